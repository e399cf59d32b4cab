"""The closure gate with the real Claude Code CLI (`claude -p`), offline.

The pinned CLI (tests/harnesses/claude-code, `npm ci` there) runs in a temporary copy of
examples/demo configured by `greenloop init claude-code`, against the scripted model server of
model_server.py on 127.0.0.1. Each scenario runs inside a fresh network namespace
(`unshare -rn`, loopback up) where nothing but loopback is reachable, and every proxy
variable points at a loopback trap that records any request that tried to leave: the test
asserts that the namespace was isolated, that the trap got nothing, and that every request
reached the model server. (bwrap's --unshare-net would cut the CLI off from a server outside
it; here the server runs inside the namespace, in claude_offline.py.) Without user
namespaces the scenarios still run, with the trap as the only guard, and say so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop.hooks.install import init

from .helpers import netns_works
from .model_server import is_main, last_user_text

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / "tests" / "harnesses" / "claude-code" / "node_modules" / ".bin" / "claude"
RUNNER = Path(__file__).with_name("claude_offline.py")
BIN = Path(sys.executable).parent
FAILING = "test_discount_code_takes_ten_percent_off"
STEER = "greenloop: the last test run"
BUDGET = 2
TURN_TIMEOUT_S = 180  # a scenario's turn; the whole scenario is bounded by its turns
TOOLS = ["Bash", "mcp__greenloop__test_run", "mcp__greenloop__test_closure_check"]




NETNS = netns_works() if CLAUDE.exists() else False

if not CLAUDE.exists():
    pytest.skip("npm ci in tests/harnesses/claude-code first", allow_module_level=True)
if not (BIN / "greenloop").exists():
    pytest.skip(
        "greenloop is not installed next to this interpreter (its MCP server)", allow_module_level=True
    )


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    ws = tmp_path / "demo"
    shutil.copytree(
        REPO / "examples" / "demo", ws, ignore=shutil.ignore_patterns(".greenloop", "__pycache__")
    )
    (ws / "greenloop.toml").write_text(f"max_intercept_rounds = {BUDGET}\n")
    init("claude-code", ws)
    return ws


def _env(tmp: Path) -> dict[str, str]:
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "PATH": os.pathsep.join([str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-ant-offline-test-key",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "GREENLOOP_CONFIG_HOME": str(tmp / "no-user-config"),
    }


def turn(prompt: str, script: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    args = ["-p", prompt, "--output-format", "json", "--mcp-config", ".mcp.json", "--allowedTools", *TOOLS]
    return {"args": [*args, *extra], "script": script, "timeout": TURN_TIMEOUT_S}


def drive(ws: Path, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the turns through claude_offline.py (in a network namespace when possible)."""
    tmp = ws.parent
    out = tmp / "claude-out.json"
    plan = {"claude": str(CLAUDE), "workspace": str(ws), "env": _env(tmp), "out": str(out), "turns": turns}
    (tmp / "plan.json").write_text(json.dumps(plan))
    runner = [sys.executable, str(RUNNER), str(tmp / "plan.json")]
    if NETNS:
        argv = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *runner]
    else:
        argv = runner
    budget = TURN_TIMEOUT_S * len(turns) + 60
    p = subprocess.run(argv, capture_output=True, text=True, timeout=budget, check=False)
    assert p.returncode == 0 and out.exists(), p.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    # Nothing left loopback: the namespace had no route off it, the proxy trap saw nothing.
    assert result["trap"] == [], f"requests tried to leave the machine: {result['trap']}"
    if NETNS:
        assert result["isolated"] is True
    else:
        print("no user namespaces here: isolation rests on the proxy trap alone", file=sys.stderr)
    for t in result["turns"]:
        assert t["code"] == 0, (t["stdout"][-2000:], t["stderr"][-2000:])
        assert t["requests"], "no request reached the model server"
    return result


def main_requests(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [q["body"] for q in t["requests"] if isinstance(q["body"], dict) and is_main(q["body"])]


def steered(t: dict[str, Any]) -> list[str]:
    """The texts of the turn's requests that carry the Stop hook's steer to the model."""
    return [text for text in map(last_user_text, main_requests(t)) if STEER in text]


def check(ws: Path, session_id: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CODE_SESSION_ID", "GREENLOOP_SESSION")}
    p = subprocess.run(
        [sys.executable, "-m", "greenloop", "check", str(ws), "--session", session_id, "--json"],
        capture_output=True,
        text=True,
        env={**env, "GREENLOOP_CONFIG_HOME": str(ws.parent / "no-user-config")},
        timeout=60,
        check=False,
    )
    data: dict[str, Any] = json.loads(p.stdout)
    return data


def runs(ws: Path) -> list[dict[str, Any]]:
    from greenloop.closure.store import Store

    with Store(ws) as store:
        return [r.to_json() for r in store.runs()]


GREENLOOP_RUN = {"tool": "Bash", "input": {"command": "greenloop run .", "description": "Run the tests"}}


def test_red_through_the_shell_is_held_then_released_and_the_next_turn_gets_a_new_budget(demo: Path) -> None:
    result = drive(
        demo,
        [
            turn("Run the tests.", [GREENLOOP_RUN]),
            turn("Carry on.", [], "--resume", "{session}"),
        ],
    )
    sid = result["session_id"]
    first, second = result["turns"]
    held = steered(first)
    assert len(held) == BUDGET  # blocked exactly max_intercept_rounds times, then released
    assert all(FAILING in text for text in held)  # the failing test reached the model
    [red] = runs(demo)
    assert red["session_id"] == sid and red["ok"] is False  # the shell run is the session's
    verdict = check(demo, sid)
    assert verdict["satisfied"] is False and verdict["unresolved"] is True
    # A new user turn: a new budget, held again the same number of times.
    again = steered(second)
    assert len(again) == BUDGET and all(FAILING in text for text in again)


@pytest.mark.parametrize("mcp_env", ["as-init-writes", "no-session-variable"])
def test_red_through_the_mcp_tool_is_held_then_released(demo: Path, mcp_env: str) -> None:
    if mcp_env == "no-session-variable":
        # Whatever Claude Code puts in its MCP servers' environment, strip the session
        # variable: the server must find the session through the process tree alone.
        config = json.loads((demo / ".mcp.json").read_text())
        config["mcpServers"]["greenloop"] = {
            "command": "env",
            "args": ["-u", "CLAUDE_CODE_SESSION_ID", "-u", "GREENLOOP_SESSION", "greenloop", "mcp"],
        }
        (demo / ".mcp.json").write_text(json.dumps(config))
    result = drive(demo, [turn("Run the tests.", [{"tool": "mcp__greenloop__test_run", "input": {}}])])
    sid = result["session_id"]
    [t] = result["turns"]
    tool_result = last_user_text(main_requests(t)[1])
    # what the model reads is the agent format (the record is the call's structuredContent)
    assert FAILING in tool_result and "rerun the failures: test_run with last_failed=true" in tool_result
    assert '"session_source"' not in tool_result, tool_result[:2000]
    held = steered(t)
    assert len(held) == BUDGET and all(FAILING in text for text in held)
    [red] = runs(demo)
    assert red["session_id"] == sid and red["ok"] is False
    verdict = check(demo, sid)
    assert verdict["satisfied"] is False and verdict["unresolved"] is True


def test_red_then_fixed_then_green_ends_the_turn(demo: Path) -> None:
    fix = {
        "tool": "Bash",
        "input": {
            "command": "sed -i 's|total \\* 10 // 100|total * 90 // 100|' cart.py",
            "description": "Fix",
        },
    }
    result = drive(
        demo, [turn("Run the tests and fix them.", [GREENLOOP_RUN, {"text": "Done."}, fix, GREENLOOP_RUN])]
    )
    sid = result["session_id"]
    [t] = result["turns"]
    assert t["script_left"] == 0
    assert len(steered(t)) == 1  # held once on the red run; the green run let the turn end
    assert "total * 90 // 100" in (demo / "cart.py").read_text()
    green, red = runs(demo)
    assert (red["ok"], green["ok"]) == (False, True) and {red["session_id"], green["session_id"]} == {sid}
    verdict = check(demo, sid)
    assert verdict["satisfied"] is True and verdict["unresolved"] is False
