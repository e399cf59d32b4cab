"""The bug log, `bugs.ndjson`: the only code that reads or writes it (locking, appending, reading).

One JSON record a line, append-only. Every line is a whole bug record; the current state of
a bug is its last line, so folding the log is "last valid line per id" (`bugs/fold.py`) and a
bug's history is every line carrying its id.

Writing. Each change takes an exclusive `flock` on the log, catches up with what other
processes appended since this `BugLog` last looked (the log only grows, so that is a read
of the new bytes), decides against that fresh state (dedup, legal move, unique id), and
appends its line with one `write` on an `O_APPEND` descriptor. The lock is released before
the line is synced to disk (`fdatasync`, which covers the data and the new size) so that
concurrent writers' syncs share journal commits; the call returns only once its own line is
durable. A log whose last line has no newline (a crash mid-write, an editor that drops the
final newline) gets one before the next line, so a torn line never swallows a good one.

Reading takes a shared lock, so a reader never sees a line half-written. Nothing is cached
between processes: a cold fold is the only fold.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from greenloop import layout
from greenloop.bugs.fold import READ_CHUNK, FoldedLog, NotABugLine, prefix_id, read_bug_line, read_range
from greenloop.bugs.record import (
    ALLOWED_MOVES,
    DETAIL_LIMIT,
    SEVERITIES,
    SOURCES,
    STATUSES,
    TITLE_LIMIT,
    Bug,
    BugHistory,
    BugNotFound,
    Fold,
    HistoryEntry,
    Opened,
    Transitioned,
    TransitionRefused,
    bounded,
    checked_choice,
    dedup_key,
    filter_choices,
    guess_severity,
    iso_time,
)
from greenloop.errors import ExitCode, GreenloopError, UsageError

__all__ = [
    "BUG_LOG",
    "BugLog",
    "bug_log_path",
    "configured_records_dir",
    "make_records_folder",
]

BUG_LOG = layout.BUG_LOG_NAME


def configured_records_dir(workspace: str | os.PathLike[str]) -> str:
    """The config's `records_dir` for the workspace ("" when unset; a config that does not
    load gives "" here: the run or command that reads it reports the error itself)."""
    from greenloop import config

    try:
        return config.load(workspace).records_dir
    except GreenloopError:
        return ""


def bug_log_path(workspace: str | os.PathLike[str]) -> Path:
    """The log of a workspace, in `layout.records_dir`: the configured folder, a DevLoop
    project's root, the place an existing log already is, else the workspace's `.greenloop/`."""
    return layout.records_dir(workspace, configured_records_dir(workspace)) / BUG_LOG


def make_records_folder(path: Path) -> None:
    """The folder a record file is appended in; a `.greenloop/` one gets the `.gitignore`
    that keeps it out of the user's `git status`."""
    if path.parent.name == layout.STATE_DIR:
        layout.make_state_dir(path.parent)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)


class BugLog:
    """The bug log of one project. Holds what it has read so far; catches up on every call.

    An instance is cheap, and a long-lived one (a worker, a server) reads only the new
    lines on each call. `clock` is the seam for time (seconds since the epoch).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time, chunk: int = READ_CHUNK
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self._folded = FoldedLog(self.path.name, chunk)

    # -- reading ---------------------------------------------------------------------

    @property
    def warnings(self) -> tuple[str, ...]:
        """The lines skipped so far, each named by its line number and why."""
        return self._folded.warnings

    @contextlib.contextmanager
    def _reading(self) -> Iterator[int | None]:
        """The log's descriptor under a shared lock, caught up (None when there is no log)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._folded.forget_file()
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._folded.catch_up(fd)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

    def fold(self) -> Fold:
        """Every bug in its current state, in the order the bugs were first written."""
        with self._reading():
            return Fold(tuple(self._folded.current.values()), str(self.path), self.warnings)

    def get(self, bug_id: str) -> Bug:
        """The current state of one bug; BugNotFound when the log has no such id."""
        with self._reading():
            return self._require(bug_id)

    def _require(self, bug_id: str) -> Bug:
        bug = self._folded.current.get(bug_id)
        if bug is None:
            raise BugNotFound(
                f"no bug {bug_id!r} in {self.path}; 'greenloop bugs list' shows the ids there"
            )
        return bug

    def list(
        self,
        *,
        unit: str | None = None,
        status: str | Sequence[str] | None = None,
        source: str | Sequence[str] | None = None,
        severity: str | Sequence[str] | None = None,
    ) -> Fold:
        """Current bugs matching every filter given. `unit` matches a bug's unit or an
        affected unit; the others take one name, a comma-separated list or a sequence."""
        statuses = filter_choices(status, "status", STATUSES, "status")
        sources = filter_choices(source, "source", SOURCES, "source")
        severities = filter_choices(severity, "severity", SEVERITIES, "severity")
        folded = self.fold()
        picked = tuple(
            b for b in folded.bugs
            if (unit is None or b.unit_id == unit or unit in b.affected_units)
            and (statuses is None or b.status in statuses)
            and (sources is None or b.source in sources)
            and (severities is None or b.severity in severities)
        )
        return Fold(picked, folded.log, folded.warnings)

    def show(self, bug_id: str) -> BugHistory:
        """One bug's whole history, every line parsed (a corrupt one is reported)."""
        with self._reading() as fd:
            current = self._require(bug_id)
            assert fd is not None
            data = read_range(fd, 0, self._folded.offset)
        key = bug_id.encode("utf-8", "surrogatepass")
        quoted = json.dumps(bug_id).encode()
        entries: list[HistoryEntry] = []
        # Every line of this bug holds its quoted id, so only the lines where bytes.find lands
        # are parsed (a big log is scanned at C speed, not split into lines first).
        pos = counted = 0
        lineno = 1
        while (hit := data.find(quoted, pos)) >= 0:
            start = data.rfind(b"\n", 0, hit) + 1
            end = data.find(b"\n", hit)
            end = len(data) if end < 0 else end
            lineno += data.count(b"\n", counted, start)
            counted = start
            pos = end + 1
            raw = data[start:end]
            pid = prefix_id(raw)
            if pid != key and pid is not None:
                continue  # another bug's line that mentions this id
            try:
                bug = read_bug_line(raw, pid)
            except NotABugLine as why:
                self._folded.warn(lineno, str(why))
                continue
            if bug.id == bug_id:
                entries.append(HistoryEntry(lineno, bug))
        return BugHistory(current, tuple(entries), str(self.path), self.warnings)

    # -- writing ---------------------------------------------------------------------

    def _append(self, fd: int, bug: Bug) -> None:
        line = bug.line()
        if self._folded.ends_mid_line:  # (_writing caught up under the lock: it knows how the file ends)
            line = b"\n" + line  # end a torn or newline-less last line; never join onto it
        view = memoryview(line)
        while view:  # one write in practice; a short write (a signal) is finished under the lock
            written = os.write(fd, view)
            if written <= 0:
                raise GreenloopError(
                    f"could not append to {self.path}: the write stopped after "
                    f"{len(line) - len(view)} of {len(line)} bytes (disk full?); free space and retry",
                    exit_code=ExitCode.BROKEN,
                )
            view = view[written:]
        self._folded.catch_up(fd)

    @staticmethod
    def _sync(fd: int) -> None:
        # fdatasync flushes the data and the size an append changed; fsync where it is missing.
        getattr(os, "fdatasync", os.fsync)(fd)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[int]:
        """The log locked for writing; the lock is dropped before the sync so syncs overlap."""
        make_records_folder(self.path)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._folded.catch_up(fd)
            yield fd
            fcntl.flock(fd, fcntl.LOCK_UN)
            self._sync(fd)
        finally:
            os.close(fd)

    def _new_id(self, now: float) -> str:
        stem = time.strftime("bug-%Y%m%d-%H%M-", time.gmtime(now))
        width = 2  # bytes of randomness: 4 hex digits, as the seed writes them
        for attempt in range(1000):
            if attempt and attempt % 50 == 0:
                width += 1  # a crowded minute: widen the suffix rather than spin
            bug_id = stem + os.urandom(width).hex()
            if bug_id not in self._folded.current:
                return bug_id
        raise GreenloopError(f"could not find a free bug id in {self.path}", exit_code=ExitCode.BROKEN)

    def open(
        self,
        *,
        unit_id: str,
        test_name: str,
        title: str | None = None,
        source: str = "unit_test",
        severity: str | None = None,
        category: str | None = None,
        detail: str | None = None,
        run_id: str | None = None,
        affected_units: Sequence[str] | None = None,
        by: str | None = None,
        got: object = None,
    ) -> Opened:
        """Open a bug, or reuse the open/fixing one with the same `unit_id:test_name`.

        `severity` defaults to `guess_severity(test_name, got)`. Reusing appends nothing.
        """
        if not unit_id.strip():
            raise UsageError("unit is empty; name the unit the bug is in (e.g. --unit todo-be)")
        if not test_name.strip():
            raise UsageError("test is empty; name the failing test (e.g. --test 'rejects empty title')")
        checked_source = checked_choice(source, "source", SOURCES, "source")
        checked_severity = (None if severity is None
                            else checked_choice(severity, "severity", SEVERITIES, "severity"))
        key = dedup_key(unit_id, test_name)
        with self._writing() as fd:
            reuse = self._folded.active_index().get(key)
            if reuse is not None:
                return Opened(self._folded.current[reuse], False, str(self.path), self.warnings)
            now = self.clock()
            stamp = iso_time(now)
            bug = Bug(
                id=self._new_id(now),
                source=checked_source,
                unit_id=unit_id,
                test_name=test_name,
                title=bounded((title or "").strip() or test_name, TITLE_LIMIT),
                status="open",
                severity=checked_severity or guess_severity(test_name, got),
                category=category or "unknown",
                detail=bounded(detail or "", DETAIL_LIMIT),
                run_id=run_id,
                affected_units=tuple(dict.fromkeys(affected_units)) if affected_units else (unit_id,),
                created_at=stamp,
                updated_at=stamp,
                by=by,
                dedup_key=key,
            )
            self._append(fd, bug)
        return Opened(bug, True, str(self.path), self.warnings)

    def transition(
        self,
        bug_id: str,
        to: str,
        *,
        by: str | None = None,
        fix_refs: Iterable[str] = (),
        closed_by: str | None = None,
        evidence: str | None = None,
    ) -> Transitioned:
        """Move a bug along the state machine, recording `by` and adding `fix_refs`; a move to
        fixed or verified records the run that made it (`closed_by`) and what it saw (`evidence`).

        The status is checked under the lock, so two writers (two runs' bridges) never move a
        bug twice: the second finds it already moved, which ALLOWED_MOVES refuses.
        """
        target = checked_choice(to, "status", STATUSES, "to")
        with self._writing() as fd:
            cur = self._require(bug_id)
            allowed = ALLOWED_MOVES[cur.status]
            if target not in allowed:
                moves = (f"it can move to {' or '.join(allowed)}" if allowed
                         else "verified is final: it cannot move")
                raise TransitionRefused(
                    f"bug {bug_id} is {cur.status} and cannot move to {target}; {moves} "
                    "(the states: open -> fixing -> fixed -> verified, or open -> fixed)"
                )
            refs = tuple(dict.fromkeys((*cur.fix_refs, *(r for r in fix_refs if r))))
            closing = target in ("fixed", "verified")
            bug = replace(
                cur, status=target, fix_refs=refs, updated_at=iso_time(self.clock()), by=by,
                closed_by=closed_by if closing else None,
                evidence=(evidence or "by hand") if closing else None,
            )
            self._append(fd, bug)
        return Transitioned(bug, cur.status, str(self.path), self.warnings)
