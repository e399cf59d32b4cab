"""The closure gate in the real GitHub Copilot CLI (`copilot -p`), offline.

The pinned CLI (`@github/copilot` 1.0.102 in tests/harnesses/copilot, `npm ci` there; its
Linux x64 binary comes as an optional dependency) runs with its own-model-provider mode
(BYOK: COPILOT_PROVIDER_TYPE=anthropic, COPILOT_PROVIDER_BASE_URL, COPILOT_MODEL) against
model_server.py's scripted Anthropic Messages API on 127.0.0.1, with COPILOT_OFFLINE=true: no
GitHub sign-in, no telemetry, no update check. It runs in a temporary copy of examples/demo
(one real bug, one failing test) wired by `greenloop init copilot`, in a temporary HOME and
COPILOT_HOME, with `--trust-folder` (Copilot loads a project's .github/hooks only in a trusted
folder). Each scenario runs inside a fresh network namespace (`unshare -rn`, loopback up;
copilot_offline.py) where nothing but loopback is reachable, and every proxy variable points
at a loopback trap that records any request that tried to leave. Without user namespaces the
scenarios still run, with the trap as the only guard, and say so.

A user turn is one `copilot -p PROMPT --allow-all-tools` run; the Stop hook's blocks come back
as the next user prompt of the same session (UserPromptSubmit fires for them), each one a
request to the model carrying greenloop's reason.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure.store import Store
from greenloop.hooks.install import init

from . import cli_offline
from .copilot_offline import is_main
from .helpers import netns_works
from .model_server import last_user_text

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "tests" / "harnesses" / "copilot" / "node_modules"
COPILOT = HARNESS / "@github" / "copilot" / "npm-loader.js"  # its `copilot` bin
RUNNER = Path(__file__).with_name("copilot_offline.py")
BIN = Path(sys.executable).parent
FAILING = "tests/test_cart.py::test_discount_code_takes_ten_percent_off"
STEER = "greenloop: the last test run"
BUDGET = 2
TURN_TIMEOUT_S = 180
PROMPT = "The cart's discount is wrong; fix it and make the tests pass."


if not COPILOT.exists() or not any(HARNESS.glob("@github/copilot-*/copilot")):
    pytest.skip("npm ci in tests/harnesses/copilot first", allow_module_level=True)
if not (BIN / "greenloop").exists():
    pytest.skip(
        "greenloop is not installed next to this interpreter (its MCP server)", allow_module_level=True
    )
NODE = shutil.which("node")
if NODE is None:
    pytest.skip("no node on PATH (the copilot bin is a Node launcher)", allow_module_level=True)
NETNS = netns_works()


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    ws = tmp_path / "demo"
    shutil.copytree(
        REPO / "examples" / "demo", ws, ignore=shutil.ignore_patterns(".greenloop", ".venv", "__pycache__")
    )
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=30)
    (ws / "greenloop.toml").write_text(f"max_intercept_rounds = {BUDGET}\n")
    init("copilot", ws)
    (tmp_path / "home").mkdir()
    return ws


def _env(tmp: Path) -> dict[str, str]:
    home = tmp / "home"
    return {
        "HOME": str(home),
        "COPILOT_HOME": str(home / ".copilot"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "PATH": os.pathsep.join([str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_TYPE": "anthropic",
        "COPILOT_PROVIDER_API_KEY": "sk-ant-offline-test-key",
        "COPILOT_MODEL": "claude-sonnet-4.5",
        "COPILOT_AUTO_UPDATE": "false",
        "NO_COLOR": "1",
        "GREENLOOP_CONFIG_HOME": str(tmp / "no-user-config"),
    }


def turn(prompt: str, script: list[dict[str, Any]]) -> dict[str, Any]:
    # --trust-folder trusts the project for this one session (it refuses --session-id, so the
    # session is read back from the run's "Resume copilot --resume=ID" line).
    args = ["--allow-all-tools", "--trust-folder", "--no-auto-update"]
    return {"args": [*args, "-p", prompt], "script": script, "timeout": TURN_TIMEOUT_S}


def drive(ws: Path, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the turns through copilot_offline.py (in a network namespace when possible)."""
    return cli_offline.drive(RUNNER, "copilot", [str(NODE), str(COPILOT)], ws, _env(ws.parent), turns,
                             netns=NETNS, turn_timeout=TURN_TIMEOUT_S)  # fmt: skip


def session_of(t: dict[str, Any]) -> str:
    found = re.findall(r"--resume=([0-9a-f-]{36})", t["stderr"])  # its closing stats
    assert len(found) == 1, t["stderr"][-2000:]
    return str(found[0])


def main_texts(t: dict[str, Any]) -> list[str]:
    """What the CLI sent last in each of the turn's agent requests (prompt, tool result, steer)."""
    bodies = [q["body"] for q in t["requests"] if isinstance(q["body"], dict)]
    return [last_user_text(b) for b in bodies if is_main(b)]


def steered(t: dict[str, Any]) -> list[str]:
    """The texts of the turn's requests that carry the Stop hook's steer to the model."""
    return [text for text in main_texts(t) if STEER in text]


def check(ws: Path, session: str) -> dict[str, Any]:
    p = subprocess.run(
        [sys.executable, "-m", "greenloop", "check", str(ws), "--session", session, "--json"],
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if k != "GREENLOOP_SESSION"},
            "PYTHONPATH": str(REPO / "src"),
            "GREENLOOP_CONFIG_HOME": str(ws.parent / "no-user-config"),
        },
        timeout=60,
        check=False,
    )
    data: dict[str, Any] = json.loads(p.stdout)
    return data


def kinds(ws: Path, session: str) -> list[tuple[int, str]]:
    with Store(ws) as store:
        return [(i["turn_seq"], i["kind"]) for i in store.interceptions(session)]


def shell(command: str) -> dict[str, Any]:
    return {"tool": "bash", "input": {"command": command, "description": "Run the tests"}}


@pytest.mark.timeout(TURN_TIMEOUT_S + 120)
def test_red_through_the_shell_is_held_max_intercept_rounds_times_then_released(demo: Path) -> None:
    result = drive(demo, [turn(PROMPT, [shell("greenloop run .")])])
    [t] = result["turns"]
    session = session_of(t)
    texts = main_texts(t)
    assert PROMPT in texts[0] and FAILING in texts[1]  # the prompt, then the red run's output
    held = steered(t)
    assert len(held) == BUDGET  # blocked exactly max_intercept_rounds times, then released
    assert all(FAILING in text for text in held)  # the failing test reached the model each time
    for n, text in enumerate(held, 1):
        assert f"(Intercept {n} of {BUDGET} this turn.)" in text
    assert kinds(demo, session) == [(1, "steer")] * BUDGET + [(1, "release")]
    with Store(demo) as store:
        [red] = store.runs()
    assert red.session_id == session and red.ok is False  # the shell run is the session's
    verdict = check(demo, session)
    assert verdict["unresolved"] is True and verdict["satisfied"] is False
    assert verdict["last_run"]["failing"] == [FAILING]


@pytest.mark.timeout(TURN_TIMEOUT_S + 120)
def test_red_then_a_fix_then_green_ends_the_turn_without_a_steer(demo: Path) -> None:
    cart = str(demo / "cart.py")
    script = [
        shell("greenloop run ."),
        {"tool": "view", "input": {"path": cart}},
        {
            "tool": "edit",
            "input": {
                "path": cart,
                "old_str": "return total * 10 // 100",
                "new_str": "return total * 90 // 100",
            },
        },
        shell("greenloop run ."),
        {"text": "Fixed: the discount takes 10% off and every test passes."},
    ]
    result = drive(demo, [turn(PROMPT, script)])
    [t] = result["turns"]
    session = session_of(t)
    assert "every test passes" in t["stdout"]
    assert "return total * 90 // 100" in (demo / "cart.py").read_text()
    texts = main_texts(t)
    assert FAILING in texts[1]  # the red run the model read before it fixed the bug
    assert steered(t) == []  # green at the end: the Stop hook allowed the turn at once
    assert kinds(demo, session) == []
    with Store(demo) as store:
        # newest first: the green re-run, then the red run; both the session's
        assert [(r.session_id, r.ok) for r in store.runs()] == [(session, True), (session, False)]
    verdict = check(demo, session)
    assert verdict["satisfied"] is True and verdict["unresolved"] is False
    assert verdict["last_run"]["ok"] is True and verdict["last_run"]["session_id"] == session


@pytest.mark.timeout(TURN_TIMEOUT_S + 120)
def test_red_through_the_mcp_tool_is_held_then_released(demo: Path) -> None:
    # Copilot names a project .mcp.json server's tools SERVER-TOOL.
    result = drive(demo, [turn(PROMPT, [{"tool": "greenloop-test_run", "input": {}}])])
    [t] = result["turns"]
    session = session_of(t)
    tool_result = main_texts(t)[1]
    # The MCP server found the session through the process tree (its Copilot parent's binding).
    assert '"session_source":"process-tree"' in tool_result, tool_result[:2000]
    assert f'"session_id":"{session}"' in tool_result
    assert FAILING in tool_result
    held = steered(t)
    assert len(held) == BUDGET and all(FAILING in text for text in held)
    assert kinds(demo, session) == [(1, "steer")] * BUDGET + [(1, "release")]
    with Store(demo) as store:
        [red] = store.runs()
    assert red.session_id == session and red.ok is False
    verdict = check(demo, session)
    assert verdict["unresolved"] is True and verdict["satisfied"] is False
