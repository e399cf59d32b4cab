"""Which session a run belongs to when nothing names it: the process-tree binding, with real
processes. A fake harness (tests/fake_harness.py, a python process) runs hooks through `sh -c`,
a shell child and an MCP server child, exactly as a harness lays out its process tree; no
session variable reaches any of them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure import session
from greenloop.closure.store import Store
from greenloop.system import ptree

FAKE = str(Path(__file__).with_name("fake_harness.py"))
GREENLOOP = f"{sys.executable} -m greenloop"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A pytest workspace with one failing test; greenloop's user config points nowhere."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (folder / "test_calc.py").write_text(
        "from calc import add\n\n\n"
        "def test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n"
    )
    (folder / "conftest.py").write_text(
        "import sys, pathlib\nsys.path.insert(0, str(pathlib.Path(__file__).parent))\n"
    )
    return folder


@pytest.fixture
def child() -> Iterator[int]:
    """A live child of this test process (whose own ancestors depend on how pytest was started:
    an orphaned pytest has none), for the tests that look up a tree from below."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _env(ws: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in session.ENV_VARS and not k.endswith("_PROJECT_DIR")
    }
    env["GREENLOOP_CONFIG_HOME"] = str(ws.parent / "no-user-config")
    return env


def harness(ws: Path, plan: list[dict[str, Any]], timeout: float = 120) -> list[Any]:
    p = subprocess.run(
        [sys.executable, FAKE, "-"],
        input=json.dumps(plan),
        capture_output=True,
        text=True,
        cwd=ws,
        env=_env(ws),
        timeout=timeout,
        check=False,
    )
    assert p.returncode == 0, p.stderr
    result: list[Any] = json.loads(p.stdout)
    return result


def event(name: str, sid: str, ws: Path, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": sid,
        "transcript_path": str(ws / "t.jsonl"),
        "cwd": str(ws),
        "hook_event_name": name,
    }
    if name == "Stop":
        payload.update(stop_hook_active=False, last_assistant_message="done")
    payload.update(extra)
    return payload


def hook(name: str, sid: str, ws: Path, harness_name: str = "claude-code", **extra: Any) -> dict[str, Any]:
    return {"hook": harness_name, "payload": event(name, sid, ws, **extra)}


CHECK = {"shell": f"{GREENLOOP} check . --json"}


def _check(step: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(step["stdout"])
    return out


# ---------------------------------------------------------------------------- the rule


def test_a_shell_run_belongs_to_the_session_whose_hooks_ran_under_the_same_harness(ws: Path) -> None:
    out = harness(
        ws,
        [
            hook("SessionStart", "s-1", ws, source="startup"),
            {"shell": f"{GREENLOOP} run . --json"},  # red, and no session variable anywhere
            hook("Stop", "s-1", ws),
            CHECK,
        ],
    )
    start, run, stop, check = out
    assert start["code"] == 0 and start["stdout"] == ""  # SessionStart adds nothing to the context
    result = json.loads(run["stdout"])
    assert result["ok"] is False and result["session_id"] == "s-1"
    blocked = json.loads(stop["stdout"])
    assert blocked["decision"] == "block" and "test_add" in blocked["reason"]
    verdict = _check(check)
    assert verdict["session_id"] == "s-1" and verdict["satisfied"] is False
    with Store(ws) as st:
        [(proc, chain)] = st.conn.execute("SELECT harness_proc, chain FROM bindings").fetchall()
    # the hook's chain, nearest first: the `sh -c` it ran in, then the harness (the bound one)
    comms = [c for _, _, c in json.loads(chain)]
    assert comms[0] == "sh" and proc.split(":")[1] == str(json.loads(chain)[1][0])


@pytest.mark.slow
def test_an_mcp_tool_run_belongs_to_the_session_and_the_stop_is_held(ws: Path) -> None:
    out = harness(
        ws,
        [
            hook("UserPromptSubmit", "s-mcp", ws, prompt="fix it"),
            {"mcp": [["test_run", {}], ["test_closure_check", {}]]},
            hook("Stop", "s-mcp", ws),
            hook("Stop", "s-mcp", ws, stop_hook_active=True),
            hook("Stop", "s-mcp", ws, stop_hook_active=True),
            CHECK,
        ],
    )
    _, (run, closure), stop1, stop2, stop3, check = out
    assert run["ok"] is False and run["session_id"] == "s-mcp" and run["session_source"] == "process-tree"
    assert closure["session_id"] == "s-mcp" and closure["satisfied"] is False
    assert json.loads(stop1["stdout"])["decision"] == "block"
    assert json.loads(stop2["stdout"])["decision"] == "block"
    released = json.loads(stop3["stdout"])  # the budget (2) is spent: released, never trapped
    assert "systemMessage" in released and "unresolved" in released["systemMessage"]
    verdict = _check(check)
    assert verdict["session_id"] == "s-mcp" and verdict["unresolved"] is True


def test_the_nearest_harness_wins_and_its_latest_session(ws: Path) -> None:
    inner = [
        hook("SessionStart", "inner", ws),
        CHECK,
    ]
    out = harness(
        ws,
        [
            hook("SessionStart", "outer-old", ws),
            hook("SessionStart", "outer", ws, source="clear"),  # same harness process, a new session
            {"harness": inner},
            CHECK,
        ],
    )
    _, _, (_, inner_check), outer_check = out
    assert _check(inner_check)["session_id"] == "inner"
    assert _check(outer_check)["session_id"] == "outer"


def test_an_unrelated_process_tree_does_not_bind(ws: Path) -> None:
    harness(ws, [hook("SessionStart", "s-a", ws)])
    # A second harness (a sibling: same parent, this test) whose hooks never ran.
    [check] = harness(ws, [CHECK])
    assert _check(check)["session_id"] is None
    # This test process itself is an ancestor of neither harness's hooks' harness.
    assert session.bound_session(ws) is None


def test_every_harness_binds_from_its_first_events(ws: Path) -> None:
    gemini = {"session_id": "g-1", "cwd": str(ws), "hook_event_name": "BeforeAgent", "prompt": "hi"}
    cursor = {"conversation_id": "c-1", "hook_event_name": "beforeSubmitPrompt", "workspace_roots": [str(ws)]}
    out = harness(
        ws,
        [
            {
                "harness": [
                    {"hook": "gemini", "payload": {**gemini, "hook_event_name": "SessionStart"}},
                    CHECK,
                ]
            },
            {"harness": [{"hook": "gemini", "payload": gemini}, CHECK]},
            {"harness": [{"hook": "cursor", "payload": cursor}, CHECK]},
            {"harness": [hook("SessionStart", "x-1", ws, "codex"), CHECK]},
        ],
    )
    (g0, g0c), (g1, g1c), (c1, c1c), (x1, x1c) = out
    assert json.loads(g0["stdout"]) == {} and json.loads(g1["stdout"]) == {}
    assert json.loads(c1["stdout"]) == {"continue": True}
    assert x1["stdout"] == ""
    assert [_check(c)["session_id"] for c in (g0c, g1c, c1c, x1c)] == ["g-1", "g-1", "c-1", "x-1"]


def test_a_session_variable_outranks_the_process_tree(ws: Path) -> None:
    out = harness(
        ws,
        [
            hook("SessionStart", "tree", ws),
            {"shell": f"CODEX_THREAD_ID=thread-9 {GREENLOOP} check . --json"},
            {"shell": f"GREENLOOP_SESSION=mine CODEX_THREAD_ID=thread-9 {GREENLOOP} check . --json"},
            {"shell": f"{GREENLOOP} check . --session named --json"},
        ],
    )
    assert [_check(c)["session_id"] for c in out[1:]] == ["thread-9", "mine", "named"]


# ---------------------------------------------------------------------------- pid reuse


def test_a_recorded_pid_with_another_start_time_never_binds(ws: Path, child: int) -> None:
    """A pid the kernel gave to another process since: same number, another start time."""
    parent = ptree.ancestors(child)[0]  # this test process, the child's harness here
    assert parent.pid == os.getpid()
    reused = ptree.Proc(parent.pid, parent.start + 1, parent.comm)
    with Store(ws) as st:
        st.bind(ptree.proc_key(reused), "ghost", "claude-code", str(ws), "[]")
    assert session.bound_session(ws, child) is None
    with Store(ws) as st:
        st.bind(ptree.proc_key(parent), "alive", "claude-code", str(ws), "[]")
    assert session.bound_session(ws, child) == "alive"


def test_a_dead_harness_leaves_nothing_to_bind(ws: Path) -> None:
    [pid] = harness(ws, [hook("SessionStart", "gone", ws), {"pid": True}])[1:]
    assert isinstance(pid, int)
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.02)
    [check] = harness(ws, [CHECK])  # a new harness, perhaps even with the old pid: no binding
    assert _check(check)["session_id"] is None


# ---------------------------------------------------------------------------- the pieces


def test_ancestors_read_proc_nearest_first_without_init(child: int) -> None:
    chain = ptree.ancestors(child)
    assert chain and chain[0].pid == os.getpid()
    assert all(p.pid > 1 for p in chain)
    assert ptree.harness_of([ptree.Proc(5, 1, "sh"), ptree.Proc(4, 1, "bash"), ptree.Proc(3, 1, "node")]) == (
        ptree.Proc(3, 1, "node")
    )
    assert ptree.harness_of([ptree.Proc(5, 1, "sh")]) is None
    # a hook run by hand from a terminal: no harness, so nothing to bind
    assert ptree.harness_of([ptree.Proc(5, 1, "bash"), ptree.Proc(4, 1, "tmux: server")]) is None
    assert ptree.ancestors(2**22 + 7) == []  # no such process


def test_resolution_order_and_meta() -> None:
    env = {"CLAUDE_CODE_SESSION_ID": "cc", "CODEX_THREAD_ID": "cx"}
    assert session.resolve_with_source("x", env=env) == ("x", "explicit")
    assert session.resolve_with_source(None, env=env) == ("cc", "env:CLAUDE_CODE_SESSION_ID")
    assert session.resolve_with_source(None, env={"CODEX_THREAD_ID": " cx "}) == ("cx", "env:CODEX_THREAD_ID")
    assert session.resolve_with_source(None, env={}, mcp_context="m") == ("m", "meta")
    assert session.resolve_with_source(None, env={}) == (None, "none")
    assert session.from_meta({"progressToken": 3, "sessionId": "abc"}) == "abc"
    assert session.from_meta({"progressToken": 3}) is None and session.from_meta(None) is None


def test_binding_is_skipped_where_greenloop_is_disabled_and_never_raises(ws: Path, child: int) -> None:
    (ws / "greenloop.toml").write_text("enabled = false\n")
    assert session.record_binding(str(ws), "s", "claude-code", pid=child) == ""
    assert not (ws / ".greenloop").exists()
    (ws / "greenloop.toml").write_text("max_intercept_rounds = 'x'\n")
    note = session.record_binding(str(ws), "s", "claude-code", pid=child)
    assert note.startswith("greenloop: could not record")


def test_a_shell_run_gets_its_sessions_sandbox_mode_through_the_tree(ws: Path) -> None:
    """Resolved before the run starts: the session's mode event (plan -> read-only) applies."""
    out = harness(
        ws,
        [
            hook("UserPromptSubmit", "s-plan", ws, prompt="look only", permission_mode="plan"),
            {"shell": f"{GREENLOOP} run . --json"},
        ],
    )
    result = json.loads(out[1]["stdout"])
    assert result["session_id"] == "s-plan"
    assert result["sandbox"]["mode"] == "read-only"
