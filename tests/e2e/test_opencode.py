"""The closure gate in the real OpenCode (opencode-ai 1.18.33, pinned in tests/harnesses/opencode), offline.

A copy of examples/demo (one real bug, one failing test) is wired by `greenloop init opencode`
(its plugin in .opencode/plugin/, its MCP server left off here); `opencode serve` runs with
a scripted model (model_server.py, through OpenCode's bundled Anthropic provider) inside a
network namespace with only loopback, when the machine allows one (opencode_offline.py
drives it over the server's HTTP API, as OpenCode's TUI does). OpenCode cannot refuse a stop:
the plugin posts greenloop's reason to the session when it goes idle, so each corrective
round is a request the model gets with the failing test named in it.
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

from greenloop.closure.store import Store

from .helpers import REPO, cli, netns_works

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# opencode-ai's binary for Linux x64, the package itself: opencode-ai lists one per platform as
# optional dependencies, which a lock file written here cannot all name.
HARNESS = REPO / "tests" / "harnesses" / "opencode"
OPENCODE = HARNESS / "node_modules" / "opencode-linux-x64" / "bin" / "opencode"
DRIVER = Path(__file__).with_name("opencode_offline.py")
FAILING = "tests/test_cart.py::test_discount_code_takes_ten_percent_off"
PROMPT = "The cart's discount is wrong; fix it and make the tests pass."
BUDGET = 2  # max_intercept_rounds, the default
MODEL = {
    "model": "scripted/claude-scripted",
    "autoupdate": False,
    "share": "disabled",
    "permission": {"bash": "allow", "edit": "allow"},
    "provider": {
        "scripted": {
            "npm": "@ai-sdk/anthropic",
            "name": "Scripted",
            "options": {"baseURL": "BASE_URL", "apiKey": "offline"},
            "models": {
                "claude-scripted": {
                    "name": "Scripted",
                    "tool_call": True,
                    "limit": {"context": 200000, "output": 8192},
                }
            },
        }
    },
}


def bash(command: str) -> dict[str, Any]:
    return {"tool": "bash", "input": {"command": command, "description": "run it"}}




@pytest.fixture
def project(tmp_path: Path) -> Path:
    if not OPENCODE.exists():
        pytest.skip("npm ci in tests/harnesses/opencode first")
    root = tmp_path / "project"
    shutil.copytree(REPO / "examples" / "demo", root)
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    init = cli("init", "opencode", str(root))
    assert init.code == 0, init.stderr
    config = json.loads((root / "opencode.json").read_text())
    config["mcp"]["greenloop"]["enabled"] = False  # the shell is enough here; one process fewer
    (root / "opencode.json").write_text(json.dumps(config))
    return root


def _plugin_package_present(folder: Path) -> None:
    """What OpenCode's start-up checks before installing @opencode-ai/plugin into a config folder
    (a node_modules, and a lock naming every dependency): offline, the install retries for about
    70 s before the session may start. greenloop's plugin imports nothing from that package."""
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    lock = {"packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}
    (folder / "package-lock.json").write_text(json.dumps(lock))


def drive(tmp_path: Path, project: Path, turns: list[dict[str, Any]], timeout: float = 420) -> dict[str, Any]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    _plugin_package_present(home / ".config" / "opencode")
    _plugin_package_present(project / ".opencode")
    env = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(REPO / "src"),
        "GREENLOOP_CONFIG_HOME": str(home / ".config" / "greenloop"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
    }
    out = tmp_path / "report.json"
    plan = {"argv": [str(OPENCODE), "serve", "--print-logs"], "cwd": str(project), "env": env,
            "model_config": MODEL, "turns": turns, "timeout": timeout, "quiet": 6,
            "out": str(out)}  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    runner = [sys.executable, str(DRIVER), str(tmp_path / "plan.json")]
    isolate = netns_works()
    namespace = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
    argv = [*namespace, *runner] if isolate else runner
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 90, check=False)
    assert p.returncode == 0 and out.exists(), p.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    assert not report["errors"], (report["errors"], report["log_tail"])
    if isolate:
        assert report["isolated"] is True, "the network namespace let a connection off the machine"
    for turn in report["turns"]:
        assert not turn["timed_out"], report["log_tail"]
        assert turn["script_left"] == 0, turn
    return report


def kinds(project: Path, session: str) -> list[tuple[int, str]]:
    with Store(project) as store:
        return [(i["turn_seq"], i["kind"]) for i in store.interceptions(session)]


def steers(texts: list[str]) -> list[str]:
    return [t for t in texts if t.startswith("greenloop:") and "Intercept" in t]


@pytest.mark.timeout(600)
def test_a_red_turn_is_held_exactly_the_budget_then_released(tmp_path: Path, project: Path) -> None:
    script = [bash("python -m pytest -q tests"), {"text": "All done."}, {"text": "Done, I think."},
              {"text": "I could not fix it."}]  # fmt: skip
    report = drive(tmp_path, project, [{"prompt": PROMPT, "script": script}])
    session = report["session_id"]
    [turn] = report["turns"]
    held = steers(turn["main"])
    assert len(held) == BUDGET, turn["main"]
    assert all(FAILING in text for text in held)
    assert [f"Intercept {n} of {BUDGET}" in text for n, text in enumerate(held, 1)] == [True] * BUDGET
    assert len(turn["main"]) == 2 + BUDGET  # the prompt, the tool result, one request per round
    assert kinds(project, session) == [(1, "steer")] * BUDGET + [(1, "release")]
    verdict = cli("check", "--session", session, "--json", cwd=project).json
    assert verdict["unresolved"] is True and verdict["satisfied"] is False
    assert verdict["last_run"]["session_id"] == session  # the agent's own pytest, seen by the plugin


@pytest.mark.timeout(600)
def test_red_then_fixed_then_green_is_allowed(tmp_path: Path, project: Path) -> None:
    fix = "sed -i 's|return total \\* 10 // 100|return total * 90 // 100|' cart.py"
    script = [bash("python -m pytest -q tests"), bash(fix), bash("python -m pytest -q tests"),
              {"text": "Fixed: the discount keeps 90%."}]  # fmt: skip
    report = drive(tmp_path, project, [{"prompt": PROMPT, "script": script}])
    session = report["session_id"]
    [turn] = report["turns"]
    assert steers(turn["main"]) == [] and len(turn["main"]) == 4
    assert "return total * 90 // 100" in (project / "cart.py").read_text()
    assert kinds(project, session) == []
    verdict = cli("check", "--session", session, "--json", cwd=project).json
    assert verdict["unresolved"] is False and verdict["satisfied"] is True
    assert verdict["last_run"]["session_id"] == session and verdict["last_run"]["ok"] is True
