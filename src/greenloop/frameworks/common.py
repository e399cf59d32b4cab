"""Helpers every runner parser shares: ANSI stripping, stack trimming, expected/got, bounds,
and the driver of a streaming parser (how a parser closes is in frameworks/results.py).

Parsers are streaming and total: they see one line at a time, keep at most a bounded amount
of text per failure and a bounded number of failures in detail, and never raise. The
limits below are what keeps a 100 MB log inside a few megabytes of memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from greenloop.model import ParseResult

__all__ = [
    "MAX_DETAILED_FAILURES",
    "MAX_FAILURE_CHARS",
    "MAX_FAILURE_LINES",
    "MAX_VALUE_CHARS",
    "Event",
    "FailureDraft",
    "LineParser",
    "bounded_join",
    "cap_value",
    "capped",
    "diff_sides",
    "expected_got",
    "first_user_frame",
    "is_user_frame",
    "relativize",
    "run_parser",
    "runner_error",
    "strip_ansi",
    "test_frame",
    "trim_stack",
]

Event = Literal["pass", "fail", "skip"]

# Bounds: a failure keeps at most this many lines/characters of body; details are kept for
# this many failures (the rest are still counted and named, with an empty body).
MAX_FAILURE_LINES = 120
MAX_FAILURE_CHARS = 8000
MAX_DETAILED_FAILURES = 2000
MAX_NAMED_FAILURES = 20000

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


# An expected/got value longer than this is cut, and says so ("… [cut 1,234 chars]").
MAX_VALUE_CHARS = 4000


# Control characters a value may carry from a test's message (google/uuid's messages end in a
# backspace): everything below a space but tab and newline, and DEL. ANSI sequences go first,
# whole, so that no "[31m" is left of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def cap_value(value: str | None, limit: int = MAX_VALUE_CHARS) -> str | None:
    """`value` without control characters, whole or its first `limit` characters and how many
    were cut."""
    if value is None:
        return value
    if _CONTROL.search(value):
        value = _CONTROL.sub("", _ANSI.sub("", value))
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… [cut {len(value) - limit:,} chars]"


def _needs_cleaning(value: str | None) -> bool:
    return value is not None and (len(value) > MAX_VALUE_CHARS or _CONTROL.search(value) is not None)


def capped(result: ParseResult) -> ParseResult:
    """`result` with every failure's expected and got within MAX_VALUE_CHARS and free of
    control characters."""
    if not any(_needs_cleaning(f.expected) or _needs_cleaning(f.got) for f in result.failures):
        return result
    return result._replace(failures=tuple(
        f._replace(expected=cap_value(f.expected), got=cap_value(f.got)) for f in result.failures))


# The runner's own words when it stops before running anything (a config it cannot read, a
# missing module): `Error: Jest: 'ts-node' is required …`, `TypeError [ERR_X]: …`, pytest's
# `ERROR: file or directory not found: x`, jest's `● Validation Error:`.
# (pytest's own crash: the exception closing its INTERNALERROR> traceback, a warning that a
# `filterwarnings = error` config turned into one among them)
_RUNNER_ERROR = re.compile(r"^\s*(?:(?:[A-Z]\w*)?Error(?: \[[\w_]+\])?: \S|ERROR: \S|● Validation Error"
                           r"|INTERNALERROR> [\w.]*(?:Error|Warning|Exception): \S)")


def runner_error(lines: Iterable[str], limit: int = 3) -> str | None:
    """The first few distinct error lines a runner printed (its crash in its own words), or
    None. Stack frames and repeats are skipped; each line is kept to 300 characters."""
    found: list[str] = []
    for raw in lines:
        line = strip_ansi(raw).strip()
        if not _RUNNER_ERROR.match(line):
            continue
        line = line[:300]
        if all(line not in f and f not in line for f in found):
            found.append(line)
            if len(found) >= limit:
                break
    return " / ".join(found) if found else None


def strip_ansi(s: str) -> str:
    """Remove colour and cursor escape sequences (CSI, OSC, and two-byte escapes)."""
    if "\x1b" not in s:
        return s
    return _ANSI.sub("", s)


# Frames that belong to the runner or the platform, never to the user's code.
_FOREIGN = (
    "node_modules",
    "node:internal",
    "node:async_hooks",
    "node:events",
    "node:process",
    "(internal/",
    " internal/",
    "(<anonymous>)",
    "Promise.all (index",
    "site-packages",
    "dist-packages",
    "/_pytest/",
    "/pluggy/",
    "<frozen ",
    "importlib/__init__.py",
    "/lib/python3",
)

_JS_FRAME = re.compile(r"^\s*(?:at\s+|❯\s+)")
_JS_TAP_FRAME = re.compile(r"^\s*(?:async\s+)?[\w$.<>\[\] #]+ \(.*:\d+:\d+\)\s*$|^\s*(?:file://)?/\S+:\d+:\d+\s*$")
_PY_FRAME = re.compile(r'^\s*(?:File ".*", line \d+|\S+\.py:\d+:(?: |$))')
_LOC = re.compile(r"(?:file://)?((?:[A-Za-z]:)?[^\s():'\"]+\.[A-Za-z0-9]+):(\d+)(?::(\d+))?")
_PY_LOC = re.compile(r'File "([^"]+)", line (\d+)')


def _is_frame(line: str) -> bool:
    return bool(_JS_FRAME.match(line) or _PY_FRAME.match(line) or _JS_TAP_FRAME.match(line))


def is_user_frame(line: str) -> bool:
    """True for a stack frame line that points into the user's code (not a runner's)."""
    if not _is_frame(line):
        return False
    return not any(f in line for f in _FOREIGN)


def relativize(text: str, root: str | None) -> str:
    """Shorten absolute paths under `root` (and file:// URLs of them) to relative ones."""
    if not root:
        return text
    r = root.rstrip("/") + "/"
    return text.replace("file://" + r, "").replace(r, "")


def trim_stack(stack: str, root: str | None = None) -> str:
    """Keep only the frames in the user's code (drop node_modules, node:internal, pytest, pluggy).

    Lines that are not frames at all (messages, code excerpts) are dropped too: the result is
    the user's frames, one per line, stripped of indentation, paths relative to `root`.
    """
    try:
        kept: list[str] = []
        for raw in stack.splitlines():
            line = strip_ansi(raw).strip()
            if not line or not is_user_frame(line):
                continue
            kept.append(relativize(line, root))
            if len(kept) >= 20:
                break
        return "\n".join(kept)
    except Exception:  # totality: a helper on odd text never raises
        return ""


def first_user_frame(stack: str) -> tuple[str | None, int | None]:
    """(file, line) of the first frame in user code, or (None, None)."""
    for raw in stack.splitlines():
        line = strip_ansi(raw)
        if not is_user_frame(line):
            continue
        m = _PY_LOC.search(line)
        if m:
            return m.group(1), int(m.group(2))
        m = _LOC.search(line)
        if m:
            return m.group(1), int(m.group(2))
    return None, None


def test_frame(
    stack: str, test_file: str | None, root: str | None
) -> tuple[str | None, int | None, str | None]:
    """(file, line, origin) of a JavaScript failure: the first user frame, unless the error was
    thrown in the code under test and the stack passes through the test's own file; then the
    test's frame (where the runner's report and an editor put the failure) with the throw
    site as `origin` ("src/utils.ts:570"). Paths relative to `root`."""
    frames: list[tuple[str, int]] = []
    for raw in stack.splitlines():
        line = strip_ansi(raw)
        if not is_user_frame(line):
            continue
        m = _LOC.search(line)
        if m:
            frames.append((relativize(m.group(1), root), int(m.group(2))))
    if not frames:
        return None, None, None
    own = relativize(test_file, root) if test_file else None
    first = frames[0]
    if own is None or first[0] == own:
        return first[0], first[1], None
    at_test = next((f for f in frames if f[0] == own), None)
    if at_test is None:
        return first[0], first[1], None
    return at_test[0], at_test[1], f"{first[0]}:{first[1]}"


def bounded_join(lines: Iterable[str], limit: int = MAX_FAILURE_CHARS) -> str:
    """The lines joined by newlines, cut once `limit` characters are reached."""
    out: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > limit:
            out.append("…")
            break
        out.append(line)
    return "\n".join(out)


def diff_sides(lines: list[str]) -> tuple[str, str] | None:
    """Rebuild both sides of a `- Expected / + Received` style diff (context on both sides)."""
    exp: list[str] = []
    got: list[str] = []
    for line in lines:
        if line.startswith("- "):
            exp.append(line[2:])
        elif line.startswith("+ "):
            got.append(line[2:])
        elif line in ("-", "+"):
            (exp if line == "-" else got).append("")
        elif line.startswith("  "):
            exp.append(line[2:])
            got.append(line[2:])
    if not exp and not got:
        return None
    return "\n".join(exp).strip("\n"), "\n".join(got).strip("\n")


# jest/vitest labels: `Expected: 4`, `Expected substring: "x"` / `Received message: "y"` (toThrow)
_EXP_RECV = re.compile(r"^\s*Expected(?: value| substring| pattern| message| constructor| name)?:\s?(.*)$")
_RECV = re.compile(r"^\s*Received(?: value| message| constructor| name)?:\s?(.*)$")
# vitest's two blocks when there is no line diff: `- Expected:` lines, a blank, `+ Received:` lines
_BLOCK = re.compile(r"^([-+]) (Expected|Received):$")
_CHAI = re.compile(
    r"expected (.+?) to (?:be|equal|deeply equal|strictly equal|have length|be close to|"
    r"match object|have property|be an instance of|match|contain|include|be greater than|"
    r"be less than|be above|be below) (.+?)(?: // Object\.is equality)?$"
)
_PY_ASSERT = re.compile(r"^(?:AssertionError: )?assert (.+?) (==|!=|<=|>=|<|>|is not|is|not in|in) (.+)$")


def expected_got(body: list[str]) -> tuple[str | None, str | None]:
    """Find expected and got in a failure's text: Expected:/Received:, a +/- diff, chai's
    `expected X to be Y`, node's `actual:`/`expected:` or pytest's `assert X == Y`."""
    expected: str | None = None
    got: str | None = None
    for i, raw in enumerate(body):
        line = raw.strip()
        b = _BLOCK.match(line)
        if b:
            block: list[str] = []
            j = i + 1
            while j < len(body) and body[j].strip() != "" and not _is_frame(body[j]):
                block.append(body[j].rstrip())
                j += 1
            value = "\n".join(block) if block else None
            if b.group(2) == "Expected" and expected is None:
                expected = value
            elif b.group(2) == "Received" and got is None:
                got = value
            continue
        m = _EXP_RECV.match(line)
        if m and expected is None and not line.startswith("Expected values"):
            expected = m.group(1).strip()
            continue
        m = _RECV.match(line)
        if m and got is None:
            got = m.group(1).strip()
            continue
        nxt = body[i + 1].strip() if i + 1 < len(body) else ""
        if line.startswith("- Expected") and nxt.startswith("+ Received"):
            # The diff starts after a blank line following the legend.
            j = i + 2
            while j < len(body) and body[j].strip() == "":
                j += 1
            seg: list[str] = []
            # Diff lines carry the legend's indentation (jest indents blocks, vitest does not).
            indent = len(raw) - len(raw.lstrip())
            while j < len(body) and body[j].strip() != "" and not _is_frame(body[j]):
                seg.append(body[j][indent:])
                j += 1
            sides = diff_sides(seg)
            if sides and expected is None and got is None:
                expected, got = sides
            continue
    if expected is not None or got is not None:
        return expected, got
    for raw in body:
        line = raw.strip()
        m = _CHAI.search(line)
        if m:
            return m.group(2).strip(), m.group(1).strip()
        m = _PY_ASSERT.match(line)
        if m and m.group(2) == "==":
            return m.group(3).strip(), m.group(1).strip()
    return None, None


@dataclass
class FailureDraft:
    """A failure being assembled from lines; `finish()` turns it into a frozen Failure."""

    test: str
    file: str | None = None
    line: int | None = None
    kind: Literal["test", "load", "hook"] = "test"
    body: list[str] = field(default_factory=list)
    message: str = ""
    expected: str | None = None
    got: str | None = None
    stack: str = ""
    chars: int = 0

    def add(self, line: str) -> None:
        """Keep one more body line while the failure's line and character bounds allow."""
        if len(self.body) < MAX_FAILURE_LINES and self.chars < MAX_FAILURE_CHARS:
            self.body.append(line)
            self.chars += len(line)


class LineParser(Protocol):
    """What each runner module's text parser looks like."""

    def feed(self, line: str) -> None:
        """Read one line of the runner's output."""
        ...

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        ...


def run_parser(factory: Callable[[], LineParser], lines: Iterable[str], framework: str) -> ParseResult:
    """Drive a parser over lines; any exception becomes a note, never escapes (totality)."""
    try:
        parser = factory()
    except Exception as exc:  # pragma: no cover - constructors are trivial
        return ParseResult(notes=(f"{framework} parser could not start: {exc!r}",))
    count = 0
    feed = parser.feed
    consume = getattr(parser, "consume", None)
    try:
        if consume is not None:
            count = -1  # unknown: the parser loops itself
            consume(lines)
            lines = ()
        for line in lines:
            count += 1
            if line.__class__ is not str:  # a caller that passed bytes despite the annotation
                raw: object = line
                line = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
            feed(line.rstrip("\r\n"))
    except Exception as exc:
        where = f"at line {count}" if count >= 0 else "part way"
        note = f"{framework} output parsing stopped {where}: {type(exc).__name__}: {exc}"
        try:
            res = parser.finish()
        except Exception:
            return ParseResult(notes=(note,))
        return ParseResult(
            summary=res.summary,
            failures=res.failures,
            notes=(*res.notes, note),
            recognized=res.recognized,
            duration_ms=res.duration_ms,
            load_error=res.load_error,
        )
    try:
        return parser.finish()
    except Exception as exc:
        return ParseResult(notes=(f"{framework} output parsing failed: {type(exc).__name__}: {exc}",))
