"""jest 30: the default and verbose reporters (with and without colour, `--ci`), and the JSON
report (`--json --outputFile=…`).

Counting: `Tests:       8 failed, 1 skipped, 1 todo, 3 passed, 13 total` gives the
test counts (todo counts as skipped). A file that cannot run ("● Test suite failed to run") is
left out of that line by jest; each is added as one failure named after the file (of kind
"load", or "test" when jest says the worker process running it died inside it). When a
beforeAll throws, jest itself fails every test of that describe and counts each, so the
count stays the runner's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    Event,
    FailureDraft,
    bounded_join,
    expected_got,
    first_user_frame,
    relativize,
    run_parser,
    strip_ansi,
    test_frame,
    trim_stack,
)
from greenloop.frameworks.json_report import ReportTally, read_json_report
from greenloop.frameworks.results import closing_result, unclosed_note
from greenloop.model import Failure, ParseResult

__all__ = ["TextParser", "parse_report", "parse_text", "progress_event"]

_FILE = re.compile(r"^\s*(PASS|FAIL)\s+(\S.*?)(?:\s+\([\d.]+ m?s\))?\s*$")
_BLOCK = re.compile(r"^  ● (.+?)\s*$")
_TESTS = re.compile(r"^Tests:\s+(.+?)\s*$")
_SUITES = re.compile(r"^Test Suites:\s+(.+?)\s*$")
_TIME = re.compile(r"^Time:\s+([\d.]+)\s*(ms|s|m)\b")
_PART = re.compile(r"(\d+) (failed|passed|skipped|todo|pending|total)")
_TREE = re.compile(r"^\s+([✓✕○✎√×])\s+(.+?)\s*$")
_TREE_TIME = re.compile(r" \(\d+(?:\.\d+)? m?s\)$")
_CODE = re.compile(r"^\s*>?\s*\d+ \|")
_LOAD_HEADER = "Test suite failed to run"
# jest-worker's words when the worker process running a file died inside it (a test that
# killed its process, a native crash, the out-of-memory killer): the file loaded and its
# tests ran, so it is a failing test file, not one that could not load
_WORKER_DIED = re.compile(
    r"jest worker process \(pid=\d+\) was terminated|Call retries were exceeded"
    r"|child process exceptions, exceeding retry limit"
)


_HOOK_CALL = re.compile(r"\b(beforeAll|afterAll|beforeEach|afterEach)\s*\(")


def _hook_in_frame(body: list[str]) -> bool:
    """Does the code frame of a "Test suite failed to run" block point into a hook?

    Jest reports an afterAll that throws the same way as a file that cannot load; the code
    frame tells them apart: the marked line sits inside `afterAll(() => …)`.
    """
    frame = [b for b in body if _CODE.match(b)]
    marked = next((i for i, b in enumerate(frame) if b.lstrip().startswith(">")), None)
    if marked is None:
        return False
    for b in reversed(frame[: marked + 1]):
        code = b.split("|", 1)[1] if "|" in b else b
        if _HOOK_CALL.search(code):
            return True
        if re.search(r"\b(describe|it|test)\s*\(", code):
            return False
    return False


def _finish(d: FailureDraft, root: str | None) -> Failure:
    # Jest indents a block's body by four spaces.
    body = [b[4:] if b.startswith("    ") else b.strip() for b in d.body]
    msg: list[str] = []
    stack: list[str] = []
    extra: list[str] = []
    state = "msg"
    for line in body:
        s = line.strip()
        if s.startswith("at "):
            stack.append(s)
            state = "stack"
            continue
        if state == "msg":
            if (s == "" and msg) or _CODE.match(line) or s.startswith(("Expected:", "- Expected")):
                state = "rest"
                continue
            if s:
                msg.append(s)
        elif re.match(r"^(SyntaxError|TypeError|ReferenceError|Error)\b.*:", s) and len(extra) < 3:
            extra.append(s)
    if d.kind == "load":
        msg.extend(e for e in extra if e not in msg)
    exp, got = expected_got(body)
    file: str | None = d.file
    lineno: int | None = None
    ufile, uline, origin = test_frame("\n".join(stack), d.file if d.kind == "test" else None, root)
    if uline is not None:
        file, lineno = ufile, uline
    return Failure(
        test=d.test,
        file=relativize(file, root) if file else None,
        line=lineno,
        origin=origin,
        message=bounded_join(msg[:20]),
        expected=exp,
        got=got,
        stack=trim_stack("\n".join(stack), root),
        kind=d.kind,
    )


@dataclass
class TextParser:
    """Streaming parser of jest's text output: `feed` one line at a time, then `finish`."""

    root: str | None = None
    file: str | None = None
    draft: FailureDraft | None = None
    console: bool = False
    failures: list[Failure] = field(default_factory=list)
    names: set[tuple[str, str, str | None]] = field(default_factory=set)
    tests_line: dict[str, int] | None = None
    duration_ms: int | None = None
    tree: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    load_errors: list[str] = field(default_factory=list)
    suites_failed_to_run: int = 0
    draft_is_suite: bool = False  # the open block is a "Test suite failed to run" one
    # --verbose's tree under a file's PASS/FAIL line: its describes by depth, and the tests it
    # names as failures are named (`describe › test`); None outside a tree
    describes: list[str] | None = None
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)

    def _close(self) -> None:
        if self.draft is not None:
            # A hook's error: an afterAll after passing tests ("Test suite failed to run"),
            # or a beforeAll/beforeEach that jest reports once per test it stopped.
            if _hook_in_frame(self.draft.body):
                self.draft.kind = "hook"
            elif self.draft.kind == "load" and any(_WORKER_DIED.search(ln) for ln in self.draft.body):
                self.draft.kind = "test"
            f = _finish(self.draft, self.root)
            key = (f.test, f.kind, self.draft.file)  # the same test name in two files is two failures
            if key not in self.names:
                self.names.add(key)
                if self.draft_is_suite:
                    self.suites_failed_to_run += 1
                if f.kind == "load":
                    self.load_errors.append(f"{f.test}: {f.message.splitlines()[0] if f.message else ''}")
                if len(self.failures) >= MAX_DETAILED_FAILURES:
                    f = Failure(test=f.test, file=f.file, kind=f.kind, message=f.message[:200])
                self.failures.append(f)
        self.draft = None

    def feed(self, raw: str) -> None:
        """Read one line of jest's output."""
        line = strip_ansi(raw)
        m = _FILE.match(line)
        if m and ("/" in m.group(2) or "." in m.group(2)):
            self._close()
            self.console = False
            self.file = m.group(2)[2:] if m.group(2).startswith("./") else m.group(2)
            self.describes = []
            return
        m = _BLOCK.match(line)
        if m:
            self._close()
            self.describes = None
            title = m.group(1)
            if title == "Console":
                self.console = True
                return
            self.console = False
            if title == _LOAD_HEADER:
                # Named after the file. Whether it could not load or an afterAll threw after
                # its tests ran is decided at the end of the block (see _suite_kind).
                name = self.file or "(unknown test file)"
                self.draft = FailureDraft(test=name, file=self.file, kind="load")
                self.draft_is_suite = True
            else:
                self.draft = FailureDraft(test=title, file=self.file)
                self.draft_is_suite = False
            return
        if line.startswith("Tests:") or line.startswith("Test Suites:") or line.startswith("Time:") \
                or line.startswith("Summary of all failing tests"):
            self._close()
            self.console = False
            self._summary(line)
            return
        if self.draft is not None:
            self.draft.add(line)
            return
        if self.console:
            return
        t = _TREE.match(line)
        if t:
            sym = t.group(1)
            event = "pass" if sym in "✓√" else "fail" if sym in "✕×" else "skip"
            self.tree[event] += 1
            if self.describes is not None and event != "fail":
                self._tree_name(line, event, t.group(2))
        elif self.describes is not None:
            self._describe(line)

    def _level(self, line: str) -> int:
        return max((len(line) - len(line.lstrip())) // 2 - 1, 0)

    def _describe(self, line: str) -> None:
        """A describe's line in --verbose's tree (indented, no mark); a blank line ends the tree."""
        assert self.describes is not None
        if not line.strip() or not line.startswith("  "):
            self.describes = None
            return
        level = self._level(line)
        self.describes = [*self.describes[:level], line.strip()]

    def _tree_name(self, line: str, event: str, title: str) -> None:
        assert self.describes is not None
        title = _TREE_TIME.sub("", title)
        if event == "skip":  # `○ skipped title`, `✎ todo title`
            title = title.split(" ", 1)[1] if title.startswith(("skipped ", "todo ")) else title
            self.skipped_names.append(" › ".join([*self.describes[: self._level(line)], title]))
        else:
            self.passed_names.append(" › ".join([*self.describes[: self._level(line)], title]))

    def _summary(self, line: str) -> None:
        m = _TESTS.match(line)
        if m:
            counts: dict[str, int] = {}
            for n, what in _PART.findall(m.group(1)):
                counts[what] = int(n)
            self.tests_line = counts
            return
        m = _TIME.match(line)
        if m:
            self.duration_ms = int(float(m.group(1)) * {"ms": 1, "s": 1000, "m": 60000}[m.group(2)])

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        self._close()
        # "Test suite failed to run" blocks (a file that cannot load, or an afterAll that threw
        # after its tests passed) are outside jest's "Tests:" count; per-test failures are in it.
        loads = self.suites_failed_to_run
        notes: list[str] = []
        if self.tests_line is not None:
            c = self.tests_line
            failed = c.get("failed", 0) + loads
            passed = c.get("passed", 0)
            skipped = c.get("skipped", 0) + c.get("todo", 0) + c.get("pending", 0)
            recognized = True
        else:
            failed = max(self.tree["fail"], len(self.failures) - loads) + loads
            passed, skipped = self.tree["pass"], self.tree["skip"]
            recognized = False
            notes.append(unclosed_note(
                (passed, failed, skipped),
                "jest's closing 'Tests:' line was not found",
                "no jest output was recognised (no 'Tests:' summary, no test lines)",
            ))
        return closing_result(
            (passed, failed, skipped), self.failures, notes=notes, recognized=recognized,
            duration_ms=self.duration_ms, load_errors=self.load_errors,
            passed_names=self.passed_names, skipped_names=self.skipped_names,
        )


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse jest's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "jest")


def progress_event(line: str) -> Event | None:
    """pass/fail/skip of one finished-test line of jest's output, else None."""
    if not line or not any(c in line for c in "✓✕○✎"):
        return None
    m = _TREE.match(strip_ansi(line))
    if not m:
        return None
    sym = m.group(1)
    return "pass" if sym in "✓√" else "fail" if sym in "✕×" else "skip"


def _render(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    try:
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return str(v)


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """Parse jest's `--json` report. Missing or invalid gives recognized=False and a note."""
    return read_json_report(path, root, _parse_data)


def _parse_data(data: dict[str, Any], root: str | None) -> ParseResult:
    tally = ReportTally()
    for r, file, rel in tally.files(data, root):
        assertions = [a for a in r.get("assertionResults") or () if isinstance(a, dict)]
        tally.count(assertions, _assertion_name, partial(_assertion_failure, file=file, root=root))
        if r.get("status") == "failed" and assertions and r.get("message") \
                and not any(a.get("status") == "failed" for a in assertions):
            # the tests ran and passed, then the file failed: an afterAll threw
            tally.failed += 1
            text = strip_ansi(str(r.get("message") or ""))
            lines = [ln.strip() for ln in text.splitlines() if ln.strip() and _LOAD_HEADER not in ln]
            first = next((ln for ln in lines if not _CODE.match(ln)), "a hook failed")
            _, uline = first_user_frame(text)
            tally.failures.append(Failure(test=rel, file=rel, line=uline, message=first, kind="hook",
                                          stack=trim_stack(text, root)))
        if r.get("status") == "failed" and not assertions:
            tally.failed += 1
            text = strip_ansi(str(r.get("message") or r.get("failureMessage") or ""))
            lines = [ln[4:] if ln.startswith("    ") else ln.strip() for ln in text.splitlines()]
            lines = [ln for ln in lines if ln.strip() and _LOAD_HEADER not in ln]
            msg: list[str] = []
            for ln in lines:
                if _CODE.match(ln) or ln.strip().startswith("at "):
                    break
                msg.append(ln.strip())
            syntax = [ln.strip() for ln in lines if ln.strip().startswith("SyntaxError")][:2]
            msg = msg[:1] + [s for s in syntax if s not in msg[:1]]
            died = _WORKER_DIED.search(text) is not None
            if not died:
                tally.load_errors.append(f"{rel}: {msg[0] if msg else 'failed to run'}")
            tally.failures.append(Failure(test=rel, file=rel, message=bounded_join(msg),
                                          kind="test" if died else "load", stack=trim_stack(text, root)))
    return tally.result(data.get("startTime"))


def _assertion_name(a: dict[str, Any]) -> str:
    """A test's name as jest writes it: its describe path and title, joined by ' › '."""
    return " › ".join([*(str(x) for x in a.get("ancestorTitles") or ()), str(a.get("title") or "")])


def _assertion_failure(a: dict[str, Any], file: str, root: str | None) -> Failure:
    name = _assertion_name(a)
    text = strip_ansi(str((a.get("failureMessages") or [""])[0]))
    lines = text.splitlines()
    i = 0
    while i < len(lines) and not lines[i].lstrip().startswith("at "):
        i += 1
    message_lines = lines[:i]
    stack = "\n".join(lines[i:])
    exp, got = None, None
    details = a.get("failureDetails") or []
    mr = details[0].get("matcherResult") if details and isinstance(details[0], dict) else None
    if isinstance(mr, dict) and ("expected" in mr or "actual" in mr):
        exp, got = _render(mr.get("expected")), _render(mr.get("actual"))
    else:
        exp, got = expected_got(message_lines)
    first = [ln.strip() for ln in message_lines if ln.strip()]
    if first and first[0].startswith("Error: expect("):
        first[0] = first[0][len("Error: "):]
    msg: list[str] = []
    for ln in first:
        if ln.startswith("Expected") or ln.startswith("- Expected"):
            break
        msg.append(ln)
    kind: Literal["test", "hook"] = "hook" if "_callCircusHook" in stack else "test"
    ufile, uline, origin = test_frame(stack, file, root)
    loc = a.get("location") if isinstance(a.get("location"), dict) else None
    line = int(loc["line"]) if loc and isinstance(loc.get("line"), int) else uline
    return Failure(
        test=name,
        file=relativize(ufile or file, root),
        line=line,
        origin=origin,
        message=bounded_join(msg[:20]),
        expected=exp,
        got=got,
        stack=trim_stack(stack, root),
        kind=kind,
    )
