"""Reruns of a red run's failing tests (`rerun_failures`): a test that fails, then passes is flaky."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from greenloop import layout
from greenloop.model import Detection
from greenloop.result import RunResult

__all__ = ["rerun_failing"]


def rerun_failing(result: RunResult, the_plan: Any, detection: Detection, times: int, *, run_dir: Path,
           config: Any, policy: Any, workspace: str, cancel: threading.Event | None) -> RunResult:
    """Rerun the failing tests up to `times` times, each a plan of its own narrowed to them in
    the runner's dialect (last_failed's filter: names and files), in `run_dir/rerun-<n>/`."""
    from greenloop.runner import flaky
    from greenloop.runner.plan import RunOptions, plan
    from greenloop.runner.run import execute

    still = [f for f in result.failures if f.kind == "test" and f.test]
    notes: list[str] = []
    if not still:
        notes.append("rerun_failures: no failing test to rerun (only files that failed to load or hooks)")
        return flaky.fold_reruns(result, set(), policy=config.flaky, last_exit_code=None, notes=notes)
    flaky_names: set[str] = set()
    last_exit: int | None = None
    for attempt in range(1, times + 1):
        folder = layout.rerun_dir(run_dir, attempt)
        previous = result._replace(failures=tuple(still))
        rerun_plan = plan(detection, RunOptions(the_plan.framework, None, True, None, the_plan.timeout_ms),
                          report_dir=str(folder), default_timeout_ms=the_plan.timeout_ms, previous=previous)
        rerun = execute(rerun_plan, run_id=f"{result.run_id}-rerun-{attempt}", run_dir=folder, config=config,
                        cancel=cancel, policy=policy, workspace=workspace)
        if rerun.outcome == "broken" or rerun.aborted:
            notes.append(f"rerun_failures: rerun {attempt} broke ({rerun.crash_reason or 'broken'}); "
                         f"stopped rerunning (output in {folder})")
            break
        passed = flaky.passed_in(rerun, (f.test for f in still))
        flaky_names |= passed
        still = [f for f in still if f.test not in passed]
        last_exit = rerun.exit_code
        notes.append(f"rerun_failures: rerun {attempt} of {times} ({rerun.run_id}): {len(passed)} passed, "
                     f"{len(still)} still failing; output in {folder}")
        if not still:
            break
    return flaky.fold_reruns(result, flaky_names, policy=config.flaky,
                             last_exit_code=last_exit if not still else result.exit_code, notes=notes)
