"""go's parser reads the test events `go test -json` writes without json when no string in
them holds an escape (frameworks/go.py, _TEST_EVENT), and sifts a test's output only when its
body is read. These tests hold that path to the straightforward one: every line decoded by
json (`GoParser._decoded`), on the captured fixtures and on lines made to sit at the edge
(escapes, control characters, odd numbers, repeated keys, text between events).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

import greenloop.frameworks.go as go
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
    from_file = go.parse_report(str(report))
    fast, slow = _both(lines, None)
    assert from_file == fast == slow
    (failure,) = fast.failures
    assert failure.stack is not None and "line 1\nline 2\nline 4" in failure.stack
    assert "=== RUN" not in failure.stack
