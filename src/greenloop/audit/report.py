"""Runs the audit's checks on a DevLoop unit and builds the report (`greenloop audit`).

A static look at a unit's tests (JS: vitest/jest with supertest or fetch; Python: pytest) that
decides whether they are worth trusting; one module per check, in the order they run:
acceptance_coverage, contract_coverage, module_mocks (no_whole_module_mocks), network_clock
(no_network_or_clock), sandbox, result_json and negative_tests.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from greenloop.audit import (
    acceptance_coverage,
    contract_coverage,
    module_mocks,
    negative_tests,
    network_clock,
    result_json,
    sandbox,
)
from greenloop.audit.check import Check
from greenloop.audit.sandbox import Baseline, state_root_of
from greenloop.audit.sources import read_unit
from greenloop.errors import UsageError

__all__ = [
    "CHECK_NAMES",
    "AuditReport",
    "audit_unit",
]

CHECK_NAMES: tuple[str, ...] = (
    "acceptance_coverage",
    "contract_coverage",
    "no_whole_module_mocks",
    "no_network_or_clock",
    "sandbox",
    "result_json",
    "negative_tests",
)


@dataclass(frozen=True)
class AuditReport:
    """The audit of one unit: the verdict, the two coverage figures and every check."""

    unit: str
    ok: bool
    acceptance_coverage: float
    contract_coverage: float
    checks: tuple[Check, ...]

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (`greenloop audit --json`)."""
        return {
            "unit": self.unit,
            "ok": self.ok,
            "acceptance_coverage": self.acceptance_coverage,
            "contract_coverage": self.contract_coverage,
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AuditReport:
        """Read a report back from its JSON."""
        return cls(
            unit=str(d["unit"]),
            ok=bool(d["ok"]),
            acceptance_coverage=float(d["acceptance_coverage"]),
            contract_coverage=float(d["contract_coverage"]),
            checks=tuple(Check.from_json(c) for c in d.get("checks") or ()),
        )

    def check(self, name: str) -> Check:
        """The check called `name`; KeyError when there is none."""
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


def audit_unit(
    unit_dir: str | os.PathLike[str],
    *,
    baseline: Baseline = "auto",
    state_root: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] = time.time,
) -> AuditReport:
    """Run the seven checks on the DevLoop unit at `unit_dir`.

    `baseline` picks the sandbox comparison: "git" (uncommitted changes against HEAD), "snapshot"
    (the previous audit's file hashes in `<state_root>/.greenloop/audit/<unit>.json`), or "auto"
    (git when the unit is inside a work tree). `state_root` defaults to the project root.
    """
    if baseline not in ("auto", "git", "snapshot"):
        raise UsageError(f"baseline must be one of auto, git, snapshot, not {baseline!r}")
    root = Path(unit_dir).resolve()
    if not root.is_dir():
        raise UsageError(f"unit folder {unit_dir} does not exist: pass a DevLoop unit such as units/todo-be")
    if not any((root / name).exists() for name in ("code", "tests", "spec.json", "contract.json")):
        raise UsageError(
            f"{unit_dir} is not a DevLoop unit (no code/, tests/, spec.json or contract.json): "
            "pass a folder such as units/todo-be"
        )
    unit = read_unit(root)
    checks = [
        acceptance_coverage.check(unit),
        contract_coverage.check(unit),
        module_mocks.check(unit),
        network_clock.check(unit),
        sandbox.check(unit, baseline, Path(state_root) if state_root else state_root_of(root), clock),
        result_json.check(unit),
        negative_tests.check(unit),
    ]
    if unit.notes:
        first = checks[0]
        checks[0] = Check(first.name, first.ok, first.value, (*first.details, *unit.notes))
    acceptance = checks[0].value if isinstance(checks[0].value, float) else 0.0
    contract = checks[1].value if isinstance(checks[1].value, float) else 0.0
    return AuditReport(
        unit=unit.name,
        ok=all(c.ok for c in checks),
        acceptance_coverage=acceptance,
        contract_coverage=contract,
        checks=tuple(checks),
    )
