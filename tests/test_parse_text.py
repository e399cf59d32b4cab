"""Parsers on edge cases: totality (random bytes, truncated and shuffled real output), bounds,
counting rules, progress events, reports that are missing or invalid, the vitest JSON
contract, and the `greenloop parse` command (real subprocesses)."""

from __future__ import annotations

import importlib
import inspect
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from greenloop.cli import main
from greenloop.frameworks import (
    MODULES,
    REPORT_READERS,
    parse_report,
    parse_text,
    progress_counts,
    progress_event,
)
from greenloop.frameworks.base import Framework, ReportReader
from greenloop.frameworks.common import MAX_DETAILED_FAILURES, MAX_FAILURE_CHARS, strip_ansi, trim_stack
from greenloop.frameworks.vitest_report import parse_json_report
from greenloop.model import ParseResult

FIXTURES = Path(__file__).parent / "fixtures"
FRAMEWORKS = list(MODULES)


def _lines(rel: str) -> list[str]:
    return (FIXTURES / rel).read_text(encoding="utf-8").splitlines()


def _sane(res: ParseResult) -> None:
    s = res.summary
    assert min(s.total, s.passed, s.failed, s.skipped) >= 0
    assert s.total == s.passed + s.failed + s.skipped
    json.dumps(res.to_json())


# --- common helpers ---------------------------------------------------------------------


def test_strip_ansi_removes_colour_cursor_and_osc() -> None:
    assert strip_ansi("\x1b[1m\x1b[31mFAIL\x1b[39m\x1b[22m x") == "FAIL x"
    assert strip_ansi("\x1b]8;;http://x\x07link\x1b]8;;\x07") == "link"
    assert strip_ansi("a\x1b[2K\x1b[1Gb") == "ab"
    assert strip_ansi("plain ✓ text") == "plain ✓ text"


def test_trim_stack_keeps_only_user_frames() -> None:
    stack = "\n".join([
        "Error: boom",
        "    at Object.<anonymous> (/work/app/src/user.test.js:3:11)",
        "    at Promise.finally.completed (/work/app/node_modules/jest-circus/build/x.js:1:2)",
        "    at new Promise (<anonymous>)",
        "    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)",
        "    at file:///work/app/src/helper.js:10:2",
        "/usr/lib/python3.11/site-packages/_pytest/python.py:157: in pytest_pyfunc_call",
        "/work/app/.venv/lib/python3.11/site-packages/pluggy/_callers.py:103: in _multicall",
        "tests/test_x.py:12: in test_x",
    ])
    assert trim_stack(stack, "/work/app").splitlines() == [
        "at Object.<anonymous> (src/user.test.js:3:11)",
        "at src/helper.js:10:2",
        "tests/test_x.py:12: in test_x",
    ]
    assert trim_stack("", None) == ""


# --- totality -------------------------------------------------------------------------


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_random_bytes_never_raise(framework: str) -> None:
    rng = random.Random(20261129)
    for _ in range(30):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(2000)))
        text = blob.decode("utf-8", "replace")
        res = parse_text(framework, text.splitlines())
        _sane(res)
    # bytes lines, None-ish objects and empty input are tolerated too
    _sane(parse_text(framework, [b"\xff\xfe ok 1 - x", b"Tests  1 failed (1)"]))
    empty = parse_text(framework, [])
    assert not empty.recognized and empty.notes and empty.summary.total == 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_shuffled_and_spliced_real_output_never_raises(framework: str) -> None:
    rng = random.Random(7)
    files = sorted(FIXTURES.glob("*/mixed/*.txt"))
    pool = [ln for p in files for ln in p.read_text(encoding="utf-8").splitlines()]
    for _ in range(25):
        sample = rng.sample(pool, 300)
        for i in range(0, len(sample), 17):  # splice: cut lines in the middle
            sample[i] = sample[i][: rng.randrange(len(sample[i]) + 1)]
        _sane(parse_text(framework, sample))


def test_unknown_framework_is_a_note_not_an_exception() -> None:
    res = parse_text("mocha-ish", ["x"])
    assert not res.recognized and "unknown framework" in res.notes[0] and "vitest" in res.notes[0]


def _callables(protocol: type) -> dict[str, list[str]]:
    """Each method a Protocol names -> its parameter names after self."""
    return {
        name: list(inspect.signature(getattr(protocol, name)).parameters)[1:]
        for name in vars(protocol)
        if not name.startswith("_") and callable(getattr(protocol, name))
    }


@pytest.mark.parametrize(("table", "protocol"), [(MODULES, Framework), (REPORT_READERS, ReportReader)])
def test_every_module_the_dispatcher_names_provides_its_protocol(
    table: dict[str, str], protocol: type
) -> None:
    """What the dispatcher calls on a module is there, with the parameters it passes."""
    wanted = _callables(protocol)
    assert wanted
    for key, name in table.items():
        mod = importlib.import_module(name)
        for method, params in wanted.items():
            fn = getattr(mod, method, None)
            assert callable(fn), f"{key}: {name}.{method} is missing"
            assert list(inspect.signature(fn).parameters) == params, f"{key}: {name}.{method}"


@pytest.mark.parametrize(("framework", "rel", "closing"), [
    ("vitest", "vitest/mixed/plain.txt", "Tests  "),
    ("jest", "jest/mixed/plain.txt", "Tests:"),
    ("pytest", "pytest/mixed/v.txt", " in 0."),
    ("node:test", "node_test/mixed/tap.txt", "# tests"),
])
def test_truncated_output_reports_what_was_seen(framework: str, rel: str, closing: str) -> None:
    lines = _lines(rel)
    cut = next(i for i, ln in enumerate(lines) if closing in ln)
    full = parse_text(framework, lines)
    part = parse_text(framework, lines[:cut])
    assert full.recognized and not part.recognized
    assert part.notes and "not found" in part.notes[0]
    assert {f.test for f in part.failures} <= {f.test for f in full.failures} | {
        f.test.split(" > ")[-1] for f in full.failures}
    assert part.summary.failed >= 1


# --- counting rules on small inputs ----------------------------------------------------


@pytest.mark.parametrize(("closing", "expected"), [
    ("==== 1 failed, 11 passed in 3.20s ====", (1, 11, 0)),
    ("2 failed, 3 passed, 1 skipped, 1 xfailed, 2 xpassed, 4 errors in 0.52s", (6, 5, 2)),
    ("====== 3 passed, 2 deselected, 1 warning in 0.10s (0:00:00) ======", (0, 3, 0)),
    ("============ no tests ran in 0.01s ============", (0, 0, 0)),
    ("1 error in 0.67s", (1, 0, 0)),
])
def test_pytest_counts_as_its_closing_line(closing: str, expected: tuple[int, int, int]) -> None:
    res = parse_text("pytest", ["x.py .F", "", closing])
    assert res.recognized
    assert (res.summary.failed, res.summary.passed, res.summary.skipped) == expected


def test_pytest_xdist_and_verbose_lines_count_without_closing_line() -> None:
    res = parse_text("pytest", [
        "[gw0] [ 33%] PASSED tests/test_a.py::test_one",
        "[gw1] [ 66%] FAILED tests/test_a.py::test_two",
        "tests/test_b.py::test_three[a - b] SKIPPED (later)                [100%]",
    ])
    assert (res.summary.passed, res.summary.failed, res.summary.skipped) == (1, 1, 1)
    assert [f.test for f in res.failures] == ["tests/test_a.py::test_two"]
    assert not res.recognized


def test_pytest_xdist_letters_count_without_closing_line() -> None:
    """xdist's default output: outcome letters with no file name, cut by a crashed worker's
    message and (a run stopped at its deadline) by the stop itself."""
    res = parse_text("pytest", [
        "created: 2/2 workers",
        "2 workers [9 items]",
        "",
        "s.F.F..[gw1] node down: Not properly terminated",
        "F",
        "replacing crashed worker gw1",
        ".E",
    ])
    assert (res.summary.passed, res.summary.failed, res.summary.skipped) == (5, 4, 1)
    # without xdist's header a line of letters is somebody's output, not outcomes
    plain = parse_text("pytest", ["....F"])
    assert plain.summary.total == 0


def test_vitest_todo_counts_as_skipped_and_no_tests_is_zero() -> None:
    res = parse_text("vitest", ["      Tests  1 failed | 2 passed | 1 skipped | 3 todo (7)"])
    assert (res.summary.failed, res.summary.passed, res.summary.skipped) == (1, 2, 4)
    none = parse_text("vitest", [" Test Files  1 failed (1)", "      Tests  no tests"])
    assert none.recognized and none.summary.total == 0


def test_jest_summary_of_all_failing_tests_is_not_counted_twice() -> None:
    block = ["FAIL ./a.test.js", "  ● suite › breaks", "", "    Expected: 1", "    Received: 2", "",
             "      at Object.toBe (a.test.js:3:5)", ""]
    lines = [*block, "Summary of all failing tests", *block,
             "Test Suites: 1 failed, 1 total", "Tests:       1 failed, 1 total", "Time:        1.5 s"]
    res = parse_text("jest", lines)
    assert [f.test for f in res.failures] == ["suite › breaks"]
    f = res.failures[0]
    assert (f.expected, f.got, f.file, f.line) == ("1", "2", "a.test.js", 3)
    assert res.duration_ms == 1500 and res.summary.failed == 1


# --- bounds ---------------------------------------------------------------------------


def test_huge_failure_bodies_and_counts_stay_bounded() -> None:
    n = MAX_DETAILED_FAILURES + 300

    def gen() -> Iterator[str]:
        yield "=" * 20 + " FAILURES " + "=" * 20
        for i in range(n):
            yield f"____ test_{i} ____"
            for j in range(150):
                yield f"E       line {j} " + "x" * 100
            yield "t.py:1: AssertionError"
        yield "=" * 10 + " short test summary info " + "=" * 10
        for i in range(n):
            yield f"FAILED t.py::test_{i} - boom"
        yield f"=== {n} failed in 9.00s ==="

    res = parse_text("pytest", gen())
    assert res.summary.failed == n and len(res.failures) == n
    assert all(len(f.message) <= MAX_FAILURE_CHARS + 200 for f in res.failures)
    assert res.failures[-1].test == f"t.py::test_{n - 1}" and res.failures[-1].message == "boom"


# --- progress events -------------------------------------------------------------------


@pytest.mark.parametrize(("framework", "rel", "expected"), [
    ("vitest", "vitest/mixed/verbose.txt", {"pass": 3, "fail": 6, "skip": 4}),
    ("jest", "jest/mixed/verbose.txt", {"pass": 3, "fail": 8, "skip": 2}),
    ("pytest", "pytest/mixed/v.txt", {"pass": 5, "fail": 11, "skip": 2}),
    ("pytest", "pytest/mixed/color.txt", {"pass": 5, "fail": 11, "skip": 2}),
])
def test_progress_events_match_the_counts(framework: str, rel: str, expected: dict[str, int]) -> None:
    seen = {"pass": 0, "fail": 0, "skip": 0}
    for line in (FIXTURES / rel).read_text(encoding="utf-8").splitlines():
        ev = progress_event(framework, line)
        if ev:
            seen[ev] += 1
    assert seen == expected


@pytest.mark.parametrize(("framework", "rel"), [
    *[("vitest", f"vitest/mixed/{v}.txt") for v in ("plain", "color", "agent", "github", "verbose", "dot")],
    *[("pytest", f"pytest/mixed/{v}.txt") for v in ("plain", "q", "v", "rA", "color")],
    ("vitest", "vitest/green/plain.txt"),
    ("pytest", "pytest/green/q.txt"),
])
def test_progress_counts_add_up_to_the_tests_that_ran(framework: str, rel: str) -> None:
    seen = {"pass": 0, "fail": 0, "skip": 0}
    for line in _lines(rel):
        for k, v in (progress_counts(framework, line) or {}).items():
            seen[k] += v
    res = parse_text(framework, _lines(rel))
    # live counts cover tests that ran; files that failed to load and failed hooks come
    # with the closing summary
    extra = sum(1 for f in res.failures if f.kind in ("load", "hook")) if framework == "vitest" else 0
    s = res.summary
    assert seen == {"pass": s.passed, "fail": s.failed - extra, "skip": s.skipped}


def test_progress_event_samples() -> None:
    assert progress_event("node:test", "    not ok 2 - adds wrong") == "fail"
    assert progress_event("node:test", "ok 3 - todo one # TODO") == "skip"
    assert progress_event("node:test", "  ✔ adds (0.74ms)") == "pass"
    assert progress_event("vitest", " ✓ ok.test.js (4 tests | 1 skipped) 3ms") is None  # a file line
    assert progress_event("npm-test", "     × adds wrong 6ms") == "fail"
    assert progress_event("nope", "ok 1 - x") is None


# --- reports ----------------------------------------------------------------------------


def test_missing_and_invalid_reports_are_unrecognised_with_a_note(tmp_path: Path) -> None:
    bad_json = tmp_path / "r.json"
    bad_json.write_text("{not json")
    other_json = tmp_path / "o.json"
    other_json.write_text('{"hello": 1}')
    bad_xml = tmp_path / "r.xml"
    bad_xml.write_text("<testsuites><testcase")
    other_xml = tmp_path / "o.xml"
    other_xml.write_text("<html/>")
    cases = [
        ("vitest-json", str(tmp_path / "missing.json"), "missing"),
        ("jest-json", str(tmp_path / "missing.json"), "missing"),
        ("junit", str(tmp_path / "missing.xml"), "missing"),
        ("vitest-json", str(bad_json), "not valid JSON"),
        ("jest-json", str(other_json), "testResults"),
        ("junit", str(bad_xml), "not valid JUnit"),
        ("junit", str(other_xml), "not JUnit"),
        ("tap-file", str(bad_xml), "unknown report format"),
    ]
    for fmt, path, needle in cases:
        res = parse_report(fmt, path)
        assert not res.recognized, (fmt, path)
        assert any(needle in n for n in res.notes), (fmt, res.notes)


def test_vitest_json_contract(tmp_path: Path) -> None:
    missing = parse_json_report(tmp_path / "nope.json")
    assert missing.crashed and not missing.ok and "missing" in (missing.crash_reason or "")
    assert missing.next_action == "retry_tester"

    load = parse_json_report(FIXTURES / "vitest/loadfail/plain.report.json")
    assert load.crashed and load.next_action == "retry_tester"
    assert "could not load" in (load.crash_reason or "") and load.failures[0].kind == "load"

    green = parse_json_report(FIXTURES / "vitest/green/plain.report.json")
    assert green.ok and not green.crashed and green.next_action is None
    assert green.summary.to_json() == {"total": 4, "passed": 3, "failed": 0, "skipped": 1}

    # the mixed run without its unloadable files: ordinary failures, retry_coder
    data = json.loads((FIXTURES / "vitest/mixed/plain.report.json").read_text(encoding="utf-8"))
    data["testResults"] = [r for r in data["testResults"] if r["name"].endswith("math.test.js")]
    red_path = tmp_path / "red.json"
    red_path.write_text(json.dumps(data))
    red = parse_json_report(red_path, root="/tmp/greenloop-capture/vitest-mixed")
    assert not red.crashed and not red.ok and red.next_action == "retry_coder"
    assert red.summary.failed == 6 and red.duration_ms is not None
    out = red.to_json()
    assert set(out) >= {"ok", "crashed", "crash_reason", "summary", "failures", "duration_ms"}
    assert out["failures"][0]["file"] == "math.test.js"

    # the whole mixed run: files that cannot load beside failing tests is red, not crashed
    root = "/tmp/greenloop-capture/vitest-mixed"
    mixed = parse_json_report(FIXTURES / "vitest/mixed/plain.report.json", root=root)
    assert not mixed.crashed and mixed.next_action == "retry_coder", mixed.crash_reason
    loads = [f for f in mixed.failures if f.kind == "load"]
    assert loads and any('kind "load"' in n for n in mixed.notes)
    assert all(root not in (f.message + f.stack + (f.file or "")) for f in loads)  # relative paths


@pytest.mark.parametrize(
    ("framework", "fixture", "only_load"),
    [
        ("vitest", "vitest/loadfail/plain.txt", True),
        ("vitest", "vitest/mixed/plain.txt", False),
        ("jest", "jest/loadfail/plain.txt", True),
        ("jest", "jest/mixed/plain.txt", False),
        ("pytest", "pytest/loadfail/plain.txt", True),
        ("node:test", "node_test/loadfail/tap.txt", True),
        ("node:test", "node_test/mixed/tap.txt", False),
    ],
)
def test_load_failures_only_on_real_output(framework: str, fixture: str, only_load: bool) -> None:
    """The rule run.classify, vitest_report.parse_json_report and the hooks share."""
    from greenloop.frameworks.results import load_failures_only

    with open(FIXTURES / fixture, encoding="utf-8") as fh:
        res = parse_text(framework, fh)
    assert res.load_error, fixture
    assert load_failures_only(res) is only_load


# --- the command -------------------------------------------------------------------------


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greenloop", *args], input=stdin, capture_output=True,
                          text=True, timeout=60, check=False)


def test_parse_command_human_json_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    red = str(FIXTURES / "vitest/mixed/plain.txt")
    assert main(["parse", "--framework", "vitest", red]) == 1
    out = capsys.readouterr().out
    assert "16 tests, 3 passed, 9 failed, 4 skipped" in out
    assert "math > adds wrong" in out and "expected 4  got 3" in out and "LOAD broken.test.js" in out

    assert main(["parse", "--framework", "pytest", "--json", str(FIXTURES / "pytest/green/q.txt")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"] == {"total": 5, "passed": 4, "failed": 0, "skipped": 1} and data["recognized"]


def test_parse_command_bad_input_and_stdin(tmp_path: Path) -> None:
    unknown = _run("parse", "--framework", "ava", str(tmp_path))
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert "vitest, jest, npm-test, pytest, node:test" in unknown.stderr
    missing = _run("parse", "--framework", "jest", str(tmp_path / "none.txt"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    folder = _run("parse", "--framework", "jest", str(tmp_path))
    assert folder.returncode == 2 and "folder" in folder.stderr
    garbage = _run("parse", "--framework", "node:test", "-", stdin="hello\nworld\n")
    assert garbage.returncode == 3 and "no node:test output was recognised" in garbage.stdout
    piped = _run("parse", "--framework", "npm-test", "--json", "-",
                 stdin=(FIXTURES / "npm_test/mixed/jest.txt").read_text(encoding="utf-8"))
    assert piped.returncode == 1
    assert json.loads(piped.stdout)["summary"]["failed"] == 10


def test_vitest_github_annotations_give_blocks_their_file_and_line() -> None:
    # Real `GITHUB_ACTIONS` output with the `❯ file:line` frames taken out of the FAIL blocks:
    # the location then comes only from the `::error file=…,line=…` annotations.
    lines = [ln for ln in _lines("vitest/mixed/github.txt") if not ln.strip().startswith("❯ ")]
    res = parse_text("vitest", iter(lines), root="/tmp/greenloop-capture/vitest-mixed")
    located = {f.test: (f.file, f.line) for f in res.failures}
    assert located["math > adds wrong"] == ("math.test.js", 9)
    assert located["db suite"] == ("hooks.test.js", 5)
    without = [ln for ln in lines if not ln.startswith("::error")]
    res = parse_text("vitest", iter(without), root="/tmp/greenloop-capture/vitest-mixed")
    assert {f.test: f.line for f in res.failures}["math > adds wrong"] is None


def test_node_spec_recap_gives_a_failure_without_a_stack_its_location() -> None:
    # node's spec reporter repeats failing tests after "✖ failing tests:" with `test at f:l:c`.
    out = [
        "✖ adds wrong (1.2ms)",
        "  'boom'",
        "ℹ tests 1",
        "ℹ pass 0",
        "ℹ fail 1",
        "✖ failing tests:",
        "",
        "test at math.test.mjs:9:3",
        "✖ adds wrong (1.2ms)",
        "  'boom'",
    ]
    res = parse_text("node:test", iter(out), root=None)
    assert [(f.test, f.file, f.line) for f in res.failures] == [("adds wrong", "math.test.mjs", 9)]
