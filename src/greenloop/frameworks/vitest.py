"""vitest 4: the default, agent (minimal), verbose and dot reporters, GitHub `::error`
annotations, and the JSON report (`--reporter=json --outputFile=…`).

Counting (issue 2): the closing `Tests  6 failed | 3 passed | 3 skipped | 1 todo (13)` line
gives the test counts; todo counts as skipped. Files that fail to load ("Failed Suites",
`FAIL  f [ f ]`) and suites whose beforeAll/afterAll throws (`FAIL  f > suite` under
"Failed Suites") are left out of that line by vitest; each is added as one failure, named
after the file or the suite.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    Event,
    FailureDraft,
    bounded_join,
    expected_got,
    first_user_frame,
    json_report_result,
    load_error_of,
    load_failures_only,
    load_note,
    read_json_report,
    relativize,
    run_parser,
    strip_ansi,
    summary_of,
    trim_stack,
)
from greenloop.model import Failure, ParseResult, Summary

__all__ = [
    "TextParser",
    "VitestReport",
    "parse_json_report",
    "parse_report",
    "parse_text",
    "progress_counts",
    "progress_event",
]

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
_TREE = re.compile(r"^(\s*)([✓✔×✗✖↓□])\s+(.+?)\s*$")
_FILE_LINE = re.compile(r"\((?:\d+ tests?|no tests?)[^)]*\)(?: \d+m?s)?$")
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
    ufile, uline = first_user_frame("\n".join(stack_lines))
    if uline is not None:
        file, lineno = ufile, uline
    stack = trim_stack("\n".join(stack_lines), root)
    return Failure(
        test=d.test,
        file=relativize(file, root) if file else None,
        line=lineno,
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
    annotations: list[Failure] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)

    # -- blocks
    def _close_block(self) -> None:
        for d in self.drafts:
            self._emit(_finish_draft(d, self.root))
        self.drafts = []
        self.block_has_body = False

    def _emit(self, f: Failure) -> None:
        key = (f.test, f.kind, f.file)
        if key in self.names:
            return
        self.names.add(key)
        if f.kind == "load":
            first = f.message.splitlines()[0] if f.message else "failed to load"
            self.load_errors.append(f"{f.file}: {first}")
        if len(self.failures) >= MAX_DETAILED_FAILURES:
            f = Failure(test=f.test, file=f.file, line=f.line, kind=f.kind, message=f.message[:200])
        self.failures.append(f)

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
        m = _TREE.match(line) or _FILE_TREE.match(line)
        if not m:
            return
        rest = m.group(3)
        if _FILE_LINE.search(rest):
            # a file's line: remember whether its tests ran (a "[ file ]" failure of a file
            # whose tests ran is a top-level afterAll, not a load failure)
            fm = _FILE_COUNTS.search(rest)
            self.tree_file = rest.split(" (", 1)[0].strip()
            if fm and len(self.file_tests) < 100000:
                self.file_tests[rest.split(" (", 1)[0].strip()] = int(fm.group(1))
            return
        sym = m.group(2)
        name = _TIME_SUFFIX.sub("", rest)
        if sym in "✓✔":
            self.tree["pass"] += 1
        elif sym in "×✗✖":
            self.tree["fail"] += 1
            if len(self.tree_failed) < MAX_DETAILED_FAILURES:
                self.tree_failed.append(name)
                if self.tree_file:
                    self.tree_failed_file.setdefault(name, self.tree_file)
        else:
            self.tree["skip"] += 1

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
            failed = c.get("failed", 0) + loads + hooks + max(self.unhandled, self.errors_line)
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
        summary = summary_of(passed, failed, skipped)
        if not recognized and summary.total == 0 and not self.failures:
            notes = ["no vitest output was recognised (no 'Tests' summary, no test lines)"]
        return ParseResult(
            summary=summary,
            failures=tuple(self.failures),
            notes=tuple(notes),
            recognized=recognized,
            duration_ms=self.duration_ms,
            load_error=load_error_of(self.load_errors),
        )


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    return run_parser(lambda: TextParser(root=root), lines, "vitest")


def progress_event(line: str) -> Event | None:
    """One event per finished test line of vitest's tree/verbose output (file lines skipped)."""
    if not line or ("✓" not in line and "×" not in line and "↓" not in line and "□" not in line):
        return None
    m = _TREE.match(strip_ansi(line))
    if not m or _FILE_LINE.search(m.group(3)):
        return None
    sym = m.group(2)
    return "pass" if sym in "✓✔" else "fail" if sym in "×✗✖" else "skip"


_FILE_COUNTS = re.compile(r"\((\d+) tests?((?: \| \d+ [a-z]+)*)\)")
_FILE_TREE = re.compile(r"^(\s*)(❯)\s+(.+?)\s*$")
_DOT_LINE = re.compile(r"^[·x\-*]+$")


def progress_counts(line: str) -> dict[Event, int] | None:
    """Counts one line adds to live progress, for every vitest reporter at once.

    The default and agent reporters print a line per finished file with its counts (the
    agent reporter lists only failing tests under it, so the file line is the whole truth);
    the tests indented under it are not counted again. The verbose reporter prints one
    `file > test` line per test; the dot reporter one character per test.
    """
    if not line:
        return None
    s = strip_ansi(line)
    m = _TREE.match(s) or _FILE_TREE.match(s)
    if m:
        rest = m.group(3)
        fm = _FILE_COUNTS.search(rest) if _FILE_LINE.search(rest) else None
        if fm:
            parts = dict((w, int(n)) for n, w in re.findall(r"(\d+) ([a-z]+)", fm.group(2)))
            total = int(fm.group(1))
            failed = parts.get("failed", 0)
            skipped = parts.get("skipped", 0) + parts.get("todo", 0)
            return {"pass": max(total - failed - skipped, 0), "fail": failed, "skip": skipped}
        if len(m.group(1)) <= 1 and " > " in rest:  # verbose: " ✓ file > test 1ms"
            ev = progress_event(s)
            return {ev: 1} if ev else None
        return None
    if _DOT_LINE.match(s.strip()) and s.strip():
        t = s.strip()
        return {"pass": t.count("·"), "fail": t.count("x"), "skip": t.count("-") + t.count("*")}
    return None


# --- the JSON report -------------------------------------------------------------------


def _split_failure_message(text: str) -> tuple[str, str]:
    """A failureMessages entry is `Error: message\\n    at frame…`: split message from stack."""
    lines = strip_ansi(text).splitlines()
    msg: list[str] = []
    i = 0
    while i < len(lines) and not lines[i].lstrip().startswith("at "):
        msg.append(lines[i])
        i += 1
    return "\n".join(msg).strip(), "\n".join(lines[i:])


def _report_failure(test: str, file: str | None, text: str, root: str | None,
                    kind: Literal["test", "load", "hook"] = "test",
                    location: dict[str, Any] | None = None) -> Failure:
    message, stack = _split_failure_message(text)
    exp, got = expected_got(message.splitlines())
    ufile, uline = first_user_frame(stack)
    line: int | None = None
    if location and isinstance(location.get("line"), int):
        line = int(location["line"])
    elif uline is not None:
        line = uline
        file = ufile or file
    return Failure(
        test=test,
        file=relativize(file, root) if file else None,
        line=line,
        message=bounded_join(message.splitlines()[:20]),
        expected=exp,
        got=got,
        stack=trim_stack(stack, root),
        kind=kind,
    )


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """Parse vitest's JSON report. Missing or invalid gives recognized=False and a note."""
    return read_json_report(path, root, _parse_report_data)


def _parse_report_data(data: dict[str, Any], root: str | None) -> ParseResult:
    failures: list[Failure] = []
    passed_names: list[str] = []
    passed = failed = skipped = 0
    load_errors: list[str] = []
    notes: list[str] = []
    start = data.get("startTime")
    end: float | None = None
    for r in data["testResults"]:
        if not isinstance(r, dict):
            continue
        file = str(r.get("name") or "")
        rel = relativize(file, root) if root else file
        if isinstance(r.get("endTime"), int | float):
            end = max(end or 0.0, float(r["endTime"]))
        assertions = [a for a in r.get("assertionResults") or () if isinstance(a, dict)]
        status = r.get("status")
        message = relativize(strip_ansi(str(r.get("message") or "")), root)  # no temp paths
        never_reported = 0
        for a in assertions:
            st = a.get("status")
            if st == "passed":
                passed += 1
                passed_names.append(_assertion_name(a))
            elif st == "failed":
                failed += 1
                name = _assertion_name(a)
                msgs = a.get("failureMessages") or [""]
                loc = a.get("location") if isinstance(a.get("location"), dict) else None
                failures.append(_report_failure(name, file, str(msgs[0]), root, "test", loc))
            elif st == "pending":
                # never finished: the run stopped early (bail) or the worker running the file
                # died; vitest's own Tests line counts such a test nowhere, and neither does this
                never_reported += 1
            else:
                skipped += 1
        if never_reported:
            notes.append(f"{rel}: {never_reported} test(s) never reported a result (the run stopped "
                         "early, or the worker running the file died)")
        has_failed_test = any(a.get("status") == "failed" for a in assertions)
        if status == "failed" and not assertions:
            failed += 1
            first = message.splitlines()[0] if message else "failed to load"
            load_errors.append(f"{rel}: {first}")
            failures.append(Failure(test=rel, file=rel, message=bounded_join(message.splitlines()[:20]),
                                    kind="load", stack=trim_stack(message, root)))
        elif status == "failed" and not has_failed_test:
            # A hook threw: vitest skips the suite's tests and the JSON carries no detail. Name
            # the failure after the describe path all the skipped tests share.
            failed += 1
            paths = [[str(x) for x in a.get("ancestorTitles") or ()] for a in assertions]
            common = paths[0] if paths else []
            for p in paths[1:]:
                n = 0
                while n < min(len(common), len(p)) and common[n] == p[n]:
                    n += 1
                common = common[:n]
            name = " > ".join(common) if common else rel
            failures.append(Failure(
                test=name, file=rel, kind="hook",
                message=message or "a beforeAll/afterAll hook failed; vitest's JSON report carries no "
                "detail (the text output's 'Failed Suites' block has it)",
            ))
    result = json_report_result(passed, failed, skipped, failures, start, end, load_errors, passed_names)
    return result._replace(notes=(*result.notes, *notes)) if notes else result


def _assertion_name(a: dict[str, Any]) -> str:
    """A test's name as failures carry it: its describe path and title, joined by ' > '."""
    ancestors = [str(x) for x in a.get("ancestorTitles") or ()]
    return " > ".join([*ancestors, str(a.get("title") or a.get("fullName") or "")])


@dataclass(frozen=True)
class VitestReport:
    """The Tester seed's contract for a vitest JSON report."""

    ok: bool
    crashed: bool
    crash_reason: str | None
    summary: Summary
    failures: tuple[Failure, ...]
    duration_ms: int | None
    next_action: Literal["retry_coder", "retry_tester"] | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "crashed": self.crashed,
            "crash_reason": self.crash_reason,
            "summary": self.summary.to_json(),
            "failures": [f.to_json() for f in self.failures],
            "duration_ms": self.duration_ms,
            "next_action": self.next_action,
            "notes": list(self.notes),
        }


def parse_json_report(path: str | os.PathLike[str], root: str | None = None) -> VitestReport:
    """Read a vitest JSON report into `{ok, crashed, crash_reason, summary, failures, duration_ms}`.

    A missing or invalid report is crashed with its reason. A suite that cannot load the code
    under test (SyntaxError, missing module) is crashed with next_action "retry_tester";
    ordinary failing tests give next_action "retry_coder", also when some files could not
    load beside them (those are failures of kind "load", with a note).
    """
    res = parse_report(os.fspath(path), root)
    if not res.recognized:
        reason = res.notes[0] if res.notes else "vitest JSON report unreadable"
        return VitestReport(ok=False, crashed=True, crash_reason=reason, summary=res.summary,
                            failures=res.failures, duration_ms=res.duration_ms,
                            next_action="retry_tester", notes=res.notes)
    if res.load_error and load_failures_only(res):
        return VitestReport(ok=False, crashed=True,
                            crash_reason=f"the suite could not load the code under test: {res.load_error}",
                            summary=res.summary, failures=res.failures, duration_ms=res.duration_ms,
                            next_action="retry_tester", notes=res.notes)
    if res.summary.total == 0:
        return VitestReport(ok=False, crashed=True, crash_reason="no tests ran", summary=res.summary,
                            failures=(), duration_ms=res.duration_ms, next_action="retry_tester",
                            notes=res.notes)
    failed = res.summary.failed > 0
    notes = (*res.notes, load_note(res)) if res.load_error else res.notes
    return VitestReport(ok=not failed, crashed=False, crash_reason=None, summary=res.summary,
                        failures=res.failures, duration_ms=res.duration_ms,
                        next_action="retry_coder" if failed else None, notes=notes)


