"""The Qwen Code adapter, run as a real `greenloop hook qwen` process fed the JSON Qwen Code 0.24
sends. The payloads below are built as @qwen-code/qwen-code 0.24.4's hook code builds them
(HookEventHandler.createBaseInput and its fire*Event methods; the shell tool's llmContent; the
client's Stop and UserPromptSubmit calls), with the fields the real CLI sent in
tests/e2e/test_qwen_code.py's runs (which drive it under its harness's Node 22), and the
answers are those its hook output reads (`decision: "block"` continues the prompt with the
reason, `systemMessage` is shown). These cover the cases the end-to-end runs do not: a new
prompt_id, an event without one, a cancelled command, another server's MCP tool.

What the adapter has to get right, and the events that show it:
- UserPromptSubmit fires for the user's prompt, again for every tool result (with an empty
  prompt) and for a Stop block's continuation (with greenloop's reason), all with one
  prompt_id: the budget spans the prompt, and a new prompt_id is a new turn;
- a red test run exits non-zero, and Qwen reports it by PostToolUseFailure, not PostToolUse;
- Qwen exports no session id to its shell: the hooks that watch the tool give a shell
  `greenloop run` or an MCP test_run to the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.hooks.qwen import shell_output
from test_hooks import FAILING, hook

PROMPT = "make the tests pass"


def event(name: str, session: str, ws: Path, prompt_n: int | None = 1, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(ws / ".qwen" / "chats" / f"{session}.jsonl"),
        "cwd": str(ws),
        "hook_event_name": name,
        "timestamp": "2026-12-03T17:30:35.889Z",
        "permission_mode": "default",
    }
    if prompt_n is not None:
        payload["prompt_id"] = f"{session}########{prompt_n}"
    payload.update(extra)
    return payload


def prompt(session: str, ws: Path, text: str = PROMPT, n: int | None = 1) -> dict[str, Any]:
    return event("UserPromptSubmit", session, ws, n, prompt=text)


def stop(session: str, ws: Path, n: int | None = 1, active: bool = False) -> dict[str, Any]:
    return event(
        "Stop", session, ws, n, stop_hook_active=active, last_assistant_message="Done.",
        background_tasks=[], crons=[], context_usage=0.01, context_limit=131072, input_tokens=1311,
    )  # fmt: skip


def llm_content(command: str, output: str, code: int) -> str:
    """run_shell_command's answer to the model (ShellToolInvocation.execute)."""
    return "\n".join([
        f"Command: {command}", "Directory: (root)", f"Output: {output or '(empty)'}", "Error: (none)",
        f"Exit Code: {code}", "Signal: (none)", "Process Group PGID: 14588",
    ])  # fmt: skip


def shell(session: str, ws: Path, command: str, output: str, code: int = 0, n: int = 1) -> dict[str, Any]:
    """The event Qwen fires after a shell command: PostToolUse when it exited 0, else
    PostToolUseFailure with the same text as its `error`."""
    base = {"tool_name": "run_shell_command", "tool_input": {"command": command, "is_background": False},
            "tool_use_id": "call_1", "tool_call_id": "call_1", "duration_ms": 412}  # fmt: skip
    text = llm_content(command, output, code)
    if code == 0:
        response = {"llmContent": text, "returnDisplay": output}
        return event("PostToolUse", session, ws, n, tool_response=response, **base)
    return event("PostToolUseFailure", session, ws, n, error=text, is_interrupt=False, **base)


def answer(payload: dict[str, Any], ws: Path) -> dict[str, Any]:
    p = hook("qwen", payload, cwd=ws)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout) if p.stdout.strip() else {}
    return out


def red_run(ws: Path, session: str | None, run_id: str, ok: bool = False) -> None:
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


def test_corrective_rounds_with_tool_calls_share_one_budget(tmp_path: Path) -> None:
    assert answer(prompt("q1", tmp_path), tmp_path) == {}
    red_run(tmp_path, "q1", "run-20261203-173039-aaaaaa")
    first = answer(stop("q1", tmp_path), tmp_path)
    assert set(first) == {"decision", "reason"} and first["decision"] == "block"
    assert "Intercept 1 of 2" in first["reason"] and FAILING[0] in first["reason"]
    # Qwen continues the prompt with the reason (UserPromptSubmit again, the same prompt_id);
    # the model reads a file, whose result comes back through UserPromptSubmit with no text.
    assert answer(prompt("q1", tmp_path, first["reason"]), tmp_path) == {}
    read = event("PostToolUse", "q1", tmp_path, tool_name="read_file", tool_input={}, tool_response={})
    answer(read, tmp_path)
    assert answer(prompt("q1", tmp_path, ""), tmp_path) == {}
    second = answer(stop("q1", tmp_path, active=True), tmp_path)
    assert second["decision"] == "block" and "Intercept 2 of 2" in second["reason"]
    released = answer(stop("q1", tmp_path, active=True), tmp_path)
    assert set(released) == {"systemMessage"} and "unresolved" in released["systemMessage"]
    with Store(tmp_path) as store:
        assert [i["kind"] for i in store.interceptions("q1")] == ["steer", "steer", "release"]
        assert len(store.unresolved_records("q1")) == 1
    # The next prompt (a new prompt_id, the same words) is a new turn with a new budget.
    answer(prompt("q1", tmp_path, n=2), tmp_path)
    again = answer(stop("q1", tmp_path, n=2), tmp_path)
    assert again["decision"] == "block" and "Intercept 1 of 2" in again["reason"]


def test_without_the_prompt_hook_a_new_prompt_id_starts_a_turn_at_stop(tmp_path: Path) -> None:
    red_run(tmp_path, "q1", "run-20261203-173039-aaaaaa")
    assert answer(stop("q1", tmp_path), tmp_path)["decision"] == "block"
    assert answer(stop("q1", tmp_path), tmp_path)["decision"] == "block"
    assert "systemMessage" in answer(stop("q1", tmp_path), tmp_path)
    out = answer(stop("q1", tmp_path, n=2), tmp_path)
    assert out["decision"] == "block" and "Intercept 1 of 2" in out["reason"]


def test_without_prompt_ids_the_prompt_text_keys_the_turn(tmp_path: Path) -> None:
    """An event with no prompt_id: a tool result (empty prompt) and greenloop's own reason
    coming back keep the turn; a user's prompt starts one."""
    red_run(tmp_path, "q2", "run-20261203-173039-aaaaaa")
    answer(prompt("q2", tmp_path, n=None), tmp_path)
    first = answer(stop("q2", tmp_path, n=None), tmp_path)
    answer(prompt("q2", tmp_path, first["reason"], n=None), tmp_path)
    answer(prompt("q2", tmp_path, "", n=None), tmp_path)
    assert "Intercept 2 of 2" in answer(stop("q2", tmp_path, n=None), tmp_path)["reason"]
    assert "systemMessage" in answer(stop("q2", tmp_path, n=None), tmp_path)
    answer(prompt("q2", tmp_path, "and the other bug", n=None), tmp_path)
    assert "Intercept 1 of 2" in answer(stop("q2", tmp_path, n=None), tmp_path)["reason"]


CALC = "def test_add():\n    assert 1 + 1 == {}\n\ndef test_ok():\n    pass\n"


def _pytest(ws: Path) -> tuple[str, int]:
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_calc.py"], cwd=ws,
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    return p.stdout, p.returncode


def test_the_agents_own_red_and_green_pytest_runs_gate_the_turn(tmp_path: Path) -> None:
    """A real pytest run, reported as Qwen reports it: exit 1 by PostToolUseFailure, exit 0 by
    PostToolUse, the output inside run_shell_command's `Output:` section."""
    (tmp_path / "test_calc.py").write_text(CALC.format(3))
    answer(prompt("q3", tmp_path), tmp_path)
    output, code = _pytest(tmp_path)
    assert code == 1
    p = hook("qwen", shell("q3", tmp_path, "python -m pytest test_calc.py", output, code), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "(red: 1 failed, 1 passed)" in p.stderr
    out = answer(stop("q3", tmp_path), tmp_path)
    assert out["decision"] == "block" and "test_calc.py::test_add" in out["reason"]
    (tmp_path / "test_calc.py").write_text(CALC.format(2))
    output, code = _pytest(tmp_path)
    p = hook("qwen", shell("q3", tmp_path, "python -m pytest test_calc.py", output, code), cwd=tmp_path)
    assert "(green: 0 failed, 2 passed)" in p.stderr
    assert answer(stop("q3", tmp_path, active=True), tmp_path) == {}
    with Store(tmp_path) as store:
        assert store.latest_run(session_id="q3").outcome == "green"  # type: ignore[union-attr]


def test_a_cancelled_command_and_other_tools_record_nothing(tmp_path: Path) -> None:
    answer(prompt("q4", tmp_path), tmp_path)
    cancelled = shell("q4", tmp_path, "pytest", "", 1)
    cancelled.update(error="Tool call cancelled after completion.", is_interrupt=True)
    other = event("PostToolUse", "q4", tmp_path, tool_name="read_file", tool_input={"file_path": "a.py"},
                  tool_response={"llmContent": "1 failed, 1 passed", "returnDisplay": ""})  # fmt: skip
    for payload in (cancelled, other, shell("q4", tmp_path, "cat notes.txt", "1 failed")):
        p = hook("qwen", payload, cwd=tmp_path)
        assert p.returncode == 0 and p.stdout == "" and "recorded" not in p.stderr
    with Store(tmp_path) as store:
        assert store.latest_run(session_id="q4") is None


def test_a_shell_greenloop_run_and_an_mcp_test_run_are_given_to_the_session(tmp_path: Path) -> None:
    run_id = "run-20261203-173039-131c2a"
    red_run(tmp_path, None, run_id)  # a shell `greenloop run`: no session id in Qwen's shell
    output = (
        "✗ red  2 failed, 1 passed (3 tests) in 0.4s [pytest]\n"
        f"  result:  .greenloop/runs/{run_id}/result.json"
    )
    p = hook("qwen", shell("q5", tmp_path, "greenloop run .", output, 1), cwd=tmp_path)
    assert p.stdout == "" and f"run {run_id} (red) belongs to session q5" in p.stderr
    out = answer(stop("q5", tmp_path), tmp_path)
    assert out["decision"] == "block" and FAILING[0] in out["reason"]
    green = "run-20261203-173101-dddddd"
    red_run(tmp_path, None, green, ok=True)
    result = json.dumps({"run_id": green, "ok": True, "outcome": "green", "session_id": None})
    mcp = event("PostToolUse", "q5", tmp_path, tool_name="mcp__greenloop__test_run", tool_input={},
                tool_response={"llmContent": [{"text": result}], "returnDisplay": result})  # fmt: skip
    p = hook("qwen", mcp, cwd=tmp_path)
    assert f"run {green} (green) belongs to session q5" in p.stderr
    assert answer(stop("q5", tmp_path, active=True), tmp_path) == {}
    # Another server's tool of the same name is left alone.
    other = dict(mcp, tool_name="mcp__other__test_run")
    red_run(tmp_path, None, "run-20261203-173200-eeeeee")
    other["tool_response"] = {"llmContent": [{"text": "run-20261203-173200-eeeeee"}]}
    assert "belongs to" not in hook("qwen", other, cwd=tmp_path).stderr


def test_plan_mode_is_recorded_and_bad_input_allows(tmp_path: Path) -> None:
    red_run(tmp_path, "q6", "run-20261203-173039-aaaaaa")
    p = hook("qwen", event("SessionStart", "q6", tmp_path, None, permission_mode="plan", source="startup"),
             cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0 and p.stdout == "" and "sandbox read-only" in p.stderr
    p = hook("qwen", {"hook_event_name": "Stop", "cwd": str(tmp_path)}, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "no session_id" in p.stderr
    p = hook("qwen", "not json", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "not JSON" in p.stderr
    p = hook("qwen", event("Notification", "q6", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "ignoring Qwen Code event" in p.stderr


def test_the_project_variable_names_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "project"
    (ws / "sub").mkdir(parents=True)
    red_run(ws, "q7", "run-20261203-173039-aaaaaa")
    payload = stop("q7", ws / "sub")
    p = hook("qwen", payload, cwd=ws / "sub", env={"QWEN_PROJECT_DIR": str(ws)})
    assert json.loads(p.stdout)["decision"] == "block"


def test_shell_output_reads_the_tools_answer() -> None:
    text = llm_content("pytest", "line one\nError: inside the output\n1 failed", 1)
    assert shell_output(text) == ("line one\nError: inside the output\n1 failed", 1)
    assert shell_output(llm_content("true", "", 0)) == ("", 0)
    timed_out = "Command timed out after 120000ms before it could complete. There was no output."
    assert shell_output(timed_out) == (timed_out, None)


def test_init_writes_qwen_settings_that_the_hooks_answer(tmp_path: Path) -> None:
    """`greenloop init qwen`, then the hook command it wrote, run as Qwen runs it (`sh -c`)."""
    from greenloop.hooks.config_merge import hook_command
    from greenloop.hooks.install import init

    (tmp_path / ".qwen").mkdir()
    (tmp_path / ".qwen" / "settings.json").write_text(json.dumps({"model": {"name": "qwen3-coder-plus"}}))
    report = init("qwen", tmp_path)
    settings = json.loads((tmp_path / ".qwen" / "settings.json").read_text())
    assert settings["model"] == {"name": "qwen3-coder-plus"}
    for name in ("SessionStart", "UserPromptSubmit", "Stop", "PostToolUse", "PostToolUseFailure"):
        [group] = settings["hooks"][name]
        assert group["hooks"] == [{"type": "command", "command": hook_command("qwen"), "name": "greenloop",
                                   "timeout": 30}]  # fmt: skip
    assert settings["hooks"]["PostToolUseFailure"][0]["matcher"].startswith("^(run_shell_command|")
    assert settings["mcpServers"]["greenloop"] == {"command": "greenloop", "args": ["mcp"]}
    assert any("trustedFolders.json" in note for note in report.notes)
    assert [c.action for c in init("qwen", tmp_path).files] == ["unchanged"]
    red_run(tmp_path, "q8", "run-20261203-173039-aaaaaa")
    command = settings["hooks"]["Stop"][0]["hooks"][0]["command"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GREENLOOP_CONFIG_HOME"] = str(tmp_path / ".none")
    p = subprocess.run(["sh", "-c", command], input=json.dumps(stop("q8", tmp_path)), cwd=tmp_path,
                       capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert p.returncode == 0 and json.loads(p.stdout)["decision"] == "block", p.stderr
