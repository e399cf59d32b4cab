"""What a finished integration run adds up to: its failures, its category hint, one row per
case, and what it did to the project's bug log."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from greenloop.integration.cases import CaseOutcome
from greenloop.integration.result import IntegrationFailure
from greenloop.integration.spec.records import Case
from greenloop.integration.trace import bound_body
from greenloop.integration.unit_process import StartFailure, UnitProcess

__all__ = ["bridge_bugs", "case_failure", "case_rows", "category_hint", "startup_failure"]


def startup_failure(startup: StartFailure) -> IntegrationFailure:
    """A unit that exited before it became healthy, as the failed case `startup:<unit>`."""
    involves = tuple(startup.unit.split(", ")) if startup.unit else ()
    return IntegrationFailure(
        case_id=f"startup:{startup.unit}",
        failed_step=None,
        reason="unit_crashed",
        expected="healthy",
        got={"exit_code": startup.exit_code, "reason": startup.reason},
        involves=involves,
        stderr_excerpt=startup.stderr_excerpt,
        message=startup.message,
        unit=startup.unit,
    )


def case_failure(o: CaseOutcome, units: Mapping[str, UnitProcess]) -> IntegrationFailure:
    """A failed case with the last output lines of every unit it involves."""
    excerpts = []
    for uid in o.involves:
        up = units.get(uid)
        if up is not None and up.excerpt():
            excerpts.append(f"[{uid}]\n{up.excerpt()}")
    return IntegrationFailure(
        case_id=o.case_id,
        failed_step=o.failed_step,
        reason=o.reason or "assertion_failed",
        expected=bound_body(o.expected, 2000),  # the value itself when small, else cut JSON text
        got=bound_body(o.got, 2000),
        involves=o.involves,
        stderr_excerpt="\n".join(excerpts),
        message=o.message,
        unit=o.unit,
        artifacts=o.artifacts,
    )


def category_hint(
    category: str | None, failures: Sequence[IntegrationFailure], survivors: Sequence[Any]
) -> str | None:
    """The run's category: the one the run already set, else what its failures point at."""
    if failures and category is None:
        category = (
            "unit_crash"
            if any(f.reason == "unit_crashed" for f in failures)
            else ("timeout" if all(f.reason == "timeout" for f in failures) else "integration_bug")
        )
    if survivors and category is None:
        category = "infra_flake"
    return category


def _aborted_row(case_id: str, duration_ms: int) -> dict[str, Any]:
    return {
        "id": case_id,
        "status": "aborted",
        "duration_ms": duration_ms,
        "steps_run": None,
        "failed_step": None,
        "reason": None,
        "message": "the run was cancelled during this case; its outcome is unknown",
    }


def case_rows(
    cases: Sequence[Case],
    outcomes: Mapping[str, CaseOutcome],
    attempt_of: Mapping[str, int],
    aborted_case: tuple[str, int] | None,
    attempt: int,
) -> list[dict[str, Any]]:
    """One row per case of the run, in spec order: its outcome and the attempt that ran it, the
    case a cancel cut short as "aborted", the cases never reached as "not_run"."""
    rows: list[dict[str, Any]] = []
    for case in cases:
        outcome = outcomes.get(case.id)
        if outcome is None and aborted_case is not None and aborted_case[0] == case.id:
            rows.append(_aborted_row(*aborted_case))
            continue
        rows.append(
            {**outcome.to_json(), "attempt": attempt_of.get(case.id, attempt)}
            if outcome
            else {
                "id": case.id,
                "status": "not_run",
                "duration_ms": 0,
                "steps_run": 0,
                "failed_step": None,
                "reason": None,
                "message": "",
            }
        )
    return rows


def bridge_bugs(
    root: Path,
    failures: list[IntegrationFailure],
    *,
    run_id: str,
    ok: bool,
    covered_units: list[str],
    passed_cases: list[str],
    notes: list[str],
) -> tuple[list[IntegrationFailure], tuple[str, ...], tuple[Mapping[str, str], ...]]:
    """Record the run in the project's bug log: the failures (each with its bug id), the bugs
    opened and the bugs moved. The bug log never hides the run's own result: when it cannot
    be written, a note says why and the failures come back as they were."""
    try:
        from greenloop.bugs.bridge import bridge_integration_run

        bridged = bridge_integration_run(
            str(root),
            [f.to_json() for f in failures],
            run_id=run_id,
            ok=ok,
            covered_units=covered_units,
            passed_cases=passed_cases,
        )
        bugs_opened, moved = bridged.bugs_opened, bridged.bugs_transitioned
        notes.extend(bridged.notes)
        return [replace(f, bug_id=bridged.bug_ids.get(f.case_id)) for f in failures], bugs_opened, moved
    except Exception as exc:
        notes.append(f"bugs: could not record this run: {type(exc).__name__}: {exc}")
        return failures, (), ()
