"""From the bytes of `bugs.ndjson` to the bugs' current states: the fast fold.

The current state of a bug is its last good line, so folding parses only each bug's last
line. Finding them: the writer puts `id` first (see `Bug.to_json`), so the id of a line is
read from its prefix, one regex over a chunk of the log; only lines written another way (by
hand) are parsed while looking. The last lines are then parsed many per json call; a last
line that does not read is reported and the bug falls back to its line before, and so on.

The cost of this shortcut: a corrupt line that is not the last of its bug goes unnoticed by
the fold (it cannot change a current state); `BugLog.show` parses every line of the bug it
shows and reports it. Reading is tolerant: a torn or corrupt line is skipped with a warning
naming its line number, and every other bug still loads.
"""

from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from greenloop.bugs.record import ACTIVE, Bug, bug_of_whole_record

__all__ = [
    "DECODE_BATCH",
    "ID_PREFIX",
    "READ_CHUNK",
    "FoldedLog",
    "NotABugLine",
    "prefix_id",
    "read_bug_line",
    "read_range",
]

ID_PREFIX = b'{"id": "'  # every line greenloop writes starts like this (id is the first key)
_DECODER = json.JSONDecoder()
# A line greenloop wrote starts with its id (no escapes in it: ids never need them).
_CANONICAL_START = re.compile(rb'\{"id": "([^"\\\n]+)"')
# Each newline, with the id of the line it starts when that line is written the canonical way.
_NEXT_LINE_START = re.compile(rb'\n(?:\{"id": "([^"\\\n]+)")?')
DECODE_BATCH = 512  # last lines decoded by one json call (a bad one sends only its batch line by line)
READ_CHUNK = 8 << 20  # the log is read through a buffer this big (grown for a longer line)

# Skipped lines found while folding: (offset in the log, or in a buffer, and why).
_Skipped = list[tuple[int, str]]
# Bugs from lines not written the canonical way: id -> (offset, bug) of each such line.
_HandWritten = Mapping[bytes, list[tuple[int, Bug]]]


class NotABugLine(Exception):
    """A line that is not a bug record; the message says why."""


# --------------------------------------------------------------------------- one line


def _decode_line_json(raw: bytes | bytearray) -> Any:
    """json.loads for one line, minus its wrappers on the common path (a clean line)."""
    try:
        text = raw.decode("utf-8")
        obj, end = _DECODER.raw_decode(text)
    except ValueError:
        return json.loads(raw)  # raises the precise error
    if end != len(text) and text[end:].strip():
        return json.loads(raw)
    return obj


def read_bug_line(raw: bytes | bytearray, expect_id: bytes | None = None) -> Bug:
    """One line as a bug; raises NotABugLine saying why it is not one."""
    try:
        obj = _decode_line_json(raw)
    except UnicodeDecodeError:
        raise NotABugLine("not valid UTF-8") from None
    except (json.JSONDecodeError, RecursionError):
        torn = raw.lstrip().startswith(b"{") and not raw.rstrip().endswith(b"}")
        why = "incomplete (no closing brace: a torn write?)" if torn else "not valid JSON"
        raise NotABugLine(why) from None
    return _check_prefix_id(_bug_of_value(obj), expect_id)


def _bug_of_value(obj: Any) -> Bug:
    try:
        return Bug.from_json(obj)
    except ValueError as exc:  # a JSON value that is not a bug record
        raise NotABugLine(f"not a bug record ({exc})") from None


def _decode_lines_in_one_call(lines: Sequence[bytes | bytearray]) -> list[Any] | None:
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


def _check_prefix_id(bug: Bug, expect_id: bytes | None) -> Bug:
    if expect_id is not None and bug.id.encode("utf-8", "surrogatepass") != expect_id:
        shown = expect_id.decode(errors="replace")
        raise NotABugLine(f"its id prefix {shown!r} disagrees with its id {bug.id!r}")
    return bug


def _id_bytes(bug: Bug) -> bytes:
    return bug.id.encode("utf-8", "surrogatepass")


def prefix_id(raw: bytes) -> bytes | None:
    """The id of a line as greenloop writes it, read from its prefix (None: parse it)."""
    m = _CANONICAL_START.match(raw)
    return m[1] if m else None


def _line_at(buf: bytes, at: int) -> bytes:
    """The line of `buf` that starts at `at`, without its newline."""
    nl = buf.find(b"\n", at)
    return buf[at:] if nl < 0 else buf[at:nl]


def read_range(fd: int, start: int, end: int) -> bytes:
    """The bytes [start, end) of the file (fewer if it ends first)."""
    chunks = []
    pos = start
    while pos < end:
        chunk = os.pread(fd, min(end - pos, 1 << 30), pos)
        if not chunk:
            break
        chunks.append(chunk)
        pos += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


# --------------------------------------------------------------------------- the fold


class FoldedLog:
    """The bugs' current states folded from a log's bytes so far, and the lines skipped.

    It only grows with the log: `catch_up` folds the bytes appended since the last call, and
    starts over when the file was replaced or truncated. `chunk` is the read buffer's size.
    """

    def __init__(self, log_name: str, chunk: int = READ_CHUNK) -> None:
        self.log_name = log_name  # the file's name, in warnings
        self.chunk = max(chunk, 1)  # bytes read at a time (a longer line grows the buffer)
        self.identity: tuple[int, int] | None = None  # (device, inode) of the file folded
        self.offset = 0  # bytes folded so far
        self.ends_mid_line = False  # the bytes folded so far end inside a line (no newline yet)
        self.current: dict[str, Bug] = {}
        # dedup_key -> id of its open/fixing bug; built when first needed (readers never need it)
        self.active: dict[str, str] | None = None
        self._warnings: dict[int, str] = {}  # line number -> warning
        self._counted = (0, 0)  # (offset, newlines before it): line numbers, counted when needed

    @property
    def warnings(self) -> tuple[str, ...]:
        """The skipped lines' warnings, in line order."""
        return tuple(self._warnings[k] for k in sorted(self._warnings))

    def warn(self, lineno: int, why: str) -> None:
        """Record that line `lineno` was skipped and why (once per line)."""
        if lineno not in self._warnings:
            self._warnings[lineno] = f"{self.log_name} line {lineno}: {why}; line skipped"

    def reset(self) -> None:
        """Forget everything folded: the next catch-up reads the log from its start."""
        self.offset = 0
        self._counted = (0, 0)
        self.ends_mid_line = False
        self.current.clear()
        self.active = None
        self._warnings.clear()

    def forget_file(self) -> None:
        """There is no log (any more): nothing is folded."""
        self.reset()
        self.identity = None

    def active_index(self) -> dict[str, str]:
        """dedup_key -> id of its open or fixing bug, kept up to date from now on."""
        if self.active is None:
            self.active = {b.dedup_key: b.id for b in self.current.values() if b.status in ACTIVE}
        return self.active

    def apply(self, bug: Bug) -> None:
        """Make `bug` its id's current state."""
        old = self.current.get(bug.id)
        self.current[bug.id] = bug
        active = self.active
        if active is None:
            return
        if old is not None and active.get(old.dedup_key) == bug.id:
            del active[old.dedup_key]
        if bug.status in ACTIVE:
            active[bug.dedup_key] = bug.id

    def catch_up(self, fd: int) -> None:
        """Fold what was appended to the open log `fd` since the last call."""
        st = os.fstat(fd)
        identity = (st.st_dev, st.st_ino)
        if identity != self.identity or st.st_size < self.offset:  # replaced or truncated: start over
            self.reset()
            self.identity = identity
        if st.st_size == self.offset:
            return
        gc_was = gc.isenabled()
        gc.disable()  # folding creates many small objects and no cycles; the collector only slows it
        try:
            self.ingest(fd, self.offset, st.st_size)
            self.offset = st.st_size
            self.ends_mid_line = os.pread(fd, 1, st.st_size - 1) != b"\n"
        finally:
            if gc_was:
                gc.enable()

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

    def _warn_at_offsets(self, fd: int, skipped: _Skipped) -> None:
        """Warn about skipped lines given by their offsets (lines counted in one pass)."""
        for pos, why in sorted(skipped):
            self.warn(self._newlines_before(fd, pos) + 1, why)

    def ingest(self, fd: int, base: int, size: int) -> None:
        """Fold the log's bytes [base, size) (everything before `base` is folded).

        First find each bug's last line, reading the log in chunks through one buffer: a line
        greenloop wrote gives its id from its prefix (one regex over the chunk); only lines
        written another way (by hand) are parsed then. Then apply the last lines, parsed many
        per json call.
        """
        skipped: _Skipped = []
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
            if pos == base and self.ends_mid_line:  # text after a line that had no newline: not a line
                nl = buf.find(b"\n", 0, stop)
                if buf[: stop if nl < 0 else nl].strip():
                    skipped.append((pos, "text appended to a line that had no newline"))
                start = stop if nl < 0 else nl + 1
            if first < 0 and start < stop:
                first = pos + start
            end = stop - 1 if buf[stop - 1] == 0x0A else stop  # a final newline starts no line
            if start < end:
                m = _CANONICAL_START.match(buf, start, end)
                # id -> the newline before its last line (start - 1 for the chunk's first line);
                # the key None stands for a line in another form
                found: dict[bytes | None, int] = {m[1] if m else None: start - 1}
                found.update({x[1]: x.start() for x in _NEXT_LINE_START.finditer(buf, start, end)})
                find = buf.find
                if None not in found:  # every line canonical: keep each id's last line, in bulk
                    last.update({k: buf[v + 1 : (find(b"\n", v + 1, end) + 1 or end + 1) - 1]
                                 for k, v in found.items() if k is not None})
                else:  # some line is in another form (or blank): line by line
                    mixed = self._last_lines_of_mixed_chunk(buf, start, end, pos, skipped, hand)
                    for key, v in mixed.items():
                        if isinstance(v, Bug):
                            last[key] = v
                        else:
                            last[key] = buf[v + 1 : (find(b"\n", v + 1, end) + 1 or end + 1) - 1]
            pos += stop
        if last:
            self._apply_last_lines(fd, base, size, first, last, skipped, hand)
        self._warn_at_offsets(fd, skipped)

    @staticmethod
    def _last_lines_of_mixed_chunk(buf: bytearray, start: int, end: int, pos: int, skipped: _Skipped,
                                   hand: dict[bytes, list[tuple[int, Bug]]]) -> dict[bytes, int | Bug]:
        """Each id's last line in a chunk with lines in other forms, in order of the ids' first
        lines. A canonical line is given by the newline before it; any other is parsed now."""
        last: dict[bytes, int | Bug] = {}
        nl = start - 1
        while nl < end:
            at = nl + 1
            nl = buf.find(b"\n", at, end)
            if nl < 0:
                nl = end
            m = _CANONICAL_START.match(buf, at, nl)
            if m:
                last[m[1]] = at - 1
                continue
            raw = buf[at:nl]
            if not raw.strip():
                continue
            try:
                bug = read_bug_line(raw)
            except NotABugLine as why:
                skipped.append((pos + at, str(why)))
                continue
            key = _id_bytes(bug)
            last[key] = bug
            hand.setdefault(key, []).append((pos + at, bug))
        return last

    def _apply_last_lines(self, fd: int, base: int, size: int, first: int, last: dict[bytes, bytearray | Bug],
                          skipped: _Skipped, hand: _HandWritten) -> None:
        """Apply each bug's last line (a canonical line to decode, or a Bug already read)."""
        items = list(last.items())
        whole: list[bytes] = []  # the bytes [base, size), read only if a bug must fall back

        def fall_back_to_earlier_line(key: bytes, why: str) -> Bug | None:
            """The last line of `key` did not read: report it, and find the newest one that does."""
            if not whole:
                whole.append(read_range(fd, base, size))
            buf, start = whole[0], first - base
            nl = buf.rfind(b"\n" + ID_PREFIX + key + b'"', max(start - 1, 0))  # -1: the first line
            skipped.append((base + nl + 1, why))
            in_buffer: _Skipped = []
            mine = {key: [(p - base, b) for p, b in hand.get(key, ())]}
            found = _newest_good_line_before(buf, start, key, nl, in_buffer, mine)
            skipped.extend((p + base, w) for p, w in in_buffer)
            return found

        for i in range(0, len(items), DECODE_BATCH):
            batch = items[i : i + DECODE_BATCH]
            raws = [v for _, v in batch if not isinstance(v, Bug)]
            objs = _decode_lines_in_one_call(raws)
            # whole records become bugs (taking their dicts over); None: read carefully below
            bugs = [] if objs is None else [bug_of_whole_record(o) if type(o) is dict else None for o in objs]
            whole_bugs = [b for b in bugs if b is not None]
            if len(whole_bugs) == len(batch):  # the common case, in bulk
                ids = [b.id for b in whole_bugs]
                # each id is its line's prefix id: one comparison for the batch (a prefix id has no
                # NUL, so equal joins mean equal ids)
                if "\0".join(ids).encode("utf-8", "surrogatepass") == b"\0".join([k for k, _ in batch]):
                    if self.active is None:
                        self.current.update(zip(ids, whole_bugs, strict=True))
                    else:
                        for fresh in whole_bugs:
                            self.apply(fresh)
                    continue
            k = 0
            for key, v in batch:
                if isinstance(v, Bug):
                    self.apply(v)
                    continue
                bug: Bug | None
                try:
                    bug = (read_bug_line(v, key) if objs is None
                           else _check_prefix_id(bugs[k] or _bug_of_value(objs[k]), key))
                except NotABugLine as why:
                    bug = fall_back_to_earlier_line(key, str(why))
                k += 1
                if bug is not None:
                    self.apply(bug)


def _newest_good_line_before(buf: bytes, start: int, key: bytes, nl: int, skipped: _Skipped,
                             hand: _HandWritten) -> Bug | None:
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
            return read_bug_line(_line_at(buf, at), key)
        except NotABugLine as why:
            skipped.append((at, str(why)))
    return None
