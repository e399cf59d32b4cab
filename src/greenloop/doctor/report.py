"""One finding of `greenloop doctor` (`Check`) and all of them for one workspace (`Report`)."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

__all__ = ["STATUSES", "Check", "Report", "Status"]

Status = Literal["ok", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail")
VERSION_TIMEOUT_S = 30.0  # a version query starts an interpreter or node once; generous on a busy machine
MIN_NODE_MAJOR = 20
JS_FRAMEWORKS = ("vitest", "jest", "node:test", "npm-test")


class Check(NamedTuple):
    """One finding: `fix` says what to do when `status` is not ok."""

    area: str
    name: str
    status: Status
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The check as JSON (`greenloop doctor --json`)."""
        return {
            "area": self.area,
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
        }


class Report(NamedTuple):
    """Every check for one workspace, in the order they ran."""

    workspace: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when nothing needs a fix (warnings are advice)."""
        return all(c.status != "fail" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (`greenloop doctor --json`)."""
        return {"ok": self.ok, "workspace": self.workspace, "checks": [c.to_json() for c in self.checks]}
