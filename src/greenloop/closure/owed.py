"""One test a session owes (greenloop.closure.evidence has the rules that make it owed).

Alone in its module because the Stop hook reads owed rows: this is all it imports of the
evidence rules.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple
else:
    from greenloop.lite import NamedTuple


__all__ = ["REASONS", "TAKEN_AWAY", "OwedTest"]

REASONS = ("failed", "skipped", "removed", "only")
# The reasons that mean a test was taken away (a person may accept these; a failure never).
TAKEN_AWAY = frozenset({"skipped", "removed", "only"})


class OwedTest(NamedTuple):
    """One test the session owes: its name, why, the run that made it owed, and where."""

    test: str
    reason: str  # failed | skipped | removed | only
    run_id: str
    at: float = 0.0
    file: str | None = None
    line: int | None = None
    detail: str = ""  # the mark's text (`@pytest.mark.skip`), when the working tree shows it

    def to_json(self) -> dict[str, Any]:
        """The owed test as JSON (what `check --json` lists)."""
        return {
            "test": self.test,
            "reason": self.reason,
            "run_id": self.run_id,
            "file": self.file,
            "line": self.line,
            "detail": self.detail,
        }
