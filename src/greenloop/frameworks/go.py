"""go test: test2json events (`go test -json`, what greenloop plans) and the plain text of
`go test` / `go test -v` (the fallback for a verbatim command), in one streaming parser.

`go test -json` writes its events to stdout; greenloop plans stdout.txt itself as the report
(format "go-json"). Lines that are not events are read as plain text, so a build failure
(which Go prints as text on stderr, `# pkg` then `file.go:L:C: message`) and a verbatim
`go test ./...` are parsed by the same code.

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
failing tests, so its passed count is unknown (a note says so).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_FAILURE_LINES,
    MAX_NAMED_FAILURES,
    Event,
    bounded_join,
    load_error_of,
    relativize,
    run_parser,
    summary_of,
)
from greenloop.model import Failure, ParseResult

__all__ = [
    "GoParser",
    "expected_got",
    "go_timeout",
    "module_dirs",
    "parse_report",
    "parse_text",
    "plan_args",
    "progress_event",
    "run_pattern",
    "workspace_env",
    "workspace_patterns",
]

_RESULT = re.compile(r"^(\s*)--- (PASS|FAIL|SKIP): (\S.*?) \((\d+(?:\.\d+)?)s\)$")
_RUN = re.compile(r"^=== (?:RUN|PAUSE|CONT|NAME)\s+(\S.*)$")
_PKG_OK = re.compile(r"^ok\s+(\S+)\s+(?:\(cached\)|(\d+(?:\.\d+)?)s)")
_PKG_FAIL = re.compile(r"^FAIL\s+(\S+)\s+(?:(\d+(?:\.\d+)?)s|\[(build failed|setup failed)\])")
_PKG_NOTESTS = re.compile(r"^\?\s+(\S+)\s+\[no test files\]")
_BUILD_HEAD = re.compile(r"^# (\S+)(?: \[(\S+)\])?$")
_COMPILE = re.compile(r"^(?:\./)?([^\s:]+\.go):(\d+)(?::(\d+))?: (.+)$")
_LOG = re.compile(r"^\s*([\w.\-]+\.go):(\d+): (.*)$")
_FRAME_FILE = re.compile(r"^\s+(\S+\.go):(\d+)(?: \+0x[0-9a-f]+)?$")
_TIMEOUT = re.compile(r"^panic: test timed out after (\S+)")
_PANIC = re.compile(r"^\s*panic: (.*?)(?: \[recovered\])?$")
# Go runs TestXxx where Xxx does not start with a lower-case letter
_TEST_NAME = re.compile(r"^(?:Test|Example|Fuzz)(?:[A-Z_0-9][^./\s]*)?(?:/\S+)?$")
_RE2_SPECIAL = re.compile(r"[\\.+*?()|\[\]{}^$]")  # RE2 rejects escapes of other characters
_MODULE = re.compile(r"^\s*module\s+(\S+)", re.M)
_USE = re.compile(r"^\s*use\s+(?:\(([^)]*)\)|(\S+))", re.M)

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


def _work_uses(root: str) -> list[str] | None:
    """The folders a go.work at `root` uses, or None without a go.work."""
    try:
        with open(os.path.join(root, "go.work"), encoding="utf-8", errors="replace") as fh:
            work = fh.read()
    except OSError:
        return None
    dirs: list[str] = []
    for m in _USE.finditer(work):
        block = m.group(1) if m.group(1) is not None else m.group(2)
        for d in block.splitlines():
            d = d.split("//", 1)[0].strip().strip('"')
            if d:
                dirs.append(d)
    return dirs


def workspace_patterns(root: str) -> list[str]:
    """The package patterns of a whole run: `./...`, or one `./mod/...` per module of go.work
    (`./...` at a go.work root without its own go.mod matches no module)."""
    uses = _work_uses(root)
    if not uses:
        return ["./..."]
    out = []
    for d in uses:
        norm = os.path.normpath(d)
        out.append("./..." if norm == "." else f"./{norm}/...")
    return list(dict.fromkeys(out))


def workspace_env(root: str, env: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(variables for the child, notes): under go.work, Go refuses `-mod=mod`/`-mod=vendor` in
    GOFLAGS ("-mod may only be set to readonly when in workspace mode"), so they are dropped."""
    flags = env.get("GOFLAGS", "")
    if _work_uses(root) is None or "-mod=" not in flags:
        return [], []
    kept = [f for f in flags.split() if not f.startswith("-mod=") or f == "-mod=readonly"]
    note = f"GOFLAGS {flags!r} had -mod, which go.work workspaces refuse; the run used {' '.join(kept)!r}"
    return [("GOFLAGS", " ".join(kept))], [note]


def module_dirs(root: str | None) -> dict[str, str]:
    """Module path -> folder relative to `root`, from go.mod or every `use` of go.work."""
    if not root:
        return {}
    out: dict[str, str] = {}
    dirs = _work_uses(root) or ["."]
    for d in dirs:
        try:
            with open(os.path.join(root, d, "go.mod"), encoding="utf-8", errors="replace") as fh:
                m = _MODULE.search(fh.read())
        except OSError:
            continue
        if m:
            out[m.group(1).strip('"')] = os.path.normpath(d)
    return out


def run_pattern(names: list[str]) -> str:
    """The `-run` regex of tests named like `TestA` or `TestTable/case`: one alternation per level."""
    levels: list[list[str]] = []
    for name in dict.fromkeys(names):
        for i, part in enumerate(name.split("/")):
            if len(levels) <= i:
                levels.append([])
            if part not in levels[i]:
                levels[i].append(part)
    return "/".join("^(" + "|".join(_RE2_SPECIAL.sub(r"\\\g<0>", p) for p in lv) + ")$" for lv in levels)


@dataclass
class _Test:
    name: str
    package: str
    body: list[str] = field(default_factory=list)
    outcome: str | None = None
    children: int = 0
    failed_children: int = 0


class GoParser:
    """Streaming parser of test2json events and of plain `go test` output, mixed freely."""

    def __init__(self, root: str | None = None) -> None:
        self.root = root
        self.modules = module_dirs(root)
        self.tests: dict[tuple[str, str], _Test] = {}
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
        self.text_open: _Test | None = None
        self.text_pending: list[_Test] = []  # plain-text tests whose package line is still ahead
        self.text_verbose = False
        self.go_errors: list[str] = []  # `go: …` lines: the go command refused before building

    # --------------------------------------------------------------- events

    def _test(self, pkg: str, name: str) -> _Test:
        key = (pkg, name)
        t = self.tests.get(key)
        if t is None:
            t = _Test(name, pkg)
            self.tests[key] = t
            self.order.append(key)
            if "/" in name:
                parent = self.tests.get((pkg, name.rsplit("/", 1)[0]))
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
                if action == "fail" and "/" in test:
                    parent = self.tests.get((pkg, test.rsplit("/", 1)[0]))
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

    def _test_output(self, t: _Test, line: str) -> None:
        if _RUN.match(line) or _RESULT.match(line):
            return
        if _TIMEOUT.match(line):
            self.timeout = line
        if len(t.body) < MAX_FAILURE_LINES:
            t.body.append(line)

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
            c = _COMPILE.match(line)
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
            if t.outcome == "fail" and "/" in t.name:
                parent = self.tests.get(("", t.name.rsplit("/", 1)[0]))
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
        if self.text_open is not None and len(self.text_open.body) < MAX_FAILURE_LINES:
            self.text_open.body.append(line)

    def _adopt(self, tests: list[_Test], pkg: str) -> None:
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
        if line.startswith("{") and '"Action"' in line:
            ev = _json_value(line)
            if isinstance(ev, dict):
                self.events = True
                self._event(ev)
                return
        self._text(line)

    def _file_of(self, pkg: str, base: str) -> str:
        for mod, folder in sorted(self.modules.items(), key=lambda kv: -len(kv[0])):
            if pkg == mod or pkg.startswith(mod + "/"):
                rel = pkg[len(mod) :].lstrip("/")
                path = os.path.normpath(os.path.join(folder, rel, base))
                return path
        return base

    def _where(self, t: _Test) -> tuple[str | None, int | None, str]:
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
                    file, line_no = self._file_of(t.package, m.group(1)), int(m.group(2))
                    log_indent = indent
                    msg.append(m.group(3))
                continue  # later t.Log/t.Error lines stay in the stack
            continued = log_indent is not None and b.startswith(" " * (log_indent + 4))
            if continued and len(msg) == 1:
                msg[0] += "\n" + b.strip()
        if panic is not None:
            pm = _PANIC.match(t.body[panic])
            msg = [f"panic: {pm.group(1) if pm else t.body[panic].strip()}"]
            frame = self._panic_frame(t.body[panic:])
            if frame is not None:
                file, line_no = frame
        return file, line_no, "\n".join(msg)

    def _panic_frame(self, lines: list[str]) -> tuple[str, int] | None:
        """The first goroutine frame in the workspace (not GOROOT, not the testing package)."""
        root = (self.root or "").rstrip("/") + "/"
        fallback: tuple[str, int] | None = None
        for b in lines:
            m = _FRAME_FILE.match(b)
            if not m:
                continue
            path = m.group(1)
            if "/src/testing/" in path or "/src/runtime/" in path or "/pkg/mod/" in path:
                continue
            if self.root and path.startswith(root):
                return path[len(root) :], int(m.group(2))
            if fallback is None and "/go-" not in path and "/go/src/" not in path:
                fallback = (path, int(m.group(2)))
        return fallback

    def finish(self) -> ParseResult:
        passed = failed = skipped = 0
        failures: list[Failure] = []
        passed_names: list[str] = []
        failing_pkgs: set[str] = set()
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
            else:
                failed += 1
                failing_pkgs.add(t.package)
                if len(failures) >= MAX_NAMED_FAILURES:
                    continue
                if len(failures) >= MAX_DETAILED_FAILURES:
                    failures.append(Failure(test=t.name, file=None))
                    continue
                file, line_no, message = self._where(t)
                expected, got = expected_got(message)
                stack = relativize(bounded_join(b for b in t.body if b.strip()), self.root)
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
            failures.append(self._package_failure(pkg, why, running))
            load_errors.append(pkg)
            failed += 1
        for pkg, lines in self.build_errors.items():
            if pkg not in self.pkg_failed and any(_COMPILE.match(x) for x in lines):
                failures.append(self._package_failure(pkg, "build failed", running))
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
        return ParseResult(
            summary=summary_of(passed, failed, skipped),
            failures=tuple(failures),
            notes=tuple(notes),
            recognized=recognized,
            duration_ms=int(self.elapsed * 1000) if self.events else None,
            load_error=load_error_of(load_errors),
            passed_tests=tuple(passed_names),
            timed_out=self.timeout is not None,
        )

    def _package_failure(self, pkg: str, why: str, running: list[_Test]) -> Failure:
        """One load failure for a package that failed outside any finished test."""
        build = self.build_errors.get(pkg) or next(
            (v for k, v in self.build_errors.items() if k.split(" ")[0] == pkg), []
        )
        output = self.pkg_output.get(pkg, [])
        hung = [t for t in running if t.package == pkg]
        for t in hung:
            output = [*t.body, *output]
        file: str | None = None
        line_no: int | None = None
        message = f"package {pkg}: {why}"
        if build:
            m = next((c for c in map(_COMPILE.match, build) if c), None)
            if m:
                file, line_no = m.group(1), int(m.group(2))
                message = f"package {pkg} does not build: {m.group(4)}"
        else:
            panic = next((i for i, b in enumerate(output) if _PANIC.match(b)), None)
            if panic is not None:
                message = f"package {pkg}: {output[panic].strip()}"
                frame = self._panic_frame(output[panic:])
                if frame is not None:
                    file, line_no = frame
            if hung:
                message += f" (while running {', '.join(t.name for t in hung[:3])})"
        body = build or [b for b in output if b.strip()]
        return Failure(
            test=pkg,
            file=file,
            line=line_no,
            message=relativize(message, self.root),
            stack=relativize(bounded_join(body), self.root),
            kind="load",
        )


def parse_text(lines: object, root: str | None = None) -> ParseResult:
    """Parse `go test` output: test2json events, -v text or plain text (total: never raises)."""
    return run_parser(lambda: GoParser(root), lines, "go")  # type: ignore[arg-type]


_DECODE = json.JSONDecoder().raw_decode
_WHOLE_FILE_BYTES = 32 << 20  # larger reports are read a line at a time (memory stays flat)


def _json_value(line: str) -> object:
    """The JSON value `line` holds, or None: what `json.loads` accepts, without its wrapping
    (a -json run has four events a test)."""
    try:
        value, end = _DECODE(line)
    except ValueError:
        return None
    return value if end == len(line) or not line[end:].strip(" \t\n\r") else None


def _whole_events(lines: list[str]) -> list[Any] | None:
    """All `lines` decoded by one `json.loads` call when each line is one whole test2json event
    (what `go test -json` writes), else None: then they are read one at a time."""
    if not all(line.startswith("{") and line.endswith("}") and '"Action"' in line for line in lines):
        return None
    try:
        values = json.loads("[" + ",".join(lines) + "]")
    except ValueError:
        return None
    # an object split over two lines would decode as one: the counts then differ
    return values if len(values) == len(lines) else None


class _ReportParser(GoParser):
    """GoParser over report files: a file of whole events is decoded at once, not line by line."""

    def consume(self, paths: Iterable[str]) -> None:
        for path in paths:
            try:
                fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
            except OSError:
                continue
            with fh:
                if os.fstat(fh.fileno()).st_size > _WHOLE_FILE_BYTES:
                    for line in fh:
                        self.feed(line.rstrip("\r\n"))
                    continue
                lines = fh.read().split("\n")
            if lines and not lines[-1]:
                lines.pop()  # the file's last newline ends a line, it starts none
            events = _whole_events(lines)
            if events is None:
                for line in lines:
                    self.feed(line.rstrip("\r"))
                continue
            self.events = self.events or bool(events)
            for ev in events:
                self._event(ev)


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """Read a file of `go test -json` events (greenloop stores them as the run's stdout.txt).

    Go prints build errors as text on stderr, beside the events: a run's stderr.txt next to
    its stdout.txt is read after it."""
    if not os.path.exists(path):
        return ParseResult(notes=(f"report {path} is missing: go test never wrote it",))
    paths = [path]
    if os.path.basename(path) == "stdout.txt":
        paths.append(os.path.join(os.path.dirname(path), "stderr.txt"))
    parsed = run_parser(lambda: _ReportParser(root), paths, "go")
    if not parsed.recognized:
        return parsed._replace(notes=(*parsed.notes, f"report {path} holds no go test events"))
    return parsed


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


# ----------------------------------------------------------------------------- planning


def go_timeout(timeout_ms: int) -> str:
    """go test's own -timeout, a little under greenloop's: Go then panics with the hung test's
    stack (`panic: test timed out after`), which names it, before greenloop stops the tree."""
    margin = min(max(timeout_ms // 10, 500), 5000)
    return f"-timeout={max(timeout_ms - margin, 500)}ms"


def _has_tests(folder: str) -> bool:
    try:
        return any(n.endswith("_test.go") for n in os.listdir(folder))
    except OSError:
        return False


def plan_args(
    root: str, targets: list[str], failures: list[Failure] | None, timeout_ms: int
) -> tuple[list[str], list[str]]:
    """(arguments after `go test`, notes): `-json`, the timeout, `-run` for target tokens named
    like tests (`TestSub`, `TestTable/case`) or a last_failed rerun, and the packages (the
    other targets, the failing tests' packages, or every module's `./...`)."""
    notes: list[str] = []
    args = ["-json", go_timeout(timeout_ms)]
    flags = [t for t in targets if t.startswith("-")]
    # a token named like a test (TestX, TestX/case) selects tests by name, anything else is a package
    names = [t for t in targets if _TEST_NAME.match(t)]
    packages = [t for t in targets if not t.startswith("-") and t not in names]
    for token in packages:
        local = token.removesuffix("/...") or "."
        if token.startswith(".") and not os.path.isdir(os.path.join(root, local)):
            notes.append(
                f"target {token!r} is not a folder in the workspace; go test takes packages such as ./pkg/..."
            )
    if names:
        args += ["-run", run_pattern(names)]
    elif failures:
        failing = [f.test for f in failures if f.kind != "load" and f.test]
        if failing:
            args += ["-run", run_pattern(failing)]
        if not packages:
            dirs: list[str] = []
            for f in failures:
                folder = os.path.dirname(f.file) if f.file and not os.path.isabs(f.file) else None
                if f.kind == "load" or folder is None or not _has_tests(os.path.join(root, folder)):
                    dirs = []
                    break
                dirs.append("./" + folder if folder else ".")
            packages = list(dict.fromkeys(dirs))
    return [*args, *flags, *(packages or workspace_patterns(root))], notes
