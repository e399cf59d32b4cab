"""cargo test (libtest's stable text output, with cargo's own lines on stderr) and cargo-nextest's
human output (`PASS [0.004s] crate tests::name` lines and `Summary … N tests run: P passed, F
failed, S skipped`, the fallback when its JUnit report is missing: frameworks/nextest.py reads
the report, frameworks/cargo_plan.py plans the run).

libtest has no stable machine format (its JSON needs a nightly flag), so its text is what
greenloop reads: `test NAME ... ok|FAILED|ignored` per test, `---- NAME stdout ----` blocks
with the panic (`thread 'NAME' panicked at FILE:L:C:` then the message, and for assert_eq!
`left:`/`right:`), and one `test result:` line per test binary, whose counts are summed (the
runner's own summary; ignored counts as skipped, filtered out is not counted). Tests are named
as libtest writes them (`tests::nested::name`, doc tests `src/lib.rs - f (line 3)`).

On stderr cargo says what did not get as far as a test: `error[E…]: message` with
` --> file:line:col` and `error: could not compile `crate` (lib test)` is one load failure
named after the crate and target; a test binary that died outside any test (`process didn't
exit successfully … signal`) is one load failure named after the binary that was running.

assert_eq!(got, want) is the convention: left is got, right is expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_FAILURE_LINES,
    MAX_NAMED_FAILURES,
    Event,
    bounded_join,
    run_parser,
)
from greenloop.frameworks.results import closing_result
from greenloop.model import Failure, ParseResult

__all__ = ["CargoParser", "failure_of", "parse_text", "progress_event"]


_RUNNING = re.compile(r"^running (\d+) tests?$")
_TEST = re.compile(r"^test (.+?)(?: - should panic)? \.\.\. (ok|FAILED|ignored(?:, .*)?)$")
_BLOCK = re.compile(r"^---- (.+?) std(?:out|err) ----$")
_RESULT = re.compile(
    r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured; "
    r"(\d+) filtered out(?:; finished in ([\d.]+)s)?"
)
_PANIC_NEW = re.compile(r"^thread '(.*?)'(?: \(\d+\))? panicked at ([^\s:]+):(\d+):(\d+):$")
_PANIC_OLD = re.compile(r"^thread '(.*?)'(?: \(\d+\))? panicked at '(.*)', ([^\s:]+):(\d+):(\d+)$")
_PANIC_OLD_OPEN = re.compile(r"^thread '(.*?)'(?: \(\d+\))? panicked at '(.*)$")
_PANIC_OLD_CLOSE = re.compile(r"^(.*)', ([^\s:]+):(\d+):(\d+)$")
_NO_PANIC = re.compile(r"^note: test did not panic as expected(?: at ([^\s:]+):(\d+):(\d+))?")
_LEFT = re.compile(r"^\s*left(?::|`)?\s*:?\s*`?(.*?)`?,?$")
_RIGHT = re.compile(r"^\s*right(?::|`)?\s*:?\s*`?(.*?)`?$")
_LEFT_NEW = re.compile(r"^\s*left: (.*)$")
_RIGHT_NEW = re.compile(r"^\s*right: (.*)$")
_ERROR = re.compile(r"^error(?:\[(E\d+)\])?: (.*)$")
_ARROW = re.compile(r"^\s*--> ([^\s:]+):(\d+):(\d+)$")
_COULD_NOT = re.compile(r"^error: could not compile `([^`]+)`(?: \(([^)]*)\))?")
_RUNNING_BIN = re.compile(r"^\s*Running (.+?) \(")
_DIED = re.compile(r"process didn't exit successfully: .*?\((signal: .*|exit (?:status|code): .*)\)")
# cargo nextest's human output (the fallback when its JUnit report is missing)
_NX_RESULT = re.compile(
    r"^\s*(PASS|FAIL|SKIP|TIMEOUT|SIGSEGV|SIGABRT|SIGKILL|SIGBUS|SIGILL|ABORT|LEAK|FLAKY)"
    # a SKIP's time is blank (`[         ]`); nextest 0.9.100+ prints a counter, `( 1/12)`, `(─────)`
    r"(?: \[\s*(?:[\d.]+m?s)?\s*\])?(?: \((?:\s*\d+/\d+|─+)\))? (\S+) (.+?)\s*$"
)
_NX_BLOCK = re.compile(r"^\s*(?:-{3}|─+)\s*(?:TRY \d+ )?STD(?:OUT|ERR):\s+(\S+) (.+?)\s*(?:-{3}|─+)?\s*$")
_NX_SUMMARY = re.compile(
    r"^\s*Summary \[\s*([\d.]+)s\] (\d+) tests? run: (\d+) passed(?: \(\d+ slow\))?"
    r"(?:, (\d+) failed)?.*?(?:, (\d+) skipped)?$"
)
_FRAME_AT = re.compile(r"^\s+at (\./)?(\S+?):(\d+):(\d+)$")


def _message_lines(body: list[str]) -> tuple[str | None, int | None, list[str]]:
    """(file, line, message lines) of a libtest failure block."""
    for i, line in enumerate(body):
        m = _PANIC_NEW.match(line)
        if m:
            msg: list[str] = []
            for b in body[i + 1 :]:
                if b.startswith("stack backtrace:") or b.startswith("note: ") or (not b.strip() and msg):
                    break
                msg.append(b)
            return m.group(2), int(m.group(3)), msg
        m = _PANIC_OLD.match(line)
        if m:
            return m.group(3), int(m.group(4)), [m.group(2)]
        m = _PANIC_OLD_OPEN.match(line)
        if m:  # Rust before 1.73: a multi-line message in quotes, the location after it
            msg = [m.group(2)]
            for b in body[i + 1 : i + 60]:
                end = _PANIC_OLD_CLOSE.match(b)
                if end:
                    msg.append(end.group(1))
                    return end.group(2), int(end.group(3)), msg
                msg.append(b)
            return None, None, msg
        m = _NO_PANIC.match(line)
        if m:
            return (m.group(1), int(m.group(2)) if m.group(2) else None, ["test did not panic as expected"])
        if line.startswith("Error: "):
            return None, None, [line]
    return None, None, [b for b in body if b.strip()][:3]


def _is_panic(line: str) -> bool:
    return bool(_PANIC_NEW.match(line) or _PANIC_OLD.match(line) or _PANIC_OLD_OPEN.match(line))


def failure_of(name: str, body: list[str]) -> Failure:
    """The Failure of one `---- NAME stdout ----` block (also nextest's captured output).

    A test that panicked more than once (one caught by `catch_unwind`, or in a thread it
    joined) failed by its last panic: the block is read from there (scopeguard's test catches
    a "failure" panic, then fails its `assert_eq!` two lines below)."""
    panics = [i for i, b in enumerate(body) if _is_panic(b)]
    if len(panics) > 1:
        body = body[panics[-1] :]
    file, line, msg = _message_lines(body)
    expected: str | None = None
    got: str | None = None
    message = msg[0].strip() if msg else ""
    comparison = "left == right" in message
    for b in msg[1:]:
        m = _LEFT_NEW.match(b) or _LEFT.match(b)
        if m and got is None and b.strip().startswith("left"):
            got = m.group(1).strip().rstrip(",").strip("`")
            continue
        m = _RIGHT_NEW.match(b) or _RIGHT.match(b)
        if m and expected is None and b.strip().startswith("right"):
            expected = m.group(1).strip().strip("`")
    if not comparison:
        expected = None if "left != right" in message else expected
    if len(msg) > 1 and got is None:
        message = "\n".join(x.rstrip() for x in msg).strip()
    frames = _user_frames(body)
    stack = bounded_join([*(b for b in msg), *frames])
    return Failure(test=name, file=file, line=line, message=message, expected=expected, got=got, stack=stack)


_BACKTRACE_FN = re.compile(r"^\s*\d+: (\S.*?)\s*$")


def _user_frames(body: list[str]) -> list[str]:
    """The backtrace's frames in the workspace as `file:line`, each with its function when the
    backtrace names it (`cws::pick at src/lib.rs:6`): a unit test lives in the file of the code
    it tests, so only the function tells the test's frame from the code's."""
    out: list[str] = []
    fn: str | None = None
    for b in body:
        f = _BACKTRACE_FN.match(b)
        if f and not _FRAME_AT.match(b):
            fn = f.group(1)
            continue
        m = _FRAME_AT.match(b)
        if m and _user_path(m.group(2)):
            at = f"{m.group(2)}:{m.group(3)}"
            out.append(f"{fn} at {at}" if fn else at)
        fn = None
    return out


def _user_path(path: str) -> bool:
    return not path.startswith("/rustc/") and "/.cargo/" not in path and "/rustlib/" not in path


@dataclass
class _Compile:
    code: str | None
    message: str
    file: str | None = None
    line: int | None = None
    lines: list[str] = field(default_factory=list)


class CargoParser:
    """Streaming parser of `cargo test` output (stdout then stderr, or interleaved)."""

    def __init__(self, root: str | None = None) -> None:
        self.root = root
        self.passed = self.failed = self.skipped = 0
        self.line_passed = self.line_failed = self.line_skipped = 0
        # counts of the test binary still printing (no `test result:` line yet): a binary that
        # dies part way (abort, stack overflow, killed) still counts the tests it reported
        self.open_counts = [0, 0, 0]
        self.results = 0
        self.duration = 0.0
        self.failing: list[str] = []
        self.passed_names: list[str] = []
        self.skipped_names: list[str] = []  # libtest's `ignored`, nextest's SKIP
        self.bodies: dict[str, list[str]] = {}
        self.block: list[str] | None = None
        self.in_list = False
        self.errors: list[_Compile] = []
        self.open_error: _Compile | None = None
        self.loads: list[Failure] = []
        self.binary: str | None = None
        self.running = 0
        self.nx_seen = False
        self.nx_summary: tuple[int, int, int] | None = None

    def _nextest(self, line: str) -> bool:
        """One line of cargo nextest's human output; False when it is not one."""
        m = _NX_SUMMARY.match(line)
        if m:
            self.nx_summary = (int(m.group(3)), int(m.group(4) or 0), int(m.group(5) or 0))
            self.duration += float(m.group(1))
            self.block = None
            return True
        if self.nx_summary is not None:
            return _NX_RESULT.match(line) is not None  # the closing list repeats the failures
        m = _NX_BLOCK.match(line)
        if m:
            name = m.group(2)
            self.block = self.bodies.setdefault(name, [])
            if name not in self.failing:
                self.failing.append(name)
            return True
        m = _NX_RESULT.match(line)
        if m and (line.startswith(" ") or line.startswith(m.group(1))):
            status, name = m.group(1), m.group(3)
            self.nx_seen = True
            self.block = None
            if status in ("PASS", "LEAK", "FLAKY"):
                self.line_passed += 1
                self.passed_names.append(name)
            elif status == "SKIP":
                self.line_skipped += 1
                self.skipped_names.append(name)
            else:
                self.line_failed += 1
                if name not in self.failing:
                    self.failing.append(name)
                if status != "FAIL":
                    self.bodies.setdefault(name, []).append(f"the test process ended with {status}")
            return True
        return False

    def feed(self, line: str) -> None:
        """Read one line of cargo test, libtest or nextest output."""
        if (self.nx_seen or "[" in line or "STD" in line or "Summary" in line) and self._nextest(line):
            return
        m = _TEST.match(line)
        if m:
            name, status = m.group(1), m.group(2)
            if status == "ok":
                self.line_passed += 1
                self.open_counts[0] += 1
                self.passed_names.append(name)
            elif status == "FAILED":
                self.line_failed += 1
                self.open_counts[1] += 1
                if name not in self.bodies:
                    self.failing.append(name)
            else:
                self.line_skipped += 1
                self.open_counts[2] += 1
                self.skipped_names.append(name)
            return
        m = _BLOCK.match(line)
        if m:
            name = m.group(1)
            self.block = self.bodies.setdefault(name, [])
            if name not in self.failing:
                self.failing.append(name)
            self.in_list = False
            return
        if line == "failures:":
            self.block = None
            self.in_list = True
            return
        m = _RESULT.match(line)
        if m:
            self.results += 1
            self.passed += int(m.group(2))
            self.failed += int(m.group(3))
            self.skipped += int(m.group(4))
            self.duration += float(m.group(7) or 0)
            self.open_counts = [0, 0, 0]
            self.block = None
            self.in_list = False
            return
        m = _RUNNING.match(line)
        if m:
            self.running += 1
            self.block = None
            self.in_list = False
            return
        if self.in_list and (line.startswith("    ") or not line.strip()):
            return
        if self.block is not None:
            if len(self.block) < MAX_FAILURE_LINES:
                self.block.append(line)
            return
        self._stderr(line)

    def _stderr(self, line: str) -> None:
        m = _RUNNING_BIN.match(line)
        if m:
            self.binary = m.group(1).strip()
            return
        m = _COULD_NOT.match(line)
        if m:
            what = m.group(1) + (f" ({m.group(2)})" if m.group(2) else "")
            if not self.errors and any(f.test.split(" (", 1)[0] == m.group(1) for f in self.loads):
                # the same crate's other target (`lib test` beside `lib`), stopped by the same
                # errors, which cargo prints once: one broken record, not a second without a place
                return
            located = [e for e in self.errors if e.code or e.file]
            first = located[0] if located else (self.errors[0] if self.errors else None)
            message = f"{what} does not compile" + (f": {first.message}" if first else "")
            body = [x for e in self.errors for x in e.lines]
            self.loads.append(
                Failure(
                    test=what,
                    file=first.file if first else None,
                    line=first.line if first else None,
                    message=message,
                    stack=bounded_join(body),
                    kind="load",
                )
            )
            self.errors = []
            self.open_error = None
            return
        m = _DIED.search(line)
        if m:
            what = self.binary or "test binary"
            self.loads.append(
                Failure(
                    test=what,
                    message=(
                        f"the test binary {what} died before its `test result:` line ({m.group(1)}): "
                        "a test aborted the process (process::abort, a stack overflow, panic=abort) "
                        "or it crashed outside any test"
                    ),
                    stack=line.strip(),
                    kind="load",
                )
            )
            return
        m = _ERROR.match(line)
        if m and not m.group(2).startswith(("test failed, to rerun", "could not compile")):
            if re.match(r"\d+ targets? failed", m.group(2)):
                return
            self.open_error = _Compile(m.group(1), m.group(2), lines=[line])
            self.errors.append(self.open_error)
            if m.group(2).startswith("failed to"):  # a build script, a manifest, a lock file
                self.loads.append(Failure(test=m.group(2), message=m.group(2), kind="load"))
            return
        if self.open_error is not None:
            a = _ARROW.match(line)
            if a and self.open_error.file is None:
                self.open_error.file, self.open_error.line = a.group(1), int(a.group(2))
            if line.strip() and len(self.open_error.lines) < 20:
                self.open_error.lines.append(line)
            elif not line.strip():
                self.open_error = None

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        if self.nx_summary is not None:
            passed, failed, skipped = self.nx_summary
        elif self.results:
            passed, failed, skipped = self.passed, self.failed, self.skipped
            passed += self.open_counts[0]
            failed += self.open_counts[1]
            skipped += self.open_counts[2]
        else:
            passed, failed, skipped = self.line_passed, self.line_failed, self.line_skipped
        failures: list[Failure] = []
        for name in self.failing[:MAX_NAMED_FAILURES]:
            if len(failures) >= MAX_DETAILED_FAILURES:
                failures.append(Failure(test=name))
            else:
                failures.append(failure_of(name, self.bodies.get(name, [])))
        failed = max(failed, len(failures))
        failures += self.loads
        failed += len(self.loads)
        notes: list[str] = []
        if self.running > self.results and not self.loads:
            notes.append(
                f"{self.running - self.results} test binary(ies) printed no `test result:` line "
                "(stopped or killed part way)"
            )
        if not self.results and not self.loads and self.nx_summary is None:
            notes.append("no `test result:` line of libtest found: the output is not cargo test's")
        return closing_result(
            (passed, failed, skipped),
            failures,
            notes=notes,
            recognized=self.results > 0 or bool(self.loads) or self.nx_summary is not None,
            duration_ms=int(self.duration * 1000) if self.results or self.nx_summary else None,
            load_errors=[f.test for f in self.loads],
            passed_names=self.passed_names,
            skipped_names=self.skipped_names,
        )


def parse_text(lines: object, root: str | None = None) -> ParseResult:
    """Parse `cargo test` output (total: never raises)."""
    return run_parser(lambda: CargoParser(root), lines, "cargo")  # type: ignore[arg-type]


def progress_event(line: str) -> Event | None:
    """pass/fail/skip of one `test NAME ... ok|FAILED|ignored` line (or nextest's `PASS [..] NAME`)."""
    if not line.startswith("test "):
        m = _NX_RESULT.match(line) if line.startswith(" ") and "[" in line else None
        if m is None:
            return None
        status = m.group(1)
        return "pass" if status in ("PASS", "LEAK", "FLAKY") else "skip" if status == "SKIP" else "fail"
    m = _TEST.match(line)
    if not m:
        return None
    status = m.group(2)
    return "pass" if status == "ok" else "fail" if status == "FAILED" else "skip"

