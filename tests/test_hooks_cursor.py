"""The Cursor adapter, run as a real `greenloop hook cursor` process fed the JSON Cursor's hook
documentation describes (cursor.com/docs/agent/hooks). Cursor's agent CLI is not published in
a package registry, so no test here runs Cursor itself: these are its documented shapes.

Common fields of every event: conversation_id, generation_id, model, hook_event_name,
cursor_version, workspace_roots, user_email, transcript_path (null from the CLI). Events:
beforeSubmitPrompt (prompt, attachments; answers `continue`), stop (status completed |
aborted | error, loop_count; answers `followup_message`, which Cursor submits as the next user
message, up to the entry's `loop_limit`), afterShellExecution (command, cwd, output,
duration: no exit code), afterMCPExecution (tool_name, tool_input and result_json as JSON
strings, duration). The process-tree binding is tested with a stand-in harness process
(tests/fake_harness.py) that spawns hooks and shell commands as Cursor does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from greenloop.closure import session
from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from test_hooks import FAILING, hook

FAKE = str(Path(__file__).with_name("fake_harness.py"))


def event(name: str, conversation: str, ws: Path, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "conversation_id": conversation,
        "generation_id": "26b45fb6-bdea-439c-b2dc-5e97ee00ecea",
        "model": "claude-4.5-sonnet",
        "hook_event_name": name,
        "cursor_version": "2.0.77",
        "workspace_roots": [str(ws)],
        "user_email": "dev@example.com",
        "transcript_path": None,
    }
    payload.update(extra)
    return payload


def stop(conversation: str, ws: Path, loop_count: int, status: str = "completed") -> dict[str, Any]:
    return event("stop", conversation, ws, status=status, loop_count=loop_count)


def answer(payload: dict[str, Any], ws: Path) -> tuple[dict[str, Any], str]:
    p = hook("cursor", payload, cwd=ws)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out, p.stderr


def record(ws: Path, session: str | None, run_id: str, ok: bool = False) -> None:
    with Store(ws) as store:
        store.record_run(
            RunRecord(
                run_id,
                ok=ok,
                at=time.time(),
                outcome="green" if ok else "red",
                session_id=session,
                summary=Counts(3, 3 if ok else 1, 0 if ok else 2, 0),
                failing=() if ok else FAILING,
            )
        )


def test_followups_of_one_turn_share_the_budget_and_a_new_prompt_resets_it(tmp_path: Path) -> None:
    conv = "cdefee2d-2727-4b73-bf77-d9d830f31d2a"
    out, _ = answer(
        event("beforeSubmitPrompt", conv, tmp_path, prompt="fix the tests", attachments=[]), tmp_path
    )
    assert out == {"continue": True}
    record(tmp_path, conv, "run-20261202-080000-aaaaaa")
    first, _ = answer(stop(conv, tmp_path, 0), tmp_path)
    assert set(first) == {"followup_message"} and FAILING[0] in first["followup_message"]
    assert "Intercept 1 of 2" in first["followup_message"]
    # Cursor submits the follow-up as the next user message: beforeSubmitPrompt fires with it.
    assert answer(event("beforeSubmitPrompt", conv, tmp_path, prompt=first["followup_message"]), tmp_path)[
        0
    ] == {"continue": True}
    second, _ = answer(stop(conv, tmp_path, 1), tmp_path)
    assert "Intercept 2 of 2" in second["followup_message"]
    released, note = answer(stop(conv, tmp_path, 2), tmp_path)
    assert released == {} and "unresolved" in note
    # A new user message: the stop that ends it has loop_count 0 again.
    answer(event("beforeSubmitPrompt", conv, tmp_path, prompt="fix the tests"), tmp_path)
    again, _ = answer(stop(conv, tmp_path, 0), tmp_path)
    assert "Intercept 1 of 2" in again["followup_message"]


def test_aborted_and_errored_stops_are_allowed(tmp_path: Path) -> None:
    record(tmp_path, "k1", "run-20261202-080000-aaaaaa")
    for status in ("aborted", "error"):
        out, note = answer(stop("k1", tmp_path, 0, status=status), tmp_path)
        assert out == {} and status in note


def test_after_shell_execution_records_a_test_command_without_an_exit_code(tmp_path: Path) -> None:
    output = "F.\n=================== 1 failed, 1 passed in 0.12s ===================\n"
    payload = event(
        "afterShellExecution",
        "k1",
        tmp_path,
        command="pytest -q",
        cwd=str(tmp_path),
        output=output,
        duration=150,
    )
    out, note = answer(payload, tmp_path)
    assert out == {} and "recorded" in note
    with Store(tmp_path) as store:
        run = store.latest_run(session_id="k1")
        assert run is not None and run.outcome == "red" and run.exit_code is None


def test_a_shell_greenloop_run_is_given_to_the_conversation(tmp_path: Path) -> None:
    run_id = "run-20261202-080102-bbbbbb"
    record(tmp_path, None, run_id)
    output = (
        "✗ red  2 failed, 1 passed (3 tests) in 0.4s [pytest]\n"
        f"  result:  .greenloop/runs/{run_id}/result.json\n"
    )
    payload = event(
        "afterShellExecution",
        "k1",
        tmp_path,
        command="greenloop run .",
        cwd=str(tmp_path),
        output=output,
        duration=900,
    )
    out, note = answer(payload, tmp_path)
    assert out == {} and f"run {run_id} (red) belongs to session k1" in note
    assert "followup_message" in answer(stop("k1", tmp_path, 0), tmp_path)[0]


def test_after_mcp_execution_gives_greenloops_test_run_to_the_conversation(tmp_path: Path) -> None:
    run_id = "run-20261202-080203-cccccc"
    record(tmp_path, None, run_id)
    result = json.dumps({"run_id": run_id, "ok": False, "outcome": "red", "session_id": None})
    payload = event(
        "afterMCPExecution",
        "k1",
        tmp_path,
        tool_name="test_run",
        tool_input="{}",
        result_json=result,
        duration=2500,
    )
    out, note = answer(payload, tmp_path)
    assert out == {} and "belongs to session k1" in note
    # Another server's tool that happens to name the run takes nothing.
    other = event(
        "afterMCPExecution",
        "k2",
        tmp_path,
        tool_name="database_query",
        tool_input="{}",
        result_json=result,
        duration=3,
    )
    assert "belongs to" not in answer(other, tmp_path)[1]
    with Store(tmp_path) as store:
        assert store.latest_run(session_id="k1").run_id == run_id  # type: ignore[union-attr]


def test_the_process_tree_ties_a_shell_run_to_the_conversation(tmp_path: Path) -> None:
    """A stand-in Cursor process runs the beforeSubmitPrompt hook, then `greenloop run` in its
    shell with no session variable at all, then the stop hook: the run is the conversation's,
    and the stop is held on it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n")
    (ws / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
    )
    conv = "c0ffee00-0000-4000-8000-000000000001"
    plan = [
        {"hook": "cursor", "payload": event("beforeSubmitPrompt", conv, ws, prompt="fix it", attachments=[])},
        {"shell": f"{sys.executable} -m greenloop run . --json"},
        {"hook": "cursor", "payload": stop(conv, ws, 0)},
    ]
    env = {
        k: v for k, v in os.environ.items() if k not in session.ENV_VARS and not k.endswith("_PROJECT_DIR")
    }
    env["GREENLOOP_CONFIG_HOME"] = str(tmp_path / "no-user-config")
    p = subprocess.run(
        [sys.executable, FAKE, "-"],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        cwd=ws,
        env=env,
        timeout=180,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    prompt, run, held = json.loads(p.stdout)
    assert json.loads(prompt["stdout"]) == {"continue": True}
    assert json.loads(run["stdout"])["session_id"] == conv
    assert "test_add" in json.loads(held["stdout"])["followup_message"]


def test_a_test_skipped_after_it_failed_stays_owed(tmp_path: Path) -> None:
    import subprocess
    import sys

    def pytest_run(body: str) -> str:
        (tmp_path / "test_calc.py").write_text(body)
        p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
        return p.stdout

    red = "def test_add():\n    assert 1 + 1 == 3\n\ndef test_ok():\n    assert True\n"
    shell = event("afterShellExecution", "k9", tmp_path, command="pytest -v", output=pytest_run(red))
    assert "recorded" in answer(shell, tmp_path)[1]
    skipped = "import pytest\n\n@pytest.mark.skip\n" + red
    shell["output"] = pytest_run(skipped)
    assert "(green" in answer(shell, tmp_path)[1]
    out, _ = answer(stop("k9", tmp_path, 0), tmp_path)
    assert "test_calc.py::test_add (skipped in this session" in out["followup_message"]
