"""The audit's result_json check: the latest runs/<run_id>/result.json validates against the
run-result schema and every failure in it has a hint.
"""

from __future__ import annotations

from greenloop.audit.check import Check
from greenloop.audit.sources import Unit, load_json

__all__ = [
    "check",
]


def check(unit: Unit) -> Check:
    """The result_json verdict on the unit's latest run (a warning, not a failure, when there is none)."""
    from greenloop.schema import validate_run_result

    runs = unit.root / "runs"
    candidates = sorted(p.parent.name for p in runs.glob("*/result.json")) if runs.is_dir() else []
    if not candidates:
        return Check(
            "result_json",
            True,
            None,
            (f"warning: no run yet (no runs/<run_id>/result.json); run `greenloop run {unit.root}`",),
        )
    run_id = candidates[-1]
    rel = f"runs/{run_id}/result.json"
    data, problem = load_json(runs / run_id / "result.json")
    if problem is not None:
        return Check(
            "result_json", False, run_id, (f"{rel}: {problem}", "fix: rerun the tests with greenloop")
        )
    errors = validate_run_result(data)
    details = [f"latest run: {rel}"]
    details += [f"schema: {e}" for e in errors[:10]]
    if len(errors) > 10:
        details.append(f"schema: … {len(errors) - 10} more")
    empty = []
    if isinstance(data, dict) and isinstance(data.get("failures"), list):
        for i, failure in enumerate(data["failures"]):
            hint = failure.get("hint") if isinstance(failure, dict) else None
            if not isinstance(hint, str) or not hint.strip():
                name = failure.get("test") if isinstance(failure, dict) else None
                empty.append(f"failures[{i}] ({name or '?'}) has no hint")
    details += empty
    if errors:
        details.append(
            "fix: write result.json as `greenloop schema run-result` describes (greenloop run does)"
        )
    if empty:
        details.append(
            "fix: give every failure a one- or two-sentence hint naming the cause and where to look"
        )
    return Check("result_json", not errors and not empty, run_id, tuple(details))
