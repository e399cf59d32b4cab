"""bun test: its JUnit report (`--reporter=junit --reporter-outfile=FILE`) and its default
text output (on stderr: `file.test.ts:`, the failure's code frame and error before each
`(fail) a > b [0.1ms]` line (`✗ a > b` with colour), ` 2 pass`/` 1 fail`, `Ran N tests across M files.`).

Counting is bun's closing lines: passed = pass, failed = fail (bun counts an error outside
any test, such as a file that cannot load, as a failure too), skipped = skip + todo.
Names join the describe titles and the test's with ` > `, as bun prints them. A failing
beforeAll/afterAll shows as `(fail) describe > (unnamed)`: a hook failure. An error
outside any test in a file that ran no test (`# Unhandled error between tests` with a
missing module or a syntax error) is a load failure named after the file. bun writes no
JUnit report when such an error happens, so the text output is then the whole result.
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_NAMED_FAILURES,
    Event,
    bounded_join,
    diff_sides,
    expected_got,
    first_user_frame,
    relativize,
    run_parser,
    strip_ansi,
    trim_stack,
)
from greenloop.frameworks.results import (
    closing_result,
    counts_seen,
    unclosed_note,
    undetailed,
)
from greenloop.model import Failure, ParseResult

__all__ = [
    "TextParser",
    "name_filter",
    "parse_report",
    "parse_text",
    "progress_event",
    "test_files",
    "with_text_errors",
]

Kind = Literal["test", "load", "hook"]

# "(pass) name" without colour; "✓ name", "✗", "»" and "✎" with it
_RESULT = re.compile(r"^(?:\((pass|fail|skip|todo)\)|([✓✗»✎])) (.*?)(?: \[[\d.]+m?s\])?$")
_MARKS = {"✓": "pass", "✗": "fail", "»": "skip", "✎": "todo"}
_FILE = re.compile(r"^(\S.*\.(?:[cm]?[jt]sx?)):$")
_COUNT = re.compile(r"^\s*(\d+) (pass|fail|skip|todo|errors?|snapshots?|expect\(\) calls)\b")
_RAN = re.compile(r"^Ran (\d+) tests? across (\d+) files?\.(?: \[([\d.]+)(ms|s)\])?")
_CODE = re.compile(r"^\s*\d+ \| ")
_UNHANDLED = "# Unhandled error between tests"
_UNNAMED = "(unnamed)"
_EVENT: dict[str, Event] = {"pass": "pass", "fail": "fail", "skip": "skip", "todo": "skip"}


def _details(lines: Sequence[str]) -> tuple[list[str], str | None, str | None]:
    """(message lines, expected, got) of one failure's error text (code frame dropped)."""
    body = [ln for ln in lines if not _CODE.match(ln) and ln.strip() != "^"]
    body = [ln for ln in body if not re.match(r"^\s*\^\s*$", ln)]
    message: list[str] = []
    for ln in body:
        s = ln.strip()
        if s.startswith("at "):
            break
        message.append(ln.rstrip())
    while message and not message[0].strip():
        message.pop(0)
    exp, got = expected_got([m.strip() for m in message])
    if exp is None and got is None:
        # toEqual's diff comes before its legend ("- Expected  - 1" / "+ Received  + 1")
        legend = next((i for i, m in enumerate(message) if m.strip().startswith("- Expected")), None)
        if legend is not None:
            seg = [m for m in message[1:legend] if m.strip()]
            sides = diff_sides(seg)
            if sides:
                exp, got = sides
                message = message[:1]  # the diff is in expected/got; the matcher line says what failed
    short = [m.strip() for m in message if m.strip()]
    if short and short[0].startswith("error: "):
        short[0] = short[0][len("error: ") :]
    return short, exp, got


def _failure(name: str, kind: Kind, lines: Sequence[str], root: str | None, file: str | None,
             line: int | None) -> Failure:
    message, exp, got = _details(lines)
    stack = "\n".join(ln for ln in lines if ln.strip().startswith("at "))
    ufile, uline = first_user_frame(stack)
    return Failure(
        test=name,
        file=relativize(ufile or file or "", root) or None,
        line=uline or line,
        message=relativize(bounded_join(message[:20]), root),
        expected=exp,
        got=got,
        stack=trim_stack(stack, root),
        kind=kind,
    )


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """bun's JUnit report; missing or invalid gives recognized=False with a note."""
    try:
        return _parse_report(path, root)
    except FileNotFoundError:
        return ParseResult(notes=(f"report {path} is missing: bun did not write it (it writes none when a "
                                  "test file fails to load, or it crashed or was killed)",))
    except (ET.ParseError, OSError, ValueError) as exc:
        return ParseResult(notes=(f"report {path} is not valid JUnit XML ({type(exc).__name__}: {exc})",))


def _parse_report(path: str, root: str | None) -> ParseResult:
    failures: list[Failure] = []
    passed_names: list[str] = []
    skipped_names: list[str] = []  # <skipped/> and todo's <skipped message="TODO"/>
    passed = failed = skipped = 0
    suites: list[str] = []
    files: list[str | None] = []
    # what a testcase's name starts with: the titles of the <testsuite>s inside the file's
    # (those are describe blocks), each followed by " > "; redone only when a suite opens or closes
    prefix = ""
    duration: float | None = None
    saw_root = False
    for event, el in ET.iterparse(path, events=("start", "end")):
        tag = el.tag
        if event == "start":
            if tag == "testsuites":
                saw_root = True
                with contextlib.suppress(TypeError, ValueError):
                    duration = float(el.get("time") or "")
            elif tag == "testsuite":
                saw_root = True
                suites.append(el.get("name") or "")
                files.append(el.get("file"))
                prefix = "".join(f"{title} > " for title in suites[1:])
            continue
        if tag == "testsuite":
            if suites:
                suites.pop()
                files.pop()
                prefix = "".join(f"{title} > " for title in suites[1:])
            el.clear()
            continue
        if tag != "testcase":
            continue
        case = el.get("name") or ""
        name = prefix + case
        if len(el) == 0:  # most testcases: passed, nothing inside
            passed += 1
            passed_names.append(name)
            el.clear()
            continue
        bad = next((c for c in el if c.tag in ("failure", "error")), None)
        skip = next((c for c in el if c.tag == "skipped"), None)
        if bad is not None:
            failed += 1
            if len(failures) < MAX_NAMED_FAILURES:
                kind: Kind = "hook" if case == _UNNAMED else "test"
                text = strip_ansi(bad.text or "")
                ftype = bad.get("type") or ""
                lines = text.splitlines()
                if lines and ftype and lines[0].startswith(ftype + ": "):
                    lines[0] = lines[0][len(ftype) + 2 :]
                file = el.get("file") or (files[-1] if files else None)
                line_attr = el.get("line")
                f = _failure(name, kind, lines, root, file, int(line_attr) if line_attr else None)
                if ftype and ftype not in ("AssertionError", "Error"):
                    f = f._replace(message=f"{ftype}: {f.message}")
                failures.append(f if len(failures) < MAX_DETAILED_FAILURES else undetailed(f))
        elif skip is not None:
            skipped += 1
            skipped_names.append(name)
        else:
            passed += 1
            passed_names.append(name)
        el.clear()
    if not saw_root:
        return ParseResult(notes=(f"report {path} has no <testsuites>/<testsuite> element: not JUnit XML",))
    return closing_result(
        (passed, failed, skipped),
        failures,
        duration_ms=int(duration * 1000) if duration is not None else None,
        passed_names=passed_names,
        skipped_names=skipped_names,
    )


# "  ^ this test timed out after 50ms." / "  ^ this test is marked as failing but it passed. …"
_AFTER_FAIL = re.compile(r"^\s*\^ (this test .+)$")
_SILENT = re.compile(r"\A\s*(?:TimeoutError:?)?\s*\Z")  # what the JUnit report says of either


@dataclass
class TextParser:
    """Streaming parser of bun test's text output: `feed` one line at a time, then `finish`."""

    root: str | None = None
    file: str | None = None
    file_results: int = 0
    body: list[str] = field(default_factory=list)
    unhandled: list[str] | None = None  # lines of a "# Unhandled error between tests" block
    dashes: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    ran: int | None = None
    duration_ms: int | None = None
    progress: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    failures: list[Failure] = field(default_factory=list)
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)  # `(skip)` and `(todo)` lines
    load_errors: list[str] = field(default_factory=list)
    reported_load: Failure | None = None  # the last load failure bun printed an error for
    after_fail: int | None = None  # the failure a "  ^ this test …" line right after it belongs to

    def feed(self, raw: str) -> None:
        """Read one line of bun test's output."""
        line = strip_ansi(raw)
        if self.unhandled is not None:
            if line.startswith("-------"):
                self.dashes += 1
                if self.dashes >= 2:
                    self._unhandled()
                return
            if len(self.unhandled) < 120:
                self.unhandled.append(line)
            return
        if line.strip() == _UNHANDLED:
            self.unhandled, self.dashes = [], 0
            return
        m = _RESULT.match(line)
        if m:
            self._result(m.group(1) or _MARKS[m.group(2)], m.group(3))
            return
        f = _FILE.match(line)
        if f and not line.startswith(" "):
            self.file, self.file_results, self.body = f.group(1), 0, []
            return
        r = _RAN.match(line.strip())
        if r:
            self.ran = int(r.group(1))
            if r.group(3):
                self.duration_ms = int(float(r.group(3)) * (1 if r.group(4) == "ms" else 1000))
            return
        c = _COUNT.match(line)
        if c and line.startswith(" ") and not _CODE.match(line):
            key = c.group(2)
            self.counts["errors" if key.startswith("error") else key] = int(c.group(1))
            return
        note = _AFTER_FAIL.match(line)
        if note and not self.body and self.after_fail is not None:  # "(fail) x" then "  ^ this test …"
            self._add_note(self.after_fail, note.group(1))
            return
        self.after_fail = None
        if len(self.body) < 200:
            self.body.append(line)

    def _add_note(self, index: int, note: str) -> None:
        """bun says why a test failed on the line after its result when nothing was thrown
        (a timeout, a .failing test that passed): that is the failure's message."""
        f = self.failures[index]
        self.failures[index] = f._replace(message=f"{note}\n{f.message}".strip() if f.message else note)

    def _result(self, status: str, name: str) -> None:
        self.file_results += 1
        self.after_fail = None
        body, self.body = self.body, []
        self.progress[_EVENT[status]] += 1
        if status == "pass":
            self.passed_names.append(name)
            return
        if status in ("skip", "todo"):
            self.skipped_names.append(name)
            return
        if status != "fail" or len(self.failures) >= MAX_NAMED_FAILURES:
            return
        kind: Kind = "hook" if name.endswith(_UNNAMED) else "test"
        if len(self.failures) >= MAX_DETAILED_FAILURES:
            self.failures.append(Failure(test=name, kind=kind))
            return
        self.failures.append(_failure(name, kind, body, self.root, self.file, None))
        self.after_fail = len(self.failures) - 1

    def _unhandled(self) -> None:
        lines, self.unhandled = self.unhandled or [], None
        name = relativize(self.file, self.root) if self.file else "bun"
        kind: Kind = "load" if self.file_results == 0 else "test"
        test = name if kind == "load" else f"{name} > (unhandled error)"
        f = _failure(test, kind, lines, self.root, self.file, None)
        if kind == "load":
            f = self._silent_load(f)
            self.load_errors.append(f"{name}: {(f.message.splitlines() or ['failed to load'])[0]}")
        if len(self.failures) < MAX_NAMED_FAILURES:
            self.failures.append(f)

    def _silent_load(self, f: Failure) -> Failure:
        """A load failure bun printed no error for gets the error of the last file it did.

        bun prints a module's load error once, for the first test file that imports it; every
        later file that imports the same module fails with an empty "Unhandled error between
        tests" block (a suite whose shared setup cannot load: 128 of 130 files with no message).
        Each of those gets that earlier error, said to be bun's report of the other file."""
        if f.message:
            self.reported_load = f
            return f
        said = self.reported_load
        if said is None:
            return f
        first = said.message.splitlines()[0]
        why = ("bun printed no error for this file: it reports a module that cannot load once, for "
               f"the first test file that imports it, here {said.test}")
        return f._replace(message=f"{first}\n({why})")

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        if self.unhandled is not None:
            self._unhandled()
        notes: list[str] = []
        recognized = self.ran is not None
        if recognized:
            c = self.counts
            passed, failed = c.get("pass", 0), c.get("fail", 0)
            skipped = c.get("skip", 0) + c.get("todo", 0)
        else:
            passed, failed, skipped = counts_seen(self.progress, len(self.failures))
            notes.append(unclosed_note(
                (passed, failed, skipped),
                "bun's closing 'Ran N tests across M files' line was not found",
                "no bun test output was recognised (no (pass)/(fail) lines, no closing counts)",
            ))
        return closing_result(
            (passed, failed, skipped), self.failures, notes=notes, recognized=recognized,
            duration_ms=self.duration_ms, load_errors=self.load_errors, passed_names=self.passed_names,
            skipped_names=self.skipped_names,
        )


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse bun test's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "bun")


def progress_event(line: str) -> Event | None:
    """`(pass)`, `(fail)`, `(skip)` and `(todo)` lines (`✓`, `✗`, `»`, `✎` with colour)."""
    m = _RESULT.match(strip_ansi(line))
    return _EVENT[m.group(1) or _MARKS[m.group(2)]] if m else None


def name_filter(failures: Sequence[Failure]) -> str | None:
    """`-t` for a rerun of these failures. bun matches it against the full name, titles joined
    with spaces; greenloop names join them with ` > `, so either separator matches. A failing
    test's name is anchored; a failing hook (`db > (unnamed)`) reruns its describe block (its
    title as a prefix). None: a hook outside any describe, or nothing to name."""
    from greenloop.frameworks.mocha import js_escape

    sep = "(?: > | › | )"
    alts: list[str] = []
    for f in failures:
        if f.kind == "load" or not f.test:
            continue
        parts = f.test.split(" > ")
        if f.kind == "hook" or parts[-1] == _UNNAMED:
            if len(parts) < 2:
                return None
            alts.append(sep.join(js_escape(p) for p in parts[:-1]) + sep)
        else:
            alts.append(sep.join(js_escape(p) for p in parts) + "$")
    alts = list(dict.fromkeys(alts))
    return f"^(?:{'|'.join(alts)})" if alts else None


def test_files(files: Sequence[str]) -> list[str]:
    """bun takes a bare argument as a name filter; a path must start with ./ or /."""
    return [f if f.startswith(("./", "/", "../")) else f"./{f}" for f in files]


def _with_text_messages(report: ParseResult, text: ParseResult) -> ParseResult:
    """The report's failures whose message is empty or only `TimeoutError:` (bun's JUnit has no
    words for a timeout or a .failing test that passed) with the text output's message."""
    said = {f.test: f.message for f in text.failures if f.message}
    failures = tuple(
        f._replace(message=said[f.test]) if _SILENT.match(f.message) and f.test in said else f
        for f in report.failures
    )
    return report._replace(failures=failures) if failures != report.failures else report


def with_text_errors(report: ParseResult, text: ParseResult) -> ParseResult:
    """The JUnit report's result plus the errors outside any test that only the text shows
    (bun counts each among its failures, and leaves them out of the report), and the text's
    words for failures the report gives none."""
    report = _with_text_messages(report, text)
    known = {f.test for f in report.failures}
    extra = tuple(f for f in text.failures
                  if (f.kind == "load" or f.test.endswith("(unhandled error)")) and f.test not in known)
    if not extra:
        return report
    s = report.summary
    names = ", ".join(f.test for f in extra[:3]) + (" …" if len(extra) > 3 else "")
    return report._replace(
        summary=s._replace(total=s.total + len(extra), failed=s.failed + len(extra)),
        failures=(*report.failures, *extra),
        notes=(*report.notes, f"bun's JUnit report leaves out errors outside tests; {len(extra)} taken "
                              f"from its text output: {names}"),
        load_error=report.load_error or text.load_error,
    )
