"""The closure loop on a real pytest suite, everything as real processes.

`greenloop run` runs the suite, `greenloop hook claude-code` answers the harness's events, and
the source file is rewritten between runs: red, stop -> steer; still red, stop -> steer;
stop -> released and unresolved; new turn -> new budget; fix and run green -> satisfied and
the unresolved record cleared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

TESTS = """\
from calc import add, div


def test_add():
    assert add(2, 3) == 5


def test_div():
    assert div(8, 2) == 4


def test_always():
    assert True
"""


def env_for(ws: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GREENLOOP_SESSION", "CLAUDE_CODE_SESSION_ID", "CLAUDE_PROJECT_DIR", "PYTEST_ADDOPTS")
    }
    env["GREENLOOP_CONFIG_HOME"] = str(ws / ".no-user-config")
    env.update(extra)
    return env


def greenloop(ws: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "greenloop", *args],
        cwd=ws,
        input=stdin,
        capture_output=True,
        text=True,
        env=env_for(ws, **env),
        timeout=180,
    )


def write_source(ws: Path, add: str, div: str) -> None:
    (ws / "calc.py").write_text(f"def add(a, b):\n    return {add}\n\n\ndef div(a, b):\n    return {div}\n")


def stop(ws: Path, session: str) -> dict[str, Any] | None:
    payload = {
        "session_id": session,
        "transcript_path": str(ws / "t.jsonl"),
        "cwd": str(ws),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
        "last_assistant_message": "All done.",
    }
    p = greenloop(ws, "hook", "claude-code", stdin=json.dumps(payload))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if p.stdout.strip() else None


def prompt(ws: Path, session: str) -> None:
    payload = {"session_id": session, "cwd": str(ws), "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    p = greenloop(ws, "hook", "claude-code", stdin=json.dumps(payload))
    assert p.returncode == 0 and p.stdout == "", p.stderr


def check(ws: Path, session: str) -> tuple[int, dict[str, Any]]:
    p = greenloop(ws, "check", "--session", session, "--json")
    return p.returncode, json.loads(p.stdout)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-p no:cacheprovider'\n")
    (tmp_path / "test_calc.py").write_text(TESTS)
    return tmp_path


def test_red_steer_steer_release_new_turn_then_green(ws: Path) -> None:
    session = "sess-scenario"
    prompt(ws, session)
    write_source(ws, "a - b", "a / b")  # add is wrong
    run = greenloop(ws, "run", "--json", CLAUDE_CODE_SESSION_ID=session)  # the harness's variable
    assert run.returncode == 1, run.stderr
    result = json.loads(run.stdout)
    assert result["session_id"] == session and result["outcome"] == "red"

    first = stop(ws, session)
    assert first is not None and first["decision"] == "block"
    assert "test_add" in first["reason"] and "test_div" not in first["reason"]

    write_source(ws, "a + b", "a * b")  # add fixed, div broken: still red
    assert greenloop(ws, "run", "--session", session).returncode == 1
    second = stop(ws, session)
    assert second is not None and second["decision"] == "block"
    assert "test_div" in second["reason"] and "Intercept 2 of 2" in second["reason"]

    released = stop(ws, session)
    assert released is not None and "unresolved" in released["systemMessage"]
    code, verdict = check(ws, session)
    assert code == 1 and verdict["satisfied"] is False and verdict["unresolved"] is True
    assert verdict["intercepts_this_turn"] == 2 and verdict["budget"] == 2

    prompt(ws, session)  # a new turn: a new budget
    again = stop(ws, session)
    assert again is not None and again["decision"] == "block" and "Intercept 1 of 2" in again["reason"]
    code, verdict = check(ws, session)
    assert verdict["unresolved"] is True  # a record, not a switch: only a passing run clears it

    write_source(ws, "a + b", "a / b")  # fixed
    code, verdict = check(ws, session)
    assert any("files changed since the last run" in n for n in verdict["notes"])
    green = greenloop(ws, "run", "--json", GREENLOOP_SESSION=session)
    assert green.returncode == 0, green.stdout + green.stderr
    code, verdict = check(ws, session)
    assert code == 0 and verdict["satisfied"] is True and verdict["unresolved"] is False
    assert verdict["last_run"]["run_id"] == json.loads(green.stdout)["run_id"]
    assert not any("files changed since the last run" in n for n in verdict["notes"])
    assert stop(ws, session) is None  # allowed: nothing printed


def test_workspace_run_without_session_gates_a_session_seen_before_it(ws: Path) -> None:
    prompt(ws, "early")
    write_source(ws, "a - b", "a / b")
    assert greenloop(ws, "run").returncode == 1  # no session anywhere: a workspace run
    first = stop(ws, "early")
    assert first is not None and first["decision"] == "block"
    assert stop(ws, "brand-new") is None  # its first event came after that run


def test_background_run_is_recorded_when_the_job_ends(ws: Path) -> None:
    session = "sess-bg"
    prompt(ws, session)
    write_source(ws, "a - b", "a / b")
    started = greenloop(ws, "run", "--background", "--json", "--session", session)
    assert started.returncode == 0, started.stderr
    job_id = json.loads(started.stdout)["job_id"]
    waited = greenloop(ws, "job", job_id, "--wait", "--json")
    assert waited.returncode == 1, waited.stdout + waited.stderr  # the job's run is red
    status = json.loads(waited.stdout)
    assert status["status"] == "done" and status["ok"] is False and status["result"]["outcome"] == "red"
    blocked = stop(ws, session)
    assert blocked is not None and status["run_id"] in blocked["reason"]

    write_source(ws, "a + b", "a / b")
    started = greenloop(ws, "run", "--background", "--json", "--session", session)
    job_id = json.loads(started.stdout)["job_id"]
    assert greenloop(ws, "job", job_id, "--wait").returncode == 0
    assert stop(ws, session) is None


def codex_stop(ws: Path, session: str, turn: str) -> dict[str, Any] | None:
    payload = {
        "session_id": session,
        "transcript_path": None,
        "cwd": str(ws),
        "hook_event_name": "Stop",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "turn_id": turn,
        "stop_hook_active": False,
        "last_assistant_message": "done",
    }
    p = greenloop(ws, "hook", "codex", stdin=json.dumps(payload))
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if p.stdout.strip() else None


def test_node_test_suite_through_the_codex_hook(tmp_path: Path) -> None:
    (tmp_path / "calc.test.mjs").write_text(
        "import {test} from 'node:test';\nimport assert from 'node:assert';\n"
        "import {add} from './calc.mjs';\n"
        "test('adds two numbers', () => { assert.strictEqual(add(2, 3), 5); });\n"
        "test('is a function', () => { assert.strictEqual(typeof add, 'function'); });\n"
    )
    (tmp_path / "calc.mjs").write_text("export function add(a, b) { return a - b; }\n")
    red = greenloop(tmp_path, "run", "--json", "--session", "codex-thread")
    assert red.returncode == 1, red.stdout + red.stderr
    assert json.loads(red.stdout)["framework"] == "node:test"
    steer = codex_stop(tmp_path, "codex-thread", "turn-1")
    assert steer is not None and list(steer) == ["decision", "reason"]
    assert "adds two numbers" in steer["reason"]
    (tmp_path / "calc.mjs").write_text("export function add(a, b) { return a + b; }\n")
    assert greenloop(tmp_path, "run", "--session", "codex-thread").returncode == 0
    assert codex_stop(tmp_path, "codex-thread", "turn-1") is None
