"""The GitHub Copilot CLI adapter, run as a real `greenloop hook copilot` process fed the payloads
Copilot CLI 1.0.102 sends in `-p` mode (the PascalCase events `greenloop init copilot` writes:
`tool_name` "Bash", the shell text ending `<shellId: 0 completed with exit code N>`) and the
camelCase ones GitHub's hooks reference documents (docs.github.com/en/copilot/reference/
hooks-reference). tests/e2e/test_copilot_cli.py drives the real CLI offline.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.hooks.config_merge import hook_command
from greenloop.hooks.install import init
from test_hooks import FAILING, hook

PROMPT = "make the tests pass"


def event(name: str, session: str, ws: Path, **extra: Any) -> dict[str, Any]:
    return {"hook_event_name": name, "session_id": session, "timestamp": "2026-12-03T17:30:35.889Z",
            "cwd": str(ws), **extra}  # fmt: skip


def stop(session: str, ws: Path, active: bool = False) -> dict[str, Any]:
    return event("Stop", session, ws, transcript_path=str(ws / "t.jsonl"), stop_reason="end_turn",
                 stop_hook_active=active)  # fmt: skip


def answer(payload: dict[str, Any], ws: Path) -> dict[str, Any]:
    p = hook("copilot", payload, cwd=ws)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def red_run(ws: Path, session: str | None, run_id: str, ok: bool = False) -> None:
    with Store(ws) as store:
        store.record_run(
            RunRecord(run_id, ok=ok, at=time.time(), outcome="green" if ok else "red", session_id=session,
                      summary=Counts(3, 3 if ok else 1, 0 if ok else 2, 0), failing=() if ok else FAILING)
        )  # fmt: skip


def test_stop_blocks_with_the_reason_then_releases_and_a_new_prompt_starts_a_turn(tmp_path: Path) -> None:
    answer(event("UserPromptSubmit", "c1", tmp_path, prompt=PROMPT), tmp_path)
    red_run(tmp_path, "c1", "run-20261203-173039-aaaaaa")
    first = answer(stop("c1", tmp_path), tmp_path)
    assert set(first) == {"decision", "reason"} and first["decision"] == "block"
    assert "Intercept 1 of 2" in first["reason"] and FAILING[0] in first["reason"]
    # Copilot enqueues the reason as the next user prompt: if it fires UserPromptSubmit, that
    # is greenloop's own message coming back, the same turn.
    answer(event("UserPromptSubmit", "c1", tmp_path, prompt=first["reason"]), tmp_path)
    second = answer(stop("c1", tmp_path, active=True), tmp_path)
    assert "Intercept 2 of 2" in second["reason"]
    p = hook("copilot", stop("c1", tmp_path, active=True), cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "unresolved" in p.stderr
    with Store(tmp_path) as store:
        assert [i["kind"] for i in store.interceptions("c1")] == ["steer", "steer", "release"]
    answer(event("UserPromptSubmit", "c1", tmp_path, prompt="and again"), tmp_path)
    assert "Intercept 1 of 2" in answer(stop("c1", tmp_path), tmp_path)["reason"]


def test_camel_case_payloads_are_read_too(tmp_path: Path) -> None:
    red_run(tmp_path, "c2", "run-20261203-173039-aaaaaa")
    payload = {"sessionId": "c2", "timestamp": 1704614750000, "cwd": str(tmp_path),
               "transcriptPath": "/t.jsonl", "stopReason": "end_turn", "stop_hook_active": False,
               "hook_event_name": "agentStop"}  # fmt: skip
    assert answer(payload, tmp_path)["decision"] == "block"


PYTEST_RED = """...F.                                                        [100%]
FAILED tests/test_calc.py::test_add - assert 2 == 3
1 failed, 4 passed in 0.14s
<exited with exit code 1>"""


def test_the_agents_own_bash_pytest_run_is_recorded(tmp_path: Path) -> None:
    answer(event("UserPromptSubmit", "c3", tmp_path, prompt=PROMPT), tmp_path)
    ran = event("PostToolUse", "c3", tmp_path, tool_name="bash",
                tool_input={"command": "python -m pytest -q", "description": "tests"},
                tool_result={"result_type": "success", "text_result_for_llm": PYTEST_RED})  # fmt: skip
    p = hook("copilot", ran, cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "(red: 1 failed, 4 passed)" in p.stderr
    assert "is red: 1 failed, 4 passed of 5" in answer(stop("c3", tmp_path), tmp_path)["reason"]
    # A failed tool (PostToolUseFailure, camelCase) with a green summary is still the run it shows.
    failed = {"hook_event_name": "postToolUseFailure", "sessionId": "c4", "cwd": str(tmp_path),
              "toolName": "bash", "toolArgs": json.dumps({"command": "pytest -q"}),
              "error": "5 passed in 0.10s\n<exited with exit code 0>"}  # fmt: skip
    assert "(green: 0 failed, 5 passed)" in hook("copilot", failed, cwd=tmp_path).stderr
    # Other tools and other commands record nothing.
    view = event("PostToolUse", "c3", tmp_path, tool_name="view", tool_input={"path": "a.py"},
                 tool_result={"text_result_for_llm": "1 failed"})  # fmt: skip
    assert "recorded" not in hook("copilot", view, cwd=tmp_path).stderr


def test_a_shell_greenloop_run_is_given_to_the_session(tmp_path: Path) -> None:
    run_id = "run-20261203-173039-131c2a"
    red_run(tmp_path, None, run_id)
    text = (
        f"✗ red  2 failed, 1 passed [pytest]\n  result:  .greenloop/runs/{run_id}/result.json\n"
        "<shellId: 0 completed with exit code 1>"
    )
    # As Copilot CLI 1.0.102 sends it: the model's `bash` tool is `Bash` here.
    ran = event("PostToolUse", "c5", tmp_path, tool_name="Bash",
                tool_input={"command": "greenloop run .", "description": "Run the tests"},
                tool_result={"result_type": "success", "text_result_for_llm": text})  # fmt: skip
    assert f"run {run_id} (red) belongs to session c5" in hook("copilot", ran, cwd=tmp_path).stderr


def test_bad_input_allows(tmp_path: Path) -> None:
    p = hook("copilot", {"hook_event_name": "Stop", "cwd": str(tmp_path)}, cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout) == {} and "no session id" in p.stderr
    p = hook("copilot", event("Notification", "c6", tmp_path), cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "ignoring Copilot CLI event" in p.stderr


def test_init_writes_the_hooks_file_and_keeps_the_users_entries(tmp_path: Path) -> None:
    hooks_dir = tmp_path / ".github" / "hooks"
    hooks_dir.mkdir(parents=True)
    mine = {"type": "command", "bash": "./audit.sh", "timeoutSec": 5}
    (hooks_dir / "greenloop.json").write_text(json.dumps({"version": 1, "hooks": {"Stop": [mine]}}))
    report = init("copilot", tmp_path)
    data = json.loads((hooks_dir / "greenloop.json").read_text())
    assert data["version"] == 1
    ours = {"type": "command", "bash": hook_command("copilot"), "timeoutSec": 30}
    assert data["hooks"]["Stop"] == [mine, ours]
    for name in ("SessionStart", "UserPromptSubmit", "PostToolUse", "PostToolUseFailure"):
        assert data["hooks"][name] == [ours]
    assert json.loads((tmp_path / ".mcp.json").read_text())["mcpServers"]["greenloop"]["args"] == ["mcp"]
    assert any("trust" in note for note in report.notes)
    assert [c.action for c in init("copilot", tmp_path).files] == ["unchanged", "unchanged"]
