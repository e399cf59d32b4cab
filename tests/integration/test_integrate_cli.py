"""`greenloop integrate` end to end: summary and --json, exit codes, Ctrl-C and SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from greenloop.cli import main

from .itkit import MARK, step, unit, wait_for, write_project


def test_summary_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("api")],
        [
            {"id": "good", "steps": [step("api", "GET /api/items", expect={"status": 200})]},
            {
                "id": "bad",
                "steps": [step("api", "GET /api/items", expect={"assert": ["$.items.length == 9"]})],
            },
        ],
    )
    assert main(["integrate", str(project), "--sandbox", "full-access", "--case", "good"]) == 0
    out = capsys.readouterr()
    assert "integration PASSED: 1/1 cases passed" in out.out and "✓ good" in out.out
    assert "greenloop: case good" in out.err  # progress goes to stderr

    junit = tmp_path / "j.xml"
    code = main(["integrate", str(project), "--sandbox", "full-access", "--json", "--junit", str(junit)])
    assert code == 1
    data = json.loads(capsys.readouterr().out)
    assert data["cases_failed"] == 1 and data["failures"][0]["case_id"] == "bad"
    assert data["failures"][0]["bug_id"]  # the bug bridge recorded it
    assert junit.is_file() and (project / "bugs.ndjson").is_file()
    for key in (
        "ok",
        "run_id",
        "result_ref",
        "cases_total",
        "cases_passed",
        "cases_failed",
        "cases_timeout",
        "failures",
        "ports_used",
        "surviving_processes",
        "category_hint",
        "crashed",
        "duration_ms",
    ):
        assert key in data

    crashing = write_project(
        tmp_path / "q", [unit("api", "crash")], [{"id": "c", "steps": [step("api", "GET /")]}]
    )
    assert main(["integrate", str(crashing), "--sandbox", "full-access"]) == 3
    text = capsys.readouterr().out
    assert "integration BROKEN" in text and "startup failed (exited)" in text and "boom: giving up" in text

    # From inside a unit's folder, the project above it is found.
    assert (
        main(["integrate", str(project / "units" / "api"), "--sandbox", "full-access", "--case", "good"]) == 0
    )
    assert "integration PASSED" in capsys.readouterr().out

    assert main(["integrate", str(tmp_path / "nowhere")]) == 2
    assert main(["integrate", str(project), "--junit", str(tmp_path / "no" / "dir" / "j.xml")]) == 2
    assert "create it first" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGTERM])
def test_interrupt_tears_everything_down_and_exits_130(tmp_path: Path, mark: str, sig: int) -> None:
    project = write_project(
        tmp_path / "p",
        # With SIGINT, one unit ignores SIGTERM: the one test that waits the real 5 s grace.
        [
            unit("base"),
            unit("stubborn", "ignore-term" if sig == signal.SIGINT else "ok", depends_on=["base"]),
            unit("daemon", "daemon"),
        ],
        [{"id": "long", "steps": [step("stubborn", "GET /api/slow?s=60")]}],
    )
    env = {**os.environ, MARK: mark}
    proc = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "integrate", str(project), "--json", "--sandbox", "full-access"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        runs = project / "integration" / "runs"

        def running() -> bool:
            logs = list(runs.glob("*/process.log")) if runs.is_dir() else []
            return bool(logs) and "running cases" in logs[0].read_text()

        assert wait_for(running, 20), (
            proc.stderr.read() if proc.poll() is not None and proc.stderr else "not started"
        )
        time.sleep(0.2)
        t0 = time.monotonic()
        proc.send_signal(sig)
        code = proc.wait(timeout=20)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130
    if sig == signal.SIGINT:
        assert 5 <= took < 5 + 10  # the real 5 s grace for the unit that ignores SIGTERM, then SIGKILL
    else:
        assert took < 15  # nothing waits the grace: every unit stops on SIGTERM
    [result_file] = runs.glob("*/result.json")
    result = json.loads(result_file.read_text())
    assert result["interrupted"] is True and result["ok"] is False
    assert result["surviving_processes"] == []
    log = result_file.with_name("process.log").read_text()
    assert "teardown" in log and "no process left" in log
    # no_survivors scans /proc for this test's marker and folder afterwards.


def test_interrupt_while_units_start(tmp_path: Path, mark: str) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("sick", "never-healthy"), unit("web", depends_on=["sick"])],
        [{"id": "c", "steps": [step("web", "GET /api/items")]}],
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "integrate", str(project), "--sandbox", "full-access"],
        env={**os.environ, MARK: mark},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    runs = project / "integration" / "runs"
    try:

        def polling() -> bool:
            logs = list(runs.glob("*/process.log")) if runs.is_dir() else []
            return bool(logs) and "health sick GET" in logs[0].read_text()

        assert wait_for(polling, 20)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130
    [result_file] = runs.glob("*/result.json")
    result = json.loads(result_file.read_text())
    assert result["interrupted"] and result["surviving_processes"] == []
    assert [c["status"] for c in result["cases"]] == ["not_run"]
