"""The OpenCode adapter: a real `greenloop hook opencode` process fed what greenloop's plugin sends,
and the plugin itself (the file `greenloop init opencode` writes) run under Node with a recording
stand-in for OpenCode's client, calling the real hook.

OpenCode cannot refuse a stop, so what has to hold: the plugin sends greenloop's reason back
to the session (promptAsync) exactly when the gate steers, and that reason coming back as the
next user message (chat.message) is the same turn, so the budget ends the loop; a user's own
message is a new turn; the bash tool's output and exit code record the agent's own run.
The real OpenCode drives the plugin in tests/e2e/test_opencode.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.hooks.install import init
from greenloop.hooks.opencode_plugin import PLUGIN_PATH, hook_command_of
from test_hooks import FAILING, hook

PROMPT = "make the tests pass"


def event(name: str, session: str, ws: Path, **extra: Any) -> dict[str, Any]:
    return {"cwd": str(ws), "hook_event_name": name, "session_id": session, **extra}


def message(session: str, ws: Path, text: str = PROMPT) -> dict[str, Any]:
    return event("chat.message", session, ws, message_id="msg_01", agent="build", prompt=text)


def bash(session: str, ws: Path, command: str, output: str, code: int | None) -> dict[str, Any]:
    args = {"command": command, "description": "run it"}
    return event("tool.execute.after", session, ws, tool="bash", args=args, output=output, exit=code)


def answer(payload: dict[str, Any], ws: Path) -> dict[str, Any]:
    p = hook("opencode", payload, cwd=ws)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def red_run(ws: Path, session: str | None, run_id: str, ok: bool = False) -> None:
    with Store(ws) as store:
        store.record_run(
            RunRecord(run_id, ok=ok, at=time.time(), outcome="green" if ok else "red", session_id=session,
                      summary=Counts(3, 3 if ok else 1, 0 if ok else 2, 0), failing=() if ok else FAILING)
        )  # fmt: skip


def test_idle_continues_with_the_reason_then_releases(tmp_path: Path) -> None:
    answer(message("ses_1", tmp_path), tmp_path)
    red_run(tmp_path, "ses_1", "run-20261203-173039-aaaaaa")
    first = answer(event("session.idle", "ses_1", tmp_path), tmp_path)
    assert set(first) == {"action", "message"} and first["action"] == "continue"
    assert "Intercept 1 of 2" in first["message"]
    assert FAILING[0] in first["message"]
    # The plugin posts the reason: it comes back as the session's next user message.
    answer(message("ses_1", tmp_path, first["message"]), tmp_path)
    second = answer(event("session.idle", "ses_1", tmp_path), tmp_path)
    assert second["action"] == "continue" and "Intercept 2 of 2" in second["message"]
    answer(message("ses_1", tmp_path, second["message"]), tmp_path)
    released = answer(event("session.idle", "ses_1", tmp_path), tmp_path)
    assert released["action"] == "release" and "unresolved" in released["message"]
    with Store(tmp_path) as store:
        assert [i["kind"] for i in store.interceptions("ses_1")] == ["steer", "steer", "release"]
        assert len(store.unresolved_records("ses_1")) == 1
    # The user's next message is a new turn with a new budget.
    answer(message("ses_1", tmp_path, "try again"), tmp_path)
    assert "Intercept 1 of 2" in answer(event("session.idle", "ses_1", tmp_path), tmp_path)["message"]


CALC = "def test_add():\n    assert 1 + 1 == 3\n\ndef test_ok():\n    pass\n"


def test_the_agents_own_pytest_run_through_bash_gates_the_turn(tmp_path: Path) -> None:
    (tmp_path / "test_calc.py").write_text(CALC)
    run = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_calc.py"]
    p = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    answer(message("ses_2", tmp_path), tmp_path)
    said = hook("opencode", bash("ses_2", tmp_path, "python -m pytest test_calc.py", p.stdout, p.returncode),
                cwd=tmp_path)  # fmt: skip
    assert json.loads(said.stdout) == {} and "(red: 1 failed, 1 passed)" in said.stderr
    out = answer(event("session.idle", "ses_2", tmp_path), tmp_path)
    assert out["action"] == "continue" and "test_calc.py::test_add" in out["message"]
    # Another tool, or a command that runs no tests, records nothing.
    read = event("tool.execute.after", "ses_2", tmp_path, tool="read", args={}, output="1 failed")
    for payload in (bash("ses_2", tmp_path, "ls", "1 failed", 0), read):
        assert "recorded" not in hook("opencode", payload, cwd=tmp_path).stderr


def test_greenloop_runs_from_the_shell_and_the_mcp_tool_belong_to_the_session(tmp_path: Path) -> None:
    run_id = "run-20261203-173039-131c2a"
    red_run(tmp_path, None, run_id)
    text = f"✗ red  2 failed, 1 passed (3 tests) [pytest]\n  result:  .greenloop/runs/{run_id}/result.json"
    p = hook("opencode", bash("ses_3", tmp_path, "greenloop run .", text, 1), cwd=tmp_path)
    assert f"run {run_id} (red) belongs to session ses_3" in p.stderr
    assert answer(event("session.idle", "ses_3", tmp_path), tmp_path)["action"] == "continue"
    green = "run-20261203-173101-dddddd"
    red_run(tmp_path, None, green, ok=True)
    mcp = event("tool.execute.after", "ses_3", tmp_path, tool="greenloop_test_run", args={},
                output=json.dumps({"run_id": green, "ok": True}))  # fmt: skip
    assert f"run {green} (green) belongs to session ses_3" in hook("opencode", mcp, cwd=tmp_path).stderr
    assert answer(event("session.idle", "ses_3", tmp_path), tmp_path) == {}


def test_bad_input_allows(tmp_path: Path) -> None:
    for payload, said in (({"hook_event_name": "session.idle", "cwd": str(tmp_path)}, "no session_id"),
                          (event("chat.message", "s", tmp_path), "no prompt text"),
                          (event("file.edited", "s", tmp_path), "ignoring OpenCode event"),
                          ("[]", "not a JSON object")):  # fmt: skip
        p = hook("opencode", payload, cwd=tmp_path)
        assert p.returncode == 0 and json.loads(p.stdout) == {} and said in p.stderr


# ------------------------------------------------------------------ the plugin under Node

DRIVER = """
import { GreenloopPlugin } from "./plugin.mjs"
const calls = []
const client = {
  app: { log: async (a) => { calls.push(["log", a.body.level, a.body.message]) } },
  session: {
    get: async ({ path }) => ({ data: { id: path.id, parentID: path.id === "ses_child" ? "ses_1" : null } }),
    promptAsync: async ({ path, body }) => { calls.push(["promptAsync", path.id, body.parts[0].text]) },
  },
  tui: { showToast: async ({ body }) => { calls.push(["toast", body.message]) } },
}
const hooks = await GreenloopPlugin({ client, directory: process.argv[2] })
for (const line of process.argv.slice(3)) {
  const [kind, a, b] = JSON.parse(line)
  if (kind === "event") await hooks.event({ event: a })
  else await hooks[kind](a, b)
}
console.log(JSON.stringify(calls))
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed")
def test_the_written_plugin_sends_the_agent_back_and_stops_at_the_budget(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    init("opencode", ws)
    source = (ws / PLUGIN_PATH).read_text()
    assert hook_command_of(source) is not None and "hook opencode" in (hook_command_of(source) or "")
    (tmp_path / "plugin.mjs").write_text(source)
    (tmp_path / "driver.mjs").write_text(DRIVER)
    red_run(ws, "ses_1", "run-20261203-173039-aaaaaa")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["GREENLOOP_CONFIG_HOME"] = str(tmp_path / ".none")

    def drive(*steps: Any) -> list[list[str]]:
        p = subprocess.run(["node", "driver.mjs", str(ws), *(json.dumps(s) for s in steps)], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert p.returncode == 0, p.stderr
        calls: list[list[str]] = json.loads(p.stdout.splitlines()[-1])
        return calls

    idle = ["event", {"type": "session.idle", "properties": {"sessionID": "ses_1"}}]
    user = ["chat.message", {"sessionID": "ses_1", "messageID": "m1", "agent": "build"},
            {"message": {}, "parts": [{"type": "text", "text": PROMPT}]}]  # fmt: skip
    calls = drive(user, idle)
    sent = [c for c in calls if c[0] == "promptAsync"]
    assert len(sent) == 1 and sent[0][1] == "ses_1" and "Intercept 1 of 2" in sent[0][2]
    back = ["chat.message", {"sessionID": "ses_1", "messageID": "m2"},
            {"message": {}, "parts": [{"type": "text", "text": sent[0][2]}]}]  # fmt: skip
    calls = drive(back, idle)
    sent = [c for c in calls if c[0] == "promptAsync"]
    assert len(sent) == 1 and "Intercept 2 of 2" in sent[0][2]
    back[2]["parts"][0]["text"] = sent[0][2]  # type: ignore[index]
    calls = drive(back, idle)
    assert [c[0] for c in calls if c[0] != "log"] == ["toast"] and "unresolved" in calls[-1][1]
    # A sub-agent's session is never gated; a bash run is recorded with its exit code.
    child = ["event", {"type": "session.idle", "properties": {"sessionID": "ses_child"}}]
    ran = {"tool": "bash", "sessionID": "ses_1", "callID": "c1", "args": {"command": "pytest"}}
    summary = "=== 1 failed, 2 passed in 0.1s ==="
    said = {"title": "pytest", "output": "x", "metadata": {"output": summary, "exit": 1}}
    tool = ["tool.execute.after", ran, said]
    calls = drive(child, tool)
    assert not [c for c in calls if c[0] == "promptAsync"]
    assert any(c[0] == "log" and "recorded" in c[2] for c in calls), calls
