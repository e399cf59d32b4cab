"""The closure gate with the real Codex CLI (`codex exec`, npm `@openai/codex`, pinned in
tests/harnesses/codex) against a scripted model on 127.0.0.1.

Each scenario copies examples/demo (one failing test), wires it with the real `greenloop init
codex`, and runs `codex exec` with a temporary CODEX_HOME whose `model_providers` entry points
at `ResponsesServer`, a Responses API server that plays the model from a plan: the agent runs
the suite through its shell (`exec_command`) or through the MCP tool `test_run`, says it is
done, and the Stop hook sends it back with the failing test's name (which reaches the model as
a message), at most `max_intercept_rounds` times per turn, then lets the turn end and records
the session unresolved; `codex exec resume` starts a new turn with a new budget; a fix and a
green run let the turn end at once; the agent's own `pytest` is recorded by the PostToolUse
hook. Every run must be recorded under Codex's session (the thread id).

Nothing may leave the machine. Each turn runs through codex_offline.py inside a fresh network
namespace (`unshare -rn`, loopback up) where only 127.0.0.1 is reachable, with the model
server and `ProxyTrap` (a loopback proxy every proxy variable points at) in there too; the
test fails if the trap got anything. Codex's background calls (plugin sync, update checks,
analytics, web search) are also switched off in its config. Where user namespaces are not
available, the trap and the config alone guard it.

Install: `cd tests/harnesses/codex && npm ci` (the tests skip when the CLI is missing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, netns_works, processes_under, wait_until
from .responses_server import Answer, call, say, texts

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

CODEX = REPO / "tests" / "harnesses" / "codex" / "node_modules" / ".bin" / "codex"
DRIVER = Path(__file__).resolve().parent / "codex_offline.py"
FAILING = "test_discount_code_takes_ten_percent_off"
BUDGET = 2  # max_intercept_rounds, written into the project's greenloop.toml
EXEC_TIMEOUT_S = 240  # one `codex exec`, however many model requests it makes
FIX = (
    "python3 -c \"import pathlib; p = pathlib.Path('cart.py'); "
    "p.write_text(p.read_text().replace('total * 10 // 100', 'total * 90 // 100'))\""
)


def _require_codex() -> None:
    if not CODEX.exists():
        pytest.skip("the Codex CLI is not installed: run `npm ci` in tests/harnesses/codex")


def run_in_shell() -> Answer:
    return call("exec_command", cmd="greenloop run .", yield_time_ms=30000)


@dataclass
class ExecResult:
    code: int
    events: list[dict[str, Any]]
    stderr: str
    seconds: float
    plan_left: int

    @property
    def thread_id(self) -> str:
        for event in self.events:
            if event.get("type") == "thread.started":
                return str(event["thread_id"])
        raise AssertionError(f"no thread.started event; stderr:\n{self.stderr[-3000:]}")


_NETNS: dict[str, bool] = {}  # probed once, by the first scenario that runs




@dataclass
class CodexProject:
    """A wired demo project, a CODEX_HOME pointing at the scripted model, and the CLI."""

    root: Path
    home: Path
    env: dict[str, str]
    netns: bool
    requests: list[dict[str, Any]] = field(default_factory=list)  # every request, all turns
    runs: list[ExecResult] = field(default_factory=list)

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        """The bodies of the `POST …/responses` requests, all turns, in order."""
        return [
            r["body"] for r in self.requests if r["method"] == "POST" and r["path"].endswith("/responses")
        ]

    def exec(self, prompt: str, plan: list[Answer], *, resume: str | None = None) -> ExecResult:
        """One `codex exec` turn (a `resume` of that thread when given), the model playing `plan`."""
        # The project's trust is in CODEX_HOME's config; hook trust is bypassed for this
        # invocation (the hooks were just written by init and are what the test checks).
        # --strict-config: Codex refuses any key it does not know, init's included.
        common = ["--json", "--strict-config", "--dangerously-bypass-hook-trust"]
        if resume:
            argv = ["exec", "resume", *common, resume, prompt]
        else:
            argv = ["exec", *common, "-C", str(self.root), prompt]
        n = len(self.runs)
        spec: dict[str, Any] = {
            "codex": str(CODEX),
            "cwd": str(self.root),
            "env": self.env,
            "argv": argv,
            "codex_home": str(self.home),
            "config": _codex_config(self.root),
            "plan": [a.to_json() for a in plan],
            "timeout": EXEC_TIMEOUT_S,
            "out": str(self.root.parent / f"turn-{n}.json"),
        }
        spec_path = self.root.parent / f"turn-{n}-spec.json"
        spec_path.write_text(json.dumps(spec))
        runner = [sys.executable, str(DRIVER), str(spec_path)]
        if self.netns:
            runner = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *runner]
        proc = subprocess.run(
            runner, capture_output=True, text=True, timeout=EXEC_TIMEOUT_S + 60, stdin=subprocess.DEVNULL
        )
        assert proc.returncode == 0, proc.stderr
        out: dict[str, Any] = json.loads(Path(spec["out"]).read_text())
        self.requests += out["requests"]
        events = []
        for line in out["stdout"].splitlines():
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        result = ExecResult(out["code"], events, out["stderr"], out["seconds"], out["plan_left"])
        self.runs.append(result)
        # Nothing tried to leave the machine: no route off the namespace, nothing at the trap.
        assert out["trap"] == [], f"requests tried to leave the machine: {out['trap']}"
        if self.netns:
            assert out["isolated"] is True
        assert result.code == 0, (
            f"codex exec failed ({result.code}):\n{out['stdout'][-3000:]}\n{out['stderr'][-3000:]}"
        )
        assert not out["errors"], out["errors"]
        assert out["requests"], "Codex never reached the scripted model"
        assert all(r["method"] == "POST" and r["path"] == "/v1/responses" for r in out["requests"]), [
            (r["method"], r["path"]) for r in out["requests"]
        ]
        return result

    def check(self, session: str) -> dict[str, Any]:
        proc = subprocess.run(
            ["greenloop", "check", "--session", session, "--json"],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        data: dict[str, Any] = json.loads(proc.stdout)
        return data


def _run_sessions(project: CodexProject) -> list[str | None]:
    """The session each recorded run of the project was recorded under, oldest first."""
    results = sorted((project.root / ".greenloop" / "runs").glob("*/result.json"))
    return [json.loads(path.read_text()).get("session_id") for path in results]


def _codex_config(project: Path) -> str:
    """CODEX_HOME's config.toml; the driver puts the model server's URL for {base_url}."""
    return f"""\
model = "scripted-model"
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
# The login shell's profile resets PATH; greenloop (a shim in a temporary folder) must stay found.
allow_login_shell = false
check_for_update_on_startup = false
web_search = "disabled"

[analytics]
enabled = false

# Everything that would call a service off this machine is off.
[features]
plugins = false
remote_plugin = false
plugin_sharing = false
apps = false
tool_suggest = false
skill_mcp_dependency_install = false
image_generation = false
in_app_updates = false

[model_providers.scripted]
name = "scripted"
base_url = "{{base_url}}"
wire_api = "responses"
env_key = "GREENLOOP_TEST_MODEL_KEY"
request_max_retries = 0
stream_max_retries = 0

[projects."{project}"]
trust_level = "trusted"
"""


def _shim(bin_dir: Path) -> None:
    """`greenloop` on PATH for Codex's hooks, MCP server and shell: this checkout, this Python.
    Codex starts MCP servers with a cleaned environment (no PYTHONPATH), so the shim sets it."""
    bin_dir.mkdir()
    shim = bin_dir / "greenloop"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{REPO / "src"}" exec "{sys.executable}" -m greenloop "$@"\n')
    shim.chmod(0o755)


@pytest.fixture
def codex_project(tmp_path: Path) -> Iterator[CodexProject]:
    _require_codex()
    root = tmp_path / "demo"
    shutil.copytree(
        REPO / "examples" / "demo", root, ignore=shutil.ignore_patterns(".greenloop", "__pycache__")
    )
    (root / "greenloop.toml").write_text(f"max_intercept_rounds = {BUDGET}\n")
    bin_dir = tmp_path / "bin"
    _shim(bin_dir)
    home = tmp_path / "codex-home"
    home.mkdir()
    user_home = tmp_path / "home"
    user_home.mkdir()
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(user_home),
        "CODEX_HOME": str(home),
        "GREENLOOP_TEST_MODEL_KEY": "sk-loopback-only",
        "GREENLOOP_CONFIG_HOME": str(tmp_path / "greenloop-user"),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env, timeout=30)
    init = subprocess.run(
        ["greenloop", "init", "codex", str(root)], env=env, capture_output=True, text=True, timeout=60
    )
    assert init.returncode == 0, init.stderr
    project = CodexProject(root, home, env, _NETNS.setdefault("works", netns_works()))
    try:
        yield project
    finally:  # what reached the model, for reading when a scenario fails
        (tmp_path / "model-requests.json").write_text(json.dumps(project.requests, indent=1))
    # Codex ends its hooks, MCP server and shell commands with itself.
    assert wait_until(lambda: not processes_under(tmp_path), timeout=15), processes_under(tmp_path)


def _steer(request: dict[str, Any]) -> str | None:
    """The gate's steer, when it is what a model request answers: Codex sends a Stop hook's
    block reason as the newest user message (`<hook_prompt …>reason</hook_prompt>`)."""
    items = request.get("input") or []
    last = items[-1] if items else None
    if not isinstance(last, dict) or last.get("type") != "message":
        return None
    found = [t for t in texts({"input": [last]}) if FAILING in t]
    return found[0] if found else None


def _agent_messages(result: ExecResult) -> list[str]:
    return [str(e["item"]["text"]) for e in result.events if e.get("item", {}).get("type") == "agent_message"]


def _story(project: CodexProject, result: ExecResult) -> str:
    """What reached the model, one line per request (the newest input item), and the end of
    Codex's stderr: a failed scenario's assertion says what happened."""
    lines = []
    for number, request in enumerate(project.model_requests, 1):
        items = request.get("input") or []
        last = items[-1] if items else {}
        text = " ".join(texts({"input": [last]})) if isinstance(last, dict) else ""
        if isinstance(last, dict) and not text:
            text = str(last.get("output") or last.get("arguments") or "")
        kind = last.get("type") if isinstance(last, dict) else type(last).__name__
        lines.append(f"{number}. {kind}: {text[:200]!r}")
    return "\n".join([*lines, f"codex exit {result.code}, stderr: {result.stderr[-1500:]}"])


def _blocked_then_released(project: CodexProject, result: ExecResult, *, before: int) -> None:
    """The turn was sent back exactly BUDGET times, each time naming the failing test, and the
    agent's last "done" then ended it."""
    steers = [s for r in project.model_requests[before:] if (s := _steer(r))]
    assert len(steers) == BUDGET, _story(project, result)
    for number, steer in enumerate(steers, 1):
        assert f"Intercept {number} of {BUDGET} this turn" in steer, steer
    assert _agent_messages(result)[-(BUDGET + 1) :] == ["done"] * (BUDGET + 1), _agent_messages(result)


def test_red_shell_run_is_blocked_then_released_and_resume_gets_a_new_budget(
    codex_project: CodexProject,
) -> None:
    project = codex_project
    first = project.exec("Make the cart's tests pass.", [run_in_shell()])
    session = first.thread_id
    _blocked_then_released(project, first, before=0)
    check = project.check(session)
    assert check["unresolved"] is True and check["satisfied"] is False, check
    assert check["intercepts_this_turn"] == BUDGET, check
    assert check["last_run"]["ok"] is False, check
    assert _run_sessions(project) == [session]  # CODEX_THREAD_ID in the shell's environment

    # A second user turn on the same session: a new budget, so two more steers, then release.
    before = len(project.model_requests)
    second = project.exec("Are the tests green now?", [], resume=session)
    assert second.thread_id == session
    _blocked_then_released(project, second, before=before)
    again = project.check(session)
    assert again["unresolved"] is True and again["intercepts_this_turn"] == BUDGET, again


def test_red_mcp_test_run_is_blocked_then_released(codex_project: CodexProject) -> None:
    project = codex_project
    result = project.exec("Make the cart's tests pass.", [call("mcp__greenloop__test_run")])
    offered = [t.get("name") for t in project.model_requests[0].get("tools", [])]
    assert "mcp__greenloop" in offered, f"codex exec did not wait for the greenloop MCP server: {offered}"
    assert result.plan_left == 0
    session = result.thread_id
    # recorded under Codex's session (the `_meta` of its tools/call), not the MCP connection's
    assert _run_sessions(project) == [session]
    _blocked_then_released(project, result, before=0)
    check = project.check(session)
    assert check["unresolved"] is True and check["intercepts_this_turn"] == BUDGET, check
    assert check["last_run"]["ok"] is False, check


def test_red_fix_green_lets_the_turn_end(codex_project: CodexProject) -> None:
    project = codex_project
    plan = [
        run_in_shell(),
        say("done"),
        call("exec_command", cmd=FIX),
        run_in_shell(),
        say("fixed and green"),
    ]
    result = project.exec("Make the cart's tests pass.", plan)
    session = result.thread_id
    assert result.plan_left == 0
    steers = [s for r in project.model_requests if (s := _steer(r))]
    assert len(steers) == 1 and "Intercept 1 of" in steers[0], steers  # the red run's one steer
    # the stop after the green run was allowed at once: no further request reached the model
    assert _agent_messages(result)[-1] == "fixed and green", _agent_messages(result)
    assert _steer(project.model_requests[-1]) is None
    assert _run_sessions(project) == [session, session]
    check = project.check(session)
    assert check["satisfied"] is True and check["unresolved"] is False, check
    assert check["last_run"]["ok"] is True and check["intercepts_this_turn"] == 1, check


# The agent's own `python -m pytest`, outliving exec_command's first yield (500 ms), so its
# result comes back through write_stdin: Codex still sends PostToolUse with the whole output
# when the command ends, and the hook records the run from it.
OWN_PYTEST = call("exec_command", cmd=f"{sys.executable} -m pytest -q", yield_time_ms=500)


def test_the_agents_own_pytest_is_recorded_by_post_tool_use_and_gates(codex_project: CodexProject) -> None:
    project = codex_project
    (project.root / "conftest.py").write_text("import time\ntime.sleep(3)\n")
    result = project.exec("Make the cart's tests pass.", [OWN_PYTEST])
    session = result.thread_id
    assert _run_sessions(project) == []  # no `greenloop run`: the hook's record is in the database
    _blocked_then_released(project, result, before=0)
    check = project.check(session)
    assert check["unresolved"] is True and check["last_run"]["ok"] is False, check
