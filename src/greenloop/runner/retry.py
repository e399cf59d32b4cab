"""mode retry and mode resume: runs that follow an earlier run.

retry reruns the previous run's failures first, then the whole suite when they pass, as one
result whose `retry` says what was fixed, what remains and what is new. resume continues a run
greenloop stopped before it ended (greenloop.runner.recover). Both start runs through the
`run` they are given (api.test_run), so a run they start is recorded like any other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from greenloop import layout
from greenloop.errors import UsageError
from greenloop.result import ResumeInfo, RetryInfo, RunResult
from greenloop.runner.after_run import after_run, finalize, unit_status
from greenloop.runner.run_store import (
    RESULT_FILE,
    previous_run,
    read_result,
    runs_root,
    store_again,
    store_result,
)

__all__ = ["resume", "retry"]

RunCall = Callable[..., RunResult]


def retry(
    run: RunCall, workspace: Path, *, session_id: str | None, **options: Any
) -> RunResult:
    """mode retry: the previous run's failures alone, then (if they pass) the whole suite."""
    ws = workspace
    if session_id is None:
        from greenloop.closure import session as session_mod

        session_id = session_mod.resolve(workspace=ws)
    root = runs_root(ws)
    previous, whose = previous_run(root, ws, session_id)
    if previous is None:
        raise UsageError(f"mode retry needs a previous run in {ws}: run the tests once (mode test) first")
    before = [f.test for f in previous.failures]
    notes = [f"retry of {previous.run_id}"] + ([whose] if whose else [])
    first: RunResult | None = None
    if before:
        first = run(ws, last_failed=True, session_id=session_id, **options)
        if first.outcome != "green" or first.aborted:
            final = first
            notes.append(f"retry: the previous failures still fail in {first.run_id}; the rest of the "
                         "suite did not run (fix these first)")
        else:
            notes.append(f"retry: the previous failures passed in {first.run_id}; then the whole suite ran")
            final = run(ws, session_id=session_id, **options)
    else:
        notes.append(f"retry: {previous.run_id} had no failures; the whole suite ran")
        final = run(ws, session_id=session_id, **options)
    failing = [f.test for f in final.failures]
    passed = set(final.passed_tests)
    info = RetryInfo(
        previous_run=previous.run_id,
        first_pass_run=first.run_id if first is not None else None,
        fixed=tuple(t for t in before if t not in failing and (not passed or t in passed)),
        remain=tuple(t for t in before if t in failing),
        new=tuple(t for t in failing if t not in before),
        full_suite=final is not first,
    )
    final = final._replace(retry=info, notes=(*final.notes, *notes))
    store_again(final, root)
    return final


def resume(run: RunCall, workspace: Path, token: str, **callbacks: Any) -> RunResult:
    """mode resume: the finished run as it is, a run rebuilt from its runner's report, the
    unfinished files run again beside the finished ones (greenloop.runner.resume), or, when the
    run's files cannot be known, the suite again with the same options (greenloop.runner.recover)."""
    from greenloop.runner import recover
    from greenloop.runner import resume as resume_mod

    ws = workspace
    root = runs_root(ws)
    run_dir = recover.check(root, token)
    stored = run_dir / RESULT_FILE
    if stored.is_file():
        done = read_result(stored)
        return done._replace(notes=(*done.notes, "resume: this run had finished; nothing ran"))
    data = recover.read_run_file(run_dir)
    alive = resume_mod.still_running(data)
    if alive is not None:
        raise UsageError(f"resume token {token!r}: run {run_dir.name} is still going (greenloop process "
                         f"{alive}): wait for its result, or stop that process first")
    stopped = resume_mod.stop_runner(run_dir)  # a runner still going would count beside the resume
    rebuilt = recover.from_report(run_dir, data, str(ws))
    if rebuilt is None:
        continued = resume_mod.continue_run(ws, run_dir, data, **callbacks)
        if isinstance(continued, str):  # the run's files cannot be known: the whole suite again
            options = {k: v for k, v in (data.get("options") or {}).items() if v not in (None, False)}
            again = run(ws, session_id=data.get("session_id"), **options, **callbacks)
            note = (f"resume of {run_dir.name}: its runner had not finished (no complete report) and "
                    f"{continued}, so the whole suite ran again with the same options as {again.run_id}")
            again = again._replace(notes=(*again.notes, *([stopped] if stopped else []), note),
                                   resume=ResumeInfo(from_run=run_dir.name, rerun_run=again.run_id,
                                                     whole_suite=True))
            store_again(again, root)
            return again
        rebuilt = continued
    if stopped:
        rebuilt = rebuilt._replace(notes=(*rebuilt.notes, stopped))
    unit = layout.unit_of(ws)
    unit_dir = layout.unit_run_dir(unit[0], unit[1], rebuilt.run_id) if unit else None
    result = finalize(rebuilt, session_id=data.get("session_id"),
                       ref=unit_dir / RESULT_FILE if unit_dir else None, root=root)
    final = after_run(str(ws), result)
    if unit is not None:  # the interrupted run left its unit "testing"
        from greenloop import config as config_mod

        status = "passed" if final.ok else "failed"
        said = unit_status(unit, status, final.run_id, write_back=config_mod.load(ws).write_unit_status)
        if said:
            final = final._replace(notes=(*final.notes, said))
    store_result(final, run_dir, unit_dir)
    return final
