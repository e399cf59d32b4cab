"""Scenarios across runs and surfaces: red -> last_failed -> fix -> green, the DevLoop unit
layout, the human summary, a runner that is not installed, a report that never came, a
verbatim command, the Python API with progress, cancellation and the bounded view."""

from __future__ import annotations

import json
import os
import pty
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from greenloop import api
from greenloop.model import Progress

from .helpers import REPO, cli, js_workspace, processes_under, py_workspace

pytestmark = pytest.mark.e2e

CALC = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add\n\n"
    "def test_adds():\n    assert add(1, 2) == 3\n\n"
    "def test_adds_badly():\n    assert add(2, 2) == 5\n\n"
    "def test_adds_negative():\n    assert add(-1, -1) == -2\n"
)


def test_pytest_red_then_last_failed_then_green(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"calc.py": CALC, "test_calc.py": TESTS})
    first = cli("run", str(ws), "--json")
    assert first.code == 1 and first.json["summary"]["failed"] == 1
    rerun = cli("run", str(ws), "--json", "--last-failed")
    r = rerun.json
    assert rerun.code == 1 and r["summary"] == {"total": 1, "passed": 0, "failed": 1, "skipped": 0}, r
    assert "test_calc.py::test_adds_badly" in r["command"] and "-k" not in r["command"].split()
    assert any(f"reran 1 failure(s) of {first.json['run_id']}" in n for n in r["notes"])
    # the agent "fixes" the test's expectation; the rerun of the last failure is green
    (ws / "test_calc.py").write_text(TESTS.replace("== 5", "== 4"))
    fixed = cli("run", str(ws), "--json", "--last-failed")
    assert fixed.code == 0 and fixed.json["summary"]["total"] == 1, fixed.json
    # nothing failed last time: the full suite runs, and says why
    full = cli("run", str(ws), "--json", "--last-failed")
    assert full.code == 0 and full.json["summary"]["total"] == 3
    assert any("had no failures" in n for n in full.json["notes"])


def test_vitest_last_failed_uses_t_with_describe_path(tmp_path: Path) -> None:
    ws = js_workspace(
        tmp_path / "ws",
        "vitest",
        {
            "a.test.js": (
                "import { describe, it, expect } from 'vitest'\n"
                "describe('outer', () => { describe('in [x]', () => {\n"
                "  it('fails > here', () => { expect(1).toBe(2) })\n"
                "  it('passes', () => {})\n"
                "}) })\n"
                "it('top', () => {})\n"
            )
        },
    )
    first = cli("run", str(ws), "--json")
    assert first.code == 1, first.json
    rerun = cli("run", str(ws), "--json", "--last-failed").json
    assert rerun["summary"]["failed"] == 1 and rerun["summary"]["passed"] == 0, rerun
    assert "-t" in rerun["command"]


def test_devloop_unit_runs_are_also_written_in_the_unit(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "units.json").write_text(json.dumps({"units": [{"id": "calc", "kind": "be"}]}))
    unit = project / "units" / "calc"
    (unit / "code").mkdir(parents=True)
    (unit / "code" / "calc.py").write_text(CALC)
    (unit / "tests").mkdir()
    (unit / "tests" / "test_calc.py").write_text(TESTS)
    (unit / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent / 'code'))\n"
    )
    (unit / "spec.json").write_text(json.dumps({"acceptance_criteria": ["adds numbers"]}))
    done = cli("run", str(unit), "--json")
    r = done.json
    assert done.code == 1, r
    unit_run = unit / "runs" / r["run_id"]
    assert sorted(p.name for p in unit_run.iterdir()) == ["result.json", "stderr.txt", "stdout.txt"]
    assert r["result_ref"] == str(unit_run / "result.json")
    assert json.loads((unit_run / "result.json").read_text()) == r
    assert "1 failed" in (unit_run / "stdout.txt").read_text()
    assert (unit / ".greenloop" / "runs" / r["run_id"] / "result.json").exists()


def test_human_summary_shows_the_failing_tests(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"calc.py": CALC, "test_calc.py": TESTS})
    done = cli("run", str(ws))
    assert done.code == 1
    out = done.stdout
    assert "✗ red" in out and "1 failed, 2 passed (3 tests)" in out
    assert "test_adds_badly" in out and "test_calc.py:7" in out
    assert "expected: 5" in out and "got:      4" in out and "hint:" in out
    assert "result:" in out and "result.json" in out
    assert "\x1b[" not in out + done.stderr  # not a terminal: no colour, no redraws


def test_runner_not_installed_is_broken_with_install_hint(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / "package.json").write_text(json.dumps({"devDependencies": {"vitest": "4"}}))
    (ws / "a.test.js").write_text("")
    done = cli("run", str(ws), "--json")
    r = done.json
    assert (done.code, r["outcome"]) == (3, "broken"), r
    assert "vitest is not installed" in r["crash_reason"] and "npm install -D vitest" in r["crash_reason"]


def test_missing_report_is_broken_with_the_reason(tmp_path: Path) -> None:
    # pytest dies while loading conftest.py, before it can write its junit report
    ws = py_workspace(
        tmp_path / "ws", {"conftest.py": "import os\nos._exit(7)\n", "test_a.py": "def test_a():\n    pass\n"}
    )
    done = cli("run", str(ws), "--json")
    r = done.json
    assert (done.code, r["outcome"], r["crashed"], r["exit_code"]) == (3, "broken", True, 7), r
    assert "report was missing" in r["crash_reason"]


def test_verbatim_command_is_parsed_as_text(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"calc.py": CALC, "test_calc.py": TESTS})
    done = cli(
        "run", str(ws), "--json", "--command", "python -m pytest -q -p no:cacheprovider", "--target", "x"
    )
    r = done.json
    assert done.code == 1 and r["outcome"] == "red", r
    assert r["command"] == "python -m pytest -q -p no:cacheprovider"
    assert r["summary"]["failed"] == 1 and r["summary"]["passed"] == 2
    assert any("text output" in n for n in r["notes"]) and any("target is ignored" in n for n in r["notes"])


def test_api_progress_and_bounded_view(tmp_path: Path) -> None:
    many = "".join(f"def test_fail_{i}():\n    assert {i} == -1\n\n" for i in range(12))
    ws = py_workspace(tmp_path / "ws", {"test_many.py": many + "def test_ok():\n    pass\n"})
    seen: list[Progress] = []
    result = api.test_run(str(ws), on_progress=seen.append, sandbox="full-access")
    assert result.outcome == "red" and result.summary.failed == 12
    view = api.bounded(result)
    assert len(view["failures"]) == 5 and all(f["hint"] for f in view["failures"])
    assert len(view["more_failures"]) == 7 and view["more_failures_omitted"] == 0
    assert view["result_ref"] == result.result_ref and Path(view["result_ref"]).exists()
    assert view["summary"] == {"total": 13, "passed": 1, "failed": 12, "skipped": 0}
    assert len(json.dumps(view)) < 40_000
    if seen:  # the pytest progress lines are counted as they come
        assert seen[-1].done <= 13 and seen[-1].failed <= 12


def test_api_cancel_stops_the_whole_tree(tmp_path: Path) -> None:
    ws = py_workspace(
        tmp_path / "ws",
        {
            "test_hang.py": "import subprocess, time\n\ndef test_hang():\n"
            "    subprocess.Popen(['sleep', '600'], start_new_session=True)\n    time.sleep(600)\n"
        },
    )
    cancel = threading.Event()
    timer = threading.Timer(1.5, cancel.set)
    timer.start()
    start = time.monotonic()
    try:
        result = api.test_run(str(ws), cancel=cancel, timeout_ms=60_000)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 15
    assert (result.outcome, result.aborted, result.ok) == ("broken", True, False)
    assert processes_under(ws) == []


def test_demo_project_is_red_with_a_structured_failure(tmp_path: Path) -> None:
    demo = tmp_path / "repo"
    # Without the .venv that scripts/demo provisions: this run uses the test interpreter's pytest.
    ignore = shutil.ignore_patterns(".venv", ".greenloop")
    shutil.copytree(REPO / "examples" / "demo", demo / "examples" / "demo", ignore=ignore)
    done = cli("run", str(demo / "examples" / "demo"))
    assert done.code == 1 and "test_discount_code_takes_ten_percent_off" in done.stdout
    assert "expected: 1800" in done.stdout and "got:      200" in done.stdout


def test_live_progress_redraws_on_a_terminal(tmp_path: Path) -> None:
    # 30 tests of 0.1 s each: long enough to see several redraws with growing counts
    slow = "".join(f"def test_{i}():\n    time.sleep(0.1)\n\n" for i in range(30))
    ws = py_workspace(tmp_path / "ws", {"test_slow.py": "import time\n\n" + slow})
    master, slave = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), TERM="xterm")
    child = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "run", str(ws)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out, _ = child.communicate(timeout=60)
    os.close(master)
    assert child.returncode == 0, out
    screen = b"".join(chunks).decode()
    counts = [int(m) for m in re.findall(r"\rrunning… (\d+) passed", screen)]
    assert counts and counts[-1] > 0, screen
    assert counts == sorted(counts) and len(set(counts)) > 1, counts
    assert "✓ green" in out.decode() and "30 passed" in out.decode()


def test_agent_and_ci_variables_do_not_change_the_runner_output(tmp_path: Path) -> None:
    ws = js_workspace(
        tmp_path / "ws",
        "vitest",
        {
            "a.test.js": (
                "import { it, expect } from 'vitest'\n"
                "it('passes', () => {})\nit('fails', () => { expect(1).toBe(2) })\n"
            )
        },
    )
    env = {
        "CLAUDECODE": "1",
        "AI_AGENT": "claude-code",
        "CURSOR_AGENT": "1",
        "GITHUB_ACTIONS": "true",
        "FORCE_COLOR": "1",
    }
    done = cli("run", str(ws), "--json", env=env)
    r = done.json
    assert done.code == 1 and r["summary"]["failed"] == 1, r
    run_dir = ws / ".greenloop" / "runs" / r["run_id"]
    output = (run_dir / "stdout.txt").read_text() + (run_dir / "stderr.txt").read_text()
    assert "::error" not in output
    # the shell's FORCE_COLOR is the test's to see (a suite may assert on it): the output is
    # coloured as in a bare run, and the parsers strip it
    assert "\x1b[" in output
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    assert "✓ passes" in output  # vitest's default reporter lists passing tests; the agent one omits them
    assert "FAIL  a.test.js > fails" in output


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupting_greenloop_stops_the_tree_and_keeps_the_result(tmp_path: Path, sig: int) -> None:
    ws = py_workspace(
        tmp_path / "ws",
        {
            "test_hang.py": "import subprocess, time\n\ndef test_hang():\n"
            "    subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
            "    open('started', 'w').close()\n    time.sleep(600)\n"
        },
    )
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    child = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", "full-access"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + 30
    while not (ws / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(sig)
    out, err = child.communicate(timeout=30)
    assert child.returncode == 130, err
    r = json.loads(out)
    assert (r["outcome"], r["aborted"], r["ok"]) == ("broken", True, False)
    assert (ws / ".greenloop" / "runs" / r["run_id"] / "result.json").exists()
    assert processes_under(ws) == []


def test_npm_test_script_runs_the_full_suite_parsed_as_text(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "package.json").write_text(json.dumps({"name": "x", "scripts": {"test": "node --test"}}))
    (ws / "math.test.js").write_text(
        "const test = require('node:test')\nconst assert = require('node:assert')\n"
        "test('adds', () => { assert.strictEqual(1 + 2, 3) })\n"
        "test('adds badly', () => { assert.strictEqual(2 + 2, 5) })\n"
    )
    first = cli("run", str(ws), "--json")
    r = first.json
    assert (first.code, r["framework"], r["outcome"]) == (1, "npm-test", "red"), r
    assert r["summary"] == {"total": 2, "passed": 1, "failed": 1, "skipped": 0}
    (failure,) = r["failures"]
    assert (failure["test"], failure["line"]) == ("adds badly", 4)
    assert (failure["expected"], failure["got"]) == ("5", "4")
    assert any("parsed as text" in n for n in r["notes"])
    again = cli("run", str(ws), "--json", "--last-failed").json
    assert again["summary"]["total"] == 2 and any("cannot filter" in n for n in again["notes"])


def test_the_workspace_virtualenv_runs_pytest(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"calc.py": CALC, "test_calc.py": TESTS.replace("== 5", "== 4")})
    # a real virtualenv that sees this interpreter's pytest through its system site-packages
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(ws / ".venv")],
        check=True,
    )
    done = cli("run", str(ws), "--json")
    r = done.json
    assert done.code == 0, r
    assert r["command"].startswith(str(ws / ".venv" / "bin" / "python") + " -m pytest")
    assert any("virtualenv .venv" in n for n in r["notes"])


def test_a_broken_bug_log_does_not_lose_the_run(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"calc.py": CALC, "test_calc.py": TESTS})
    (ws / ".greenloop" / "bugs.ndjson").mkdir(parents=True)  # the bug log cannot be written
    done = cli("run", str(ws), "--json")
    r = done.json
    assert (done.code, r["outcome"], r["summary"]["failed"]) == (1, "red", 1), r
    assert any("bugs.ndjson" in n or "could not be recorded" in n for n in r["notes"]), r["notes"]
    assert json.loads(Path(r["result_ref"]).read_text()) == r


def test_pytest_last_failed_reruns_exactly_the_failures_not_their_namesakes(tmp_path: Path) -> None:
    """Two tests named test_x (in two classes), one failing; a parametrised case with a space
    and one with a slash: the rerun runs the failing node ids only, the way pytest --lf would."""
    tests = (
        "import pytest\n\n\nclass TestA:\n    def test_x(self):\n        assert 1 == 2\n\n\n"
        "class TestB:\n    def test_x(self):\n        assert 1 == 1\n\n\n"
        '@pytest.mark.parametrize("v", ["a b", "c/d"])\ndef test_p(v):\n    assert v == "c/d"\n'
    )
    ws = py_workspace(tmp_path / "ws", {"test_names.py": tests})
    first = cli("run", str(ws), "--json")
    assert first.code == 1 and first.json["summary"]["failed"] == 2, first.json
    again = cli("run", str(ws), "--json", "--last-failed").json
    assert again["summary"] == {"total": 2, "passed": 0, "failed": 2, "skipped": 0}, again
    assert sorted(f["test"] for f in again["failures"]) == [
        "test_names.py::TestA::test_x", "test_names.py::test_p[a b]"]
