"""go test: test2json events (`go test -json`, what greenloop plans) and the plain text of
`go test` / `go test -v` (the fallback for a verbatim command), in one streaming parser.

`go test -json` writes its events to stdout; greenloop plans stdout.txt itself as the report
(format "go-json", read by frameworks/go_report.py). Lines that are not events are read as
plain text, so a build failure (which Go prints as text on stderr, `# pkg` then
`file.go:L:C: message`) and a verbatim `go test ./...` are parsed by the same code.

Counting: leaf tests are counted, the way the other runners count. A test whose subtests ran
is a group: it is not counted itself, unless it failed while none of its subtests did (a
t.Error in the parent), then it counts as one failure. A test is named as Go writes it
(`TestTable/big_case`, spaces already turned into `_`), its package in `file`'s folder and
in the message when the import path is not under the workspace. A package that failed with
no failing test (build failed, setup failed, a panic in TestMain or init) is one load failure
named after the package. `panic: test timed out after …` (Go's own -timeout) sets
`timed_out`: run.py reports it like greenloop's own timeout.

Live progress (`progress_event`, one line at a time) also counts a group's own pass/fail
event, so it can run a little ahead of the final counts on suites with subtests.

Go prints no totals; the events are the summary. Plain `go test` without -v names only
failing tests, so its passed count is unknown (a note says so). frameworks/go_plan.py plans
the run; frameworks/go_workspace.py reads go.mod and go.work for both halves;
frameworks/go_failures.py reads where each failure happened.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_FAILURE_LINES,
    MAX_NAMED_FAILURES,
    Event,
    bounded_join,
    relativize,
    run_parser,
)
from greenloop.frameworks.go_failures import (
    COMPILE_ERROR,
    GoTest,
    declaring_file,
    example_output,
    expected_got,
    original_panic_first,
    package_failure,
    test_where,
)
from greenloop.frameworks.go_workspace import module_dirs
from greenloop.frameworks.results import closing_result
from greenloop.model import Failure, ParseResult

__all__ = ["JSON_NUMBER", "PLAIN_CHAR", "GoParser", "parse_text", "progress_event"]

_RESULT = re.compile(r"^(\s*)--- (PASS|FAIL|SKIP): (\S.*?) \((\d+(?:\.\d+)?)s\)$")
_RUN = re.compile(r"^=== (?:RUN|PAUSE|CONT|NAME)\s+(\S.*)$")
_PKG_OK = re.compile(r"^ok\s+(\S+)\s+(?:\(cached\)|(\d+(?:\.\d+)?)s)")
_PKG_FAIL = re.compile(r"^FAIL\s+(\S+)\s+(?:(\d+(?:\.\d+)?)s|\[(build failed|setup failed)\])")
_PKG_NOTESTS = re.compile(r"^\?\s+(\S+)\s+\[no test files\]")
_BUILD_HEAD = re.compile(r"^# (\S+)(?: \[(\S+)\])?$")
_TIMEOUT = re.compile(r"^panic: test timed out after (\S+)")

# A test's event as `go test -json` writes it, when no string in it holds an escape (but the
# Output's closing \n) or a control character: such a line is valid JSON and these groups are
# its decoded values (Output without its \n, None when absent), so it is read without json
# (a 2,000-test run writes 8,000 such lines). Any other line is decoded by json.
PLAIN_CHAR = r'[^"\\\x00-\x1f]'
JSON_NUMBER = r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"  # JSON's digits: ASCII only
_TEST_EVENT = re.compile(
    rf'\{{"Time":"{PLAIN_CHAR}*","Action":"([a-z]+)","Package":"({PLAIN_CHAR}*)","Test":"({PLAIN_CHAR}+)"'
    rf'(?:,"Elapsed":{JSON_NUMBER}|,"Output":"({PLAIN_CHAR}*)\\n")?\}}'
)
_SIFT_EVERY = 256  # pending output lines a test holds before they are sifted into its body


class GoParser:
    """Streaming parser of test2json events and of plain `go test` output, mixed freely."""

    def __init__(self, root: str | None = None) -> None:
        self.root = root
        self.modules = module_dirs(root)
        self.tests: dict[tuple[str, str], GoTest] = {}
        self.order: list[tuple[str, str]] = []
        self.pkg_failed: dict[str, str] = {}  # package -> why ("build failed", "FAIL")
        self.pkg_output: dict[str, list[str]] = {}
        self.pkgs_seen: set[str] = set()
        self.elapsed = 0.0
        self.events = False
        self.text_results = False
        self.timeout: str | None = None
        self.build_errors: dict[str, list[str]] = {}  # package -> compiler lines
        self.build_pkg: str | None = None
        self.text_open: GoTest | None = None
        self.text_pending: list[GoTest] = []  # plain-text tests whose package line is still ahead
        self.text_verbose = False
        self.go_errors: list[str] = []  # `go: …` lines: the go command refused before building

    # --------------------------------------------------------------- events

    def _test(self, pkg: str, name: str) -> GoTest:
        key = (pkg, name)
        t = self.tests.get(key)
        if t is None:
            t = GoTest(name, pkg)
            self.tests[key] = t
            self.order.append(key)
            parent = parent_of(self.tests, pkg, name)
            if parent is not None:
                parent.children += 1
        return t

    def _event(self, ev: dict[str, object]) -> None:
        action = ev.get("Action")
        if action in ("build-output", "build-fail"):  # Go 1.24+: build errors as events too
            target = str(ev.get("ImportPath") or "").split(" ", 1)[0]
            out = ev.get("Output")
            if action == "build-output" and isinstance(out, str) and not out.startswith("# "):
                buf = self.build_errors.setdefault(target, [])
                if len(buf) < MAX_FAILURE_LINES:
                    buf.append(out.rstrip("\n"))
            return
        pkg = str(ev.get("Package") or "")
        if action == "fail" and ev.get("FailedBuild") and not ev.get("Test"):
            self.pkg_failed[pkg] = "build failed"
        test = ev.get("Test")
        out = ev.get("Output")
        if pkg:
            self.pkgs_seen.add(pkg)
        if isinstance(test, str) and test:
            t = self._test(pkg, test)
            if action == "output" and isinstance(out, str):
                self._test_output(t, out.rstrip("\n"))
            elif action in ("pass", "fail", "skip"):
                t.outcome = str(action)
                parent = parent_of(self.tests, pkg, test) if action == "fail" else None
                if parent is not None:
                    parent.failed_children += 1
            return
        if action == "output" and isinstance(out, str):
            line = out.rstrip("\n")
            if _TIMEOUT.match(line):
                self.timeout = line
            buf = self.pkg_output.setdefault(pkg, [])
            if len(buf) < MAX_FAILURE_LINES:
                buf.append(line)
            m = _PKG_FAIL.match(line)
            if m and m.group(3):
                self.pkg_failed[pkg] = m.group(3)
        elif action == "fail":
            self.pkg_failed.setdefault(pkg, "FAIL")
        elapsed = ev.get("Elapsed")
        if action in ("pass", "fail") and isinstance(elapsed, int | float):
            self.elapsed += float(elapsed)

    def _test_output(self, t: GoTest, line: str) -> None:
        if line.startswith("panic: test timed out") and _TIMEOUT.match(line):
            self.timeout = line
        t.pending.append(line)
        if len(t.pending) >= _SIFT_EVERY:
            _sift(t)

    def _read(self, lines: Iterable[str]) -> None:
        """Read lines of events or text. A test's event with no escape in it (see _TEST_EVENT)
        is read here, doing what `_event` does with its decoded dict; any other line is
        decoded by json (`_decoded`). One loop, no call per line, as a report has thousands."""
        tests = self.tests
        plain = _TEST_EVENT.fullmatch
        for line in lines:
            m = plain(line)
            if m is None:
                self._decoded(line)
                continue
            self.events = True
            action, pkg, name, out = m.groups()
            t = tests.get((pkg, name))
            if t is None:
                if pkg:
                    self.pkgs_seen.add(pkg)  # a test seen before had its package added then
                t = self._test(pkg, name)
            if action == "output":
                if out is not None:
                    if out.startswith("panic: test timed out") and _TIMEOUT.match(out):
                        self.timeout = out
                    pending = t.pending
                    pending.append(out)
                    if len(pending) >= _SIFT_EVERY:
                        _sift(t)
            elif action in ("pass", "fail", "skip"):
                t.outcome = action
                parent = parent_of(tests, pkg, name) if action == "fail" else None
                if parent is not None:
                    parent.failed_children += 1

    def body_of(self, t: GoTest) -> list[str]:
        """`t`'s output lines as the failure shows them (its pending lines sifted first)."""
        if t.pending:
            _sift(t)
        return t.body

    # --------------------------------------------------------------- text

    def _text(self, line: str) -> None:
        if line.startswith("go: ") and len(self.go_errors) < 20:
            self.go_errors.append(line)
            return
        if self.go_errors and line.startswith("\t") and len(self.go_errors) < 20:
            self.go_errors.append(line)
            return
        m = _BUILD_HEAD.match(line)
        if m:
            self.build_pkg = m.group(1)
            self.text_open = None
            return
        if self.build_pkg is not None:
            c = COMPILE_ERROR.match(line)
            if c or line.startswith("\t") or line.startswith("  "):
                buf = self.build_errors.setdefault(self.build_pkg, [])
                if len(buf) < MAX_FAILURE_LINES:
                    buf.append(line)
                return
            self.build_pkg = None
        m = _PKG_FAIL.match(line) or _PKG_OK.match(line) or _PKG_NOTESTS.match(line)
        if m:
            pkg = m.group(1)
            self.pkgs_seen.add(pkg)
            if line.startswith("FAIL"):
                reason = m.group(3) if m.lastindex and m.lastindex >= 3 and m.group(3) else "FAIL"
                self.pkg_failed.setdefault(pkg, reason)
            self._adopt(self.text_pending, pkg)
            self.text_pending = []
            self.text_open = None
            return
        if _TIMEOUT.match(line):
            self.timeout = line
        r = _RESULT.match(line)
        if r:
            self.text_results = True
            t = self._test("", r.group(3))
            t.outcome = {"PASS": "pass", "FAIL": "fail", "SKIP": "skip"}[r.group(2)]
            parent = parent_of(self.tests, "", t.name) if t.outcome == "fail" else None
            if parent is not None:
                parent.failed_children += 1
            self.text_pending.append(t)
            self.text_open = t
            return
        m = _RUN.match(line)
        if m:
            # -v: a test's log lines come between its `=== RUN` and its `--- FAIL`
            self.text_verbose = True
            self.text_open = self._test("", m.group(1).strip())
            return
        if line in ("PASS", "FAIL"):
            self.text_open = None
            return
        if self.text_open is not None and len(self.body_of(self.text_open)) < MAX_FAILURE_LINES:
            self.text_open.body.append(line)

    def _adopt(self, tests: list[GoTest], pkg: str) -> None:
        """Move plain-text tests under the package their `ok`/`FAIL` line named."""
        moved: dict[tuple[str, str], tuple[str, str]] = {}
        for t in tests:
            key = ("", t.name)
            if self.tests.get(key) is not t or t.package:
                continue
            del self.tests[key]
            t.package = pkg
            self.tests[(pkg, t.name)] = t
            moved[key] = (pkg, t.name)
        if moved:
            self.order = [moved.get(k, k) for k in self.order]

    # --------------------------------------------------------------- driver

    def feed(self, line: str) -> None:
        """Read one line of test2json event or go test text."""
        self._read((line,))

    def _decoded(self, line: str) -> None:
        """Read one line the straightforward way: json decodes an event, any other line is text."""
        if line.startswith("{") and '"Action"' in line:
            ev = _json_value(line)
            if isinstance(ev, dict):
                self.events = True
                self._event(ev)
                return
        self._text(line)

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        passed = failed = skipped = 0
        failures: list[Failure] = []
        passed_names: list[str] = []
        skipped_names: list[str] = []
        failing_pkgs: set[str] = set()
        for t in self.tests.values():
            if t.pending and t.outcome not in ("pass", "skip"):  # the bodies read below
                _sift(t)
        for key in self.order:
            t = self.tests[key]
            if t.outcome is None:
                continue
            group = t.children > 0
            if group and not (t.outcome == "fail" and t.failed_children == 0):
                continue
            if t.outcome == "pass":
                passed += 1
                passed_names.append(t.name)
            elif t.outcome == "skip":
                skipped += 1
                skipped_names.append(t.name)
            else:
                failed += 1
                failing_pkgs.add(t.package)
                if len(failures) >= MAX_NAMED_FAILURES:
                    continue
                if len(failures) >= MAX_DETAILED_FAILURES:
                    failures.append(Failure(test=t.name, file=None))
                    continue
                file, line_no, message = test_where(t, self.modules, self.root)
                expected, got = expected_got(message)
                example = example_output(t.body) if not message else None
                if example is not None:  # an Example whose output is not its // Output: comment
                    got, expected = example
                    message = f"{t.name}'s output differs from its // Output: comment"
                    file = declaring_file(self.modules, t.package, t.name.split("/")[0], self.root)
                body = original_panic_first(t.body)
                stack = relativize(bounded_join(b for b in body if b.strip()), self.root)
                failures.append(
                    Failure(
                        test=t.name,
                        file=file,
                        line=line_no,
                        message=relativize(message, self.root) or f"{t.name} failed in {t.package}",
                        expected=expected,
                        got=got,
                        stack=stack,
                    )
                )
        load_errors: list[str] = []
        running = [self.tests[k] for k in self.order if self.tests[k].outcome is None]
        for pkg, why in self.pkg_failed.items():
            if pkg in failing_pkgs and why == "FAIL" and not any(t.package == pkg for t in running):
                continue
            failures.append(package_failure(pkg, why, running, self.build_errors, self.pkg_output, self.root))
            load_errors.append(pkg)
            failed += 1
        for pkg, lines in self.build_errors.items():
            if pkg not in self.pkg_failed and any(COMPILE_ERROR.match(x) for x in lines):
                failure = package_failure(
                    pkg, "build failed", running, self.build_errors, self.pkg_output, self.root
                )
                failures.append(failure)
                load_errors.append(pkg)
                failed += 1
        if self.go_errors and not failures:  # nothing built or ran: the go command itself refused
            first = self.go_errors[0][4:]
            failures.append(
                Failure(
                    test="go",
                    message=f"go test refused to start: {first}",
                    stack="\n".join(self.go_errors),
                    kind="load",
                )
            )
            load_errors.append("go: " + first)
            failed += 1
        notes: list[str] = []
        if self.text_results and not self.events and not self.text_verbose and passed == 0:
            notes.append("plain `go test` names only failing tests; run with -v or -json for passed counts")
        hung = [t for t in running if t.children == 0 and t.package not in self.pkg_failed and t.package]
        if hung:  # the output stopped mid-test: greenloop's own timeout, or the run was stopped
            names = ", ".join(f"{t.name} ({t.package})" for t in hung[:5])
            notes.append(f"still running when the output stopped: {names}")
        recognized = bool(self.events or self.pkgs_seen or self.text_results)
        if not recognized and not failures:
            notes.append("no go test output recognised: no test2json event, `--- PASS/FAIL` or package line")
        return closing_result(
            (passed, failed, skipped),
            failures,
            notes=notes,
            recognized=recognized,
            duration_ms=int(self.elapsed * 1000) if self.events else None,
            load_errors=load_errors,
            passed_names=passed_names,
            skipped_names=skipped_names,
            timed_out=self.timeout is not None,
        )



def parent_of(tests: dict[tuple[str, str], GoTest], pkg: str, name: str) -> GoTest | None:
    """The test `name` runs under: the longest name before one of its `/` that the stream has
    started. Not simply the part before the last `/`: `t.Run("a/b", …)` under TestX is
    `TestX/a/b`, whose parent is TestX (go-cmp names its subtests so)."""
    cut = name.rfind("/")
    while cut > 0:
        parent = tests.get((pkg, name[:cut]))
        if parent is not None:
            return parent
        cut = name.rfind("/", 0, cut)
    return None


def _sift(t: GoTest) -> None:
    """Move `t`'s pending output lines into its body: Go's own `=== RUN`/`--- PASS` lines
    dropped, at most MAX_FAILURE_LINES kept."""
    body = t.body
    for line in t.pending:
        if len(body) >= MAX_FAILURE_LINES:
            break
        if not (_RUN.match(line) or _RESULT.match(line)):
            body.append(line)
    t.pending.clear()


def parse_text(lines: object, root: str | None = None) -> ParseResult:
    """Parse `go test` output: test2json events, -v text or plain text (total: never raises)."""
    return run_parser(lambda: GoParser(root), lines, "go")  # type: ignore[arg-type]


_DECODE = json.JSONDecoder().raw_decode


def _json_value(line: str) -> object:
    """The JSON value `line` holds, or None: what `json.loads` accepts, without its wrapping."""
    try:
        value, end = _DECODE(line)
    except ValueError:
        return None
    return value if end == len(line) or not line[end:].strip(" \t\n\r") else None


def progress_event(line: str) -> Event | None:
    """pass/fail/skip of one finished test: a test2json event or a `--- PASS:` line."""
    if line.startswith("{"):
        if '"Test"' not in line:
            return None
        if '"Action":"pass"' in line:
            return "pass"
        if '"Action":"fail"' in line:
            return "fail"
        if '"Action":"skip"' in line:
            return "skip"
        return None
    m = _RESULT.match(line)
    if m:
        return {"PASS": "pass", "FAIL": "fail", "SKIP": "skip"}[m.group(2)]  # type: ignore[return-value]
    return None


