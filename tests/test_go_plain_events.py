"""go's parser reads the test events `go test -json` writes without json when no string in
them holds an escape (frameworks/go.py, _TEST_EVENT), a report's passed test in one match of
its four lines (_PASSED_TEST), and sifts a test's output only when its body is read. These
tests hold those paths to the straightforward one, every line decoded by json
(`GoParser._decoded`), on the captured fixtures and on lines made to sit at the edge
(escapes, control characters, odd numbers, repeated keys, text between events).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

import greenloop.frameworks.go as go
import greenloop.frameworks.go_report as go_report
from greenloop.frameworks.common import run_parser
from greenloop.model import ParseResult

FIXTURES = Path(__file__).parent / "fixtures" / "go"
WORK = "<work>"


class _Reference(go.GoParser):
    """Every line decoded by json, none read by the plain-event pattern."""

    def _read(self, lines: Iterable[str]) -> None:
        for line in lines:
            self._decoded(line)


class _Counting(go.GoParser):
    """The real parser, counting the lines it leaves to json."""

    decoded = 0

    def _decoded(self, line: str) -> None:
        self.decoded += 1
        super()._decoded(line)


def _both(lines: list[str], root: str | None) -> tuple[ParseResult, ParseResult]:
    fast = run_parser(lambda: go.GoParser(root), lines, "go")
    slow = run_parser(lambda: _Reference(root), lines, "go")
    return fast, slow


def _event(action: str, test: str, output: str | None = None, **more: object) -> str:
    ev: dict[str, object] = {"Time": "2026-01-02T03:04:05.123456789Z", "Action": action,
                            "Package": "example.com/p"}
    if test:
        ev["Test"] = test
    if output is not None:
        ev["Output"] = output
    ev.update(more)
    return json.dumps(ev, ensure_ascii=False, separators=(",", ":"))


# Lines at the edge of the plain pattern: each must give what json gives.
EDGE = [
    _event("run", "TestA"),
    _event("output", "TestA", "=== RUN   TestA\n"),
    _event("output", "TestA", "    a_test.go:9: got 1, want 2\n"),
    _event("output", "TestA", "\tindented with a tab\n"),  # \t: an escape, decoded by json
    _event("output", "TestA", 'quoted "value"\n'),
    _event("output", "TestA", "no newline at the end"),
    _event("output", "TestA", "two newlines\n\n"),
    _event("output", "TestA", "\n"),
    _event("output", "TestA", "é ünïcode 名前 \u2028 and\u00a0nbsp\n"),
    _event("output", "TestA", "--- FAIL: TestA (0.00s)\n"),
    _event("fail", "TestA", Elapsed=0.01),
    _event("run", "TestB/sub_case"),  # a subtest whose parent never ran
    _event("fail", "TestB/sub_case", Elapsed=1e-05),
    _event("run", "TestC"),
    _event("output", "TestC", "panic: test timed out after 2s\n"),
    '{"Time":"x","Action":"run","Package":"p","Test":"T\\u0041"}',  # an escape in the name
    '{"Time":"x","Action":"output","Package":"p","Test":"TA","Output":"ctl \x01 char\\n"}',  # invalid JSON
    '{"Time":"x\\q","Action":"run","Package":"p","Test":"TQ"}',  # invalid escape: text
    '{"Time":"x","Action":"run","Package":"p","Test":"TD","Test":"TE"}',  # the last key wins
    '{"Time":"x","Action":"fail","Package":"p","Test":"TE","Elapsed":01}',  # not a JSON number
    '{"Time":"x","Action":"fail","Package":"p","Test":"TE","Elapsed":-1.5E+3}',
    '{"Time":"x","Action":"pass","Package":"p","Test":"TE","Elapsed":1٣}',  # an Arabic-Indic digit
    '{"Time":"x","Action":"run","Package":"p","Test":"TF"} ',  # trailing space: still JSON
    '{"Time":"x","Action":"pass","Package":"p","Test":"TF","Output":"x\\n"}',
    '{"Time":"x","Action":"output","Package":"p","Test":"TF"}',
    '{"Time":"x","Action":"Run","Package":"p","Test":"TG"}',
    '{"Time":"x","Action":"run","Package":"p","Test":""}',
    '{"Time":"x","Action":"run","Package":"","Test":"TH"}',
    '{"Time":"x","Action":"output","Package":"","Test":"TH","Output":"    h_test.go:3: boom\\n"}',
    '{"Time":"x","Action":"fail","Package":"","Test":"TH"}',
    "=== RUN   TestText",
    "    text_test.go:4: from text",
    "--- FAIL: TestText (0.00s)",
    "FAIL",
    "FAIL\texample.com/text\t0.1s",
    "",
    "# example.com/broken",
    "broken.go:1:2: undefined: y",
    '{"Time":"x","Action":"output","Package":"example.com/broken","Test":"TI","Output":"after # head\\n"}',
]


def _fixture_lines(suite: str, variant: str) -> tuple[list[str], str]:
    src = str(FIXTURES / suite / "src")
    text = (FIXTURES / suite / f"{variant}.txt").read_text(encoding="utf-8")
    return text.replace(WORK, src).splitlines(), src


CAPTURES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.txt"))


@pytest.mark.parametrize("capture", CAPTURES)
def test_plain_events_read_as_json_reads_them(capture: str) -> None:
    suite, name = capture.split("/")
    lines, src = _fixture_lines(suite, name.removesuffix(".txt"))
    fast, slow = _both(lines, src)
    assert fast == slow
    assert fast.to_json() == slow.to_json()


def test_edge_lines_read_as_json_reads_them() -> None:
    lines, src = _fixture_lines("mixed", "json")
    # every edge line alone, then all of them in the middle of a real run and out of order
    for line in EDGE:
        fast, slow = _both([line], None)
        assert fast == slow, line
    for mixed in ([*lines[:40], *EDGE, *lines[40:]], [*reversed(EDGE), *lines], EDGE * 3):
        fast, slow = _both(mixed, src)
        assert fast == slow


def test_plain_pattern_gives_the_decoded_values() -> None:
    lines, _ = _fixture_lines("mixed", "json")
    matched = 0
    for line in [*lines, *EDGE]:
        m = go._TEST_EVENT.fullmatch(line)
        if m is None:
            continue
        matched += 1
        action, pkg, name, out = m.groups()
        ev = json.loads(line)
        assert (ev["Action"], ev["Package"], ev["Test"]) == (action, pkg, name), line
        assert ev.get("Output") == (None if out is None else out + "\n"), line
    assert matched > len(lines) // 2


def test_only_lines_outside_tests_go_to_json(tmp_path: Path) -> None:
    """A green run's test events all take the plain path: json decodes the package's own lines."""
    lines, src = _fixture_lines("green", "json")
    parser = _Counting(src)
    for line in lines:
        parser.feed(line)
    outside = [ln for ln in lines if '"Test":' not in ln]
    assert parser.decoded == len(outside) > 0
    assert parser.finish() == _both(lines, src)[1]


def test_a_long_output_is_sifted_as_it_comes(tmp_path: Path) -> None:
    """A test that prints more than a sift's worth keeps its first lines, Go's own dropped."""
    many = [_event("output", "TestLong", "=== RUN   TestLong\n" if i % 3 == 0 else f"line {i}\n")
            for i in range(go._SIFT_EVERY * 3)]
    lines = [_event("run", "TestLong"), *many, _event("fail", "TestLong", Elapsed=1)]
    report = tmp_path / "stdout.txt"
    report.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "stderr.txt").write_text("", encoding="utf-8")
    from_file = go_report.parse_report(str(report))
    fast, slow = _both(lines, None)
    assert from_file == fast == slow
    (failure,) = fast.failures
    assert failure.stack is not None and "line 1\nline 2\nline 4" in failure.stack
    assert "=== RUN" not in failure.stack


def _passed(name: str, pkg: str = "example.com/p", took: str = "0.00s", elapsed: str = "0") -> list[str]:
    """The four lines `go test -json` writes for a test that passes alone."""
    head = f'{{"Time":"2026-01-02T03:04:05.1Z","Action":"%s","Package":"{pkg}","Test":"{name}"'
    return [
        head % "run" + "}",
        head % "output" + f',"Output":"=== RUN   {name}\\n"}}',
        head % "output" + f',"Output":"--- PASS: {name} ({took})\\n"}}',
        head % "pass" + f',"Elapsed":{elapsed}}}',
    ]


def _report(tmp_path: Path, lines: list[str], end: str = "\n") -> ParseResult:
    report = _write(tmp_path, lines, end)
    (tmp_path / "stderr.txt").write_text("", encoding="utf-8")
    return go_report.parse_report(str(report))


def test_a_report_of_passed_tests_reads_as_json_reads_it(tmp_path: Path) -> None:
    """A passed test's four lines read as one match, and the lines that only look like them."""

    def fail_again(name: str) -> list[str]:  # -count=2: the second run fails, the first run's lines show
        return [_event("run", name), _event("output", name, "    t_test.go:3: second run\n"),
                _event("fail", name, Elapsed=0)]

    cases = [
        _passed("TestA"),
        _passed("TestA/sub_case") + _passed("TestA"),
        _passed(" TestSpace") + fail_again(" TestSpace"),  # Go's own line is then kept
        _passed("\u3000TestIdeographicSpace") + fail_again("\u3000TestIdeographicSpace"),
        _passed("TestSlow", took="1.5s", elapsed="1.5"),
        _passed("TestOdd", took="1s", elapsed="1e-3"),
        _passed("TestDigits", took="\u0663.00s"),
        _passed("TestBadElapsed", elapsed="01"),
        _passed("TestTwice") + fail_again("TestTwice"),
        _passed("TestA")[:3] + _passed("TestB"),  # a run cut short: TestA never passed
        [*_passed("TestA")[:2], _event("output", "TestA", "a log line\n"), *_passed("TestA")[2:]],
        [_passed("TestA")[0], _passed("TestB")[1], *_passed("TestA")[2:]],  # another test's line
        [*_passed("TestA"), "some text", *_passed("TestB"), "", *_passed("TestC")],
        [_passed("TestA", pkg="p\\q")[0], *_passed("TestA")],
    ]
    for lines in cases:
        for end in ("\n", "", "\n\n"):
            from_file = _report(tmp_path, lines, end)
            text_lines = [*lines, ""] if end == "\n\n" else lines
            assert from_file == run_parser(lambda: _Reference(None), text_lines, "go"), (lines, end)


def test_passed_tests_are_read_a_test_at_a_time(tmp_path: Path) -> None:
    """A passed test that ran alone is one match: json and the line pattern see only the rest
    (subtests, whose lines interleave with their parent's, and the package's own lines)."""
    read: list[str] = []

    class _Watching(go_report.ReportParser):
        def _read(self, lines: Iterable[str]) -> None:
            lines = list(lines)
            read.extend(lines)
            super()._read(lines)

    package = [_event("output", "", "PASS\n"), _event("output", "", "ok  \texample.com/p\t0.1s\n"),
               _event("pass", "", Elapsed=0.1)]
    synthetic = [line for i in range(50) for line in _passed(f"TestN{i}")] + package
    green, src = _fixture_lines("green", "json")
    for lines, root in ((synthetic, None), (green, src)):
        read.clear()
        report = _write(tmp_path, lines)
        whole = run_parser(lambda: _Watching(root), [str(report)], "go")  # noqa: B023
        assert whole == _both(lines, root)[1]
        assert 0 < len(read) < len(lines)
    assert read[-3:] == green[-3:]
    read.clear()
    run_parser(lambda: _Watching(None), [str(_write(tmp_path, synthetic))], "go")
    assert read == package


def _write(tmp_path: Path, lines: list[str], end: str = "\n") -> Path:
    report = tmp_path / "stdout.txt"
    report.write_text("\n".join(lines) + end, encoding="utf-8")
    return report


@pytest.mark.parametrize("suite", ["mixed", "green", "buildfail"])
def test_a_report_too_large_to_read_whole_is_read_the_same(
    suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the whole-file size a report is read a line at a time, without the passed-test
    match: the result is the same."""
    lines, src = _fixture_lines(suite, "json")
    report = _write(tmp_path, lines)
    whole = go_report.parse_report(str(report), src)
    monkeypatch.setattr(go_report, "_WHOLE_FILE_BYTES", 0)
    assert go_report.parse_report(str(report), src) == whole
