"""The place in the user's code a hint names, read from the failure's stack.

That place is the deepest frame of the stack in the workspace that is neither the test file
nor a dependency, named `function (file:line)`; when an assertion failed after the code under
test returned, the stack holds only the test's line, and the place is the definition of the
function the failing line called (found through the test file's imports, hints/source.py).
Without either, the hint names the test's line, never an invented place.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from greenloop.model import Failure

if TYPE_CHECKING:  # the source reader loads with the first failure: a green run never needs it
    from greenloop.hints.source import Call, Sources

__all__ = ["Evidence", "Frame", "evidence", "place", "top_user_frame"]

# Frames that are not the user's code.
_NOT_USER = re.compile(
    r"node_modules|node:internal|node:async_hooks|\(node:|<anonymous>\)?$|site-packages|dist-packages"
    r"|/lib/python\d|<frozen |<doctest |_pytest/|/pluggy/|importlib/"
)
_JS_FRAME = re.compile(
    r"^(?:at\s+|❯\s+)?(?:async\s+)?(?:(?P<fn>[^\s()][^()]*?)\s+\()?(?:file://)?"
    r"(?P<path>[^\s()]+?\.[A-Za-z0-9]+):(?P<line>\d+)(?::\d+)?\)?\s*$"
)
_PY_FRAME = re.compile(
    r"^(?:File \"(?P<path1>[^\"]+)\", line (?P<line1>\d+)(?:, in (?P<fn1>[\w<>.]+))?"
    r"|(?P<path2>[^\s:]+\.py):(?P<line2>\d+)(?::(?: in (?P<fn2>[\w<>.]+))?.*)?)\s*$"
)
_TEST_FILE = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec)/|(?:^|/)test_[^/]*\.py$|_test\.(?:py|go)$|\.(?:test|spec)\.[cm]?[jt]sx?$"
)
_FN_PREFIX = re.compile(r"^(?:async\s+)?(?:new\s+)?(?:Object|Module|TestContext|Test|Context|Function)\.")
# vitest's text reporter: `❯ titleLength code/service.js:3:21`
_VITEST_FRAME = re.compile(
    r"^❯\s+(?P<fn>[\w$.<>\[\]]+)\s+(?P<path>[^\s()]+?\.[A-Za-z0-9]+):(?P<line>\d+)(?::\d+)?\s*$"
)
# A goroutine's frame: `example.com/mixed/crash.Index(...)` (or `pkg.(*T).Method(0x1)`, and a
# closure's `.func1`), then `\t/path/crash.go:3 +0x1d` on the next line
_GO_FUNC = re.compile(r"^(?:[\w.\-~]+/)*[\w\-]+\.(?:\(\*?\w+\)\.)?(\w+)(?:\.func\d+)*(?:\.\d+)*\(.*\)$")
_GO_FILE = re.compile(r"^(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$")
_FN_ALIAS = re.compile(r"\[as ([\w$]+)\]")
# A Rust backtrace frame as the cargo parser writes it: `cws::pick at src/lib.rs:6`
_RUST_FRAME = re.compile(r"^(?P<fn>[\w:<>{}]+) at (?P<path>\S+\.rs):(?P<line>\d+)$")
_MAX_STACK_LINES = 60


class Frame(NamedTuple):
    """One frame of a stack: the function (if named), file, line, and whether Python wrote it."""

    fn: str | None
    path: str
    line: int
    python: bool


def _frames(stack: str) -> list[Frame]:
    """The stack's frames in the order written (JS: deepest first; Python: outermost first)."""
    out: list[Frame] = []
    go_fn: str | None = None  # Go names the function on the line above its file:line
    for raw in stack[: _MAX_STACK_LINES * 400].splitlines()[:_MAX_STACK_LINES]:
        line = raw.strip()[:400]  # a frame line is short; a longer one is not a frame worth reading
        go = _GO_FUNC.match(line)
        if go:
            go_fn = go.group(1)
            continue
        if not line or _NOT_USER.search(line):
            go_fn = None
            continue
        if go_fn is not None:
            g = _GO_FILE.match(line)
            go_fn, named = None, go_fn
            if g:
                out.append(Frame(named, g.group(1), int(g.group(2)), False))
                continue
        r = _RUST_FRAME.match(line)
        if r:
            out.append(Frame(r.group("fn"), r.group("path"), int(r.group("line")), False))
            continue
        p = _PY_FRAME.match(line)
        if p:
            path = p.group("path1") or p.group("path2")
            fn = p.group("fn1") or p.group("fn2")
            out.append(
                Frame(
                    fn if fn and fn != "<module>" else None,
                    path,
                    int(p.group("line1") or p.group("line2")),
                    True,
                )
            )
            continue
        m = _JS_FRAME.match(line) or _VITEST_FRAME.match(line)
        if m:
            fn = _FN_PREFIX.sub("", m.group("fn") or "").strip() or None
            alias = _FN_ALIAS.search(fn or "")
            if alias:  # V8's `Object.length [as titleLength]`: the name it was called by
                fn = alias.group(1)
            if fn and ("<anonymous>" in fn or " " in fn):
                fn = None
            out.append(Frame(fn, m.group("path"), int(m.group("line")), False))
    return out


def _test_file(failure: Failure, frames: list[Frame]) -> str | None:
    head = failure.test.split("::", 1)[0]
    if "::" in failure.test and head.endswith(".py"):
        return head
    if failure.file and _TEST_FILE.search(failure.file):
        return failure.file
    for f in frames:
        if _TEST_FILE.search(f.path):
            return f.path
    return failure.file


def _code_frame(frames: list[Frame], test_file: str | None) -> Frame | None:
    """The deepest frame in the workspace that is not the test file (dependencies are dropped).
    The parsers make paths in the workspace relative, so when the stack has relative paths an
    absolute one lies outside the workspace (a global install, the interpreter's library)."""
    relative = any(not f.path.startswith("/") for f in frames)
    own = [
        f
        for f in frames
        if f.path != test_file and not f.path.startswith("../") and not (relative and f.path.startswith("/"))
    ]
    if not own:
        return None
    if frames[0].python:
        # Python tracebacks run outermost first; greenloop's older records stored them reversed,
        # with the test's frame last
        return own[0] if frames[-1].path == test_file and frames[0].path != test_file else own[-1]
    return own[0]


def top_user_frame(failure: Failure) -> str | None:
    """The deepest frame in the user's code (not the test file) as `file:line`, else the test's."""
    frames = _frames(failure.stack)
    code = _code_frame(frames, _test_file(failure, frames))
    if code is not None:
        return f"{code.path}:{code.line}"
    if frames:
        return f"{frames[0].path}:{frames[0].line}"
    return _test_where(failure)


def _test_where(failure: Failure) -> str | None:
    if failure.file:
        return f"{failure.file}:{failure.line}" if failure.line else failure.file
    return None


class Evidence(NamedTuple):
    """What the failure and the workspace's source say, computed once per failure."""

    test_file: str | None
    test_line: int | None
    test_where: str | None
    code: Frame | None  # the deepest frame in the user's code, not the test file
    code_fn: str | None
    code_line: str | None  # the source line at `code`
    call: Call | None  # the call the test's failing line makes


def _test_frames_by_function(failure: Failure, frames: list[Frame]) -> list[Frame]:
    """The frames of the failing test's own function, for a stack whose frames name Rust
    paths (`cws::tests::pick_out_of_range` for the test `tests::pick_out_of_range`)."""
    if "::" not in failure.test:
        return []
    return [f for f in frames if f.fn and f"::{failure.test}::" in f"::{f.fn}::"]


def evidence(failure: Failure, sources: Sources | None) -> Evidence:
    """What the stack and (with `sources`) the workspace's files say about where `failure` happened."""
    frames = _frames(failure.stack)
    test_file = _test_file(failure, frames)
    in_test = [f for f in frames if f.path == test_file]
    by_fn = _test_frames_by_function(failure, frames)
    if by_fn:  # a Rust unit test beside its code: the test's frames are its function's
        test_file, in_test = by_fn[0].path, by_fn
    test_line: int | None = None
    if in_test:
        test_line = (in_test[-1] if in_test[0].python else in_test[0]).line
    elif failure.file == test_file:
        test_line = failure.line
    if test_file and test_line:
        test_where: str | None = f"{test_file}:{test_line}"
    elif test_file and test_file != failure.file:
        test_where = test_file
    else:
        test_where = _test_where(failure)
    if by_fn:  # beside its code, the test's file is the code's too: every frame but the test's
        code = _code_frame([f for f in frames if f not in by_fn], None)
    else:
        code = _code_frame(frames, test_file)
    code_fn = code.fn if code else None
    code_line = None
    call = None
    if sources is not None:
        if code is not None:
            code_fn = code_fn or sources.function_at(code.path, code.line)
            code_line = sources.line(code.path, code.line)
        call = sources.call_at(test_file, test_line)
    return Evidence(test_file, test_line, test_where, code, code_fn, code_line, call)


def place(ev: Evidence) -> str | None:
    """The place in the user's code as `function (file:line)` (or `file:line`), else None."""
    if ev.code is None:
        return None
    at = f"{ev.code.path}:{ev.code.line}"
    return f"{ev.code_fn} ({at})" if ev.code_fn else at
