"""Background jobs: real detached workers running real pytest suites."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from greenloop.closure import jobs
from greenloop.closure.store import Store
from greenloop.errors import UsageError
from greenloop.system import procfs

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("state_backend")]


def suite(ws: Path, body: str) -> Path:
    (ws / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-p no:cacheprovider'\n")
    (ws / "test_it.py").write_text(body)
    return ws


def test_job_runs_records_and_reports(tmp_path: Path) -> None:
    ws = suite(tmp_path, "def test_a():\n    assert 1 == 2\n\ndef test_b():\n    pass\n")
    job_id = jobs.start(ws, session_id="s-job", timeout_ms=60_000)
    assert job_id.startswith("job-")
    first = jobs.status(ws, job_id)
    assert first.job_id == job_id and first.session_id == "s-job"
    done = jobs.status(ws, job_id, wait=True, timeout_s=120)
    assert done.status == "done" and done.finished, done
    assert done.ok is False and done.result is not None and done.result["outcome"] == "red"
    assert done.result["summary"]["failed"] == 1
    data = done.to_json()
    assert data["status"] == "done" and data["run_id"] == done.run_id and data["ended_at"].endswith("Z")
    with Store(ws) as store:  # recorded for the session, so the gate sees it
        run = store.latest_run(session_id="s-job")
    assert run is not None and run.run_id == done.run_id and not run.ok


def test_wait_with_timeout_then_cancel_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid.txt"
    ws = suite(
        tmp_path,
        "import os, time\n\ndef test_slow():\n"
        f"    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "    time.sleep(60)\n",
    )
    job_id = jobs.start(ws, session_id=None, timeout_ms=120_000)
    status = jobs.status(ws, job_id, wait=True, timeout_s=0.3)
    assert not status.finished
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the suite never started"
        time.sleep(0.05)
    # The run may be sandboxed (its own pid namespace): find its processes by the workspace
    # path on their command lines (the worker's argv, the runner's report path).
    assert _processes_with(str(ws))
    cancelled = jobs.cancel(ws, job_id)
    assert cancelled.status == "cancelled"
    deadline = time.monotonic() + 10
    while _processes_with(str(ws)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _processes_with(str(ws)) == [], "processes outlived the cancelled job"


def _processes_with(text: str) -> list[str]:
    return [cmd for pid in procfs.pids() if text in (cmd := procfs.cmdline(pid)) and procfs.alive(pid)]


def test_worker_that_dies_silently_is_reported_lost(tmp_path: Path) -> None:
    ws = suite(tmp_path, "def test_a():\n    pass\n")
    job_id = jobs.start(ws, session_id=None, python="/bin/true")  # exits at once, records nothing
    status = jobs.status(ws, job_id, wait=True, timeout_s=30)
    assert status.status == "lost" and "without recording a result" in (status.error or "")


def test_worker_failure_is_reported_failed(tmp_path: Path) -> None:
    ws = suite(tmp_path, "def test_a():\n    pass\n")
    job_id = jobs.start(ws, session_id=None, framework="no-such-runner")
    status = jobs.status(ws, job_id, wait=True, timeout_s=60)
    assert status.status == "failed" and "no-such-runner" in (status.error or "")


def test_bad_requests(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no job 'job-nope'"):
        jobs.status(tmp_path, "job-nope")
    with pytest.raises(UsageError, match="cannot take on_progress"):
        jobs.start(tmp_path, session_id=None, on_progress=print)
    with pytest.raises(UsageError, match="not a folder"):
        jobs.start(tmp_path / "missing", session_id=None)


def test_a_job_running_on_another_machine_is_not_judged_by_a_pid_here(tmp_path: Path) -> None:
    """With a database several machines share, a job's pid means something only on its own
    host: here it stays running (not lost), says where it runs, and cannot be cancelled."""
    ws = suite(tmp_path, "def test_a():\n    pass\n")
    with Store(ws) as store:
        store.add_job("job-elsewhere", str(ws), "s-other", {})
        # a pid that is not alive here (pid_max is below 2**22 on Linux)
        store.update_job("job-elsewhere", status="running", pid=4_194_304 + 7, host="ci-runner-7")
        store.add_job("job-here", str(ws), "s-here", {})
        store.update_job("job-here", status="running", pid=4_194_304 + 8, host=jobs.this_host())
    there = jobs.status(ws, "job-elsewhere")
    assert (there.status, there.host) == ("running", "ci-runner-7"), there
    assert there.to_json()["host"] == "ci-runner-7"
    with pytest.raises(UsageError, match="runs on ci-runner-7"):
        jobs.cancel(ws, "job-elsewhere")
    assert jobs.status(ws, "job-here").status == "lost"  # this machine's own dead worker is lost
