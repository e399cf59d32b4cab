"""The bug log of a workspace, one call at a time: open, move, list and show a bug.

These are the Python entry points for a caller holding a workspace path rather than a
`BugLog`: each finds the log (`bug_log_path`), does one thing, and logs the warnings about
skipped lines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from greenloop import layout
from greenloop.bugs.log import BugLog, bug_log_path
from greenloop.bugs.record import Bug, BugHistory

__all__ = [
    "list_bugs",
    "log_for",
    "open_bug",
    "show_bug",
    "transition",
    "unit_id_of",
]


def unit_id_of(workspace: str | os.PathLike[str]) -> str:
    """The unit a workspace's unit tests belong to: `units/<unit>/` of a DevLoop project,
    else the workspace folder's name."""
    found = layout.unit_of(workspace)
    return found[1] if found is not None else (Path(workspace).resolve().name or "workspace")


def log_for(workspace: str | os.PathLike[str], clock: Callable[[], float] | None) -> BugLog:
    """The workspace's bug log (`clock` None: the real time)."""
    return BugLog(bug_log_path(workspace), clock=clock or time.time)


def _report(warnings: Iterable[str]) -> None:
    """Skipped lines, as log warnings (logging is imported only when there is one to log)."""
    warnings = tuple(warnings)
    if warnings:
        import logging

        log = logging.getLogger(__name__)
        for w in warnings:
            log.warning("%s", w)


def open_bug(
    workspace: str | os.PathLike[str],
    *,
    unit: str,
    test: str,
    title: str | None = None,
    severity: str | None = None,
    source: str | None = None,
    detail: str | None = None,
    run: str | None = None,
    category: str | None = None,
    affected_units: Sequence[str] | None = None,
    by: str | None = None,
    got: object = None,
    clock: Callable[[], float] | None = None,
) -> Bug:
    """Open a bug in the workspace's log (or return the open one for `unit:test`)."""
    opened = log_for(workspace, clock).open(
        unit_id=unit, test_name=test, title=title, source=source or "unit_test", severity=severity,
        category=category, detail=detail, run_id=run, affected_units=affected_units, by=by, got=got,
    )
    _report(opened.warnings)
    return opened.bug


def transition(
    workspace: str | os.PathLike[str],
    bug_id: str,
    to: str,
    *,
    by: str | None = None,
    fix_ref: str | None = None,
    fix_refs: Sequence[str] = (),
    clock: Callable[[], float] | None = None,
) -> Bug:
    """Move a bug; raises TransitionRefused (listing the allowed moves) or BugNotFound."""
    done = log_for(workspace, clock).transition(
        bug_id, to, by=by, fix_refs=(*fix_refs, *((fix_ref,) if fix_ref else ()))
    )
    _report(done.warnings)
    return done.bug


def list_bugs(
    workspace: str | os.PathLike[str],
    *,
    unit: str | None = None,
    status: str | Sequence[str] | None = None,
    source: str | Sequence[str] | None = None,
    severity: str | Sequence[str] | None = None,
) -> tuple[Bug, ...]:
    """Current bugs of the workspace's log matching every filter given."""
    found = log_for(workspace, None).list(unit=unit, status=status, source=source, severity=severity)
    _report(found.warnings)
    return found.bugs


def show_bug(workspace: str | os.PathLike[str], bug_id: str) -> BugHistory:
    """One bug of the workspace's log with its whole history."""
    return log_for(workspace, None).show(bug_id)
