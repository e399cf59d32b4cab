"""mode resume on real runs cut short: greenloop is SIGKILLed mid-suite (its runner goes on in
its own session), and `greenloop run --mode resume` keeps the test files that had finished,
runs only the others (the half-done one whole), and writes one exact result.

Every test appends its name to a marker file, so the test counts what actually ran: a line
written before the resume starts belongs to the interrupted attempt, one after it to the
rerun. One test blocks the first time it runs (until the resume stops its runner)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from greenloop import api
from greenloop.errors import UsageError
from greenloop.runner.recover import plan_of, resume_token
from greenloop.runner.resume_records import read

from .helpers import REPO, cli, js_workspace, node_workspace, py_workspace

pytestmark = pytest.mark.e2e

SEPARATOR = "--- resume ---"
# file -> (test name, passes?, blocks the first time?)
SUITE = {
    "a": [("a1", True, False), ("a2", True, False)],
    "b": [("b1", True, False), ("b2", False, False)],
    "c": [("c1", True, False), ("c2", True, True)],
    "d": [("d1", True, False)],
}


def _python_files(mark: Path, flag: Path, runner: str) -> dict[str, str]:
    """pytest's test functions, or (unittest) the same as methods of a TestCase."""
    files = {}
    pad = "    " if runner == "unittest" else ""
    for stem, tests in SUITE.items():
        name = f"test_{stem}.py"
        body = f"import os\nimport time\nimport unittest\n\nMARK = {str(mark)!r}\nFLAG = {str(flag)!r}\n"
        if runner == "unittest":
            body += "\n\nclass T(unittest.TestCase):"
        for test, passes, blocks in tests:
            body += f"\n\n{pad}def test_{test}({'self' if pad else ''}):\n"
            body += f"{pad}    with open(MARK, 'a') as fh:\n"
            body += f"{pad}        fh.write('{name}::test_{test}\\n')\n"
            if blocks:
                body += (f"{pad}    if not os.path.exists(FLAG):\n{pad}        open(FLAG, 'w').close()\n"
                         f"{pad}        time.sleep(120)\n")
            body += f"{pad}    assert {passes}\n"
        files[name] = body
    return files


def _js_files(mark: Path, flag: Path, runner: str) -> dict[str, str]:
    files = {}
    for stem, tests in SUITE.items():
        name = f"{stem}.test.{'js' if runner == 'vitest' else 'mjs'}"
        body = f"import {{ test }} from '{'vitest' if runner == 'vitest' else 'node:test'}'\n"
        body += "import { appendFileSync, existsSync, writeFileSync } from 'node:fs'\n"
        body += f"const MARK = {json.dumps(str(mark))}\nconst FLAG = {json.dumps(str(flag))}\n"
        for test, passes, blocks in tests:
            body += f"test('{test}', {{ timeout: 180000 }}, async () => {{\n"
            body += f"  appendFileSync(MARK, '{name}::{test}\\n')\n"
            if blocks:
                body += ("  if (!existsSync(FLAG)) { writeFileSync(FLAG, '')\n"
                         "    await new Promise((r) => setTimeout(r, 120000)) }\n")
            if not passes:
                body += "  throw new Error('b2 is wrong')\n"
            body += "})\n"
        if runner == "vitest" and not any(blocks for _t, _p, blocks in tests):
            # with no results cache (each test starts without one) vitest runs larger files
            # first: the files that finish must be larger than the one that blocks
            body += "// " + "padding " * 400 + "\n"
        files[name] = body
    return files


def _workspace(tmp_path: Path, runner: str) -> tuple[Path, Path, Path, str]:
    mark, flag = tmp_path / "ran.txt", tmp_path / "blocked-once"
    ws = tmp_path / "ws"
    if runner in ("pytest", "unittest"):
        return py_workspace(ws, _python_files(mark, flag, runner)), mark, flag, "test_c.py"
    files = _js_files(mark, flag, runner)
    if runner == "vitest":
        # a cache of the workspace's own: vitest orders files by the durations and failures
        # in its results cache, which under tests/runners/node_modules is every test's (a c.test.js
        # another test made slow or red ran first, blocked, and no file was done to resume from)
        cache = json.dumps(str(tmp_path / "vite-cache"))
        config = f"export default {{ cacheDir: {cache}, test: {{ fileParallelism: false }} }}\n"
        return js_workspace(ws, "vitest", files, config=config), mark, flag, "c.test.js"
    (ws / "package.json").parent.mkdir(parents=True, exist_ok=True)
    return node_workspace(ws, {**files, "package.json": '{"type": "module"}'}), mark, flag, "c.test.mjs"


def _blocked_with_a_file_done(flag: Path, blocking: str) -> Callable[[Path], bool]:
    """Ready once a file has finished and the blocking file's first test is recorded (a
    runner's reporter may send a finished test's result a moment after the next one starts)."""

    def ready(run_dir: Path) -> bool:
        if not flag.exists():
            return False
        records = read(plan_of(json.loads((run_dir / "run.json").read_text())))
        if isinstance(records, str) or not records.done:
            return False
        return any(f.endswith(blocking) and n >= 1 for f, n in records.seen.items())

    return ready


def _killed_mid_suite(
    ws: Path, ready: Callable[[Path], bool], framework: str, *extra: str
) -> tuple[Path, str]:
    """Start `greenloop run` and SIGKILL it once `ready(run folder)` (its runner goes on: the
    resume has to stop it); the run's folder and resume token."""
    env = {k: v for k, v in os.environ.items() if k != "GREENLOOP_SESSION"}
    env["PYTHONPATH"] = str(REPO / "src")
    argv = [sys.executable, "-m", "greenloop", "run", str(ws), "--framework", framework,
            "--sandbox", "full-access", "--session", "s", *extra]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = ws / ".greenloop" / "runs"
    deadline = time.monotonic() + 120
    run_dir: Path | None = None
    try:
        while time.monotonic() < deadline:
            found = [p.parent for p in runs.glob("*/run.json")]
            if found and ready(found[0]):
                run_dir = found[0]
                break
            time.sleep(0.1)
        else:
            pytest.fail("the run never got where the test kills it")
        assert run_dir is not None
        token = resume_token(ws, run_dir.name)
        # while greenloop still runs it, the run is not resumable: refused, nothing started
        with pytest.raises(UsageError, match="still going"):
            api.test_run(ws, mode="resume", resume_token=token)
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # greenloop dies mid-run; its runner does not
        proc.wait(10)
    return run_dir, token


# pytest with a target reruns the unfinished files' collected node ids (what the target chose)
@pytest.mark.parametrize(("runner", "target"), [
    ("pytest", None),
    ("pytest", "test_a.py test_b.py test_c.py test_d.py"),
    ("vitest", None),
    ("node:test", None),
    ("unittest", None),
])
def test_resume_keeps_the_finished_files_and_reruns_only_the_others(
    tmp_path: Path, runner: str, target: str | None
) -> None:
    ws, mark, flag, blocking = _workspace(tmp_path, runner)
    extra = ("--target", target) if target else ()
    run_dir, token = _killed_mid_suite(ws, _blocked_with_a_file_done(flag, blocking), runner, *extra)
    assert not (run_dir / "result.json").exists()
    with mark.open("a") as fh:
        fh.write(SEPARATOR + "\n")

    out = cli("run", str(ws), "--mode", "resume", "--resume-token", token, "--json", cwd=ws, timeout=240)
    assert out.code == 1, out.stderr  # b2 fails: red
    result = out.json
    info = result["resume"]

    # one result, under the interrupted run's id, counts exact: every test once
    assert result["run_id"] == run_dir.name and result["resume_token"] == token
    assert result["outcome"] == "red"
    s = result["summary"]
    assert (s["total"], s["passed"], s["failed"], s["skipped"]) == (7, 6, 1, 0)
    assert [re.split(r"[:. >]+", f["test"])[-1].removeprefix("test_") for f in result["failures"]] == ["b2"]
    assert len(result["passed_tests"]) == 6 == len(set(result["passed_tests"]))

    # which files came from which attempt
    assert info["from_run"] == run_dir.name and not info["whole_suite"]
    assert info["rerun_run"] == f"{run_dir.name}-resume-1" and (run_dir / "resume-1").is_dir()
    kept, rerun = info["kept_files"], info["rerun_files"]
    assert blocking in rerun and kept and not set(kept) & set(rerun)
    assert len(kept) + len(rerun) == 4
    python = runner in ("pytest", "unittest")
    per_file = {f"{'test_' if python else ''}{stem}": len(tests) for stem, tests in SUITE.items()}

    def tests_in(files: list[str]) -> int:
        return sum(n for stem, n in per_file.items() for f in files if f.startswith(stem + "."))

    assert info["kept"] == tests_in(kept)

    # only the unfinished files ran again, each of their tests once; the kept ones not again
    before, _, after = mark.read_text().partition(SEPARATOR + "\n")
    ran_after = after.split()
    assert sorted({line.split("::")[0] for line in ran_after}) == sorted(rerun)
    assert len(ran_after) == len(set(ran_after)) == tests_in(rerun)
    for line in before.split():
        if line.split("::")[0] in kept:
            assert before.split().count(line) == 1
    # the half-done file: its finished test was dropped and the whole file ran again
    assert info["dropped"] >= 1
    assert any("half done" in n and blocking in n and "no test counts twice" in n for n in result["notes"])
    assert any("still running after greenloop stopped" in n for n in result["notes"]), result["notes"]

    stored = json.loads((run_dir / "result.json").read_text())
    assert stored["resume"] == info and stored["summary"] == s
    # in the runner's dialect: the files, or (a narrowed pytest run) their collected node ids
    (said,) = [n for n in result["notes"] if n.startswith(f"resume of {run_dir.name}")]
    assert (f"{blocking}::test_c2" in said) == bool(target) and blocking in said
    # resuming it again changes nothing
    again = api.test_run(ws, mode="resume", resume_token=token)
    assert again.run_id == run_dir.name and "nothing ran" in again.notes[-1]


def test_a_runner_without_a_file_list_runs_the_whole_suite_again_and_says_why(tmp_path: Path) -> None:
    started = tmp_path / "started"
    suite = ("const { writeFileSync } = require('node:fs')\n"
             f"test('quick', () => writeFileSync({json.dumps(str(started))}, ''))\n"
             "test('slow', () => new Promise((r) => setTimeout(r, 30000)), 60000)\n")
    ws = js_workspace(tmp_path / "ws", "jest", {"u.test.js": suite})
    run_dir, token = _killed_mid_suite(ws, lambda _run: started.exists(), "jest")
    (ws / "u.test.js").write_text(suite.replace("30000)", "0)"))  # it no longer hangs
    result = api.test_run(ws, mode="resume", resume_token=token)
    assert result.run_id != run_dir.name and result.summary.total == 2 and result.ok
    assert result.resume is not None and result.resume.whole_suite and result.resume.from_run == run_dir.name
    assert any("jest leaves no record" in n and "whole suite ran again" in n for n in result.notes)
    assert any("still running after greenloop stopped" in n for n in result.notes)


def test_every_file_finished_but_the_report_was_never_written(tmp_path: Path) -> None:
    """The runner was stopped after its last test, before its report: nothing runs again."""
    ws = py_workspace(tmp_path / "ws", {
        "test_a.py": "def test_a():\n    pass\n",
        "test_b.py": "def test_b():\n    assert 1 == 2\n",
        "test_c.py": "import pytest\n\n\n@pytest.mark.skip\ndef test_c():\n    pass\n",
        # the session's end hangs before greenloop's plugin writes its report
        "conftest.py": "import time\n\nimport pytest\n\n\n@pytest.hookimpl(tryfirst=True)\n"
                       "def pytest_sessionfinish(session):\n    time.sleep(60)\n",
    })

    def all_done(run_dir: Path) -> bool:
        records = read(plan_of(json.loads((run_dir / "run.json").read_text())))
        return not isinstance(records, str) and len(records.done) == len(records.files) == 3

    run_dir, token = _killed_mid_suite(ws, all_done, "pytest")
    result = api.test_run(ws, mode="resume", resume_token=token)
    assert result.run_id == run_dir.name and result.outcome == "red" and result.exit_code == 1
    assert (result.summary.total, result.summary.failed, result.summary.skipped) == (3, 1, 1)
    assert [f.test for f in result.failures] == ["test_b.py::test_b"] and result.failures[0].message
    assert result.passed_tests == ("test_a.py::test_a",)
    assert result.skipped_tests == ("test_c.py::test_c",)  # kept from the finished file's records
    assert result.resume is not None and result.resume.rerun_files == () and result.resume.rerun_run is None
    assert result.resume.kept_files == ("test_a.py", "test_b.py", "test_c.py")
    assert not (run_dir / "resume-1").exists()
    assert any("every test file had finished" in n and "nothing ran again" in n for n in result.notes)
