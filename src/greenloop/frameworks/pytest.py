"""pytest: the default, -q, -v and -rA terminal output (with and without colour) and the
JUnit XML report (`--junitxml=…`).

Counting: pytest is counted as its closing line counts: `8 failed, 4 passed,
1 skipped, 1 xfailed, 1 xpassed, 3 errors in 0.9s` gives failed = failed + errors, passed =
passed + xpassed, skipped = skipped + xfailed. A strict xpass is already among "failed"; a
test that passes and then errors in teardown is one passed and one failed, as pytest says.

The parser is built for speed on long -v logs: most lines are rejected by their first
character before any regular expression runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_NAMED_FAILURES,
    Event,
    FailureDraft,
    bounded_join,
    expected_got,
    is_user_frame,
    relativize,
    run_parser,
    strip_ansi,
    trim_stack,
)
from greenloop.frameworks.results import closing_result, counts_seen, unclosed_note
from greenloop.model import Failure, ParseResult

__all__ = [
    "TextParser",
    "parse_text",
    "progress_counts",
    "progress_event",
    "split_summary_line",
]

_SECTION = re.compile(r"^=+ (.+?) =+$")
_CLOSING = re.compile(
    r"^(?:=+ )?((?:\d+ [a-z]+(?:, )?)+|no tests ran)(?: in ([\d.]+)s(?: \([\d:.]+\))?)?(?: =+)?$"
)
_PART = re.compile(r"(\d+) ([a-z]+)")
_HEADER = re.compile(r"^_{2,} (.+?) _{2,}$")
_LOCATION = re.compile(r"^(\S[^:]*?\.py):(\d+): (.*)$")
_PY_FILE_LINE = re.compile(r'^File "([^"]+)", line (\d+)')
_V_LINE = re.compile(r"^(\S+::\S.*?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_XDIST = re.compile(r"^\[gw\d+\] \[\s*\d+%\] (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S.*)$")
_DOTS = re.compile(r"^(\S+\.py) ([.FEsxX]+)\s*(?:\[\s*\d+%\])?$")
# pytest-xdist's header ("2 workers [13 items]") and its outcome letters, which carry no file
# name and may end in a worker's message ("s.F.[gw1] node down: Not properly terminated")
_XDIST_HEADER = re.compile(r"^\d+ workers? \[\d+ items?\]")
_XDIST_DOTS = re.compile(r"^([.FEsxX]+)(?:\s*\[\s*\d+%\]\s*$|\[gw\d+\] |$)")
# a file's dots wrapped onto the next line (more tests than the terminal is wide): no file
# name, the percentage at its end, or none on the last line of a run stopped mid-file
_WRAPPED_DOTS = re.compile(r"^([.FEsxX]+)\s*(?:\[\s*\d+%\])?\s*$")
_STATUS: dict[str, Event] = {
    "PASSED": "pass", "XPASS": "pass", "FAILED": "fail", "ERROR": "fail", "SKIPPED": "skip", "XFAIL": "skip",
}
_V_WORDS = tuple((f" {w}", w) for w in ("PASSED", "FAILED", "SKIPPED", "ERROR", "XFAIL", "XPASS"))
_DOT_EVENT: dict[str, Event] = {".": "pass", "X": "pass", "F": "fail", "E": "fail", "s": "skip", "x": "skip"}


def split_summary_line(rest: str) -> tuple[str, str]:
    """`nodeid - message` -> (nodeid, message), keeping ` - ` inside a parametrize id intact."""
    head = rest.split(" ", 1)[0]
    bracket = rest.find("[")
    if bracket != -1 and bracket < len(head):
        depth = 0
        for i in range(bracket, len(rest)):
            ch = rest[i]
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
                if depth == 0:
                    tail = rest[i + 1 :]
                    return rest[: i + 1], tail[3:] if tail.startswith(" - ") else tail.strip()
    if " - " in rest:
        a, b = rest.split(" - ", 1)
        return a, b
    return rest.strip(), ""


def _header_to_tail(header: str) -> str:
    """`TestGroup.test_x[a.b]` -> `TestGroup::test_x[a.b]` (dots only outside the param id)."""
    i = header.find("[")
    head, param = (header, "") if i == -1 else (header[:i], header[i:])
    return head.replace(".", "::") + param


def _finish(d: FailureDraft, root: str | None, summary_msg: str | None) -> Failure:
    e_lines: list[str] = []
    locations: list[tuple[str, int, str]] = []
    other: list[str] = []
    for line in d.body:
        if line.startswith("E "):
            e_lines.append(line[1:].strip())
            continue
        m = _LOCATION.match(line)
        if m:
            locations.append((m.group(1), int(m.group(2)), line))
            continue
        s = line.strip()
        if s and not line.startswith(" ") and not line.startswith(">"):
            other.append(s)
    stack_text = "\n".join(loc[2] for loc in locations)
    user = [loc for loc in locations if is_user_frame(loc[2])]
    file, lineno = (user[-1][0], user[-1][1]) if user else (d.file, None)
    if d.kind == "load":
        # A SyntaxError in the imported module points at that module, not the test file.
        for e in e_lines:
            m = _PY_FILE_LINE.match(e)
            if m and is_user_frame(e):
                file, lineno = m.group(1), int(m.group(2))
    message_lines = [e for e in e_lines if e] or other[:5]
    if not message_lines and summary_msg:
        message_lines = [summary_msg]
    exp, got = expected_got(e_lines)
    return Failure(
        test=d.test,
        file=relativize(file, root) if file else None,
        line=lineno,
        message=bounded_join(message_lines[:20]),
        expected=exp,
        got=got,
        stack=trim_stack(stack_text, root),
        kind=d.kind,
    )


@dataclass
class TextParser:
    """Streaming parser of pytest's text output: `feed` one line at a time, then `finish`."""

    root: str | None = None
    section: str = ""
    draft: FailureDraft | None = None
    captured: bool = False
    # Finished blocks, named by their header until the summary lines give node ids:
    # (header, kind, failure with details or None past the detail bound, file of first location)
    blocks: list[tuple[str, str, Failure | None, str | None]] = field(default_factory=list)
    summary_lines: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, nodeid, message)
    closing: dict[str, int] | None = None
    duration_ms: int | None = None
    progress: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    progress_failed: list[str] = field(default_factory=list)
    # node ids the -v lines and -rA's summary name: passed (xpass too) and skipped (xfail too)
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)
    interrupted: str | None = None
    xdist: bool = False  # pytest-xdist's header was seen: a line of bare letters is outcomes
    dots: bool = False  # the last line was a file's dots: a line of bare letters continues it

    def _close(self) -> None:
        d = self.draft
        self.draft = None
        if d is None or len(self.blocks) >= MAX_NAMED_FAILURES:
            return
        loc_file = next((m.group(1) for ln in d.body if (m := _LOCATION.match(ln))), None)
        detail = _finish(d, self.root, None) if len(self.blocks) < MAX_DETAILED_FAILURES else None
        self.blocks.append((d.test, d.kind, detail, loc_file))

    def consume(self, lines: Iterable[Any]) -> None:
        """Feed many lines; passing `pytest -v` lines take a path without a method call."""
        feed = self.feed
        progress = self.progress
        fast = self.draft is None and self.section in ("", "test session starts")
        for raw in lines:
            if raw.__class__ is not str:
                raw = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
            if fast and " PASSED" in raw and "::" in raw and "\x1b" not in raw and raw[0] != "[":
                progress["pass"] += 1
                self.passed_names.append(raw[: raw.find(" PASSED")])
                continue
            feed(raw.rstrip("\r\n"))
            fast = self.draft is None and self.section in ("", "test session starts")

    def feed(self, raw: str) -> None:
        """Read one line of pytest's output."""
        line = strip_ansi(raw) if "\x1b" in raw else raw
        if not line:
            if self.draft is not None and not self.captured:
                self.draft.add(line)
            return
        c = line[0]
        if c == "=":
            self._equals(line)
            return
        if c == "_" and line[-1] == "_":
            m = _HEADER.match(line)
            if m and self.section in ("FAILURES", "ERRORS"):
                self._open(m.group(1))
                return
        if c == "!" and "Interrupted:" in line:
            self.interrupted = line.strip("! ")
            return
        if self.draft is not None:
            if c == "-" and "Captured" in line:
                self.captured = True
                return
            if c == "-" and line.startswith("---") and "generated xml file" in line:
                return
            if not self.captured:
                self.draft.add(line)
            return
        if self.section == "short test summary info":
            self._summary_line(line)
            return
        idx = line.find("::") if self.section in ("", "test session starts") else -1
        if idx > 0:
            if c == "[":
                x = _XDIST.match(line)
                if x:
                    self._progress(x.group(1), x.group(2))
                    return
            # Fast path for -v lines: plain substring searches instead of a regex per line.
            for word, status in _V_WORDS:
                k = line.find(word, idx)
                if k != -1:
                    self._progress(status, line[:k])
                    return
        if self.xdist and c in ".FEsxX" and self.section in ("", "test session starts"):
            x = _XDIST_DOTS.match(line)
            if x:
                for ch in x.group(1):
                    self.progress[_DOT_EVENT[ch]] += 1
                return
        if self.dots and c in ".FEsxX" and self.section in ("", "test session starts"):
            w = _WRAPPED_DOTS.match(line)
            if w:
                self._count_dots(w.group(1))
                return
        self.dots = False
        if line.endswith("]") or c not in " \t":
            m = _DOTS.match(line)
            if m and self.section in ("", "test session starts"):
                self._count_dots(m.group(2))
                self.dots = True
                return
        if (c.isdigit() or c == "n") and not self._closing(line) and _XDIST_HEADER.match(line):
            self.xdist = True

    def _count_dots(self, dots: str) -> None:
        for ch in dots:
            ev = _DOT_EVENT.get(ch)
            if ev:
                self.progress[ev] += 1

    def _progress(self, status: str, nodeid: str) -> None:
        ev = _STATUS[status]
        self.progress[ev] += 1
        if ev == "fail" and len(self.progress_failed) < MAX_NAMED_FAILURES:
            self.progress_failed.append(nodeid)
        elif ev == "pass":
            self.passed_names.append(nodeid)
        elif ev == "skip":
            self.skipped_names.append(nodeid)

    def _equals(self, line: str) -> None:
        if self._closing(line):
            self._close()
            self.section = "closed"
            return
        m = _SECTION.match(line)
        if m:
            self._close()
            self.captured = False
            self.section = m.group(1)

    def _closing(self, line: str) -> bool:
        if " in " not in line and "no tests ran" not in line:
            return False
        m = _CLOSING.match(line.strip())
        if not m:
            return False
        counts: dict[str, int] = {}
        for n, what in _PART.findall(m.group(1)):
            key = {"error": "errors", "warning": "warnings"}.get(what, what)
            counts[key] = counts.get(key, 0) + int(n)
        if m.group(1) != "no tests ran" and not counts:
            return False
        self.closing = counts
        if m.group(2):
            self.duration_ms = int(float(m.group(2)) * 1000)
        return True

    def _open(self, header: str) -> None:
        self._close()
        self.captured = False
        kind: Literal["test", "load", "hook"] = "test"
        name = header
        if self.section == "ERRORS":
            if header.startswith("ERROR collecting "):
                kind, name = "load", header[len("ERROR collecting ") :]
            elif header.startswith("ERROR at setup of ") or header.startswith("ERROR at teardown of "):
                kind, name = "hook", header.split(" of ", 1)[1]
        self.draft = FailureDraft(test=name, kind=kind)

    def _summary_line(self, line: str) -> None:
        if line.startswith("FAILED "):
            nodeid, msg = split_summary_line(line[7:])
            self.summary_lines.append(("FAILED", nodeid, msg))
        elif line.startswith("ERROR "):
            nodeid, msg = split_summary_line(line[6:])
            self.summary_lines.append(("ERROR", nodeid, msg))
        elif line.startswith(("PASSED ", "XPASS ")):
            self.passed_names.append(split_summary_line(line.split(" ", 1)[1])[0])
        elif line.startswith("XFAIL "):
            self.skipped_names.append(split_summary_line(line[6:])[0])
        elif not line.startswith("SKIPPED"):  # (-rA's SKIPPED lines give a file:line, not a node id)
            self._closing(line)

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        self._close()
        failures: list[Failure] = []
        # Summary lines name tests by node id; block headers name them by "Class.test[id]".
        fail_ids = [n for k, n, _ in self.summary_lines if k == "FAILED"]
        err_ids = [n for k, n, _ in self.summary_lines if k == "ERROR"]
        msgs = {(k, n): m for k, n, m in self.summary_lines}
        by_tail: dict[str, str] = {}
        for n in fail_ids + err_ids + self.progress_failed:
            tail = n.split("::", 1)[1] if "::" in n else n
            by_tail.setdefault(tail, n)
        used: set[tuple[str, str]] = set()
        load_errors: list[str] = []
        for header, kind_s, detail, loc_file in self.blocks:
            bkind: Literal["test", "load", "hook"] = "load" if kind_s == "load" else \
                "hook" if kind_s == "hook" else "test"
            if bkind == "load":
                nodeid = header
            else:
                tail = _header_to_tail(header)
                guess = f"{loc_file}::{tail}" if loc_file else tail
                nodeid = by_tail.get(tail) or by_tail.get(header) or guess
            nfile = nodeid.split("::", 1)[0] if "::" in nodeid or nodeid.endswith(".py") else None
            key = ("ERROR" if bkind != "test" else "FAILED", nodeid)
            used.add(key)
            summary_msg = msgs.get(key, "")
            if detail is None:
                f = Failure(test=nodeid, file=nfile, kind=bkind, message=summary_msg)
            else:
                f = detail._replace(test=nodeid, file=detail.file or nfile,
                            message=detail.message or summary_msg)
            if bkind == "load":
                last = f.message.splitlines()[-1] if f.message else "import failed"
                load_errors.append(f"{nodeid}: {last}")
            failures.append(f)
        # Summary lines without a block (e.g. -q with --tb=no): named, message from the line.
        for k, n, text in self.summary_lines:
            if (k, n) in used:
                continue
            used.add((k, n))
            kind: Literal["test", "load", "hook"] = "test"
            if k == "ERROR":
                kind = "hook" if "::" in n else "load"
                if kind == "load":
                    load_errors.append(f"{n}: {text or 'import failed'}")
            failures.append(Failure(test=n, file=n.split("::", 1)[0], message=text, kind=kind))
        notes: list[str] = []
        if self.closing is not None:
            c = self.closing
            failed = c.get("failed", 0) + c.get("errors", 0)
            passed = c.get("passed", 0) + c.get("xpassed", 0)
            skipped = c.get("skipped", 0) + c.get("xfailed", 0)
            recognized = True
        else:
            passed, failed, skipped = counts_seen(self.progress, len(failures))
            recognized = False
            notes.append(unclosed_note(
                (passed, failed, skipped),
                "pytest's closing line was not found",
                "no pytest output was recognised (no closing summary line, no test lines)",
            ))
            if not failures:
                failures.extend(Failure(test=n, file=n.split("::", 1)[0]) for n in self.progress_failed)
        if self.interrupted:
            notes.append(f"pytest: {self.interrupted}")
        return closing_result(
            (passed, failed, skipped), failures, notes=notes, recognized=recognized,
            duration_ms=self.duration_ms, load_errors=load_errors,
            passed_names=dict.fromkeys(self.passed_names), skipped_names=dict.fromkeys(self.skipped_names),
        )


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse pytest's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "pytest")


def progress_counts(line: str) -> dict[Event, int] | None:
    """Counts one line adds to live progress: a -v line is one test, a line of dots
    (`test_x.py ..F.s  [ 40%]`, the default and -q reporters) is one test per character."""
    ev = progress_event(line)
    if ev is not None:
        return {ev: 1}
    s = strip_ansi(line)
    m = _DOTS.match(s) or re.match(r"^([.FEsxX]+)\s*\[\s*\d+%\]$", s)
    if not m:
        return None
    dots = m.group(m.lastindex or 1)
    out: dict[Event, int] = {"pass": 0, "fail": 0, "skip": 0}
    for ch in dots:
        out[_DOT_EVENT[ch]] += 1
    return out


def progress_event(line: str) -> Event | None:
    """One event per `nodeid STATUS` line of `pytest -v` (the dots of -q carry several)."""
    if "::" not in line:
        return None
    s = strip_ansi(line)
    m = _V_LINE.match(s)
    if m:
        return _STATUS[m.group(2)]
    x = _XDIST.match(s)
    return _STATUS[x.group(1)] if x else None
