"""The bug log, `bugs.ndjson`: the only module that reads or writes it.

One JSON record a line, append-only. Every line is a whole bug record; the current state of
a bug is its last line, so folding the log is "last valid line per id" and a bug's history
is every line carrying its id.

Writing. Each change takes an exclusive `flock` on the log, catches up with what other
processes appended since this `BugLog` last looked (the log only grows, so that is a read
of the new bytes), decides against that fresh state (dedup, legal move, unique id), and
appends its line with one `write` on an `O_APPEND` descriptor. The lock is released before
the line is synced to disk (`fdatasync`, which covers the data and the new size) so that
concurrent writers' syncs share journal commits; the call returns only once its own line is
durable. A log whose last line has no newline (a crash mid-write, an editor that drops the
final newline) gets one before the next line, so a torn line never swallows a good one.

Reading is tolerant: a torn or corrupt line is skipped with a warning naming its line
number and every other bug still loads. Readers take a shared lock, so they never see a
line half-written. Folding a large log parses only each bug's last line: the writer puts
`id` first, so the id of a line is read from its prefix (one regex over a chunk of the log);
lines that do not start that way (hand-written ones) are parsed in full. The last lines are
parsed many per json call. Nothing is cached between processes: a cold fold is the only
fold. The cost of this shortcut: a corrupt line that is
not the last of its bug goes unnoticed by `list` (it cannot change a current state);
`show` parses every line of the bug it shows and reports it.

State machine: open -> fixing -> fixed -> verified, plus open -> fixed (a green run fixes a
bug nobody claimed). Anything else is refused with the moves allowed from where the bug is.

Bridges: `bridge_unit_run` turns a unit run into bug events (red: open or reuse one bug per
failure; green: fix the unit's open bugs; crashed: one `unit_test_infra` bug), and
`bridge_integration_run` does the same for an integration run (failures open
`integration_test` bugs; a green run verifies the fixed bugs of the units it covered).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import operator
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args, runtime_checkable

from greenloop import layout
from greenloop.errors import ExitCode, GreenloopError, UsageError

if TYPE_CHECKING:  # only annotations: `bugs list` does not pay for importing the run records
    from greenloop.model import RunResult

__all__ = [
    "ALLOWED_MOVES",
    "BUG_LOG",
    "DETAIL_LIMIT",
    "FLAKY_CATEGORY",
    "INFRA_TEST_NAME",
    "INTEGRATION_UNIT",
    "SEVERITIES",
    "SOURCES",
    "STATUSES",
    "BridgeOutcome",
    "Bug",
    "BugHistory",
    "BugLog",
    "BugNotFound",
    "Fold",
    "HistoryEntry",
    "IntegrationFailure",
    "IntegrationFailureLike",
    "Opened",
    "Severity",
    "Source",
    "Status",
    "TransitionRefused",
    "Transitioned",
    "bridge_integration_run",
    "bridge_unit_run",
    "bug_log_path",
    "dedup_key",
    "guess_severity",
    "list_bugs",
    "open_bug",
    "show_bug",
    "transition",
    "unit_id_of",
]

BUG_LOG = "bugs.ndjson"

Status = Literal["open", "fixing", "fixed", "verified"]
Source = Literal["unit_test", "unit_test_infra", "integration_test"]
Severity = Literal["low", "medium", "high", "critical"]
STATUSES: tuple[str, ...] = get_args(Status)
SOURCES: tuple[str, ...] = get_args(Source)
SEVERITIES: tuple[str, ...] = get_args(Severity)

ALLOWED_MOVES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "open": ("fixing", "fixed"),
    "fixing": ("fixed",),
    "fixed": ("verified",),
    "verified": (),
})
ACTIVE: tuple[str, ...] = ("open", "fixing")  # the statuses dedup reuses

DETAIL_LIMIT = 4000  # characters of stack/detail kept per line: the log stays fast to fold
TITLE_LIMIT = 200
INFRA_TEST_NAME = "(test run broken)"  # the test_name of a unit's infrastructure bug
UNRECOGNISED_TEST_NAME = "(failing tests not recognised)"
FLAKY_CATEGORY = "flaky"  # the category of a test's bug when it failed, then passed on rerun
INTEGRATION_UNIT = "integration"  # the unit_id of integration bugs; the units are in affected_units
ID_PREFIX = b'{"id": "'  # every line greenloop writes starts like this (id is the first key)


# --------------------------------------------------------------------------- errors


class BugNotFound(GreenloopError):
    """No bug with that id in the log."""


class TransitionRefused(GreenloopError):
    """An illegal move; the message lists the moves allowed from the bug's status."""


# --------------------------------------------------------------------------- record


def _str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError(f"{key} must be a string, not {type(v).__name__}")
    return str(v)


def _opt(d: Mapping[str, Any], key: str) -> str | None:
    return None if d.get(key) is None else _str(d, key)


def _strs(d: Mapping[str, Any], key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{key} must be a list of strings")
    return tuple(v)


def _choice(d: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str | None) -> str:
    v = d.get(key, default)
    if v not in allowed:
        raise ValueError(f"{key} {v!r} is not one of {', '.join(allowed)}")
    return str(v)


def dedup_key(unit_id: str, test_name: str) -> str:
    return f"{unit_id}:{test_name}"


_KEYS = ("id", "source", "unit_id", "run_id", "test_name", "dedup_key", "category", "severity", "title",
         "detail", "affected_units", "status", "fix_refs", "created_at", "updated_at", "by",
         "closed_by", "evidence")
# Lines written before a bug recorded what closed it lack the last two keys.
_CLOSING_KEYS = ("closed_by", "evidence")
_FIELD_VALUES = operator.itemgetter(*_KEYS)
_NULLABLE = (str, type(None))
# The value types of a whole record, in _KEYS order: run_id, by, closed_by and evidence may be
# null, the lists are lists (of strings: checked apart), everything else a string.
_RECORD_TYPES: frozenset[tuple[type, ...]] = frozenset(
    (str, str, str, run_id, str, str, str, str, str, str, list, str, list, str, str, by, closed, why)
    for run_id in _NULLABLE for by in _NULLABLE for closed in _NULLABLE for why in _NULLABLE
)
_STATUS_SET, _SOURCE_SET, _SEVERITY_SET = frozenset(STATUSES), frozenset(SOURCES), frozenset(SEVERITIES)


def _whole_record(d: dict[str, Any]) -> Bug | None:
    """A record with every field, each of the right type and value, as a Bug built on `d`
    itself (which it takes over); None for anything else (the careful reader handles it).

    This is the fold's hot path: tens of thousands of calls on a big log, so the checks are
    done in bulk and the frozen __init__ is skipped."""
    if len(d) == len(_KEYS) - len(_CLOSING_KEYS):
        d["closed_by"] = d["evidence"] = None  # a line from before these keys existed
    elif len(d) != len(_KEYS):
        return None
    try:
        v = _FIELD_VALUES(d)
    except KeyError:
        return None
    if (
        tuple(map(type, v)) not in _RECORD_TYPES
        or not v[0]
        or v[1] not in _SOURCE_SET
        or v[7] not in _SEVERITY_SET
        or v[11] not in _STATUS_SET
    ):
        return None
    try:
        "".join(v[10])  # a TypeError unless every item is a string
        "".join(v[12])
    except TypeError:
        return None
    d["affected_units"] = tuple(v[10])
    d["fix_refs"] = tuple(v[12])
    bug: Bug = object.__new__(Bug)
    object.__setattr__(bug, "__dict__", d)
    return bug


@dataclass(frozen=True)
class Bug:
    """One line of the log: a bug's whole state at one moment."""

    id: str
    source: Source
    unit_id: str
    test_name: str
    title: str
    status: Status = "open"
    severity: Severity = "medium"
    category: str = "unknown"
    detail: str = ""
    run_id: str | None = None
    affected_units: tuple[str, ...] = ()
    fix_refs: tuple[str, ...] = ()
    created_at: str = ""
    updated_at: str = ""
    by: str | None = None
    dedup_key: str = ""
    # The run that moved the bug to fixed or verified, and what it saw: "test_passed" (the
    # run executed the bug's own test and it passed), "suite_passed" (a whole-suite green run
    # whose output names no test), "case_passed" (an integration run passed the bug's case),
    # "integration_passed" (a green integration run covering a unit bug's unit), or "by hand".
    closed_by: str | None = None
    evidence: str | None = None

    def __post_init__(self) -> None:
        if not self.dedup_key:
            object.__setattr__(self, "dedup_key", dedup_key(self.unit_id, self.test_name))

    def to_json(self) -> dict[str, Any]:
        # This key order is the log's canonical form: `id` first, so the fold reads a line's id
        # from its prefix without parsing the line. Never reorder (old logs stay readable
        # either way, but lines in another order are read the slow way).
        return {
            "id": self.id,
            "source": self.source,
            "unit_id": self.unit_id,
            "run_id": self.run_id,
            "test_name": self.test_name,
            "dedup_key": self.dedup_key,
            "category": self.category,
            "severity": self.severity,
            "title": self.title,
            "detail": self.detail,
            "affected_units": list(self.affected_units),
            "status": self.status,
            "fix_refs": list(self.fix_refs),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "by": self.by,
            "closed_by": self.closed_by,
            "evidence": self.evidence,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Bug:
        """Read a record back; missing optional keys get defaults. Raises ValueError naming the bad key."""
        if type(d) is dict:  # a line as greenloop writes it is checked in bulk
            bug = _whole_record(dict(d))
            if bug is not None:
                return bug
        return cls._read(d)

    @classmethod
    def _read(cls, d: Mapping[str, Any]) -> Bug:
        """The careful reader: any key may be missing; every value is checked and named."""
        if not isinstance(d, Mapping):
            raise ValueError("the line is not a JSON object")
        bug_id = d.get("id")
        if not isinstance(bug_id, str) or not bug_id:
            raise ValueError("id is missing or not a string")
        unit_id = _str(d, "unit_id")
        test_name = _str(d, "test_name")
        created = _str(d, "created_at")
        return cls(
            id=bug_id,
            source=_choice(d, "source", SOURCES, "unit_test"),  # type: ignore[arg-type]
            unit_id=unit_id,
            test_name=test_name,
            title=_str(d, "title", test_name),
            status=_choice(d, "status", STATUSES, None),  # type: ignore[arg-type]
            severity=_choice(d, "severity", SEVERITIES, "medium"),  # type: ignore[arg-type]
            category=_str(d, "category", "unknown"),
            detail=_str(d, "detail"),
            run_id=_opt(d, "run_id"),
            affected_units=_strs(d, "affected_units", (unit_id,) if unit_id else ()),
            fix_refs=_strs(d, "fix_refs"),
            created_at=created,
            updated_at=_str(d, "updated_at", created),
            by=_opt(d, "by"),
            dedup_key=_str(d, "dedup_key", dedup_key(unit_id, test_name)),
            closed_by=_opt(d, "closed_by"),
            evidence=_opt(d, "evidence"),
        )

    def line(self) -> bytes:
        return (json.dumps(self.to_json(), ensure_ascii=False) + "\n").encode("utf-8")


@dataclass(frozen=True)
class Opened:
    """What `open` did: the bug (new, or the open one it reused) and whether it is new."""

    bug: Bug
    created: bool
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"bug": self.bug.to_json(), "created": self.created, "log": self.log,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Transitioned:
    bug: Bug
    from_status: Status
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"bug": self.bug.to_json(), "from": self.from_status, "to": self.bug.status,
                "log": self.log, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Fold:
    """The log folded to current states (in order of first appearance), with its warnings."""

    bugs: tuple[Bug, ...]
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"bugs": [b.to_json() for b in self.bugs], "count": len(self.bugs), "log": self.log,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class HistoryEntry:
    line: int  # 1-based line number in the log
    bug: Bug

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, **self.bug.to_json()}


@dataclass(frozen=True)
class BugHistory:
    """One bug: its current state and every line it has had, oldest first."""

    bug: Bug
    history: tuple[HistoryEntry, ...]
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"bug": self.bug.to_json(), "history": [h.to_json() for h in self.history],
                "log": self.log, "warnings": list(self.warnings)}


# --------------------------------------------------------------------------- helpers


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FIVE_XX = re.compile(r"(?<![0-9])5[0-9]{2}(?![0-9])")
_SECURITY = re.compile(r"secur|auth(?!or(?!i[sz]))", re.IGNORECASE)  # not "author", yes "authorize"


def guess_severity(test_name: str, got: object = None) -> Severity:
    """The seed's guess: a test about security or auth fails critically; a 5xx got is high.

    The seed checks the 5xx first, which would rate an auth test answering 500 as merely
    high; greenloop keeps the more severe of the two guesses. `auth` matches auth,
    authentication, OAuth, unauthorized, but not author.
    """
    if _SECURITY.search(test_name):
        return "critical"
    if got is not None and _FIVE_XX.search(str(got)):
        return "high"
    return "medium"


def _check(value: str | None, name: str, allowed: tuple[str, ...], flag: str) -> None:
    if value is not None and value not in allowed:
        raise UsageError(f"{flag} {value!r} is not a {name}; use one of: {', '.join(allowed)}")


def _choices(value: str | Sequence[str] | None, name: str, allowed: tuple[str, ...],
             flag: str) -> frozenset[str] | None:
    """A filter value: one name, a comma-separated list, or a sequence of names."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    wanted = frozenset(i.strip() for i in items if i.strip())
    for w in sorted(wanted):
        _check(w, name, allowed, flag)
    return wanted or None


# --------------------------------------------------------------------------- the log


_DECODER = json.JSONDecoder()
# A line greenloop wrote starts with its id (no escapes in it: ids never need them).
_HEAD = re.compile(rb'\{"id": "([^"\\\n]+)"')
# Each newline, with the id of the line it starts when that line is written the canonical way.
_NEXT = re.compile(rb'\n(?:\{"id": "([^"\\\n]+)")?')
_BATCH = 512  # last lines decoded by one json call (a bad one sends only its batch line by line)
_CHUNK = 8 << 20  # the log is read through a buffer this big (grown for a longer line)


class _Skip(Exception):
    """A line that is not a bug record; the message says why."""


def _loads(raw: bytes | bytearray) -> Any:
    """json.loads for one line, minus its wrappers on the common path (a clean line)."""
    try:
        text = raw.decode("utf-8")
        obj, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(raw)  # raises the precise error
    if end != len(text) and text[end:].strip():
        return json.loads(raw)
    return obj


def _record(raw: bytes | bytearray, expect_id: bytes | None = None) -> Bug:
    """One line as a bug; raises _Skip saying why it is not one."""
    try:
        obj = _loads(raw)
    except UnicodeDecodeError:
        raise _Skip("not valid UTF-8") from None
    except (json.JSONDecodeError, RecursionError):
        torn = raw.lstrip().startswith(b"{") and not raw.rstrip().endswith(b"}")
        raise _Skip("incomplete (no closing brace: a torn write?)" if torn else "not valid JSON") from None
    return _checked(_as_bug(obj), expect_id)


def _as_bug(obj: Any) -> Bug:
    try:
        return Bug.from_json(obj)
    except ValueError as exc:  # a JSON value that is not a bug record
        raise _Skip(f"not a bug record ({exc})") from None


def _decode_all(lines: Sequence[bytes | bytearray]) -> list[Any] | None:
    """Many lines in one json call: their values in order, or None if any line is not exactly
    one JSON value (that batch is then read line by line, so each bad line is named)."""
    if not lines:
        return []
    parts = list(lines)
    parts[0] = b"[" + parts[0]
    parts[-1] = parts[-1] + b"]"
    try:
        objs = json.loads(b",".join(parts).decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return objs if type(objs) is list and len(objs) == len(lines) else None


def _checked(bug: Bug, expect_id: bytes | None) -> Bug:
    if expect_id is not None and bug.id.encode("utf-8", "surrogatepass") != expect_id:
        raise _Skip(f"its id prefix {expect_id.decode(errors='replace')!r} disagrees with its id {bug.id!r}")
    return bug


def _id_key(bug: Bug) -> bytes:
    return bug.id.encode("utf-8", "surrogatepass")


def _line(buf: bytes, at: int) -> bytes:
    """The line of `buf` that starts at `at`, without its newline."""
    nl = buf.find(b"\n", at)
    return buf[at:] if nl < 0 else buf[at:nl]


def _read_range(fd: int, start: int, end: int) -> bytes:
    chunks = []
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(end - pos, 1 << 30), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class BugLog:
    """The bug log of one project. Holds what it has read so far; catches up on every call.

    An instance is cheap, and a long-lived one (a worker, a server) reads only the new
    lines on each call. `clock` is the seam for time (seconds since the epoch).
    """

    def __init__(
        self, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time, chunk: int = _CHUNK
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.chunk = max(chunk, 1)  # bytes read at a time (a longer line grows the buffer)
        self._ident: tuple[int, int] | None = None
        self._offset = 0  # bytes folded so far
        self._partial = False  # the bytes folded so far end inside a line (no newline yet)
        self._counted = (0, 0)  # (offset, newlines before it): line numbers, counted when needed
        self._current: dict[str, Bug] = {}
        # dedup_key -> id of its open/fixing bug; built when first needed (readers never need it)
        self._active: dict[str, str] | None = None
        self._warnings: dict[int, str] = {}  # line number -> warning

    # -- reading ---------------------------------------------------------------------

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self._warnings[k] for k in sorted(self._warnings))

    def _warn(self, lineno: int, why: str) -> None:
        if lineno not in self._warnings:
            self._warnings[lineno] = f"{self.path.name} line {lineno}: {why}; line skipped"

    def _reset(self) -> None:
        self._offset = 0
        self._counted = (0, 0)
        self._partial = False
        self._current.clear()
        self._active = None
        self._warnings.clear()

    def _apply(self, bug: Bug) -> None:
        old = self._current.get(bug.id)
        self._current[bug.id] = bug
        active = self._active
        if active is None:
            return
        if old is not None and active.get(old.dedup_key) == bug.id:
            del active[old.dedup_key]
        if bug.status in ACTIVE:
            active[bug.dedup_key] = bug.id

    @staticmethod
    def _prefix_id(raw: bytes) -> bytes | None:
        """The id of a line as greenloop writes it, read from its prefix (None: parse it)."""
        m = _HEAD.match(raw)
        return m[1] if m else None

    def _newlines_before(self, fd: int, offset: int) -> int:
        """How many lines of the log end before byte `offset` (read from the file, remembered)."""
        at, count = self._counted if self._counted[0] <= offset else (0, 0)
        while at < offset:
            chunk = os.pread(fd, min(offset - at, 1 << 24), at)
            if not chunk:
                break
            count += chunk.count(b"\n")
            at += len(chunk)
        self._counted = (at, count)
        return count

    def _warn_at(self, fd: int, skipped: list[tuple[int, str]]) -> None:
        """Warn about skipped lines given by their offsets (lines counted in one pass)."""
        for pos, why in sorted(skipped):
            self._warn(self._newlines_before(fd, pos) + 1, why)

    def _ingest(self, fd: int, base: int, size: int) -> None:
        """Fold the log's bytes [base, size) (everything before `base` is folded).

        The current state of a bug is its last good line, so only each bug's last line is
        parsed. Pass 1 finds them, reading the log in chunks through one buffer: a line
        greenloop wrote gives its id from its prefix (one regex over the chunk); only lines
        written another way (by hand) are parsed then. Pass 2 parses the last lines, many per
        json call; a last line that does not read is reported and the bug falls back to its
        line before, and so on.
        """
        skipped: list[tuple[int, str]] = []  # (offset in the log, why)
        last: dict[bytes, bytearray | Bug] = {}  # id -> its last line if canonical, else that line's bug
        hand: dict[bytes, list[tuple[int, Bug]]] = {}  # id -> its lines in other forms (offset, bug)
        first = -1  # the offset of the first line that starts in [base, size)
        buf = bytearray(min(self.chunk, size - base))
        pos = base
        while pos < size:
            n = os.preadv(fd, [memoryview(buf)[: size - pos]], pos)
            if n <= 0:
                break  # the log shrank under the lock (an editor): fold what was read
            stop = n
            if pos + n < size:  # a chunk ends at its last newline; the next one starts after it
                stop = buf.rfind(b"\n", 0, n) + 1
                if stop == 0:  # one line longer than the buffer
                    buf.extend(bytes(len(buf)))
                    continue
            start = 0
            if pos == base and self._partial:  # text after a line that had no newline: not a line
                nl = buf.find(b"\n", 0, stop)
                if buf[: stop if nl < 0 else nl].strip():
                    skipped.append((pos, "text appended to a line that had no newline"))
                start = stop if nl < 0 else nl + 1
            if first < 0 and start < stop:
                first = pos + start
            end = stop - 1 if buf[stop - 1] == 0x0A else stop  # a final newline starts no line
            if start < end:
                m = _HEAD.match(buf, start, end)
                found: dict[Any, int] = {m[1] if m else None: start - 1}  # None: another form
                found.update({x[1]: x.start() for x in _NEXT.finditer(buf, start, end)})
                find = buf.find
                if None not in found:  # every line canonical: keep each id's last line, in bulk
                    last.update({k: buf[v + 1 : (find(b"\n", v + 1, end) + 1 or end + 1) - 1]
                                 for k, v in found.items()})
                else:  # some line is in another form (or blank): line by line
                    for key, v in self._pass1(buf, start, end, pos, skipped, hand).items():
                        if isinstance(v, Bug):
                            last[key] = v
                        else:
                            last[key] = buf[v + 1 : (find(b"\n", v + 1, end) + 1 or end + 1) - 1]
            pos += stop
        if last:
            self._fold(fd, base, size, first, last, skipped, hand)
        self._warn_at(fd, skipped)

    @staticmethod
    def _pass1(buf: bytearray, start: int, end: int, pos: int, skipped: list[tuple[int, str]],
               hand: dict[bytes, list[tuple[int, Bug]]]) -> dict[bytes, int | Bug]:
        """Pass 1 for a chunk with lines in other forms: each id's last line, in order of the
        ids' first lines. A canonical line is given by its newline; any other is parsed now."""
        last: dict[bytes, int | Bug] = {}
        nl = start - 1
        while nl < end:
            at = nl + 1
            nl = buf.find(b"\n", at, end)
            if nl < 0:
                nl = end
            m = _HEAD.match(buf, at, nl)
            if m:
                last[m[1]] = at - 1
                continue
            raw = buf[at:nl]
            if not raw.strip():
                continue
            try:
                bug = _record(raw)
            except _Skip as why:
                skipped.append((pos + at, str(why)))
                continue
            key = _id_key(bug)
            last[key] = bug
            hand.setdefault(key, []).append((pos + at, bug))
        return last

    def _fold(self, fd: int, base: int, size: int, first: int, last: dict[bytes, bytearray | Bug],
              skipped: list[tuple[int, str]], hand: Mapping[bytes, list[tuple[int, Bug]]]) -> None:
        """Pass 2: apply each bug's last line (a canonical line to decode, or a Bug)."""
        items = list(last.items())
        whole: list[bytes] = []  # the bytes [base, size), read only if a bug must fall back

        def earlier(key: bytes, why: str) -> Bug | None:
            """The last line of `key` did not read: report it, and find the newest one that does."""
            if not whole:
                whole.append(_read_range(fd, base, size))
            buf, start = whole[0], first - base
            nl = buf.rfind(b"\n" + ID_PREFIX + key + b'"', max(start - 1, 0))  # -1: the first line
            skipped.append((base + nl + 1, why))
            rel: list[tuple[int, str]] = []
            mine = {key: [(p - base, b) for p, b in hand.get(key, ())]}
            found = self._earlier(buf, start, key, nl, rel, mine)
            skipped.extend((p + base, w) for p, w in rel)
            return found

        for i in range(0, len(items), _BATCH):
            batch = items[i : i + _BATCH]
            raws = [v for _, v in batch if type(v) is not Bug]
            objs = _decode_all(raws)  # type: ignore[arg-type]
            # whole records become bugs (taking their dicts over); None: read carefully below
            bugs = [] if objs is None else [_whole_record(o) if type(o) is dict else None for o in objs]
            if objs is not None and len(raws) == len(batch) and all(bugs):  # the common case, in bulk
                ids = [b.id for b in bugs]  # type: ignore[union-attr]
                # each id is its line's prefix id: one comparison for the batch (a prefix id has no
                # NUL, so equal joins mean equal ids)
                if "\0".join(ids).encode("utf-8", "surrogatepass") == b"\0".join([k for k, _ in batch]):
                    if self._active is None:
                        self._current.update(zip(ids, bugs, strict=True))  # type: ignore[arg-type]
                    else:
                        for fresh in bugs:
                            self._apply(fresh)  # type: ignore[arg-type]
                    continue
            k = 0
            for key, v in batch:
                if type(v) is Bug:
                    self._apply(v)
                    continue
                bug: Bug | None
                try:
                    bug = (_record(v, key) if objs is None  # type: ignore[arg-type]
                           else _checked(bugs[k] or _as_bug(objs[k]), key))
                except _Skip as why:
                    bug = earlier(key, str(why))
                k += 1
                if bug is not None:
                    self._apply(bug)

    @staticmethod
    def _earlier(buf: bytes, start: int, key: bytes, nl: int, skipped: list[tuple[int, str]],
                 hand: Mapping[bytes, list[tuple[int, Bug]]]) -> Bug | None:
        """The newest good line of bug `key` before the line after newline `nl` (None: none in
        this buffer, so the state folded before it stands)."""
        needle = b"\n" + ID_PREFIX + key + b'"'
        mine = hand.get(key, ())
        at = nl + 1
        while at > start:
            j = buf.rfind(needle, max(start - 1, 0), at - 1)
            cand = j + 1 if j >= 0 else (0 if start == 0 and buf.startswith(needle[1:]) else -1)
            newer = [b for p, b in mine if cand < p < at]
            if newer:
                return newer[-1]  # a line written by hand, newer than any canonical one left
            if cand < 0:
                return None
            at = cand
            try:
                return _record(_line(buf, at), key)
            except _Skip as why:
                skipped.append((at, str(why)))
        return None

    def _catch_up(self, fd: int) -> None:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        if ident != self._ident or st.st_size < self._offset:  # replaced or truncated: start over
            self._reset()
            self._ident = ident
        if st.st_size == self._offset:
            return
        gc_was = gc.isenabled()
        gc.disable()  # folding creates many small objects and no cycles; the collector only slows it
        try:
            self._ingest(fd, self._offset, st.st_size)
            self._offset = st.st_size
            self._partial = os.pread(fd, 1, st.st_size - 1) != b"\n"
        finally:
            if gc_was:
                gc.enable()


    @contextlib.contextmanager
    def _reading(self) -> Iterator[int | None]:
        """The log's descriptor under a shared lock, caught up (None when there is no log)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            self._reset()
            self._ident = None
            yield None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            self._catch_up(fd)
            yield fd
        finally:
            os.close(fd)  # closing releases the lock

    def fold(self) -> Fold:
        """Every bug in its current state, in the order the bugs were first written."""
        with self._reading():
            return Fold(tuple(self._current.values()), str(self.path), self.warnings)

    def get(self, bug_id: str) -> Bug:
        with self._reading():
            return self._require(bug_id)

    def _require(self, bug_id: str) -> Bug:
        bug = self._current.get(bug_id)
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
        statuses = _choices(status, "status", STATUSES, "status")
        sources = _choices(source, "source", SOURCES, "source")
        severities = _choices(severity, "severity", SEVERITIES, "severity")
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
            data = _read_range(fd, 0, self._offset)
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
            pid = self._prefix_id(raw)
            if pid != key and pid is not None:
                continue  # another bug's line that mentions this id
            try:
                bug = _record(raw, pid)
            except _Skip as why:
                self._warn(lineno, str(why))
                continue
            if bug.id == bug_id:
                entries.append(HistoryEntry(lineno, bug))
        return BugHistory(current, tuple(entries), str(self.path), self.warnings)

    # -- writing ---------------------------------------------------------------------

    def _append(self, fd: int, bug: Bug) -> None:
        line = bug.line()
        if self._partial:  # (_writing caught up under the lock: it knows how the file ends)
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
        self._catch_up(fd)

    @staticmethod
    def _sync(fd: int) -> None:
        # fdatasync flushes the data and the size an append changed; fsync where it is missing.
        getattr(os, "fdatasync", os.fsync)(fd)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[int]:
        """The log locked for writing; the lock is dropped before the sync so syncs overlap."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._catch_up(fd)
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
            if bug_id not in self._current:
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
        _check(source, "source", SOURCES, "source")
        _check(severity, "severity", SEVERITIES, "severity")
        key = dedup_key(unit_id, test_name)
        with self._writing() as fd:
            if self._active is None:
                self._active = {b.dedup_key: b.id for b in self._current.values() if b.status in ACTIVE}
            reuse = self._active.get(key)
            if reuse is not None:
                return Opened(self._current[reuse], False, str(self.path), self.warnings)
            now = self.clock()
            stamp = _iso(now)
            bug = Bug(
                id=self._new_id(now),
                source=source,  # type: ignore[arg-type]
                unit_id=unit_id,
                test_name=test_name,
                title=_bounded((title or "").strip() or test_name, TITLE_LIMIT),
                status="open",
                severity=(severity or guess_severity(test_name, got)),  # type: ignore[arg-type]
                category=category or "unknown",
                detail=_bounded(detail or "", DETAIL_LIMIT),
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
        _check(to, "status", STATUSES, "to")
        with self._writing() as fd:
            cur = self._require(bug_id)
            allowed = ALLOWED_MOVES[cur.status]
            if to not in allowed:
                moves = (f"it can move to {' or '.join(allowed)}" if allowed
                         else "verified is final: it cannot move")
                raise TransitionRefused(
                    f"bug {bug_id} is {cur.status} and cannot move to {to}; {moves} "
                    "(the states: open -> fixing -> fixed -> verified, or open -> fixed)"
                )
            refs = tuple(dict.fromkeys((*cur.fix_refs, *(r for r in fix_refs if r))))
            closing = to in ("fixed", "verified")
            bug = replace(
                cur, status=to, fix_refs=refs, updated_at=_iso(self.clock()), by=by,  # type: ignore[arg-type]
                closed_by=closed_by if closing else None,
                evidence=(evidence or "by hand") if closing else None,
            )
            self._append(fd, bug)
        return Transitioned(bug, cur.status, str(self.path), self.warnings)


# --------------------------------------------------------------------------- by workspace


def bug_log_path(workspace: str | os.PathLike[str]) -> Path:
    """The log of a workspace: at the DevLoop project root (the folder holding `units.json`
    or `bugs.ndjson`, found by walking up), elsewhere at the workspace itself."""
    root = layout.find_project_root(workspace)
    return (root if root is not None else Path(workspace).resolve()) / BUG_LOG


def unit_id_of(workspace: str | os.PathLike[str]) -> str:
    """The unit a workspace's unit tests belong to: `units/<unit>/` of a DevLoop project,
    else the workspace folder's name."""
    found = layout.unit_of(workspace)
    return found[1] if found is not None else (Path(workspace).resolve().name or "workspace")


def _log_for(workspace: str | os.PathLike[str], clock: Callable[[], float] | None) -> BugLog:
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
    opened = _log_for(workspace, clock).open(
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
    done = _log_for(workspace, clock).transition(
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
    found = _log_for(workspace, None).list(unit=unit, status=status, source=source, severity=severity)
    _report(found.warnings)
    return found.bugs


def show_bug(workspace: str | os.PathLike[str], bug_id: str) -> BugHistory:
    return _log_for(workspace, None).show(bug_id)


# --------------------------------------------------------------------------- bridges


def _text(v: object) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _failure_title(name: str, expected: object, got: object, message: str) -> str:
    if expected is not None or got is not None:
        return f"{name}: expected {_text(expected)}, got {_text(got)}"
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    return f"{name}: {first}"


def _is_no_tests(result: RunResult) -> bool:
    """A broken run that is only "no tests ran": nothing crashed, nothing timed out, nothing
    was counted. A workspace without tests has no bug to track (the gate still sees the run)."""
    if result.timed_out or result.failures or result.summary.total:
        return False
    if result.framework is None:
        return True
    return not result.crashed or "no test" in (result.crash_reason or "").lower()


def _settle(
    blog: BugLog, bugs: Iterable[Bug], to: Status, *, by: str, run_id: str, moved: list[dict[str, str]],
    evidence: str,
) -> None:
    for b in bugs:
        try:
            done = blog.transition(b.id, to, by=by, fix_refs=(run_id,), closed_by=run_id, evidence=evidence)
        except TransitionRefused:
            continue  # another writer moved it first; nothing to add
        moved.append({"id": b.id, "from": done.from_status, "to": to, "evidence": evidence})


def _answered_by(result: RunResult, bugs: Sequence[Bug]) -> tuple[list[Bug], list[Bug], list[str]]:
    """Which of a unit's active test bugs this (not broken) run answers, and how.

    A bug moves to fixed only on evidence about its own test: the run names the test among
    those that ran and passed (`test_passed`). A runner whose output names no passed test
    (a text fallback, some npm scripts) gives that evidence only as a whole: a green run of
    the whole suite (`suite_passed`). A narrowed run (target, last_failed, a verbatim command)
    never closes a bug whose test it did not name. Returns (by test, by suite, notes)."""
    passed = frozenset(result.passed_tests)
    whole_green = result.ok and result.selection is None
    by_test: list[Bug] = []
    by_suite: list[Bug] = []
    missing: list[str] = []
    for b in bugs:
        if b.test_name in passed:
            by_test.append(b)
        elif whole_green and (not passed or b.test_name == UNRECOGNISED_TEST_NAME):
            by_suite.append(b)
        elif whole_green:
            missing.append(b.id)
    notes = []
    if missing:
        notes.append(
            f"bugs: {len(missing)} open bug(s) ({', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}) "
            "stay open: this green run of the whole suite did not run their tests (renamed or "
            "removed?); close one by hand with `greenloop bugs transition ID --to fixed`"
        )
    return by_test, by_suite, notes


def bridge_unit_run(
    workspace: str, result: RunResult, *, clock: Callable[[], float] | None = None
) -> RunResult:
    """Bridge one unit run into the bug log and return the result with the bug fields filled.

    - red: each failure opens a bug (or reuses the open/fixing one for `unit:test`), its
      `bug_id` is written into the failure, new ids go to `bugs_opened`. A file that failed
      to load opens a `unit_test_infra` bug. A red run in which no failing test was
      recognised opens one bug for the unit so the red is not lost.
    - green: the unit's open and fixing unit-test bugs move to fixed, `fix_refs` gets the
      run id; the moves go to `bugs_transitioned`.
    - broken (crashed, timed out): one `unit_test_infra` bug per unit (reused while open).
      "No tests ran" (nothing crashed or timed out, nothing counted) and an aborted run open
      nothing: an empty suite and a person's Ctrl-C are not bugs.
    - any run that was not broken (red or green) fixes the unit's open infra bug: the suite
      ran again.
    Integration bugs are left to integration runs. The log cannot be written (read-only
    folder, full disk): the run is returned with a note, never turned into an error.
    """
    blog = _log_for(workspace, clock)
    unit = unit_id_of(workspace)
    by = "greenloop run"
    opened: list[str] = []
    moved: list[dict[str, str]] = []
    failures = list(result.failures)
    notes: list[str] = []
    try:
        if result.outcome == "broken" or result.crashed or result.timed_out:
            if result.aborted:
                notes.append("bugs: an interrupted run opens no bug")
            elif _is_no_tests(result):
                notes.append("bugs: no tests ran, so there is no failure to track (no bug opened)")
            else:
                why = result.crash_reason or ("timed out" if result.timed_out else "crashed")
                o = blog.open(
                    unit_id=unit, test_name=INFRA_TEST_NAME, source="unit_test_infra",
                    title=f"the test run of {unit} broke: {why}",
                    detail=f"{why}\n\n{result.output_tail[-DETAIL_LIMIT:]}".strip(),
                    run_id=result.run_id, by=by,
                    severity="high",  # a broken suite hides every other result
                )
                if o.created:
                    opened.append(o.bug.id)
        else:
            failing = {f.test for f in failures}
            mine = [b for b in blog.fold().bugs
                    if b.unit_id == unit and b.status in ACTIVE and b.test_name not in failing]
            # The suite ran again: the runner works. A file that failed to load is answered by
            # a run of the whole suite, or by a passed test named after the file (pytest ids).
            infra = [b for b in mine if b.source == "unit_test_infra"]
            ran = [b for b in infra if b.test_name == INFRA_TEST_NAME]
            loaded = [b for b in infra if b.test_name != INFRA_TEST_NAME and (
                result.selection is None
                or any(t.startswith(b.test_name + "::") for t in result.passed_tests))]
            _settle(blog, ran, "fixed", by=by, run_id=result.run_id, moved=moved, evidence="suite_ran")
            _settle(blog, loaded, "fixed", by=by, run_id=result.run_id, moved=moved, evidence="file_loaded")
            # A flaky test's bug stays open when the test passes: passing is what a flaky test
            # mostly does, so only a person closes it (one bug per flaky test across runs).
            by_test, by_suite, skipped = _answered_by(
                result, [b for b in mine if b.source == "unit_test" and b.category != FLAKY_CATEGORY])
            for answered, evidence in ((by_test, "test_passed"), (by_suite, "suite_passed")):
                _settle(blog, answered, "fixed", by=by, run_id=result.run_id, moved=moved, evidence=evidence)
            notes.extend(skipped)
            # A green run (config flaky = "warn") still logs its flaky tests.
            if not result.ok or any(f.flaky for f in failures):
                for i, f in enumerate(failures):
                    if result.ok and not f.flaky:
                        continue
                    title = _failure_title(f.test, f.expected, f.got, f.message)
                    o = blog.open(
                        unit_id=unit, test_name=f.test,
                        source="unit_test_infra" if f.kind == "load" else "unit_test",
                        title=f"flaky: {title}" if f.flaky else title,
                        category=FLAKY_CATEGORY if f.flaky else None,
                        detail=f.stack or f.message, run_id=result.run_id, by=by, got=f.got,
                    )
                    failures[i] = f._replace(bug_id=o.bug.id)
                    if o.created:
                        opened.append(o.bug.id)
                if not failures and not result.ok:
                    o = blog.open(
                        unit_id=unit, test_name=UNRECOGNISED_TEST_NAME,
                        title=f"tests of {unit} failed (exit {result.exit_code}) but no failing "
                              "test was recognised in the output",
                        detail=result.output_tail[-DETAIL_LIMIT:], run_id=result.run_id, by=by,
                    )
                    if o.created:
                        opened.append(o.bug.id)
        notes.extend(blog.warnings)
    except OSError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.strerror or exc}")
    except GreenloopError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.message}")
    return result._replace(
        failures=tuple(failures),
        bugs_opened=(*result.bugs_opened, *opened),
        bugs_transitioned=(*result.bugs_transitioned, *moved),
        notes=(*result.notes, *notes),
    )


@runtime_checkable
class IntegrationFailureLike(Protocol):
    """What the bridge reads of one failed integration case (a dict with these keys works too)."""

    case_id: str
    failed_step: int | str | None
    reason: str
    expected: Any
    got: Any
    involves: Sequence[str]


@dataclass(frozen=True)
class IntegrationFailure:
    case_id: str
    failed_step: int | str | None = None
    reason: str = ""
    expected: Any = None
    got: Any = None
    involves: tuple[str, ...] = ()
    stderr_excerpt: str = ""

    @classmethod
    def of(cls, f: IntegrationFailureLike | Mapping[str, Any]) -> IntegrationFailure:
        def get(key: str, default: Any = None) -> Any:
            return f.get(key, default) if isinstance(f, Mapping) else getattr(f, key, default)

        case_id = get("case_id")
        if not case_id:
            raise UsageError("an integration failure has no case_id; every failure names its case")
        step = get("failed_step")
        return cls(
            case_id=str(case_id),
            failed_step=step if isinstance(step, (int, str)) else None,
            reason=str(get("reason") or ""),
            expected=get("expected"),
            got=get("got"),
            involves=tuple(str(u) for u in (get("involves") or ())),
            stderr_excerpt=str(get("stderr_excerpt") or ""),
        )

    def title(self) -> str:
        step = f" step {self.failed_step}" if self.failed_step not in (None, "") else ""
        what = (f"expected {_text(self.expected)}, got {_text(self.got)}"
                if self.expected is not None or self.got is not None else (self.reason or "failed"))
        return f"{self.case_id}{step}: {what}"

    def detail(self) -> str:
        parts = [self.reason]
        if self.expected is not None or self.got is not None:
            parts.append(f"expected: {_text(self.expected)}\ngot: {_text(self.got)}")
        if self.stderr_excerpt:
            parts.append(f"stderr:\n{self.stderr_excerpt}")
        return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class BridgeOutcome:
    """What an integration run did to the log. `bug_ids` maps each failed case to its bug."""

    bugs_opened: tuple[str, ...] = ()
    bugs_transitioned: tuple[dict[str, str], ...] = ()
    bug_ids: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "bugs_opened": list(self.bugs_opened),
            "bugs_transitioned": [dict(t) for t in self.bugs_transitioned],
            "bug_ids": dict(self.bug_ids),
            "notes": list(self.notes),
        }


def bridge_integration_run(
    project: str,
    failures: Sequence[IntegrationFailureLike | Mapping[str, Any]],
    *,
    run_id: str,
    ok: bool,
    covered_units: Sequence[str],
    passed_cases: Sequence[str] | None = None,
    clock: Callable[[], float] | None = None,
) -> BridgeOutcome:
    """Bridge one integration run into the project's bug log.

    - each failure opens an `integration_test` bug (unit_id `integration`, test_name the
      case id, affected_units the case's `involves`), or reuses the open one for that case;
    - the open/fixing integration bugs of `passed_cases` move to fixed, in any run (a case
      that passes is fixed even while another case fails); a case the run did not execute
      moves nothing (without `passed_cases`, no integration bug moves);
    - a green run (`ok`) then verifies the fixed integration bugs of `passed_cases`, and the
      fixed unit bugs whose units are all in `covered_units`, with the run id in `fix_refs`
      and `closed_by`. A red run verifies nothing.
    """
    items = [IntegrationFailure.of(f) for f in failures]
    blog = _log_for(project, clock)
    by = "greenloop integrate"
    covered = set(covered_units)
    opened: list[str] = []
    moved: list[dict[str, str]] = []
    ids: dict[str, str] = {}
    notes: list[str] = []
    try:
        for f in items:
            o = blog.open(
                unit_id=INTEGRATION_UNIT, test_name=f.case_id, source="integration_test",
                title=f.title(), detail=f.detail(), run_id=run_id, by=by,
                affected_units=f.involves or None, got=f.got,
            )
            ids[f.case_id] = o.bug.id
            if o.created:
                opened.append(o.bug.id)
        # Only a case this run executed and saw pass is evidence about its bug.
        passed = set(passed_cases or ()) - set(ids)
        # A case that passed answers its bug, even in a run where another case failed.
        current = blog.fold().bugs
        answered = [b for b in current
                    if b.source == "integration_test" and b.status in ACTIVE and b.test_name in passed]
        _settle(blog, answered, "fixed", by=by, run_id=run_id, moved=moved, evidence="case_passed")
        if ok:
            current = blog.fold().bugs
            cases = [b for b in current
                     if b.status == "fixed" and b.source == "integration_test" and b.test_name in passed]
            units = [b for b in current
                     if b.status == "fixed" and b.source != "integration_test"
                     and set(b.affected_units or (b.unit_id,)) <= covered]
            _settle(blog, cases, "verified", by=by, run_id=run_id, moved=moved, evidence="case_passed")
            _settle(blog, units, "verified", by=by, run_id=run_id, moved=moved,
                    evidence="integration_passed")
        notes.extend(blog.warnings)
    except OSError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.strerror or exc}")
    except GreenloopError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.message}")
    return BridgeOutcome(tuple(opened), tuple(moved), ids, tuple(notes))

