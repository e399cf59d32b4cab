"""timeline.ndjson: appended by runs and integration runs, read tolerantly, safe under
concurrent writers, printed and followed by `greenloop timeline`, offered over MCP."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest

from greenloop.devloop import timeline as tl
from greenloop.model import Failure, Summary
from greenloop.result import RunResult


def test_append_and_read_back_skipping_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "timeline.ndjson"
    assert tl.append(path, [tl.event("unit_tested", "api", "run-1", "red")]) is None
    with path.open("ab") as fh:
        fh.write(b'{"at": "x", "kind": "unit_te')  # a writer died mid-line
    assert tl.append(path, [tl.event("test_passed", "api", "run-2", "green")]) is None
    events, warnings = tl.read(path)
    assert [e.ref for e in events] == ["run-1", "run-2"]
    assert len(warnings) == 1 and "line 2" in warnings[0]
    assert tl.read(path, kinds=("test_passed",))[0][0].ref == "run-2"
    assert tl.read(path, last=1)[0][0].ref == "run-2"
    assert tl.read(tmp_path / "missing.ndjson") == ([], [])


def test_events_of_a_run_name_the_outcome_and_the_bugs(tmp_path: Path) -> None:
    moved = ({"id": "bug-0", "from": "open", "to": "fixed", "evidence": "test_passed"},)
    red = RunResult(run_id="run-1", ok=False, outcome="red", framework="pytest", command="pytest",
                    exit_code=1, summary=Summary(total=3, passed=2, failed=1), failures=(Failure(test="t"),),
                    bugs_opened=("bug-1",), bugs_transitioned=moved)
    kinds = [(e.kind, e.ref) for e in tl.events_of_run(red, "api")]
    assert kinds == [("unit_tested", "run-1"), ("test_failed", "run-1"), ("bug_opened", "bug-1"),
                     ("bug_closed", "bug-0")]
    closed = tl.events_of_run(red, "api")[-1]
    assert closed.summary == "open -> fixed by run-1 (test_passed)"


def _writer(path: str, n: int, who: int) -> None:
    for i in range(n):
        tl.append(path, [tl.event("unit_tested", f"unit-{who}", f"run-{who}-{i}", "x" * 300)])


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "timeline.ndjson"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), 40, w)) for w in range(12)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    events, warnings = tl.read(path)
    assert warnings == []
    assert sorted(e.ref for e in events) == sorted(f"run-{w}-{i}" for w in range(12) for i in range(40))


@pytest.mark.e2e
def test_runs_append_their_events_in_order(tmp_path: Path) -> None:
    from greenloop import api

    root = tmp_path / "proj"
    unit = root / "units" / "calc"
    (unit / "tests").mkdir(parents=True)
    (root / "units.json").write_text(json.dumps({"units": [{"id": "calc"}]}))
    (unit / "pytest.ini").write_text("[pytest]\n")
    test_file = unit / "tests" / "test_calc.py"
    test_file.write_text("def test_adds():\n    assert 2 - 3 == 5\n")
    red = api.test_run(unit, timeout_ms=60_000, sandbox="full-access")
    test_file.write_text("def test_adds():\n    assert 2 + 3 == 5\n")
    green = api.test_run(unit, timeout_ms=60_000, sandbox="full-access")
    events, _ = tl.read(root / "timeline.ndjson")
    assert [(e.kind, e.unit_id) for e in events] == [
        ("unit_tested", "calc"), ("test_failed", "calc"), ("bug_opened", "calc"),
        ("unit_tested", "calc"), ("test_passed", "calc"), ("bug_closed", "calc")]
    assert events[0].ref == red.run_id and events[3].ref == green.run_id
    assert events[2].ref == red.bugs_opened[0] == events[5].ref
    # the CLI prints the same, as JSON and as a table
    out = subprocess.run([sys.executable, "-m", "greenloop", "timeline", str(root), "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert [e["kind"] for e in json.loads(out)["events"]] == [e.kind for e in events]
    table = subprocess.run([sys.executable, "-m", "greenloop", "timeline", str(unit), "--kind", "bug_closed"],
                           capture_output=True, text=True, check=True).stdout
    assert "bug_closed" in table and "unit_tested" not in table
    bad = subprocess.run([sys.executable, "-m", "greenloop", "timeline", str(root), "--kind", "nope"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "unit_tested" in bad.stderr


def test_follow_prints_events_as_they_are_appended(tmp_path: Path) -> None:
    (tmp_path / "units.json").write_text('{"units": []}')
    path = tmp_path / "timeline.ndjson"
    tl.append(path, [tl.event("unit_tested", "old", "run-old", "before")])
    argv = [sys.executable, "-m", "greenloop", "timeline", str(tmp_path), "--follow", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["ref"] == "run-old"
        time.sleep(0.5)
        tl.append(path, [tl.event("integration_started", "integration", "int-1", "2 cases")])
        t = time.monotonic()
        line = json.loads(proc.stdout.readline())
        assert line["kind"] == "integration_started" and time.monotonic() - t < 5
    finally:
        proc.terminate()
        proc.wait(10)
