"""The outcome table (run.classify), the output tail and the human renderer. Pure: no process."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from greenloop.model import Failure, ParseResult, Plan, Progress, RawRun, Summary
from greenloop.render import LiveProgress, progress_line, run_text
from greenloop.result import RunResult
from greenloop.runner.results import output_tail
from greenloop.runner.verdict import classify

PLAN = Plan(
    framework="vitest", argv=("vitest", "run"), cwd="/w", timeout_ms=5000, report_format="vitest-json"
)


def raw(exit_code: int | None = 0, **kw: object) -> RawRun:
    base: dict[str, object] = {
        "timed_out": False,
        "aborted": False,
        "duration_ms": 10,
        "stdout_path": "/x",
        "stderr_path": "/y",
    }
    base.update(kw)
    return RawRun(exit_code=exit_code, **base)  # type: ignore[arg-type]


def parsed(total: int = 0, passed: int = 0, failed: int = 0, loads: int = 0, **kw: object) -> ParseResult:
    fails = tuple(Failure(test=f"t{i}", kind="load" if i < loads else "test") for i in range(failed))
    return ParseResult(summary=Summary(total, passed, failed, 0), failures=fails, recognized=True, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("r", "p", "report_ok", "outcome", "ok", "next_action", "reason"),
    [
        (raw(0), parsed(3, 3), True, "green", True, None, None),
        (raw(1), parsed(3, 2, 1), True, "red", False, "retry_coder", None),
        (raw(0), parsed(3, 2, 1), True, "red", False, "retry_coder", None),  # exit 0 but a failure: red
        (
            raw(1),
            parsed(3, 3),
            True,
            "broken",
            False,
            "retry_tester",
            "exited with code 1 but no failing test",
        ),
        (raw(0), parsed(0, 0), True, "broken", False, "retry_tester", "no tests ran"),
        (raw(5), parsed(0, 0), None, "broken", False, "retry_tester", "no tests ran"),
        (
            raw(1),
            parsed(1, 0, 1, loads=1, load_error="SyntaxError in a.js"),
            True,
            "broken",
            False,
            "retry_tester",
            "could not load the code under test: SyntaxError",
        ),
        (  # only load failures, while other files' tests passed: still the tester's to fix
            raw(1),
            parsed(4, 3, 1, loads=1, load_error="SyntaxError in a.js"),
            True,
            "broken",
            False,
            "retry_tester",
            "could not load the code under test: SyntaxError",
        ),
        # files that cannot load beside tests that failed normally: red, both listed
        (
            raw(1),
            parsed(5, 2, 3, loads=1, load_error="a.js: SyntaxError"),
            True,
            "red",
            False,
            "retry_coder",
            "some test files could not load (a.js: SyntaxError)",
        ),
        (raw(1), parsed(0, 0), False, "broken", False, "retry_tester", "report was missing or invalid"),
        (
            raw(None, timed_out=True, signal=9),
            parsed(2, 1, 1),
            None,
            "broken",
            False,
            None,
            "timed out after 5000 ms",
        ),
        (raw(None, aborted=True), parsed(), None, "broken", False, None, "interrupted"),
        (raw(None, spawn_error="No such file"), parsed(), None, "broken", False, None, "could not start"),
        (raw(-9, signal=9), parsed(3, 3), True, "broken", False, "retry_tester", "killed by signal 9"),
    ],
)
def test_outcomes_are_never_confused(
    r: RawRun,
    p: ParseResult,
    report_ok: bool | None,
    outcome: str,
    ok: bool,
    next_action: str | None,
    reason: str | None,
) -> None:
    v = classify(PLAN, r, p, report_ok=report_ok)
    assert (v.outcome, v.ok, v.next_action) == (outcome, ok, next_action)
    text = (v.crash_reason or "") + " ".join(v.notes)
    if reason:
        assert reason in text
    if ok:  # ok implies the contract's formula
        assert not r.timed_out and not r.aborted and r.exit_code == 0 and p.summary.failed == 0


def test_output_tail_is_the_last_characters_without_colour(tmp_path: Path) -> None:
    out = tmp_path / "stdout.txt"
    err = tmp_path / "stderr.txt"
    out.write_text("x" * 10_000 + "\x1b[31mRED\x1b[0m end\n")
    err.write_text("")
    tail = output_tail(str(out), str(err), 100)
    assert len(tail) == 100 and tail.endswith("RED end\n") and "\x1b" not in tail
    err.write_text("boom on stderr\n")
    assert output_tail(str(out), str(err), 100).endswith("boom on stderr\n")
    assert output_tail(str(out), str(err), 0) == ""


def test_live_progress_off_a_terminal_prints_at_most_every_interval() -> None:
    now = [0.0]
    stream = io.StringIO()
    live = LiveProgress(stream, tty=False, clock=lambda: now[0], interval_s=5.0)
    for i in range(100):  # 100 updates within 4 s: nothing printed yet
        now[0] = i * 0.04
        live.update(Progress(passed=i))
        live._draw()
    assert stream.getvalue() == ""
    now[0] = 5.5
    live._draw()
    assert stream.getvalue() == "running… 99 passed · 5.5s\n"
    live.close()


def test_live_progress_on_a_terminal_redraws_in_place_and_clears() -> None:
    now = [0.0]
    stream = io.StringIO()
    live = LiveProgress(stream, tty=True, clock=lambda: now[0])
    live.update(Progress(passed=3, failed=1))
    now[0] = 1.25
    live.update(Progress(passed=4, failed=1, skipped=2))
    live.close()
    text = stream.getvalue()
    assert text.startswith("\rrunning… 3 passed, 1 failed · 0 ms")
    assert "\rrunning… 4 passed, 1 failed, 2 skipped · 1.2s" in text
    assert text.endswith("\r") and "\n" not in text


def test_progress_line() -> None:
    assert progress_line(Progress(10, 0, 0, 61_000)) == "running… 10 passed · 1m01s"


def test_run_text_red_and_broken() -> None:
    red = RunResult(
        run_id="r1",
        ok=False,
        outcome="red",
        framework="pytest",
        command="pytest",
        exit_code=1,
        summary=Summary(2, 1, 1, 0),
        duration_ms=1500,
        result_ref="/w/.greenloop/runs/r1/result.json",
        failures=(
            Failure(
                test="test_x",
                file="t.py",
                line=7,
                message="assert 4 == 5",
                expected="5",
                got="4",
                hint="add() is off by one",
            ),
        ),
        next_action="retry_coder",
    )
    text = run_text(red, cwd="/w")
    assert "✗ red  1 failed, 1 passed (2 tests) in 1.5s [pytest]" in text
    assert "FAILED test_x  (t.py:7)" in text and "expected: 5" in text and "got:      4" in text
    assert "hint: add() is off by one" in text and "result:  .greenloop/runs/r1/result.json" in text
    broken = RunResult(
        run_id="r2",
        ok=False,
        outcome="broken",
        framework="jest",
        command="jest",
        exit_code=None,
        timed_out=True,
        crashed=True,
        crash_reason="timed out after 100 ms",
        output_tail="a\nb\n",
    )
    text = run_text(broken)
    assert "! broken  timed out after 100 ms [jest]" in text and "last output:" in text
