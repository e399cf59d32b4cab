"""Integration modes on real units: a run killed with SIGKILL mid-way is resumed (only its
unfinished cases run, on fresh ports, into the same folder, one result for the whole run, each
case naming its attempt), bad tokens are refused before anything starts, and retry runs the
failed cases first."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from greenloop.errors import UsageError
from greenloop.integration import attempts
from greenloop.integration.modes import retry
from greenloop.integration.result import IntegrationResult
from greenloop.integration.run import integrate

from .itkit import MARK, scan, step, unit, wait_for, write_project


def project_with_a_slow_case(root: Path) -> Path:
    return write_project(
        root,
        [unit("api")],
        [
            {"id": "first", "steps": [step("api", "GET /api/items")]},
            {"id": "slow", "steps": [step("api", "GET /api/slow?s=30")]},
            {"id": "last", "steps": [step("api", "GET /api/items")]},
        ],
    )


def test_a_killed_run_resumes_where_it_stopped(tmp_path: Path, mark: str) -> None:
    project = project_with_a_slow_case(tmp_path / "p")
    env = {**os.environ, MARK: mark}
    proc = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "integrate", str(project), "--json", "--sandbox", "full-access"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    runs = project / "integration" / "runs"
    try:
        assert wait_for(lambda: bool(list(runs.glob("*/cases/0000.json"))), 30), "the first case never ended"
        os.kill(proc.pid, signal.SIGKILL)  # greenloop dies; its units are orphaned
        proc.wait(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    for pid, _ in scan(mark, str(tmp_path)):  # what a reboot would do to the orphans
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    (folder,) = list(runs.iterdir())
    assert not (folder / "result.json").exists()
    first_ports = json.loads((folder / "env.json").read_text())
    token = attempts.resume_token(project, folder.name)
    # attempt 2 runs only `slow` (cut at 3 s now) and `last`
    result = integrate(project, resume_token=token, env=env, sandbox="full-access", grace_s=1.0,
                       health_timeout_s=15.0, record_bugs=False, case_timeout_s=3.0)
    assert result.run_id == folder.name and result.resume_token == token and result.attempts == 2
    rows = {c["id"]: c for c in result.cases}
    assert rows["first"]["attempt"] == 1 and rows["first"]["status"] == "passed"
    assert rows["slow"]["attempt"] == 2 and rows["last"]["attempt"] == 2
    assert rows["last"]["status"] == "passed"
    assert result.cases_total == 3
    log = (folder / "process.log").read_text()
    assert "attempt 2: resuming" in log
    trace = [json.loads(ln) for ln in (folder / "http-trace.ndjson").read_text().splitlines()]
    assert [t["case_id"] for t in trace].count("first") == 1  # `first` was not run again
    assert set(json.loads((folder / "env.json").read_text())) == set(first_ports)  # started again
    assert json.loads((folder / "result.json").read_text())["attempts"] == 2
    # a finished run resumed again: nothing runs
    again = integrate(project, resume_token=token, env=env, sandbox="full-access", record_bugs=False)
    assert "nothing ran" in again.notes[-1]


def test_bad_tokens_are_refused_before_anything_starts(tmp_path: Path, mark: str,
                                                       run: Callable[..., IntegrationResult]) -> None:
    one_case = [{"id": "c", "steps": [step("api", "GET /api/items")]}]
    project = write_project(tmp_path / "p", [unit("api")], one_case)
    done = run(project)
    assert done.resume_token is not None
    other = write_project(tmp_path / "q", [unit("api")], one_case)
    before = sorted((project / "integration" / "runs").iterdir())
    with pytest.raises(UsageError, match="another project"):
        integrate(other, resume_token=done.resume_token)
    with pytest.raises(UsageError, match="no integration run"):
        integrate(project, resume_token="run-19990101-000000-abcdef." + attempts.project_tag(project))
    with pytest.raises(UsageError, match="not one greenloop gave"):
        integrate(project, resume_token="whatever")
    spec = project / "integration" / "spec.json"
    spec.write_text(spec.read_text().replace("/api/items", "/api/items?x=1"))
    with pytest.raises(UsageError, match="changed since"):
        integrate(project, resume_token=done.resume_token)
    assert sorted((project / "integration" / "runs").iterdir()) == before  # nothing was written
    cli = subprocess.run([sys.executable, "-m", "greenloop", "integrate", str(project), "--mode", "resume"],
                         capture_output=True, text=True)
    assert cli.returncode == 2 and "--resume-token" in cli.stderr


def test_retry_runs_the_failed_cases_first(tmp_path: Path, mark: str) -> None:
    project = write_project(
        tmp_path / "p", [unit("api")],
        [{"id": "good", "steps": [step("api", "GET /api/items")]},
         {"id": "bad", "steps": [step("api", "GET /api/items", expect={"status": 201})]}],
    )
    kw: dict[str, Any] = {"env": {**os.environ, MARK: mark}, "sandbox": "full-access", "grace_s": 1.0,
                          "record_bugs": False}
    with pytest.raises(UsageError, match="earlier integration run"):
        retry(project, **kw)
    first = integrate(project, **kw)
    assert not first.ok
    still = retry(project, **kw)
    assert [c["id"] for c in still.cases] == ["bad"] and "did not all pass" in still.notes[-1]
    spec = project / "integration" / "spec.json"
    spec.write_text(spec.read_text().replace('"status": 201', '"status": 200'))
    fixed = retry(project, **kw)
    assert fixed.ok and [c["id"] for c in fixed.cases] == ["good", "bad"]
    assert "then every case ran" in fixed.notes[-1]
