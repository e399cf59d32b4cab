"""Where a failing Go test or package failed, read from its output once the run's events are in:
the file and line of its first t.Error/t.Log (or of the panic's first frame in the workspace),
its message, the got/want values in it, and one load failure for a package that failed
outside any finished test (a build error, a panic in TestMain or init, a hung test)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from greenloop.frameworks.common import bounded_join, relativize
from greenloop.model import Failure

__all__ = [
    "COMPILE_ERROR",
    "GoTest",
    "declaring_file",
    "example_output",
    "expected_got",
    "original_panic_first",
    "package_failure",
    "panic_frame",
    "test_where",
]

# a compiler line under `# pkg`: file.go:L[:C]: message
COMPILE_ERROR = re.compile(r"^(?:\./)?([^\s:]+\.go):(\d+)(?::(\d+))?: (.+)$")
_LOG = re.compile(r"^\s*([\w.\-]+\.go):(\d+): (.*)$")
_FRAME_FILE = re.compile(r"^\s+(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$")
_RACE_ACCESS = re.compile(r"^((?:Previous )?(?:[Rr]ead|[Ww]rite)) at 0x[0-9a-f]+ by goroutine (\d+):$")
_PANIC = re.compile(r"^\s*panic: (.*?)(?: \[recovered\])?$")

# got/want, the convention of Go's own tests: "got X, want Y", "f(x) = X, want Y",
# "want Y, got X", testify's "expected: Y / actual: X".
_GOT_WANT = re.compile(r"\bgot:?\s+(.+?),?\s+(?:want|expected):?\s+(.+?)\s*$", re.I)
_EQ_WANT = re.compile(r"(?:^|\s)=\s+(.+?),\s+want:?\s+(.+?)\s*$")
_WANT_GOT = re.compile(r"\b(?:want|expected):?\s+(.+?),?\s+(?:got|but got|actual):?\s+(.+?)\s*$", re.I)
_TESTIFY_EXP = re.compile(r"^\s*expected\s*:\s(.*)$")
_TESTIFY_ACT = re.compile(r"^\s*actual\s*:\s(.*)$")


def expected_got(message: str) -> tuple[str | None, str | None]:
    """(expected, got) of a Go failure message, by the got/want conventions above."""
    lines = message.splitlines()
    exp = next((m.group(1).strip() for m in map(_TESTIFY_EXP.match, lines) if m), None)
    act = next((m.group(1).strip() for m in map(_TESTIFY_ACT.match, lines) if m), None)
    if exp is not None or act is not None:
        return exp, act
    for line in lines:
        m = _GOT_WANT.search(line)
        if m:
            return m.group(2), m.group(1)
        m = _EQ_WANT.search(line)
        if m:
            return m.group(2), m.group(1)
        m = _WANT_GOT.search(line)
        if m:
            return m.group(1), m.group(2)
    return None, None



@dataclass
class GoTest:
    """One test as the events and text lines tell it: its output, outcome and subtests.

    `pending` holds output lines not yet sifted into `body` (the `=== RUN`/`--- PASS` lines
    dropped, at most MAX_FAILURE_LINES kept): a test that passes never needs its body, so
    GoParser sifts a test's lines only when it reads the body (see GoParser.body_of)."""

    name: str
    package: str
    body: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    outcome: str | None = None
    children: int = 0
    failed_children: int = 0


def _file_of(modules: dict[str, str], pkg: str, base: str) -> str:
    for mod, folder in sorted(modules.items(), key=lambda kv: -len(kv[0])):
        if pkg == mod or pkg.startswith(mod + "/"):
            rel = pkg[len(mod) :].lstrip("/")
            path = os.path.normpath(os.path.join(folder, rel, base))
            return path
    return base


def test_where(t: GoTest, modules: dict[str, str], root: str | None) -> tuple[str | None, int | None, str]:
    """(file, line, message) of a failing test from its output."""
    file: str | None = None
    line_no: int | None = None
    msg: list[str] = []
    log_indent: int | None = None
    panic = next((i for i, b in enumerate(t.body) if _PANIC.match(b)), None)
    for b in t.body:
        m = _LOG.match(b)
        if m:
            indent = len(b) - len(b.lstrip())
            if file is None:
                file, line_no = _file_of(modules, t.package, m.group(1)), int(m.group(2))
                log_indent = indent
                msg.append(m.group(3))
            continue  # later t.Log/t.Error lines stay in the stack
        continued = log_indent is not None and b.startswith(" " * (log_indent + 4))
        if continued and len(msg) == 1:
            msg[0] += "\n" + b.strip()
    if panic is not None:
        pm = _PANIC.match(t.body[panic])
        msg = [f"panic: {pm.group(1) if pm else t.body[panic].strip()}"]
        frame = panic_frame(original_panic_first(t.body)[panic:], root)  # a re-raise's origin
        if frame is not None:
            file, line_no = frame
    race = next((i for i, b in enumerate(t.body) if b.strip() == "WARNING: DATA RACE"), None)
    if race is not None and panic is None:  # -race: testing.go's own line is no place to look
        accesses = _race_accesses(t.body[race:], root)
        msg = [f"data race: {'; '.join(accesses)}" if accesses else "data race detected during the test"]
        frame = panic_frame(t.body[race:], root)
        if frame is not None:
            file, line_no = frame
    return file, line_no, "\n".join(msg)


def _race_accesses(lines: list[str], root: str | None) -> list[str]:
    """The race detector's two accesses, each as "read by goroutine 8 in F (file:line)"."""
    out: list[str] = []
    for i, b in enumerate(lines[:60]):
        m = _RACE_ACCESS.match(b)
        if m is None:
            continue
        func = lines[i + 1].strip() if i + 1 < len(lines) else ""
        frame = panic_frame(lines[i + 1 : i + 3], root)
        where = f" ({frame[0]}:{frame[1]})" if frame else ""
        out.append(f"{m.group(1).lower()} by goroutine {m.group(2)} in {func}{where}")
        if len(out) == 2:
            break
    return out


def example_output(body: list[str]) -> tuple[str, str] | None:
    """(got, want) of an Example whose printed output differs from its `// Output:` comment:
    Go prints `got:`, the output, `want:`, the expected output, each on lines of their own."""
    lines = [b.rstrip() for b in body]
    try:
        got_at = lines.index("got:")
        want_at = lines.index("want:", got_at + 1)
    except ValueError:
        return None
    return "\n".join(lines[got_at + 1 : want_at]), "\n".join(lines[want_at + 1 :]).rstrip("\n")


def declaring_file(modules: dict[str, str], pkg: str, name: str, root: str | None) -> str | None:
    """The package's test file that declares `func name(` (an Example's failure names no file)."""
    from greenloop.hints.source import Sources, definition_lines

    folder = os.path.dirname(_file_of(modules, pkg, "x"))
    sources = Sources(root or ".")
    try:
        names = sorted(n for n in os.listdir(os.path.join(root or "", folder)) if n.endswith("_test.go"))
    except OSError:
        return None
    for n in names[:200]:
        file = os.path.normpath(os.path.join(folder, n))
        if next(definition_lines(sources.lines(file) or [], name, ".go"), None) is not None:
            return file
    return None


_PANIC_CALL = re.compile(r"^panic\(")


def original_panic_first(body: list[str]) -> list[str]:
    """`body` with a re-raised panic's trace reordered: the original panic's frames first, then
    the frames that recovered and raised it again, so that the first test frame a reader (and
    the hint) meets is the test's call into the code, not its deferred re-raise."""
    start = next((i for i, b in enumerate(body) if _PANIC.match(b)), None)
    if start is None:
        return body
    trace = body[start:]
    calls = [i for i, b in enumerate(trace) if _PANIC_CALL.match(b)]
    if len(calls) < 2:
        return body
    first = calls[-1]
    return [*body[:start], *trace[:calls[0]], *trace[first:], "raised again at:", *trace[calls[0]:first]]


def panic_frame(lines: list[str], workspace: str | None) -> tuple[str, int] | None:
    """The first goroutine frame in the workspace (not GOROOT, not the testing package)."""
    root = (workspace or "").rstrip("/") + "/"
    fallback: tuple[str, int] | None = None
    for b in lines:
        m = _FRAME_FILE.match(b)
        if not m:
            continue
        path = m.group(1)
        if "/src/testing/" in path or "/src/runtime/" in path or "/pkg/mod/" in path:
            continue
        if workspace and path.startswith(root):
            return path[len(root) :], int(m.group(2))
        if fallback is None and "/go-" not in path and "/go/src/" not in path:
            fallback = (path, int(m.group(2)))
    return fallback


def package_failure(
    pkg: str,
    why: str,
    running: list[GoTest],
    build_errors: dict[str, list[str]],
    pkg_output: dict[str, list[str]],
    root: str | None,
) -> Failure:
    """One load failure for a package that failed outside any finished test."""
    build = build_errors.get(pkg) or next(
        (v for k, v in build_errors.items() if k.split(" ")[0] == pkg), []
    )
    output = pkg_output.get(pkg, [])
    hung = [t for t in running if t.package == pkg]
    for t in hung:
        output = [*t.body, *output]
    file: str | None = None
    line_no: int | None = None
    message = f"package {pkg}: {why}"
    # `[build failed]` with no error of its own: a package it imports does not build, and go
    # printed that package's errors under its own `# pkg` heading. Name it and its first error.
    broken_deps = {k.split(" ")[0]: v for k, v in build_errors.items() if k.split(" ")[0] != pkg and v}
    if not build and "build failed" in why and broken_deps:
        build = next(iter(broken_deps.values()))
        m = next((c for c in map(COMPILE_ERROR.match, build) if c), None)
        deps = ", ".join(broken_deps)
        message = f"package {pkg} does not build: a package it depends on does not ({deps})"
        if m:
            file, line_no = m.group(1), int(m.group(2))
            message += f": {m.group(4)}"
    elif build:
        m = next((c for c in map(COMPILE_ERROR.match, build) if c), None)
        if m:
            file, line_no = m.group(1), int(m.group(2))
            message = f"package {pkg} does not build: {m.group(4)}"
    else:
        panic = next((i for i, b in enumerate(output) if _PANIC.match(b)), None)
        if panic is not None:
            message = f"package {pkg}: {output[panic].strip()}"
            frame = panic_frame(output[panic:], root)
            if frame is not None:
                file, line_no = frame
        if hung:
            message += f" (while running {', '.join(t.name for t in hung[:3])})"
    body = build or [b for b in output if b.strip()]
    return Failure(
        test=pkg,
        file=file,
        line=line_no,
        message=relativize(message, root),
        stack=relativize(bounded_join(body), root),
        kind="load",
    )

