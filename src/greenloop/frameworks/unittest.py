"""unittest: greenloop's report (frameworks/unittest_runner/, planned by plan.py) and the text
runner's output at the default verbosity (a row of `.F.sEx`) and at -v (`name (id) ... ok`).

Counting is unittest's closing lines: `Ran N tests` and `FAILED (failures=1, errors=2,
skipped=1, expected failures=1, unexpected successes=1)`. failed = failures + errors +
unexpected successes; skipped = skipped + expected failures; passed = the tests that
succeeded (a failing subtest is one failure each, as unittest counts it). Names are unittest
ids (`test_mod.TestCase.test_x`, `… (i=2)` for a subtest); a module that failed to import
is a load failure named after the module; a failing setUpClass/setUpModule is a hook failure
named as unittest writes it (`setUpClass (test_mod.TestCase)`).
"""

from __future__ import annotations

import ast
import re
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
    "TextParser",
    "call_args",
    "expected_got",
    "first_second",
    "parse_report",
    "parse_text",
    "progress_counts",
    "progress_event",
    "report_failure",
    "rerun_ids",
]

Kind = Literal["test", "load", "hook"]

_SEPARATOR_EQ = "=" * 70
_SEPARATOR_DASH = "-" * 70
_HEADER = re.compile(r"^(FAIL|ERROR|UNEXPECTED SUCCESS): (.+)$")
_RAN = re.compile(r"^Ran (\d+) tests? in ([\d.]+)s$")
_CLOSING = re.compile(r"^(OK|FAILED)(?: \((.*)\))?$|^NO TESTS RAN(?: \((.*)\))?$")
_V_LINE = re.compile(
    r"^(.*?) \.\.\. (ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$"
)
_V_START = re.compile(r"^(.*?) \.\.\. ")
_V_STATUS = re.compile(r"^(ok|FAIL|ERROR|skipped\b.*|expected failure|unexpected success)$")
_DOTS = re.compile(r"^[.FEsxu]+$")
_DOT_EVENT: dict[str, Event] = {".": "pass", "F": "fail", "E": "fail", "u": "fail", "s": "skip", "x": "skip"}
_V_EVENT: dict[str, Event] = {
    "ok": "pass", "FAIL": "fail", "ERROR": "fail", "unexpected success": "fail", "expected failure": "skip",
}
# "test_x (pkg.mod.Class.test_x)" (3.11+), "test_x (pkg.mod.Class)" (older), with a subtest's
# "(i=1)" after it; "setUpClass (pkg.mod.Class)"; "test_mod (unittest.loader._FailedTest.test_mod)"
_DESC = re.compile(r"^(\w+) \(([\w.]+)\)(?: (\(.*\)))?$")
_FAILED_TEST = "unittest.loader._FailedTest"
_HOOKS = ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule")
_EXC_LINE = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Exit|Interrupt|Warning)|AssertionError)(?:: (.*))?$"
)
_NOT_EQUAL = re.compile(r"^(?:AssertionError: )?(?:[A-Z]\w* differ: )?(.+?) != (.+?)(?: : .*)?$")


def _name(desc: str) -> tuple[str, Kind]:
    """A failure header's description -> (greenloop name, kind)."""
    m = _DESC.match(desc.strip())
    if not m:
        return desc.strip(), "test"
    method, where, sub = m.group(1), m.group(2), m.group(3)
    if where.startswith(_FAILED_TEST):
        return method, "load"
    if method in _HOOKS:
        return desc.strip(), "hook"
    test_id = where if where.endswith("." + method) else f"{where}.{method}"
    return f"{test_id} {sub}" if sub else test_id, "test"


def expected_got(message: str, traceback: str = "") -> tuple[str | None, str | None]:
    """assertEqual's `first != second` (also `Lists differ: [1] != [2]`, `… : msg`) as
    (expected, got). unittest's arguments carry no roles, so the call in `traceback` decides
    where it shows them: the literal, or the argument named expected/want, is the expected
    value, whichever side it is on (`assertEqual(5, add(2, 3))` expects 5). With no such sign
    neither is: (None, None), and the hint says "first" and "second" (hints/hint.py)."""
    pair = first_second(message)
    side = _expected_side(traceback) if pair is not None else None
    if pair is None or side is None:
        return None, None
    return pair if side == 0 else (pair[1], pair[0])


def first_second(message: str) -> tuple[str, str] | None:
    """assertEqual's two values as its message shows them (`first != second`), in call order."""
    for line in message.splitlines():
        m = _NOT_EQUAL.match(line.strip())
        if m:
            return m.group(1).strip(), m.group(2).strip()
    return None


def call_args(line: str) -> tuple[ast.expr, ast.expr] | None:
    """The first two arguments of the call on one source line (`self.assertEqual(a, b)`,
    stripped), else None (not one whole call)."""
    try:
        node = ast.parse(line.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.Call) or len(node.args) < 2:
        return None
    return node.args[0], node.args[1]


_ASSERT_EQUAL_CALL = re.compile(r"^\s*self\.assert(?:Equals?|\w+Equal)\(")
_EXPECTED_NAMES = frozenset({"expected", "expect", "exp", "want", "wanted", "expected_value"})
_GOT_NAMES = frozenset({"actual", "got", "result", "res", "value", "observed", "output"})


def _expected_side(traceback: str) -> int | None:
    """0 or 1: which argument of the traceback's last assertEqual call is the expected value,
    as the call itself shows; None when it does not (both or neither a literal, or a call that
    spans lines)."""
    calls = [ln for ln in traceback.splitlines() if _ASSERT_EQUAL_CALL.match(ln)]
    args = call_args(calls[-1]) if calls else None
    if args is None:
        return None
    marks = [_role(a) for a in args]
    if marks[0] == "expected" and marks[1] != "expected":
        return 0
    if marks[1] == "expected" and marks[0] != "expected":
        return 1
    if marks[0] == "got" and marks[1] != "got":
        return 1
    if marks[1] == "got" and marks[0] != "got":
        return 0
    return None


def _role(arg: ast.expr) -> str | None:
    if isinstance(arg, ast.Name):
        name = arg.id.lower()
        return "expected" if name in _EXPECTED_NAMES or name.startswith("expected_") else (
            "got" if name in _GOT_NAMES else None)
    try:
        ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return "expected"


_DOCTEST_PLACE = re.compile(r'^File "(?P<file>[^"]+)", line (?P<line>\d+), in \S+$')


def _doctest_block(lines: list[str], start: int) -> str:
    """The indented lines after `lines[start]` (doctest's `Expected:`/`Got:`), dedented."""
    out: list[str] = []
    for ln in lines[start + 1 :]:
        if not ln.startswith("    "):
            break
        out.append(ln[4:])
    return "\n".join(out)


def _doctest_example(message: str) -> tuple[str, int, str | None, str | None, str] | None:
    """(file, line, expected, got, its block) of the first failing example of a doctest failure
    (`Failed doctest test for …`): doctest prints `Expected:` and `Got:` (or `Exception
    raised:`, which has no expected value to compare) under the example's own place."""
    if "Failed doctest test for" not in message:
        return None
    lines = message.splitlines()
    for i, ln in enumerate(lines):
        m = _DOCTEST_PLACE.match(ln.strip())
        if m is None or i + 1 >= len(lines) or lines[i + 1].strip() != "Failed example:":
            continue
        expected = got = None
        end = len(lines)
        for j in range(i + 2, len(lines)):
            head = lines[j].strip()
            if head == "Expected:":
                expected = _doctest_block(lines, j)
            elif head == "Got:":
                got = _doctest_block(lines, j)
            elif head in ("Got nothing", "Expected nothing"):
                got = "" if head == "Got nothing" else got
                expected = "" if head == "Expected nothing" else expected
            elif head.startswith("-----"):
                end = j
                break
        block = "\n".join(lines[i:end])
        return m.group("file"), int(m.group("line")), expected, got, block
    return None


def _exception_lines(text: str) -> list[str]:
    """The exception lines of a traceback: its last `Type: message` and what follows it,
    plus (for a module that failed to import) the import error's own last line."""
    lines = text.rstrip("\n").splitlines()
    starts = [i for i, ln in enumerate(lines) if _EXC_LINE.match(ln)]
    if not starts:
        return [ln for ln in lines if ln.strip()][-3:]
    first = lines[starts[0]]
    tail = lines[starts[-1]:]
    out = [first] if starts[0] != starts[-1] and first.startswith("ImportError") else []
    return out + tail


def _failure(name: str, kind: Kind, text: str, root: str | None, file: str | None = None,
             line: int | None = None, message: str | None = None) -> Failure:
    exc = _exception_lines(text) if text else []
    msg = message if message is not None and kind != "load" else "\n".join(exc)
    ufile, uline = first_user_frame(_last_user_frames(text))
    if kind == "load" or file is None:
        file, line = ufile or file, uline or line
    exp, got = expected_got(msg, text)
    example = _doctest_example(msg)
    if example is not None:  # a DocTestSuite failure: its first failing example is the place
        file, line, exp, got, block = example
        text = block  # its stack: that example, not the doctest runner's frames
    return Failure(
        test=name,
        file=relativize(file, root) if file else None,
        line=line,
        message=relativize(bounded_join([m for m in msg.splitlines()][:20]), root),
        expected=exp,
        got=got,
        stack=trim_stack(text, root),
        kind=kind,
    )


def _last_user_frames(text: str) -> str:
    """The traceback's frames, deepest first, so `first_user_frame` finds the deepest one in
    the workspace (Python prints the outermost first)."""
    frames = [ln for ln in text.splitlines() if ln.lstrip().startswith('File "')]
    return "\n".join(reversed(frames))


def rerun_ids(failures: Any) -> list[str]:
    """What `python -m unittest` takes to rerun these failures: test ids (a subtest's parent
    test), the class of a failing setUpClass, the module of a load failure."""
    out: list[str] = []
    for f in failures:
        name = str(f.test)
        if f.kind == "hook":
            m = _DESC.match(name)
            name = m.group(2) if m else ""
        elif f.kind == "test":
            name = name.split(" ", 1)[0]
        if name and re.match(r"^[\w.]+$", name) and name not in out:
            out.append(name)
    return out


# ------------------------------------------------------------------ greenloop's report


def report_failure(item: dict[str, Any], root: str | None) -> Failure:
    """One failure as greenloop's runner records it (in its report and its stream)."""
    kind_s = item.get("kind")
    kind: Kind = "load" if kind_s == "load" else "hook" if kind_s == "hook" else "test"
    file = item.get("file") if isinstance(item.get("file"), str) else None
    line = item.get("line") if isinstance(item.get("line"), int) else None
    text = str(item.get("traceback") or "")
    return _failure(str(item.get("id") or "?"), kind, text, root, file, line, str(item.get("message") or ""))


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """greenloop's unittest report; missing or invalid gives recognized=False with a note."""
    data = read_json_object(
        path, "counts", "it crashed, was killed or could not start greenloop's unittest runner",
        "greenloop's unittest report",
    )
    if isinstance(data, ParseResult):
        return data
    c = {str(k): int(v) for k, v in data["counts"].items() if isinstance(v, int)}
    failed = c.get("failures", 0) + c.get("errors", 0) + c.get("unexpected_successes", 0)
    skipped = c.get("skipped", 0) + c.get("expected_failures", 0)
    failures: list[Failure] = []
    load_errors: list[str] = []
    for item in data.get("failures") or ():
        if not isinstance(item, dict):
            continue
        f = report_failure(item, root)
        if f.kind == "load":
            last = f.message.splitlines()[-1] if f.message else "failed to import"
            load_errors.append(f"{f.test}: {last}")
        failures.append(f if len(failures) < MAX_DETAILED_FAILURES else undetailed(f))
    notes: tuple[str, ...] = ()
    omitted = data.get("omitted")
    if isinstance(omitted, int) and omitted > 0:
        notes = (f"{omitted} more failure(s) are counted but not detailed in the report",)
    duration = data.get("duration")
    return closing_result(
        (c.get("passed", 0), failed, skipped),
        failures,
        notes=notes,
        duration_ms=int(duration * 1000) if isinstance(duration, int | float) else None,
        load_errors=load_errors,
        passed_names=(str(n) for n in data.get("passed") or () if isinstance(n, str)),
        skipped_names=(str(n) for n in data.get("skipped") or () if isinstance(n, str)),
    )


# ------------------------------------------------------------------ text output


@dataclass
class TextParser:
    """Streaming parser of unittest's text output: `feed` one line at a time, then `finish`."""

    root: str | None = None
    state: Literal["", "header", "body"] = ""
    current: tuple[str, Kind] | None = None
    body: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)  # -v's skipped and expected failures
    progress: dict[str, int] = field(default_factory=lambda: {"pass": 0, "fail": 0, "skip": 0})
    ran: int | None = None
    duration_ms: int | None = None
    closing: dict[str, int] | None = None
    load_errors: list[str] = field(default_factory=list)
    pending_desc: str = ""

    def _close(self) -> None:
        if self.current is None:
            return
        name, kind = self.current
        self.current = None
        body, self.body = self.body, []
        if len(self.failures) >= MAX_NAMED_FAILURES:
            return
        if len(self.failures) >= MAX_DETAILED_FAILURES:
            self.failures.append(Failure(test=name, kind=kind))
            return
        f = _failure(name, kind, "\n".join(body), self.root)
        if kind == "load":
            last = f.message.splitlines()[-1] if f.message else "failed to import"
            self.load_errors.append(f"{name}: {last}")
        self.failures.append(f)

    def feed(self, raw: str) -> None:
        """Read one line of unittest's output."""
        line = strip_ansi(raw)
        if line == _SEPARATOR_EQ:
            self._close()
            self.state = "header"
            return
        if self.state == "header":
            m = _HEADER.match(line)
            if m:
                self.current = _name(m.group(2))
                if m.group(1) == "UNEXPECTED SUCCESS":
                    self.body = ["unexpected success: the test is marked expectedFailure but passed"]
                return
            if line == _SEPARATOR_DASH:
                self.state = "body"
                return
        if line == _SEPARATOR_DASH:
            # the dashes before "Ran N tests" end the last failure's body
            self._close()
            self.state = ""
            return
        if self.state == "body":
            if len(self.body) < 200:
                self.body.append(line)
            return
        m = _RAN.match(line)
        if m:
            self.ran = int(m.group(1))
            self.duration_ms = int(float(m.group(2)) * 1000)
            return
        if self.ran is not None:
            c = _CLOSING.match(line.strip())
            if c:
                self._closing(c.group(2) or c.group(3) or "")
                return
        v = _V_LINE.match(line)
        if v:
            self._status((self.pending_desc or v.group(1)).strip(), v.group(2))
            return
        if self.pending_desc and _V_STATUS.match(line):
            # -v when the test printed something: its status ends a later line
            self._status(self.pending_desc, line)
            return
        start = _V_START.match(line)
        if start:
            self.pending_desc = start.group(1).strip()
            return
        if _DOTS.match(line):
            for ch in line:
                self.progress[_DOT_EVENT[ch]] += 1
            return
        if _DESC.match(line.strip()):
            self.pending_desc = line.strip()  # -v with a docstring: the description comes first

    def _status(self, desc: str, status: str) -> None:
        self.pending_desc = ""
        ev = _V_EVENT.get(status, "skip")
        self.progress[ev] += 1
        if ev == "pass":
            self.passed_names.append(_name(desc)[0])
        elif ev == "skip":
            self.skipped_names.append(_name(desc)[0])

    def _closing(self, inner: str) -> None:
        counts: dict[str, int] = {}
        for part in inner.split(","):
            if "=" in part:
                k, _, v = part.strip().partition("=")
                if v.isdigit():
                    counts[k.strip()] = int(v)
        self.closing = counts

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        self._close()
        notes: list[str] = []
        if self.closing is not None and self.ran is not None:
            c = self.closing
            hooks = sum(1 for f in self.failures if f.kind == "hook")
            failed = c.get("failures", 0) + c.get("errors", 0) + c.get("unexpected successes", 0)
            skipped = c.get("skipped", 0) + c.get("expected failures", 0)
            # "Ran N" counts tests; a failing setUpClass is an error but not a test that ran
            passed = max(self.ran - (failed - hooks) - skipped, 0)
            recognized = True
        else:
            passed, failed, skipped = counts_seen(self.progress, len(self.failures))
            recognized = False
            notes.append(unclosed_note(
                (passed, failed, skipped),
                "unittest's closing 'Ran N tests' and OK/FAILED lines were not found",
                "no unittest output was recognised (no 'Ran N tests' line, no test lines)",
            ))
        return closing_result(
            (passed, failed, skipped), self.failures, notes=notes, recognized=recognized,
            duration_ms=self.duration_ms, load_errors=self.load_errors, passed_names=self.passed_names,
            skipped_names=self.skipped_names,
        )


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse unittest's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "unittest")


def progress_event(line: str) -> Event | None:
    """One event per `name (id) ... ok` line of -v."""
    m = _V_LINE.match(strip_ansi(line))
    if not m:
        return None
    return _V_EVENT.get(m.group(2), "skip")


def progress_counts(line: str) -> dict[Event, int] | None:
    """A -v line is one test; a row of dots (the default verbosity) one test per character."""
    ev = progress_event(line)
    if ev is not None:
        return {ev: 1}
    s = strip_ansi(line)
    if not _DOTS.match(s):
        return None
    out: dict[Event, int] = {"pass": 0, "fail": 0, "skip": 0}
    for ch in s:
        out[_DOT_EVENT[ch]] += 1
    return out
