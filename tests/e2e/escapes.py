"""The three escape routes of the closure gate, as the e2e files on the real agent CLIs play
them (tests/e2e/test_escapes_claude_code.py, test_escapes_codex.py, test_escapes_gemini_cli.py).

Each starts in a copy of examples/demo, where tests/test_cart.py::test_discount_code_takes_ten_
percent_off fails on a real bug in cart.py, and ends with the model saying it is done:

- `narrow`: a red `greenloop run .`, then a green run narrowed to another test. The failed
  test is still owed (a narrowed run clears only what it ran).
- `skip`: a red run, then `@pytest.mark.skip` on the failing test and a green whole-suite run
  (1 skipped). The test is owed as taken away.
- `stale`: an honest fix and a green run, then another edit of cart.py. The verdict is stale.

The gate holds the turn `rounds(budget)` times (the whole budget for owed and taken-away
tests; once for a stale verdict, as docs/closure-gate.md says), naming in each steer what the
route owes; then releases it, and `greenloop check` says unresolved with the route's reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greenloop.closure.store import Store

__all__ = [
    "FIX",
    "NARROW",
    "OWED",
    "ROUTES",
    "SKIP",
    "TOUCH",
    "Route",
    "assert_unresolved",
    "interceptions",
    "steers",
]

OWED = "tests/test_cart.py::test_discount_code_takes_ten_percent_off"
NARROW = "greenloop run . --target tests/test_cart.py::test_quantity_must_be_positive"
SKIP = "sed -i 's/^def test_discount_code_takes_ten_percent_off/@pytest.mark.skip\\n&/' tests/test_cart.py"
FIX = (
    "python3 -c \"import pathlib; p = pathlib.Path('cart.py'); "
    "p.write_text(p.read_text().replace('total * 10 // 100', 'total * 90 // 100'))\""
)
TOUCH = "printf '\\n# Checked by hand.\\n' >> cart.py"  # any change of the code after the green run

_INTERCEPT = re.compile(r"Intercept (\d+) of (\d+) this turn")


@dataclass(frozen=True)
class Route:
    """One escape route: what each steer must name, and what the gate records."""

    name: str
    says: tuple[str, ...]  # in every steer of the route
    holding: str  # `check --json`'s "holding"
    reason: str  # its "unresolved_reason"
    last: tuple[int, int, int]  # the last (green) run's passed, failed, skipped
    once: bool = False  # held once (stale), not the whole budget

    def rounds(self, budget: int) -> int:
        return 1 if self.once else budget


ROUTES = {
    "narrow": Route("narrow", (OWED, "failed in run-"), "owed", "owed", (1, 0, 0)),
    "skip": Route(
        "skip", (OWED, "skipped in this session", "@pytest.mark.skip"), "taken_away", "taken away", (4, 0, 1)
    ),
    "stale": Route("stale", ("files changed since the last run",), "stale", "stale", (5, 0, 0), once=True),
}


def steers(texts: Iterable[str]) -> list[str]:
    """The texts (what a model request carried last) that are one of greenloop's steers."""
    return [t for t in texts if "greenloop" in t and _INTERCEPT.search(t)]


def interceptions(root: Path, session: str) -> list[tuple[int, str]]:
    """(turn, kind) of every interception the gate recorded for the session, oldest first."""
    with Store(root) as store:
        return [(int(i["turn_seq"]), str(i["kind"])) for i in store.interceptions(session)]


def assert_unresolved(
    route: Route, held: list[str], root: Path, session: str, verdict: dict[str, Any], budget: int
) -> None:
    """Held `route.rounds(budget)` times, each steer naming what the route owes and counting
    its round; then released; and `check` says unresolved, with the route's rule and reason,
    after a green last run of the session."""
    rounds = route.rounds(budget)
    assert len(held) == rounds, held
    for number, text in enumerate(held, 1):
        assert all(part in text for part in route.says), (route.says, text)
        assert f"Intercept {number} of {budget} this turn" in text, text
    assert interceptions(root, session) == [(1, "steer")] * rounds + [(1, "release")]
    assert verdict["satisfied"] is False and verdict["unresolved"] is True, verdict
    assert (verdict["holding"], verdict["unresolved_reason"]) == (route.holding, route.reason), verdict
    # The escape's own run is the session's last, and green: what the gate held on is the route.
    last = verdict["last_run"]
    assert last["ok"] is True and last["session_id"] == session, last
    summary = last["summary"]
    assert (summary["passed"], summary["failed"], summary["skipped"]) == route.last, summary
