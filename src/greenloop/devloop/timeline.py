"""`timeline.ndjson`: what happened in a DevLoop project, in order, one event a line.

Beside `bugs.ndjson` (the project root, or the workspace for a plain one), append-only, each
line `{at, kind, unit_id, ref, summary}`:

| kind | when | ref |
| --- | --- | --- |
| `unit_tested` | a unit run ended (any outcome) | the run id |
| `test_passed`, `test_failed` | the same run was green, or red/broken | the run id |
| `integration_started` | an integration run started its services | the integration run id |
| `integration_done`, `integration_failed` | it ended green, or not | the integration run id |
| `bug_opened`, `bug_closed` | a run opened a bug, or moved one to fixed or verified | the bug id |

Writing is the bug log's discipline (docs/bugs.md, "Nothing is lost"): an exclusive `flock`,
one `write` of whole lines on an `O_APPEND` descriptor (a torn last line gets its newline
first), `fdatasync` after the lock is dropped. Reading is tolerant: a torn or corrupt line is
skipped with a warning naming its line number. Appending never raises: a loop whose timeline
cannot be written still has its runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from greenloop.timefmt import iso as _iso

__all__ = [
    "KINDS",
    "TIMELINE",
    "Event",
    "append",
    "events_of_integration",
    "events_of_run",
    "follow",
    "read",
    "timeline_path",
]

TIMELINE = "timeline.ndjson"
Kind = Literal[
    "unit_tested", "test_passed", "test_failed", "integration_started", "integration_done",
    "integration_failed", "bug_opened", "bug_closed",
]
KINDS: tuple[str, ...] = get_args(Kind)


class Event(NamedTuple):
    """One line of `timeline.ndjson`: when, what kind, which unit, a reference and a summary."""
    at: str
    kind: str
    unit_id: str
    ref: str
    summary: str

    def to_json(self) -> dict[str, Any]:
        """The event as JSON."""
        return dict(self._asdict())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Event:
        """Raises ValueError naming the key that is missing or wrong."""
        values = []
        for key in cls._fields:
            v = d.get(key)
            if not isinstance(v, str):
                raise ValueError(f"'{key}' is missing or not a string")
            values.append(v)
        if values[1] not in KINDS:
            raise ValueError(f"unknown kind {values[1]!r}")
        return cls(*values)

    def line(self) -> bytes:
        """The event as one NDJSON line (bytes, newline included)."""
        return (json.dumps(self.to_json(), ensure_ascii=False) + "\n").encode("utf-8")


def timeline_path(workspace: str | os.PathLike[str]) -> Path:
    """The timeline of a workspace: beside its bug log."""
    from greenloop.bugs.log import bug_log_path

    return bug_log_path(workspace).with_name(TIMELINE)




def event(kind: str, unit_id: str, ref: str, summary: str, *, now: float | None = None) -> Event:
    return Event(_iso(time.time() if now is None else now), kind, unit_id, ref, summary[:500])


def append(path: str | os.PathLike[str], events: Sequence[Event]) -> str | None:
    """Append `events` as whole lines under the lock; returns a note when it could not."""
    if not events:
        return None
    data = b"".join(e.line() for e in events)
    try:
        from greenloop.bugs.log import make_records_folder

        make_records_folder(Path(path))
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        return f"timeline: could not open {path}: {exc.strerror or exc}"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # end a torn last line; never join onto it
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                return f"timeline: the write to {path} stopped (disk full?)"
            view = view[written:]
        fcntl.flock(fd, fcntl.LOCK_UN)
        getattr(os, "fdatasync", os.fsync)(fd)
        return None
    except OSError as exc:
        return f"timeline: could not append to {path}: {exc.strerror or exc}"
    finally:
        os.close(fd)


def _parse(lines: Iterable[tuple[int, bytes]], warnings: list[str]) -> Iterator[Event]:
    for lineno, raw in lines:
        if not raw.strip():
            continue
        try:
            yield Event.from_json(json.loads(raw))
        except (ValueError, TypeError, AttributeError) as exc:
            warnings.append(f"timeline line {lineno} skipped: {exc}")


def read(path: str | os.PathLike[str], *, unit: str | None = None, kinds: Sequence[str] = (),
         last: int | None = None) -> tuple[list[Event], list[str]]:
    """Every event (or the `last` N), optionally of one unit or some kinds, with warnings."""
    warnings: list[str] = []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], warnings
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # never read a line half-written
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read()
    finally:
        os.close(fd)
    events = [e for e in _parse(enumerate(data.split(b"\n"), 1), warnings)
              if (unit is None or e.unit_id == unit) and (not kinds or e.kind in kinds)]
    return (events[-last:] if last else events), warnings


def follow(path: str | os.PathLike[str], *, poll_s: float = 0.2, stop: Callable[[], bool] = lambda: False,
           start_at_end: bool = False) -> Iterator[Event]:
    """Yield events as they are appended (a whole line at a time), until `stop()` is true."""
    offset = 0
    if start_at_end:
        try:
            offset = os.stat(path).st_size
        except OSError:
            offset = 0
    pending = b""
    lineno = 0
    warnings: list[str] = []
    while not stop():
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
        except OSError:
            chunk = b""
        if chunk:
            offset += len(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            numbered = []
            for raw in lines:
                lineno += 1
                numbered.append((lineno, raw))
            yield from _parse(numbered, warnings)
            continue
        time.sleep(poll_s)


# ------------------------------------------------------------------------- what runs add


def events_of_run(result: Any, unit_id: str, *, now: float | None = None) -> list[Event]:
    """The events of one finished unit run (a greenloop.result.RunResult, bugs bridged)."""
    s = result.summary
    counts = f"{s.passed} passed, {s.failed} failed, {s.skipped} skipped ({s.total})"
    why = f": {result.crash_reason}" if result.crash_reason else ""
    out = [event("unit_tested", unit_id, result.run_id, f"{result.outcome}: {counts}{why}", now=now),
           event("test_passed" if result.ok else "test_failed", unit_id, result.run_id,
                 counts if result.ok else f"{result.outcome}: {counts}{why}", now=now)]
    out += bug_events(result.bugs_opened, result.bugs_transitioned, unit_id, result.run_id, now=now)
    return out


def bug_events(opened: Iterable[str], moved: Iterable[Mapping[str, str]], unit_id: str, run_id: str,
               *, now: float | None = None) -> list[Event]:
    out = [event("bug_opened", unit_id, b, f"opened by {run_id}", now=now) for b in opened]
    for t in moved:
        if t.get("to") in ("fixed", "verified"):
            evidence = f" ({t['evidence']})" if t.get("evidence") else ""
            out.append(event("bug_closed", unit_id, t.get("id", ""),
                             f"{t.get('from')} -> {t.get('to')} by {run_id}{evidence}", now=now))
    return out


def events_of_integration(result: Any, *, now: float | None = None) -> list[Event]:
    """The events of one finished integration run (greenloop.integration.result.IntegrationResult)."""
    summary = (f"{result.cases_passed}/{result.cases_total} cases passed"
               + (f", {result.cases_timeout} timed out" if result.cases_timeout else "")
               + (" (crashed)" if result.crashed else ""))
    out = [event("integration_done" if result.ok else "integration_failed", "integration", result.run_id,
                 summary, now=now)]
    out += bug_events(result.bugs_opened, result.bugs_transitioned, "integration", result.run_id, now=now)
    return out
