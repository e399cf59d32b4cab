"""mocha: greenloop's reporter's JSON report (mocha's JSON reporter's shape plus title paths;
a plain `--reporter json` file reads too) and the spec reporter's text output.

Counting is mocha's closing lines: `N passing`, `N pending`, `N failing`, where a failing
hook (`"before all" hook for "x"`) is one failure and the tests it kept from running are
not counted at all. Names join the describe titles and the test's with ` > `
(`math > nested > adds`). A file that cannot load stops mocha before any test runs
(`Exception during run: …`): one load failure named after the test file, its file:line
where the error is (the module it imports, for a syntax error there).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_NAMED_FAILURES,
    Event,
    bounded_join,
    first_user_frame,
    relativize,
    run_parser,
    strip_ansi,
    trim_stack,
)
from greenloop.frameworks.results import (
    closing_result,
    counts_seen,
    read_json_object,
    unclosed_note,
    undetailed,
)
from greenloop.model import Failure, ParseResult

__all__ = [
    "TextParser", "grep_pattern", "js_escape", "parse_report", "parse_text", "progress_event",
]



Kind = Literal["test", "load", "hook"]

_HOOK = re.compile(r'^"(?:before|after) (?:all|each)" hook')
_PASS = re.compile(r"^(\s*)[✔✓√] (.*?)(?: \(\d+ms\))?$")
_FAIL = re.compile(r"^(\s*)(\d+)\) (.*)$")
_PENDING = re.compile(r"^(\s*)- (\S.*)$")  # (a diff line is "-" and the value: "-4", "-    x")
_COUNT = re.compile(r"^\s+(\d+) (passing|pending|failing)(?: \((\d+)(ms|s|m)\))?$")
_DETAIL = re.compile(r"^  (\d+)\) (.*)$")
_EXCEPTION = re.compile(r"^\s*Exception during run: (.*)$")
_NO_FILES = re.compile(r"^\s*Error: No test files found")


def _stack_head(stack: str) -> list[str]:
    """The message part of a stack (the lines before the first `at …` frame)."""
    out: list[str] = []
    for line in stack.splitlines():
        if line.strip().startswith("at ") or line.strip() == "+ expected - actual":
            break
        out.append(line.strip())
    while out and not out[-1].strip():
        out.pop()
    return out


# supertest's own words, whose sides its error object leaves out (a header) or gets wrong (a
# text body: `actual` is res.body, `{}` for text): `expected "Link" of "A", got "B"`,
# `expected "Link" matching /x/, got "B"`, `expected 200 "OK", got 404 "Not Found"`,
# `expected 'hi' response body, got 'nope'`. The sides are read as the message shows them.
_SUPERTEST = (
    re.compile(r'^(?:Error: )?expected "[^"]+" (?:of|matching) (?P<exp>.+), got (?P<got>.+)$'),
    re.compile(r'^(?:Error: )?expected (?P<exp>\d{3} "[^"]*"), got (?P<got>\d{3} "[^"]*")$'),
    re.compile(r"^(?:Error: )?expected (?P<exp>.+) response body, got (?P<got>.+)$"),
)


def _supertest_sides(head: list[str]) -> tuple[str, str] | None:
    if len(head) != 1:
        return None
    for pattern in _SUPERTEST:
        m = pattern.match(head[0])
        if m:
            return m.group("exp"), m.group("got")
    return None


def _failure(name: str, kind: Kind, err: dict[str, Any], file: str | None, root: str | None) -> Failure:
    stack = str(err.get("stack") or "")
    message = str(err.get("message") or "")
    head = _stack_head(stack) or message.splitlines()
    ufile, uline = first_user_frame(stack)
    exp = err.get("expected")
    got = err.get("actual")
    sides = _supertest_sides([h for h in head if h.strip()])
    if sides is not None:
        exp, got = sides
    return Failure(
        test=name,
        file=relativize(ufile or file or "", root) or None,
        line=uline,
        message=relativize(bounded_join([h for h in head if h.strip()][:20]), root),
        expected=None if exp is None else str(exp),
        got=None if got is None else str(got),
        stack=trim_stack(stack, root),
        kind=kind,
    )


def _name(item: dict[str, Any]) -> str:
    path = item.get("titlePath")
    if isinstance(path, list) and path:
        return " > ".join(str(p) for p in path)
    return str(item.get("fullTitle") or item.get("title") or "?")


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """The JSON report; missing or invalid gives recognized=False with a note."""
    data = read_json_object(
        path, "stats", "it crashed, was killed, or a test file failed to load before any test ran",
        "a mocha JSON report",
    )
    if isinstance(data, ParseResult):
        return data
    stats = data["stats"]
    failures: list[Failure] = []
    for item in data.get("failures") or ():
        if not isinstance(item, dict):
            continue
        title = str(item.get("title") or "")
        kind: Kind = "hook" if item.get("hook") or _HOOK.match(title) else "test"
        err = item.get("err") if isinstance(item.get("err"), dict) else {}
        file = item.get("file") if isinstance(item.get("file"), str) else None
        f = _failure(_name(item), kind, err or {}, file, root)
        failures.append(f if len(failures) < MAX_DETAILED_FAILURES else undetailed(f))
    passes = [_name(p) for p in data.get("passes") or () if isinstance(p, dict)]
    pending = [_name(p) for p in data.get("pending") or () if isinstance(p, dict)]
    duration = stats.get("duration")
    counts = (int(stats.get("passes") or 0), int(stats.get("failures") or 0), int(stats.get("pending") or 0))
    return closing_result(
        counts,
        failures,
        duration_ms=int(duration) if isinstance(duration, int | float) else None,
        passed_names=passes,
        skipped_names=pending,
    )


def grep_pattern(failures: Sequence[Failure]) -> str | None:
    """`--grep` for a rerun of these failures (mocha matches it against the full title, the
    titles joined with spaces): each failing test's full title, anchored; for a failing
    hook, its describe's title as a prefix (every test under it)."""
    alts: list[str] = []
    for f in failures:
        if f.kind == "load" or not f.test:
            continue
        parts = f.test.split(" > ")
        if f.kind == "hook" or _HOOK.match(parts[-1]):
            if len(parts) < 2:
                return None  # a root-level hook: every test is affected
            alts.append(" ".join(js_escape(p) for p in parts[:-1]) + " ")
        else:
            alts.append(" ".join(js_escape(p) for p in parts) + "$")
    alts = list(dict.fromkeys(alts))
    return f"^(?:{'|'.join(alts)})" if alts else None


def js_escape(text: str) -> str:
    """Escape a title for a JavaScript RegExp (only its special characters: a Python-escaped
    space or letter would be an error under the `u` flag)."""
    return re.sub(r"[.*+?^${}()|\[\]\\/]", lambda m: "\\" + m.group(0), text)


@dataclass
class TextParser:
    """Streaming parser of mocha's text output: `feed` one line at a time, then `finish`."""

    root: str | None = None
    stack: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    duration_ms: int | None = None
    progress: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)  # the spec reporter's pending `- title`
    failures: list[Failure] = field(default_factory=list)
    in_details: bool = False
    title: list[str] = field(default_factory=list)  # the detail header being read
    header_done: bool = False
    body: list[str] = field(default_factory=list)
    load: list[str] | None = None  # lines of an "Exception during run"
    load_errors: list[str] = field(default_factory=list)

    def _close(self) -> None:
        if not self.title:
            return
        name = " > ".join(t.strip() for t in self.title)
        body, self.body, self.title, self.header_done = self.body, [], [], False
        if len(self.failures) >= MAX_NAMED_FAILURES:
            return
        leaf = name.rsplit(" > ", 1)[-1]
        kind: Kind = "hook" if _HOOK.match(leaf) else "test"
        if len(self.failures) >= MAX_DETAILED_FAILURES:
            self.failures.append(Failure(test=name, kind=kind))
            return
        text = "\n".join(body)
        exp, got = _diff(body)
        f = _failure(name, kind, {"stack": text}, None, self.root)
        self.failures.append(f._replace(expected=exp, got=got))

    def _close_load(self) -> None:
        if self.load is None:
            return
        lines, self.load = self.load, None
        text = "\n".join(lines)
        ufile, uline = first_user_frame(text)
        # the outermost frame in the workspace is the test file mocha was loading
        spec, _ = first_user_frame("\n".join(reversed(text.splitlines())))
        head = [ln.strip() for ln in _stack_head(text) if ln.strip()]
        # node prints a SyntaxError as "file:line", the code and caret, then the error
        errors = [h for h in head if re.match(r"^[A-Z]\w*(?:Error|Exception)\b", h)] or head[:1]
        where = re.match(r"^(/\S+?):(\d+)$", head[0]) if head else None
        if where:
            ufile, uline = where.group(1), int(where.group(2))
        name = relativize(spec or ufile or "", self.root) or "mocha"
        message = relativize(bounded_join(errors[:5]), self.root) or "a test file failed to load"
        self.load_errors.append(f"{name}: {message.splitlines()[0]}")
        file = relativize(ufile, self.root) if ufile else None
        self.failures.append(Failure(test=name, file=file, line=uline, message=message,
                                     stack=trim_stack(text, self.root), kind="load"))

    def feed(self, raw: str) -> None:
        """Read one line of mocha's output."""
        line = strip_ansi(raw)
        if self.load is not None:
            if len(self.load) < 120:
                self.load.append(line)
            return
        m = _EXCEPTION.match(line)
        if m or _NO_FILES.match(line):
            self._close()
            self.load = [m.group(1)] if m else [line.strip()]
            return
        c = _COUNT.match(line)
        if c:
            self.counts[c.group(2)] = int(c.group(1))
            if c.group(3):
                unit = {"ms": 1, "s": 1000, "m": 60000}[c.group(4)]
                self.duration_ms = int(c.group(3)) * unit
            if c.group(2) == "failing":
                self.in_details = True
            return
        if self.in_details:
            self._detail(line)
            return
        self._listing(line)

    def _listing(self, line: str) -> None:
        if not line.strip():
            return
        indent = len(line) - len(line.lstrip())
        level = max(indent // 2 - 1, 0)
        m = _PASS.match(line)
        if m:
            self.progress["pass"] += 1
            self.passed_names.append(" > ".join([*self.stack[:level], m.group(2)]))
            return
        m = _FAIL.match(line)
        if m:
            self.progress["fail"] += 1
            return
        m = _PENDING.match(line)
        if m:
            self.progress["skip"] += 1
            self.skipped_names.append(" > ".join([*self.stack[:level], m.group(2)]))
            return
        if indent >= 2:
            self.stack = [*self.stack[:level], line.strip()]

    def _detail(self, line: str) -> None:
        m = _DETAIL.match(line)
        if m:
            self._close()
            self.title = [m.group(2)]
            self.header_done = m.group(2).endswith(":")
            if self.header_done:
                self.title[-1] = self.title[-1][:-1]
            return
        if not self.title:
            return
        if not self.header_done:
            s = line.strip()
            if s.endswith(":"):
                self.title.append(s[:-1])
                self.header_done = True
            elif s:
                self.title.append(s)
            return
        if len(self.body) < 200:
            self.body.append(line)

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        self._close()
        self._close_load()
        notes: list[str] = []
        recognized = "passing" in self.counts or "failing" in self.counts
        if recognized:
            passed = self.counts.get("passing", 0)
            failed = self.counts.get("failing", 0)
            skipped = self.counts.get("pending", 0)
        else:
            passed, failed, skipped = counts_seen(self.progress, len(self.failures))
            if self.load_errors:
                recognized = True  # mocha stopped before running anything: the load error is the result
            else:
                notes.append(unclosed_note(
                    (passed, failed, skipped),
                    "mocha's closing 'N passing'/'N failing' lines were not found",
                    "no mocha output was recognised (no spec reporter lines, no closing counts)",
                ))
        return closing_result(
            (passed, failed, skipped), self.failures, notes=notes, recognized=recognized,
            duration_ms=self.duration_ms, load_errors=self.load_errors, passed_names=self.passed_names,
            skipped_names=self.skipped_names,
        )


def _diff(body: Iterable[str]) -> tuple[str | None, str | None]:
    """mocha's `+ expected - actual` diff: `-` lines are the actual value, `+` the expected."""
    lines = list(body)
    for i, raw in enumerate(lines):
        if raw.strip() != "+ expected - actual":
            continue
        indent = len(raw) - len(raw.lstrip())
        exp: list[str] = []
        got: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        while j < len(lines) and lines[j].strip() and not lines[j].strip().startswith("at "):
            seg = lines[j][indent:]
            sign, rest = seg[:1], seg[1:]
            if sign == "-":
                got.append(rest)
            elif sign == "+":
                exp.append(rest)
            else:
                exp.append(rest)
                got.append(rest)
            j += 1
        if exp or got:
            return "\n".join(exp), "\n".join(got)
    return None, None


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse mocha's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "mocha")


def progress_event(line: str) -> Event | None:
    """The spec reporter's `✔ name`, `N) name` and `- name` lines (before its closing counts)."""
    s = strip_ansi(line)
    if _PASS.match(s):
        return "pass"
    if _FAIL.match(s) and not _DETAIL.match(s):
        return "fail"
    if _PENDING.match(s) and s.startswith("    "):
        return "skip"
    return None
