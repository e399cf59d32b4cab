"""vitest 4: the default, agent (minimal), verbose and dot reporters and GitHub `::error`
annotations (the JSON report is read by frameworks/vitest_report.py, live progress counted by
frameworks/vitest_progress.py).

Counting: the closing `Tests  6 failed | 3 passed | 3 skipped | 1 todo (13)` line
gives the test counts; todo counts as skipped. Files that fail to load ("Failed Suites",
`FAIL  f [ f ]`) and suites whose beforeAll/afterAll throws (`FAIL  f > suite` under
"Failed Suites") are left out of that line by vitest; each is added as one failure, named
after the file or the suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    FailureDraft,
    bounded_join,
    expected_got,
    relativize,
    run_parser,
    strip_ansi,
    test_frame,
    trim_stack,
)
from greenloop.frameworks.results import (
    closing_result,
    undetailed,
)
from greenloop.frameworks.vitest_progress import (
    FILE_COUNTS,
    FILE_LINE,
    FILE_TREE_LINE,
    TREE_LINE,
    progress_counts,
    progress_event,
)
from greenloop.frameworks.vitest_report import no_tests, no_tests_failure
from greenloop.model import Failure, ParseResult

# progress_counts and progress_event live in vitest_progress.py; this module hands them on as
# part of the Framework the dispatcher calls (frameworks/base.py)
__all__ = ["TextParser", "parse_text", "progress_counts", "progress_event"]

_SECTION = re.compile(r"^⎯+ (Failed Suites|Failed Tests|Unhandled Errors?|Unhandled Rejection)\b.*⎯+\s*$")
_UNHANDLED_ONE = re.compile(r"^⎯+ (Uncaught Exception|Unhandled Rejection|Unhandled Error)\b.*⎯+\s*$")
_RULE = re.compile(r"^⎯{8,}\s*$")
_ORIGIN = re.compile(r'^This error originated in "(.+?)" test file')
_BLOCK_END = re.compile(r"^⎯+\[\d+/\d+\]⎯\s*$")
_FAIL = re.compile(r"^\s*FAIL\s+(?:\|[^|]+\|\s+)?(.+?)\s*$")
_TESTS = re.compile(r"^\s*Tests\s+(.+?)\s*$")
_FILES = re.compile(r"^\s*Test Files\s+(.+?)\s*$")
_DURATION = re.compile(r"^\s*Duration\s+([\d.]+)\s*(ms|s|m)\b")
_ERRORS = re.compile(r"^\s*Errors\s+(\d+) errors?")
_PART = re.compile(r"(\d+) (failed|passed|skipped|todo|pending|expected fail)")
_TIME_SUFFIX = re.compile(r"\s+\d+(?:\.\d+)?m?s$")
_CONSOLE = re.compile(r"^(stdout|stderr) \| ")
_GH = re.compile(r"^::(error|warning|notice)\s+(.*?)::(.*)$")


def _gh_unescape(s: str, prop: bool) -> str:
    s = s.replace("%0D", "\r").replace("%0A", "\n")
    if prop:
        s = s.replace("%3A", ":").replace("%2C", ",")
    return s.replace("%25", "%")


def _split_header(header: str) -> tuple[str, str | None]:
    """`file > describe > test` -> (file, "describe > test"); `file [ file ]` -> (file, None)."""
    m = re.match(r"^(.*?) \[ (.*?) \]$", header)
    if m:
        return m.group(1), None
    if " > " in header:
        file, rest = header.split(" > ", 1)
        return file, rest
    return header, None


def _finish_draft(d: FailureDraft, root: str | None) -> Failure:
    body = d.body
    msg_lines: list[str] = []
    stack_lines: list[str] = []
    in_msg = True
    for line in body:
        s = line.strip()
        if s.startswith("❯ ") or s.startswith("at "):
            stack_lines.append(s)
            in_msg = False
            continue
        if in_msg:
            if s == "" and msg_lines:
                in_msg = False
                continue
            if s.startswith("- Expected") or re.match(r"^\d+\|", s):
                in_msg = False
                continue
            if s:
                msg_lines.append(s)
    exp, got = expected_got(body)
    file, lineno = d.file, d.line
    ufile, uline, origin = test_frame("\n".join(stack_lines), d.file if d.kind == "test" else None, root)
    if uline is not None:
        file, lineno = ufile, uline
    stack = trim_stack("\n".join(stack_lines), root)
    return Failure(
        test=d.test,
        file=relativize(file, root) if file else None,
        line=lineno,
        origin=origin,
        message=relativize(bounded_join(msg_lines[:20]), root),
        expected=exp,
        got=got,
        stack=stack,
        kind=d.kind,
    )


@dataclass
class TextParser:
    """Streaming parser of vitest's human reporters (default, agent, verbose, dot, github)."""

    root: str | None = None
    section: str = ""
    drafts: list[FailureDraft] = field(default_factory=list)  # the current (grouped) block
    block_has_body: bool = False
    failures: list[Failure] = field(default_factory=list)
    # (name, kind, file) of the failures kept: the same test name in two files is two failures
    names: set[tuple[str, str, str | None]] = field(default_factory=set)
    in_console: bool = False
    tests_line: dict[str, int] | None = None
    duration_ms: int | None = None
    unhandled: int = 0
    errors_line: int = 0  # "Errors  N errors" of the closing summary
    file_tests: dict[str, int] = field(default_factory=dict)  # tests per file, from file lines
    tree: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    tree_failed: list[str] = field(default_factory=list)
    tree_file: str | None = None  # the file line the tree's test lines follow
    tree_failed_file: dict[str, str] = field(default_factory=dict)
    # the verbose reporter's `✓ file > describe > test` lines name their tests as failures are
    # named (the default reporter's tree leaves the describes out, so its lines name none)
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)
    annotations: list[Failure] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    no_test_files: int = 0  # test files vitest failed for declaring no test

    # -- blocks
    def _close_block(self) -> None:
        for d in self.drafts:
            self._emit(_finish_draft(d, self.root))
        self.drafts = []
        self.block_has_body = False

    def _emit(self, f: Failure) -> None:
        if f.kind == "load" and no_tests(f.message):
            # a file that loaded and declares no test: no load failure; outside vitest's Tests line
            f = no_tests_failure(f.test, f.message)
            self.no_test_files += 1
        key = (f.test, f.kind, f.file)
        if key in self.names:
            return
        self.names.add(key)
        if f.kind == "load":
            first = f.message.splitlines()[0] if f.message else "failed to load"
            self.load_errors.append(f"{f.file}: {first}")
        self.failures.append(f if len(self.failures) < MAX_DETAILED_FAILURES else undetailed(f))

    def _unhandled_line(self, line: str) -> None:
        """Inside "Unhandled Errors": one failure per "Uncaught Exception" block, named after
        its message and the file vitest says it originated in. They fail the run (exit 1)
        although no test failed, and the JSON report does not mention them."""
        if _UNHANDLED_ONE.match(line):
            self._close_unhandled()
            self.drafts = [FailureDraft(test="unhandled error", kind="test")]
            return
        if _RULE.match(line) or self._summary(line):
            self._close_unhandled()
            self.section = ""
            return
        if not self.drafts:
            return  # the preamble ("Vitest caught 1 unhandled error …")
        m = _ORIGIN.match(line)
        if m:
            self.drafts[0].file = m.group(1)
        self.drafts[0].add(line)

    def _close_unhandled(self) -> None:
        if not self.drafts:
            return
        d = self.drafts[0]
        self.drafts = []
        f = _finish_draft(d, self.root)
        first = f.message.splitlines()[0] if f.message else "error"
        self.unhandled += 1
        self._emit(f._replace(test=f"unhandled error: {first}", file=f.file or d.file))

    def _open(self, header: str) -> None:
        if self.drafts and self.block_has_body:
            self._close_block()
        file, rest = _split_header(header)
        kind: Literal["test", "load", "hook"]
        if self.section == "Failed Suites":
            kind = "load" if rest is None and not self.file_tests.get(file) else "hook"
        else:
            kind = "test" if rest is not None else "load"
        name = file if rest is None else rest
        d = FailureDraft(test=name, file=file, kind=kind)
        if self.drafts:
            d.body = self.drafts[0].body
        self.drafts.append(d)

    def feed(self, raw: str) -> None:
        """Read one line of vitest's output."""
        line = strip_ansi(raw)
        if self.in_console:
            if line.strip() == "":
                self.in_console = False
            return
        if _CONSOLE.match(line):
            self.in_console = True
            return
        if line.startswith("::"):
            self._annotation(line)
            return
        m = _SECTION.match(line)
        if m and self.section == "Unhandled" and _UNHANDLED_ONE.match(line):
            m = None  # "⎯ Unhandled Error ⎯" inside "⎯ Unhandled Errors ⎯": one error's block
        if m:
            self._close_block()
            self.section = m.group(1)
            if self.section.startswith("Unhandled"):
                self.section = "Unhandled"
            return
        if self.section == "Unhandled":
            self._unhandled_line(line)
            return
        if _BLOCK_END.match(line):
            self._close_block()
            return
        if self.section:
            fm = _FAIL.match(line)
            if fm:
                self._open(fm.group(1))
                return
            if self.drafts:
                if self._summary(line):
                    self._close_block()
                    self.section = ""
                    return
                if line.strip():
                    self.block_has_body = True
                self.drafts[0].add(line)
                return
        if self._summary(line):
            return
        self._tree(line)

    def _tree(self, line: str) -> None:
        m = TREE_LINE.match(line) or FILE_TREE_LINE.match(line)
        if not m:
            return
        rest = m.group(3)
        if FILE_LINE.search(rest):
            # a file's line: remember whether its tests ran (a "[ file ]" failure of a file
            # whose tests ran is a top-level afterAll, not a load failure)
            fm = FILE_COUNTS.search(rest)
            self.tree_file = rest.split(" (", 1)[0].strip()
            if fm and len(self.file_tests) < 100000:
                self.file_tests[rest.split(" (", 1)[0].strip()] = int(fm.group(1))
            return
        sym = m.group(2)
        name = _TIME_SUFFIX.sub("", rest)
        full = _verbose_name(m.group(1), name)
        if sym in "✓✔":
            self.tree["pass"] += 1
            if full:
                self.passed_names.append(full)
        elif sym in "×✗✖":
            self.tree["fail"] += 1
            if len(self.tree_failed) < MAX_DETAILED_FAILURES:
                self.tree_failed.append(name)
                if self.tree_file:
                    self.tree_failed_file.setdefault(name, self.tree_file)
        else:
            self.tree["skip"] += 1
            if full and sym in "↓□":
                self.skipped_names.append(full)

    def _summary(self, line: str) -> bool:
        m = _TESTS.match(line)
        if m and ("|" in m.group(1) or "(" in m.group(1) or "no tests" in m.group(1)):
            counts: dict[str, int] = {}
            for n, what in _PART.findall(m.group(1)):
                counts[what] = counts.get(what, 0) + int(n)
            self.tests_line = counts
            return True
        if _FILES.match(line):
            return True
        m = _DURATION.match(line)
        if m:
            v = float(m.group(1))
            self.duration_ms = int(v * {"ms": 1, "s": 1000, "m": 60000}[m.group(2)])
            return True
        m = _ERRORS.match(line)
        if m:
            self.errors_line = int(m.group(1))
            return True
        return False

    def _annotation(self, line: str) -> None:
        m = _GH.match(line)
        if not m or m.group(1) != "error":
            return
        props: dict[str, str] = {}
        for part in m.group(2).split(","):
            if "=" in part:
                k, v = part.split("=", 1)
                props[k.strip()] = _gh_unescape(v, True)
        msg = _gh_unescape(m.group(3), False)
        title = props.get("title", "")
        file, rest = _split_header(title) if title else (props.get("file", ""), None)
        body = msg.splitlines()
        exp, got = expected_got(body)
        first = []
        for b in body:
            if not b.strip() or b.strip().startswith("❯") or b.strip().startswith("- Expected"):
                break
            first.append(b.strip())
        line_no = props.get("line")
        self.annotations.append(
            Failure(
                test=rest if rest is not None else file,
                file=relativize(props.get("file") or file, self.root) or None,
                line=int(line_no) if line_no and line_no.isdigit() else None,
                message=bounded_join(first[:20]),
                expected=exp,
                got=got,
                kind="test" if rest is not None else "load",
            )
        )

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        self._close_block()
        notes: list[str] = []
        # Merge GitHub annotations: they add file:line to blocks, or stand alone.
        by_name = {f.test: i for i, f in enumerate(self.failures)}
        for a in self.annotations:
            i = by_name.get(a.test)
            if i is None:
                self._emit(a)
                by_name[a.test] = len(self.failures) - 1
            else:
                f = self.failures[i]
                if f.line is None and a.line is not None:
                    self.failures[i] = f._replace(file=a.file or f.file, line=a.line)
        loads = sum(1 for f in self.failures if f.kind == "load")
        hooks = sum(1 for f in self.failures if f.kind == "hook")
        if self.tests_line is not None:
            c = self.tests_line
            outside = loads + hooks + self.no_test_files + max(self.unhandled, self.errors_line)
            failed = c.get("failed", 0) + outside
            passed = c.get("passed", 0) + c.get("expected fail", 0)
            skipped = c.get("skipped", 0) + c.get("todo", 0) + c.get("pending", 0)
            recognized = True
        else:
            tests_failed = sum(1 for f in self.failures if f.kind == "test") - self.unhandled
            failed = max(self.tree["fail"], tests_failed) + loads + hooks + self.unhandled
            passed, skipped = self.tree["pass"], self.tree["skip"]
            recognized = False
            notes.append("vitest's closing 'Tests' line was not found; counts come from the lines seen")
        tests = [f for f in self.failures if f.kind == "test"]
        # the tree's failing names stand in for details the output never printed (a run
        # stopped before vitest's closing "Failed Tests" section gives only the tree)
        named = self.tests_line.get("failed", 0) if self.tests_line is not None else self.tree["fail"]
        if len(tests) < named and self.tree_failed:
            known = {f.test for f in tests}
            known_titles = {f.test.rsplit(" > ", 1)[-1] for f in tests}
            for name in self.tree_failed:
                plain = name.split(" > ", 1)[1] if " > " in name and "." in name.split(" > ", 1)[0] else name
                if plain not in known and plain.rsplit(" > ", 1)[-1] not in known_titles:
                    file = self.tree_failed_file.get(name)
                    self._emit(Failure(test=plain, file=relativize(file, self.root) if file else None))
                    known.add(plain)
        if not recognized and passed + failed + skipped == 0 and not self.failures:
            notes = ["no vitest output was recognised (no 'Tests' summary, no test lines)"]
        return closing_result(
            (passed, failed, skipped), self.failures, notes=notes, recognized=recognized,
            duration_ms=self.duration_ms, load_errors=self.load_errors,
            passed_names=self.passed_names, skipped_names=self.skipped_names,
        )


def _verbose_name(indent: str, rest: str) -> str | None:
    """The test a verbose line (` ✓ math.test.js > math > adds`) names, without its file
    (`math > adds`, as a failure's header names it); None for the default reporter's tree."""
    if len(indent) > 1 or " > " not in rest:
        return None
    file, name = rest.split(" > ", 1)
    return name if "." in file else None


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse vitest's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "vitest")

