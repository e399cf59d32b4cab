"""mode retry on real pytest runs: the previous failures first, then the whole suite only when
they pass, one result saying what was fixed, what remains and what is new."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop import api
from greenloop.errors import UsageError

from .helpers import py_workspace

pytestmark = pytest.mark.e2e

SUITE = (
    "import shop\n\n"
    "def test_a():\n    assert shop.a() == 1\n\n"
    "def test_b():\n    assert shop.b() == 2\n\n"
    "def test_c():\n    assert shop.c() == 3\n"
)


def shop(a: int, b: int, c: int) -> str:
    return f"def a():\n    return {a}\n\ndef b():\n    return {b}\n\ndef c():\n    return {c}\n"


def test_retry_runs_the_failures_first_then_the_suite(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"test_shop.py": SUITE, "shop.py": shop(0, 0, 3)})
    with pytest.raises(UsageError, match="previous run"):
        api.test_run(ws, mode="retry", session_id="s", sandbox="full-access")
    first = api.test_run(ws, session_id="s", sandbox="full-access")
    assert sorted(f.test for f in first.failures) == ["test_shop.py::test_a", "test_shop.py::test_b"]

    (ws / "shop.py").write_text(shop(1, 0, 3))  # a fixed, b still wrong
    one = api.test_run(ws, mode="retry", session_id="s", sandbox="full-access")
    assert one.outcome == "red" and one.selection == "last_failed" and one.summary.total == 2
    assert one.retry is not None
    r = one.retry
    assert (r.previous_run, r.fixed, r.remain, r.new, r.full_suite) == (
        first.run_id, ("test_shop.py::test_a",), ("test_shop.py::test_b",), (), False)
    assert any("did not run" in n for n in one.notes)
    stored = json.loads(Path(one.result_ref or "").read_text())
    assert stored["retry"]["remain"] == ["test_shop.py::test_b"]  # the stored result says it too

    (ws / "shop.py").write_text(shop(1, 2, 0))  # b fixed, c broken
    two = api.test_run(ws, mode="retry", session_id="s", sandbox="full-access")
    assert two.retry is not None and two.retry.full_suite and two.selection is None
    assert two.summary.total == 3 and [f.test for f in two.failures] == ["test_shop.py::test_c"]
    assert (two.retry.previous_run, two.retry.fixed, two.retry.remain, two.retry.new) == (
        one.run_id, ("test_shop.py::test_b",), (), ("test_shop.py::test_c",))
    assert two.retry.first_pass_run not in (None, two.run_id)
    with pytest.raises(UsageError, match="drop target"):
        api.test_run(ws, mode="retry", target="test_shop.py")
    with pytest.raises(UsageError, match="mode must be one of"):
        api.test_run(ws, mode="again")
    # the CLI takes --mode, and refuses a bad one with exit 2
    out = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws), "--mode", "retry", "--json",
                          "--session", "s", "--sandbox", "full-access"], capture_output=True, text=True)
    assert out.returncode == 1 and json.loads(out.stdout)["retry"]["remain"] == ["test_shop.py::test_c"]
    bad = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws), "--mode", "again"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "mode must be one of" in bad.stderr


def _kill_runner_of(run_dir: Path) -> None:
    """Kill whatever still runs for a run folder (the runner outlives greenloop: its own session)."""
    import contextlib
    import os
    import signal

    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        with contextlib.suppress(OSError):
            if str(run_dir).encode() in Path(f"/proc/{pid}/environ").read_bytes():
                os.kill(int(pid), signal.SIGKILL)


def test_resume_rebuilds_a_run_from_the_runners_report_or_runs_it_again(tmp_path: Path) -> None:
    import os
    import signal
    import time

    suite = "import time\n\ndef test_slow():\n    time.sleep(2)\n\ndef test_bad():\n    assert 1 == 2\n"
    ws = py_workspace(tmp_path / "ws", {"test_s.py": suite})

    def killed_run(*extra: str) -> tuple[Path, str]:
        argv = [sys.executable, "-m", "greenloop", "run", str(ws), "--sandbox", "full-access", *extra]
        runs = ws / ".greenloop" / "runs"
        before = set(runs.glob("*"))  # a run resumed as a new run stays without a result of its own
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def unfinished() -> list[Path]:
            return [p.parent for p in runs.glob("*/run.json")
                    if not (p.parent / "result.json").exists() and p.parent not in before]

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not unfinished():
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)  # greenloop dies mid-run
        proc.wait(10)
        (run_dir,) = unfinished()
        from greenloop.runner.recover import resume_token

        return run_dir, resume_token(ws, run_dir.name)

    # 1. the runner goes on and finishes: the result is built from its report
    run_dir, token = killed_run()
    report = json.loads((run_dir / "run.json").read_text())["plan"]["report_file"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not Path(report).exists():
        time.sleep(0.1)
    rebuilt = api.test_run(ws, mode="resume", resume_token=token)
    assert rebuilt.run_id == run_dir.name and rebuilt.outcome == "red"
    assert (rebuilt.summary.total, rebuilt.summary.failed) == (2, 1) and rebuilt.bugs_opened
    assert any(n.startswith("recovered:") for n in rebuilt.notes) and rebuilt.resume_token == token
    assert json.loads((run_dir / "result.json").read_text())["outcome"] == "red"
    # resuming a finished run changes nothing
    again = api.test_run(ws, mode="resume", resume_token=token)
    assert again.run_id == run_dir.name and "nothing ran" in again.notes[-1]

    # 2. the runner died too: what had not finished runs again (here the one test file, or the
    # whole suite when the runner died before pytest had collected), counted once
    run_dir, token = killed_run()
    _kill_runner_of(run_dir)
    rerun = api.test_run(ws, mode="resume", resume_token=token)
    assert rerun.summary.total == 2 and rerun.resume is not None and rerun.resume.from_run == run_dir.name
    assert any(f"resume of {run_dir.name}" in n for n in rerun.notes)

    # 3. a verbatim command cannot be narrowed to files: the whole suite runs again, and says why
    run_dir, token = killed_run("--command", f"{sys.executable} -m pytest -q")
    _kill_runner_of(run_dir)
    whole = api.test_run(ws, mode="resume", resume_token=token)
    assert whole.run_id != run_dir.name and whole.summary.total == 2
    assert whole.resume is not None and whole.resume.whole_suite and whole.resume.rerun_run == whole.run_id
    assert any("verbatim command" in n and "whole suite ran again" in n for n in whole.notes), whole.notes

    # bad tokens: refused before anything starts
    with pytest.raises(UsageError, match="not one greenloop gave"):
        api.test_run(ws, mode="resume", resume_token="nope")
    with pytest.raises(UsageError, match="another workspace"):
        api.test_run(ws, mode="resume", resume_token=f"{run_dir.name}.00000000")
    with pytest.raises(UsageError, match="resume_token"):
        api.test_run(ws, mode="resume")
