"""The Gemini CLI adapter, run as a real `greenloop hook gemini` process fed the JSON Gemini CLI
0.61 sends (the shapes below were captured from the real CLI: tests/e2e/test_gemini_cli.py).

What the adapter has to get right, and the events that show it:
- a deny re-enters the agent with the deny's reason as the next prompt (BeforeAgent fires
  again with it), and after a corrective round in which the model called a tool, AfterAgent
  says `stop_hook_active: false` again: the budget must still span the whole user turn;
- a new user prompt (even the same text again) is a new turn with a new budget;
- Gemini exports no session id to its shell and greenloop's MCP server records a run under
  its own connection id: the hooks that watch the tool give the run to the session.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from test_hooks import FAILING, hook

PROMPT = "make the tests pass"


def event(name: str, session: str, ws: Path, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(ws / "chats" / f"session-{session}.json"),
        "cwd": str(ws),
        "hook_event_name": name,
        "timestamp": "2026-12-02T07:30:35.889Z",
    }
    payload.update(extra)
    return payload


def before_agent(session: str, ws: Path, prompt: str) -> dict[str, Any]:
    return event("BeforeAgent", session, ws, prompt=prompt)


def after_agent(session: str, ws: Path, prompt: str = PROMPT, active: bool = False) -> dict[str, Any]:
    return event("AfterAgent", session, ws, prompt=prompt, prompt_response="Done.", stop_hook_active=active)


def shell(session: str, ws: Path, command: str, output: str) -> dict[str, Any]:
    text = f"<untrusted_context>\nOutput: {output}\nProcess Group PGID: 14588\n</untrusted_context>"
    return event(
        "AfterTool",
        session,
        ws,
        tool_name="run_shell_command",
        tool_input={"command": command, "description": "run the tests"},
        tool_response={"llmContent": text, "returnDisplay": ""},
    )


def mcp_tool(session: str, ws: Path, tool: str, result: dict[str, Any]) -> dict[str, Any]:
    text = json.dumps(result, indent=2)
    return event(
        "AfterTool",
        session,
        ws,
        tool_name=f"mcp_greenloop_{tool}",
        tool_input={},
        tool_response={
            "llmContent": [{"text": f"<untrusted_context>\n{text}\n</untrusted_context>"}],
            "returnDisplay": text,
        },
        mcp_context={"server_name": "greenloop", "tool_name": tool, "command": "greenloop", "args": ["mcp"]},
    )


def answer(payload: dict[str, Any], ws: Path) -> dict[str, Any]:
    p = hook("gemini", payload, cwd=ws)
    assert p.returncode == 0, p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
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
    assert answer(before_agent("g1", tmp_path, PROMPT), tmp_path) == {}
    red_run(tmp_path, "g1", "run-20261202-073039-aaaaaa")
    first = answer(after_agent("g1", tmp_path), tmp_path)
    assert first["decision"] == "deny" and "Intercept 1 of 2" in first["reason"]
    # Gemini feeds the reason back as the next prompt; the model reads a file and answers.
    assert answer(before_agent("g1", tmp_path, first["reason"]), tmp_path) == {}
    answer(
        event("AfterTool", "g1", tmp_path, tool_name="read_file", tool_input={}, tool_response={}), tmp_path
    )
    second = answer(after_agent("g1", tmp_path, active=False), tmp_path)
    assert second["decision"] == "deny" and "Intercept 2 of 2" in second["reason"]
    assert answer(before_agent("g1", tmp_path, second["reason"]), tmp_path) == {}
    released = answer(after_agent("g1", tmp_path, active=False), tmp_path)
    assert set(released) == {"systemMessage"} and "unresolved" in released["systemMessage"]
    with Store(tmp_path) as store:
        kinds = [i["kind"] for i in store.interceptions("g1")]
        assert kinds == ["steer", "steer", "release"]
        assert len(store.unresolved_records("g1")) == 1


def test_a_new_user_prompt_gets_a_new_budget_even_with_the_same_text(tmp_path: Path) -> None:
    red_run(tmp_path, "g1", "run-20261202-073039-aaaaaa")
    for _ in range(2):  # two user turns, the same words
        answer(before_agent("g1", tmp_path, PROMPT), tmp_path)
        reasons = []
        for _round in range(2):
            out = answer(after_agent("g1", tmp_path), tmp_path)
            assert out["decision"] == "deny"
            reasons.append(out["reason"])
            answer(before_agent("g1", tmp_path, out["reason"]), tmp_path)
        assert ["Intercept 1 of 2" in reasons[0], "Intercept 2 of 2" in reasons[1]] == [True, True]
        assert "systemMessage" in answer(after_agent("g1", tmp_path), tmp_path)


def test_without_the_before_agent_hook_a_new_prompt_text_starts_a_turn(tmp_path: Path) -> None:
    """Settings written by an older init have only AfterAgent and AfterTool."""
    red_run(tmp_path, "g1", "run-20261202-073039-aaaaaa")
    assert answer(after_agent("g1", tmp_path), tmp_path)["decision"] == "deny"
    assert answer(after_agent("g1", tmp_path, active=False), tmp_path)["decision"] == "deny"
    assert "systemMessage" in answer(after_agent("g1", tmp_path, active=True), tmp_path)
    out = answer(after_agent("g1", tmp_path, prompt="now the other bug"), tmp_path)
    assert out["decision"] == "deny" and "Intercept 1 of 2" in out["reason"]


def test_a_workspace_run_in_the_first_turn_counts_once_before_agent_fired(tmp_path: Path) -> None:
    # BeforeAgent fires before the first tool: the session is known before the run is made.
    answer(before_agent("g1", tmp_path, PROMPT), tmp_path)
    red_run(tmp_path, None, "run-20261202-073039-bbbbbb")  # a shell `greenloop run`: no session id
    assert answer(after_agent("g1", tmp_path), tmp_path)["decision"] == "deny"


def test_after_tool_gives_a_shell_greenloop_run_to_the_session(tmp_path: Path) -> None:
    run_id = "run-20261202-073039-131c2a"
    red_run(tmp_path, None, run_id)
    output = (
        "FAILED tests/test_calc.py::test_div\n\n✗ red  2 failed, 1 passed (3 tests) in 0.4s [pytest]\n"
        f"  result:  .greenloop/runs/{run_id}/result.json\n  next:    retry_coder"
    )
    p = hook("gemini", shell("g1", tmp_path, "greenloop run .", output), cwd=tmp_path)
    assert json.loads(p.stdout) == {} and f"run {run_id} (red) belongs to session g1" in p.stderr
    with Store(tmp_path) as store:
        assert store.latest_run(session_id="g1").run_id == run_id  # type: ignore[union-attr]
    # No BeforeAgent and a run made before the session's first event: attached, it still counts.
    out = answer(after_agent("g1", tmp_path), tmp_path)
    assert out["decision"] == "deny" and FAILING[0] in out["reason"]


def test_a_green_shell_run_outranks_the_sessions_older_red_mcp_run(tmp_path: Path) -> None:
    red_run(tmp_path, None, "run-20261202-073039-cccccc")
    answer(
        mcp_tool(
            "g1",
            tmp_path,
            "test_run",
            {"run_id": "run-20261202-073039-cccccc", "ok": False, "session_id": None},
        ),
        tmp_path,
    )
    assert answer(after_agent("g1", tmp_path), tmp_path)["decision"] == "deny"
    green = "run-20261202-073101-dddddd"
    red_run(tmp_path, None, green, ok=True)
    answer(
        shell("g1", tmp_path, "cd . && greenloop run --json", f'{{"run_id": "{green}", "ok": true}}'),
        tmp_path,
    )
    assert answer(after_agent("g1", tmp_path, active=True), tmp_path) == {}


def test_after_tool_gives_an_mcp_test_run_to_the_session(tmp_path: Path) -> None:
    run_id = "run-20261202-073039-eeeeee"
    red_run(tmp_path, None, run_id)
    answer(before_agent("g1", tmp_path, PROMPT), tmp_path)
    result = {"run_id": run_id, "ok": False, "outcome": "red", "session_id": None}
    p = hook("gemini", mcp_tool("g1", tmp_path, "test_run", result), cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "belongs to session g1" in p.stderr
    out = answer(after_agent("g1", tmp_path), tmp_path)
    assert out["decision"] == "deny" and FAILING[1] in out["reason"]
    # A passing run given to the session clears its unresolved record.
    with Store(tmp_path) as store:
        store.mark_released("g1", 1, run_id)
    green = "run-20261202-073200-ffffff"
    red_run(tmp_path, None, green, ok=True)
    answer(
        mcp_tool(
            "g1",
            tmp_path,
            "test_job",
            {"job_id": "job-x", "status": "done", "result": {"run_id": green, "ok": True}},
        ),
        tmp_path,
    )
    with Store(tmp_path) as store:
        assert store.unresolved_records("g1") == []
    assert answer(after_agent("g1", tmp_path, active=True), tmp_path) == {}


def test_runs_of_other_sessions_and_other_tools_are_left_alone(tmp_path: Path) -> None:
    run_id = "run-20261202-073039-abcdef"
    red_run(tmp_path, "another-agent-session", run_id)
    text = f"result:  .greenloop/runs/{run_id}/result.json"
    for payload in (
        shell("g1", tmp_path, "greenloop run .", text),  # someone else's run
        shell("g1", tmp_path, "cat notes.txt", text),  # not a greenloop run
        shell("g1", tmp_path, "greenloop check", text),  # names a run, makes none
    ):
        p = hook("gemini", payload, cwd=tmp_path)
        assert json.loads(p.stdout) == {} and "belongs to" not in p.stderr
    other_server = mcp_tool("g1", tmp_path, "test_run", {"run_id": run_id})
    other_server["mcp_context"] = {"server_name": "other", "tool_name": "test_run", "command": "other-mcp"}
    assert "belongs to" not in hook("gemini", other_server, cwd=tmp_path).stderr
    with Store(tmp_path) as store:
        assert store.latest_run(session_id="another-agent-session").run_id == run_id  # type: ignore[union-attr]
        assert store.latest_run(session_id="g1") is None


def test_before_agent_without_state_or_prompt_is_harmless(tmp_path: Path) -> None:
    p = hook("gemini", event("BeforeAgent", "g1", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout) == {} and "no prompt" in p.stderr
    p = hook("gemini", event("SessionStart", "g1", tmp_path, source="startup"), cwd=tmp_path)
    assert p.returncode == 0 and json.loads(p.stdout) == {}


def test_edits_with_no_run_are_denied_once_then_released(tmp_path: Path) -> None:
    assert json.loads(hook("gemini", before_agent("g9", tmp_path, PROMPT), cwd=tmp_path).stdout) == {}
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n")  # the agent edits, runs nothing
    out = json.loads(hook("gemini", after_agent("g9", tmp_path), cwd=tmp_path).stdout)
    assert out["decision"] == "deny" and "recorded no test run" in out["reason"]
    out = json.loads(hook("gemini", after_agent("g9", tmp_path), cwd=tmp_path).stdout)
    assert "unresolved (not run)" in out["systemMessage"]
    # A session that changes nothing is never held.
    assert json.loads(hook("gemini", before_agent("g10", tmp_path, PROMPT), cwd=tmp_path).stdout) == {}
    assert json.loads(hook("gemini", after_agent("g10", tmp_path), cwd=tmp_path).stdout) == {}


def test_an_attached_shell_run_brings_its_evidence_to_the_session(tmp_path: Path) -> None:
    """A shell `greenloop run` Gemini's shell could not tie to the session (no session id) is
    given to it by AfterTool, with what it said about each test: a narrowed green run after a
    red one still leaves the red one's failure owed."""
    import os
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-p no:cacheprovider'\n")
    body = "def test_add():\n    assert 1 + 1 == 3\n\ndef test_ok():\n    pass\n"
    (tmp_path / "test_calc.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_SESSION", "_SESSION_ID", "_THREAD_ID"))}
    env["GREENLOOP_CONFIG_HOME"] = str(tmp_path / ".none")

    def greenloop_run(*args: str) -> str:
        p = subprocess.run([sys.executable, "-m", "greenloop", "run", *args], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
        command = "greenloop run " + " ".join(args)
        said = hook("gemini", shell("g7", tmp_path, command, p.stdout), cwd=tmp_path)
        return p.stdout + said.stderr

    answer(before_agent("g7", tmp_path, PROMPT), tmp_path)
    # No harness process above these runs (this test is no harness): only AfterTool ties them.
    assert "(red) belongs to session g7" in greenloop_run()
    assert "(green) belongs to session g7" in greenloop_run("--target", "test_calc.py::test_ok")
    out = answer(after_agent("g7", tmp_path), tmp_path)
    assert out["decision"] == "deny" and "test_calc.py::test_add (failed in run-" in out["reason"]
