"""The run store: each run's result.json under `.greenloop/runs/<run_id>/`, read, listed, pruned.

A DevLoop unit folder also keeps a copy under `units/<unit>/runs/<run_id>/` (its output files
linked, not copied). Writes are atomic: a reader sees the old file or the new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from greenloop import layout
from greenloop.errors import UsageError
from greenloop.result import RunResult

__all__ = [
    "KEEP_RUNS",
    "RESULT_FILE",
    "UNREADABLE",
    "latest_run",
    "list_runs",
    "load_run",
    "previous_run",
    "prune_runs",
    "read_result",
    "runs_root",
    "store_again",
    "store_result",
    "write_json",
]

RESULT_FILE = layout.RESULT_NAME
KEEP_RUNS = 100  # stored runs kept per workspace (with their full output)


def runs_root(ws: Path) -> str:
    """Where a workspace's runs are stored (the root its probe answers for)."""
    from greenloop.runner.probe import probe

    return probe(str(ws), files=False).root


def store_again(result: RunResult, root: str) -> None:
    """Store a result again after adding to it (its run folder and a DevLoop unit's copy)."""
    data = result.to_json()
    refs = {str(layout.run_dir(root, result.run_id) / RESULT_FILE)}
    if result.result_ref:
        refs.add(result.result_ref)
    for ref in refs:
        if os.path.exists(ref):
            write_json(Path(ref), data)


def previous_run(root: str, workspace: Path, session_id: str | None) -> tuple[RunResult | None, str | None]:
    """The run whose failures `last_failed` reruns, and a note when it is not the session's own.

    The rule (README, docs/mcp.md): the session's own latest run; else (a new session, or no
    session) the workspace's latest stored run, with a note naming whose run that was."""
    if session_id is not None:
        from greenloop.closure.store import Store

        try:
            with Store(workspace, warn=lambda _m: None) as st:
                record = st.latest_run(session_id=session_id)
        except Exception:  # an unreadable state database: fall back to the run store
            record = None
        if record is not None:
            for path in (layout.run_dir(root, record.run_id) / RESULT_FILE, record.result_ref):
                if not path:
                    continue
                try:
                    return read_result(path), None
                except UNREADABLE:
                    continue
    latest = latest_run(root)
    if latest is None:
        return None, None
    owner = f"session {latest.session_id}" if latest.session_id else "no session"
    mine = "this session has no run yet" if session_id is not None else "no session is known"
    if session_id is not None and latest.session_id == session_id:
        return latest, None
    return latest, (f"last_failed: {mine}; used the workspace's latest run {latest.run_id} "
                    f"({owner}, {latest.started_at or 'time unknown'})")


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic write: a reader sees the old file or the new one, never half of one."""
    from greenloop.system.atomic import write_text

    write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def store_result(result: RunResult, run_dir: Path, unit_dir: Path | None) -> None:
    """Store a run's result in its run folder and, for a DevLoop unit, in the unit's copy too."""
    data = result.to_json()
    write_json(run_dir / RESULT_FILE, data)
    if unit_dir is None:
        return
    unit_dir.mkdir(parents=True, exist_ok=True)
    for name in (layout.STDOUT_NAME, layout.STDERR_NAME):
        src, dst = run_dir / name, unit_dir / name
        if not src.exists() or dst.exists():
            continue
        try:
            os.link(src, dst)  # same bytes, no copy of a large log
        except OSError:
            shutil.copyfile(src, dst)
    write_json(unit_dir / RESULT_FILE, data)


def list_runs(workspace: str | os.PathLike[str]) -> list[str]:
    """Run ids with a stored result, oldest first."""
    runs = layout.runs_dir(workspace)
    found: list[tuple[int, str]] = []
    try:
        entries = list(os.scandir(runs))
    except OSError:
        return []
    for entry in entries:
        try:
            found.append((os.stat(os.path.join(entry.path, RESULT_FILE)).st_mtime_ns, entry.name))
        except OSError:
            continue
    return [name for _, name in sorted(found)]


def prune_runs(
    workspace: str | os.PathLike[str], *, keep: int = KEEP_RUNS, protect: str | None = None
) -> list[str]:
    """Delete all but the newest `keep` run folders of a workspace; returns the deleted ids.

    Folders without a result (a run killed with greenloop itself) count by their own age. Only
    `.greenloop/runs/` is pruned: a DevLoop unit's `units/<unit>/runs/` is the unit's history.
    """
    runs = layout.runs_dir(workspace)
    aged: list[tuple[int, str]] = []
    try:
        entries = [e for e in os.scandir(runs) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for entry in entries:
        try:
            try:
                mtime = os.stat(os.path.join(entry.path, RESULT_FILE)).st_mtime_ns
            except OSError:
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
        except OSError:
            continue
        aged.append((mtime, entry.name))
    aged.sort()
    doomed = [name for _, name in aged[: max(0, len(aged) - keep)] if name != protect]
    for name in doomed:
        shutil.rmtree(runs / name, ignore_errors=True)
    return doomed


UNREADABLE = (OSError, ValueError, KeyError, TypeError)  # what read_result raises


def read_result(path: str | os.PathLike[str]) -> RunResult:
    """The RunResult stored at `path` (a result.json); raises one of UNREADABLE."""
    return RunResult.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def load_run(workspace: str | os.PathLike[str], run_id: str) -> RunResult:
    """A stored run; UsageError when it is missing or unreadable."""
    path = layout.run_dir(workspace, run_id) / RESULT_FILE
    try:
        return read_result(path)
    except UNREADABLE as exc:
        raise UsageError(f"run {run_id!r} has no readable result at {path}: pick one in runs/") from exc


def latest_run(workspace: str | os.PathLike[str]) -> RunResult | None:
    """The workspace's most recent stored run; torn or corrupt results are skipped."""
    for run_id in reversed(list_runs(workspace)):
        with contextlib.suppress(UsageError):
            return load_run(workspace, run_id)
    return None
