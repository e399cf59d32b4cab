"""What parallel workers leave in the runners' records, parsed: interleaved starts and ends of
several pytest-xdist workers, a worker that died inside a test (pytest-xdist, vitest, jest,
node:test), node holding back a concurrent file's events, and the same test name in several
files. Written from records of real runs (tests/e2e/test_parallel_*.py run the runners)."""

from __future__ import annotations

import json
from pathlib import Path

from greenloop.frameworks import parse_report, parse_text
from greenloop.frameworks.node_test_stream import running_tests
from greenloop.frameworks.pytest_report import read_stream
from greenloop.frameworks.vitest_errors import with_unhandled_errors


def _ndjson(path: Path, items: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    return str(path)


def test_pytest_stream_of_two_workers_names_each_running_test_and_closes_a_crashed_one(
    tmp_path: Path,
) -> None:
    crash = {"nodeid": "b.py::test_crash", "when": "???", "category": "failed", "file": "b.py", "line": None,
             "message": None, "longrepr": "worker 'gw1' crashed while running 'b.py::test_crash'"}
    path = _ndjson(tmp_path / "stream.ndjson", [
        {"start": "a.py::test_one", "line": 1},
        {"start": "b.py::test_crash", "line": 4},
        {"end": "a.py::test_one"},
        {"start": "a.py::test_hangs", "line": 7},
        {"failure": crash},
        {"start": "b.py::test_hangs", "line": 9},
    ])
    part = read_stream(path)
    assert part is not None
    assert part.running == (("a.py::test_hangs", 7), ("b.py::test_hangs", 9))
    assert part.started == 4
    [f] = part.failures
    assert (f.test, f.file, f.line, f.kind) == ("b.py::test_crash", "b.py", 4, "test")
    assert "crashed while running" in f.message


def test_node_stream_names_a_concurrent_file_whose_events_node_held_back(tmp_path: Path) -> None:
    path = _ndjson(tmp_path / "stream.ndjson", [
        {"start": "/w/test/a.test.js", "file": "/w/test/a.test.js", "line": 1, "nesting": 0},
        {"start": "/w/test/b.test.js", "file": "/w/test/b.test.js", "line": 1, "nesting": 0},
        {"start": "a hangs", "file": "/w/test/a.test.js", "line": 3, "nesting": 0},
        {"start": "/w/test/c.test.js", "file": "/w/test/c.test.js", "line": 1, "nesting": 0},
        {"end": "/w/test/c.test.js", "file": "/w/test/c.test.js", "nesting": 0},
    ])
    assert running_tests(path, "/w") == [
        ("a hangs", "test/a.test.js", 3),
        ("test/b.test.js", "test/b.test.js", None),
    ]


def _report(path: Path, results: list[dict[str, object]]) -> str:
    path.write_text(json.dumps({"startTime": 1, "testResults": results}))
    return str(path)


def test_vitest_file_whose_worker_died_is_one_failing_test_file(tmp_path: Path) -> None:
    pending: list[dict[str, object]] = [
        {"title": t, "ancestorTitles": [], "status": "pending"} for t in ("ok", "kills", "after")
    ]
    path = _report(tmp_path / "report.json", [
        {"name": "/w/a.test.js", "status": "failed", "message": "", "assertionResults": [
            {"title": "same", "ancestorTitles": [], "status": "failed", "failureMessages": ["Error: x"]},
            {"title": "skipped", "ancestorTitles": [], "status": "skipped"},
        ]},
        {"name": "/w/crash.test.js", "status": "passed", "message": "", "assertionResults": pending},
    ])
    report = parse_report("vitest-json", path, root="/w")
    # tests that never finished are counted nowhere, as vitest's own Tests line counts them
    assert (report.summary.passed, report.summary.failed, report.summary.skipped) == (0, 1, 1)
    assert any("crash.test.js: 3 test(s) never reported" in n for n in report.notes)
    text = parse_text("vitest", [
        "      Tests  1 failed | 1 skipped (5)",
        "     Errors  1 error",
        "⎯⎯⎯⎯⎯⎯ Unhandled Errors ⎯⎯⎯⎯⎯⎯",
        "⎯⎯⎯⎯⎯⎯ Unhandled Error ⎯⎯⎯⎯⎯⎯⎯",
        "Error: [vitest-pool]: Worker forks emitted error.",
        "Caused by: Error: Worker exited unexpectedly",
        "⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯",
    ])
    res = with_unhandled_errors(report, text, path, "/w")
    assert (res.summary.passed, res.summary.failed, res.summary.skipped) == (0, 2, 1)
    crash = res.failures[-1]
    assert (crash.test, crash.file, crash.kind) == ("crash.test.js", "crash.test.js", "test")
    assert "3 test(s) never reported a result (ok, kills, after)" in crash.message
    assert res.load_error is None
    # nothing unhandled: the report's result as it was (a bail leaves pending tests too)
    quiet = parse_text("vitest", ["      Tests  1 failed (2)"])
    assert with_unhandled_errors(report, quiet, path, "/w") is report


def test_jest_file_whose_worker_died_is_a_failing_test_file_not_a_load_failure(tmp_path: Path) -> None:
    died = ("  ● Test suite failed to run\n\n    A jest worker process (pid=28) was terminated by another "
            "process: signal=SIGKILL, exitCode=null.\n")
    syntax = "  ● Test suite failed to run\n\n    SyntaxError: Unexpected token (1:5)\n"
    path = _report(tmp_path / "report.json", [
        {"name": "/w/crash.test.js", "status": "failed", "message": died, "assertionResults": []},
        {"name": "/w/broken.test.js", "status": "failed", "message": syntax, "assertionResults": []},
    ])
    res = parse_report("jest-json", path, root="/w")
    kinds = {f.test: f.kind for f in res.failures}
    assert kinds == {"crash.test.js": "test", "broken.test.js": "load"}
    assert res.load_error is not None and "crash.test.js" not in res.load_error


def test_node_tap_file_killed_by_a_signal_is_a_failing_test_file(tmp_path: Path) -> None:
    tap = (
        "TAP version 13\n"
        "# Subtest: /w/test/crash.test.js\n"
        "not ok 1 - /w/test/crash.test.js\n"
        "  ---\n  duration_ms: 190\n  location: '/w/test/crash.test.js:1:1'\n"
        "  failureType: 'testCodeFailure'\n  exitCode: ~\n  signal: 'SIGKILL'\n"
        "  error: 'test failed'\n  code: 'ERR_TEST_FAILURE'\n  ...\n"
        "1..1\n# tests 1\n# suites 0\n# pass 0\n# fail 1\n# cancelled 0\n# skipped 0\n# todo 0\n"
    )
    path = tmp_path / "report.tap"
    path.write_text(tap)
    res = parse_report("node-tap", str(path), root="/w")
    [f] = res.failures
    assert (f.test, f.kind) == ("test/crash.test.js", "test") and "SIGKILL" in f.message
    assert res.load_error is None


TWO_FILES = [("same name", "a.test.js"), ("same name", "b.test.js")]


def test_the_same_test_name_in_two_files_is_two_failures_in_jest_and_vitest_text() -> None:
    jest = []
    for file in ("a", "b"):
        jest += [f"FAIL ./{file}.test.js", "  ● same name", "", "    Expected: 1", "    Received: 2", "",
                 f"      at Object.toBe ({file}.test.js:1:5)", ""]
    jest += ["Tests:       2 failed, 2 total"]
    res = parse_text("jest", jest)
    assert sorted((f.test, f.file) for f in res.failures) == TWO_FILES
    vitest = ["⎯⎯⎯⎯⎯⎯⎯ Failed Tests 2 ⎯⎯⎯⎯⎯⎯⎯"]
    for file in ("a", "b"):
        vitest += [f" FAIL  {file}.test.js > same name", "AssertionError: expected 1 to be 2",
                   f" ❯ {file}.test.js:2:35", "⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯[1/2]⎯"]
    vitest += ["      Tests  2 failed (2)"]
    res = parse_text("vitest", vitest)
    assert sorted((f.test, f.file) for f in res.failures) == TWO_FILES


def test_vitest_unhandled_error_inside_the_unhandled_errors_section_is_a_failure() -> None:
    lines = [
        "      Tests  1 passed (1)",
        "     Errors  1 error",
        "⎯⎯⎯⎯⎯⎯ Unhandled Errors ⎯⎯⎯⎯⎯⎯",
        "Vitest caught 1 unhandled error during the test run.",
        "⎯⎯⎯⎯⎯⎯ Unhandled Error ⎯⎯⎯⎯⎯⎯⎯",
        "Error: [vitest-pool]: Worker forks emitted error.",
        "Caused by: Error: Worker exited unexpectedly",
        "⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯⎯",
    ]
    res = parse_text("vitest", lines)
    assert res.summary.failed == 1
    [f] = res.failures
    assert f.test == "unhandled error: Error: [vitest-pool]: Worker forks emitted error."
