"""docs/devloop-walkthrough.md, step by step, on a copy of examples/todo through the CLI:
test -> red -> retry -> green -> integration run -> killed -> resume -> done."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop.bugs.log import BugLog
from greenloop.devloop import timeline, units

from .itkit import MARK, scan, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "todo"
MODULES = EXAMPLE / "units" / "todo-api" / "node_modules"

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def gl(project: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "greenloop", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_walkthrough(tmp_path: Path, mark: str) -> None:
    project = tmp_path / "todo"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("node_modules", "runs", "bugs.ndjson*",
                                                                    ".greenloop", "timeline.ndjson"))
    (project / "units" / "todo-api" / "node_modules").symlink_to(MODULES, target_is_directory=True)
    env = {**os.environ, MARK: mark}
    server = project / "units" / "auth" / "code" / "server.py"
    right = '"username_and_password_required"'
    server.write_text(server.read_text().replace(right, '"username_required"'))

    # 1. test, red
    red = gl(project, "run", "units/auth", "--json", env=env)
    assert red.returncode == 1, red.stderr
    run1 = json.loads(red.stdout)
    assert [f["test"] for f in run1["failures"]] == ["tests/test_server.py::test_missing_fields_give_400"]
    assert (project / "units" / "auth" / "runs" / run1["run_id"] / "result.json").is_file()
    (bug,) = BugLog(project / "bugs.ndjson").fold().bugs
    assert bug.status == "open" and bug.run_id == run1["run_id"]
    kinds = [(e.kind, e.unit_id) for e in timeline.read(project / "timeline.ndjson")[0]]
    assert kinds == [("unit_tested", "auth"), ("test_failed", "auth"), ("bug_opened", "auth")]
    assert units.read_status(project)["auth"]["status"] == "failed"

    # 2. retry, green
    server.write_text(server.read_text().replace('"username_required"', right))
    green = gl(project, "run", "units/auth", "--mode", "retry", "--json", env=env)
    assert green.returncode == 0, green.stderr
    run3 = json.loads(green.stdout)
    retry = run3["retry"]
    assert retry["previous_run"] == run1["run_id"] and retry["full_suite"]
    assert retry["fixed"] == ["tests/test_server.py::test_missing_fields_give_400"]
    assert retry["remain"] == retry["new"] == []
    fixed = BugLog(project / "bugs.ndjson").get(bug.id)
    closing = (fixed.status, fixed.closed_by, fixed.evidence)
    assert closing == ("fixed", retry["first_pass_run"], "test_passed")
    assert units.read_status(project)["auth"] == {**units.read_status(project)["auth"], "status": "passed",
                                                  "run_id": run3["run_id"]}

    # 3. integration run, killed after its first case
    proc = subprocess.Popen([sys.executable, "-m", "greenloop", "integrate", "--sandbox", "full-access"],
                            cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    runs = project / "integration" / "runs"
    try:
        assert wait_for(lambda: bool(list(runs.glob("*/cases/0000.json"))), 60), "no case finished"
        os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    for pid, _ in scan(mark, str(tmp_path)):  # the orphaned units, as a reboot would end them
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    (folder,) = list(runs.iterdir())
    token = next(w.rstrip(")") for w in err.split() if w.startswith(folder.name + "."))
    attempts = json.loads((folder / "attempts.json").read_text())
    assert len(attempts) == 1 and attempts[0]["resume_token"] == token
    # the kill may land inside the next case's atomic write: its hidden temporary is not a case
    finished = sorted(p.name for p in (folder / "cases").glob("*.json"))
    assert finished and finished[0] == "0000.json"
    assert timeline.read(project / "timeline.ndjson")[0][-1].kind == "integration_started"

    # 4. resume, done
    done = gl(project, "integrate", "--mode", "resume", "--resume-token", token, "--json",
              "--sandbox", "full-access", env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    result = json.loads(done.stdout)
    assert result["ok"] and result["attempts"] == 2 and result["run_id"] == folder.name
    attempt_of = {c["id"]: c["attempt"] for c in result["cases"]}
    cases = json.loads((project / "integration" / "spec.json").read_text())["cases"]
    assert attempt_of[cases[0]["id"]] == 1 and set(attempt_of.values()) <= {1, 2}
    assert "attempt 2: resuming" in (folder / "process.log").read_text()
    assert BugLog(project / "bugs.ndjson").get(bug.id).status == "verified"
    tail = [e.kind for e in timeline.read(project / "timeline.ndjson")[0]][-3:]
    assert tail == ["integration_started", "integration_done", "bug_closed"]
    story = gl(project, "timeline", env=env)
    assert story.returncode == 0 and "integration_done" in story.stdout

    # the unit run's safety net: greenloop and its runner die mid-run, resume finishes it as one
    # result under the interrupted run's id (the finished files kept, the others run again; here
    # the one test file, or the whole suite when pytest had not collected yet)
    unit_runs = project / "units" / "auth" / ".greenloop" / "runs"
    before = set(unit_runs.glob("*"))
    argv = [sys.executable, "-m", "greenloop", "run", "units/auth", "--sandbox", "full-access"]
    quiet = subprocess.DEVNULL
    killed = subprocess.Popen(argv, cwd=project, env=env, stdout=quiet, stderr=quiet)
    try:
        assert wait_for(lambda: any(p.parent not in before for p in unit_runs.glob("*/run.json")), 60)
    finally:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
    (cut,) = [p.parent for p in unit_runs.glob("*/run.json") if p.parent not in before]
    for pid, _ in scan(mark, str(tmp_path)):  # its runner too, as a reboot would end it
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    from greenloop.runner.recover import resume_token

    assert not (cut / "result.json").exists()  # killed while pytest was still starting
    assert units.read_status(project)["auth"]["status"] == "testing"
    resumed = gl(project, "run", "units/auth", "--mode", "resume", "--resume-token",
                 resume_token(project / "units" / "auth", cut.name), "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    last = json.loads(resumed.stdout)
    assert last["resume"]["from_run"] == cut.name and last["summary"]["total"] == 5
    assert (project / "units" / "auth" / "runs" / last["run_id"] / "result.json").is_file()
    assert units.read_status(project)["auth"]["status"] == "passed"
