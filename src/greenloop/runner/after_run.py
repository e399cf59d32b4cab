"""What follows every run: the bug log, the timeline and the session's closure record,
a DevLoop unit's status and a serving dashboard told of the run. A failing step becomes a
note on the result, never a lost run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from greenloop.result import RunResult

__all__ = ["after_run", "announce", "finalize", "unit_status", "with_note"]


def finalize(result: RunResult, *, session_id: str | None, ref: Path | None, root: str) -> RunResult:
    """The result as stored: its session, where its result.json lives, its resume token."""
    from greenloop.runner.recover import resume_token

    return result._replace(
        session_id=session_id,
        result_ref=str(ref) if ref is not None else result.result_ref,
        resume_token=resume_token(root, result.run_id),
    )


def unit_status(unit: tuple[Path, str], status: Any, run_id: str, *, write_back: bool) -> str | None:
    """Record a DevLoop unit's status; a failure to record is a note, never a lost run."""
    from greenloop.devloop import units

    try:
        return units.set_status(unit[0], unit[1], status, run_id, write_back=write_back)
    except OSError as exc:
        return f"unit status: could not record {unit[1]} as {status} ({exc.strerror or exc})"


def announce(workspace: str, run_id: str, run_dir: str, framework: str | None,
              found: list[tuple[str, Any]]) -> None:
    """Tell a running `greenloop serve` of this workspace that the run has started, so it can
    stream it (the run's preload thread calls this; nothing is read when none runs)."""
    from greenloop.dashboard import live

    serving = live.find_serving(workspace)
    if serving is not None:
        live.announce(serving[0], run_id, run_dir, framework)
        found.append(serving)


def with_note(result: RunResult, what: str, exc: Exception) -> RunResult:
    """The result with a note saying which after-step failed and why."""
    return result._replace(notes=(*result.notes, f"{what} ({type(exc).__name__}: {exc})"))


def after_run(
    workspace: str,
    result: RunResult,
    *,
    fingerprint: Callable[[], str | None] | None = None,
    session_resolved: bool = False,
) -> RunResult:
    """Hand the final result to the bug log, then to the session record; returns it, enriched.

    The bug bridge goes first so the closure store records the final result (with bug ids);
    a failing step becomes a note, never a lost run. `session_resolved`: the caller resolved
    the run's session before it started (None there means a workspace-level run), so it is
    not looked up again.
    """
    sid = result.session_id
    try:
        if sid is None and not session_resolved:
            from greenloop.closure import session as session_mod

            # The caller's session: its environment, else the process tree (the harness whose
            # hooks ran above this process), else none: a workspace-level run.
            sid = session_mod.resolve(workspace=workspace)
    except Exception as exc:
        result = with_note(result, "the session could not be resolved", exc)
    if sid != result.session_id:
        result = result._replace(session_id=sid)
    # bugs: bridge the run into bugs.ndjson (red opens, green fixes; bug ids go into the failures)
    try:
        from greenloop.bugs.bridge import bridge_unit_run

        result = bridge_unit_run(workspace, result)
    except Exception as exc:  # bookkeeping must never lose the result of a run that happened
        result = with_note(result, "the run could not be recorded in the bug log", exc)
    # timeline: what happened, in order, beside the bug log
    try:
        from greenloop.bugs.workspace import unit_id_of
        from greenloop.devloop import timeline

        problem = timeline.append(timeline.timeline_path(workspace),
                                  timeline.events_of_run(result, unit_id_of(workspace)))
        if problem:
            result = result._replace(notes=(*result.notes, problem))
    except Exception as exc:
        result = with_note(result, "the run could not be added to the timeline", exc)
    # closure: record the final run for the session (or the workspace) so the gate sees it
    try:
        from greenloop.closure import store

        store.record_result(workspace, result, session_id=sid, fingerprint=fingerprint)
    except Exception as exc:
        result = with_note(result, "the run could not be recorded for the gate", exc)
    return result
