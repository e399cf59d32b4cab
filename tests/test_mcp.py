"""The MCP server through the SDK's real client, with `greenloop mcp` as a stdio subprocess.

Every test starts a fresh server process (one connection = one session) against a real
workspace in tmp_path, runs real pytest suites through it, and checks what a model would
read: structured results, errors as tool results, the gate's view of the session.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar, cast

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, RequestParamsMeta

from greenloop.mcp.outputs import bounded_integration
from greenloop.mcp.tools import TOOL_NAMES

T = TypeVar("T")

RUN_ARGS = {"framework", "target", "last_failed", "command", "timeout_ms", "run_in_background", "session_id"}


# --------------------------------------------------------------------------- client helpers


def _params(workspace: Path, home: Path, env: Mapping[str, str] | None = None) -> StdioServerParameters:
    child_env = {
        "GREENLOOP_CONFIG_HOME": str(home),
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        # the greenloop under test, where PYTHONPATH names a checkout other than the installed one
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
        **(env or {}),
    }
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "greenloop", "mcp", "--workspace", str(workspace)],
        env=child_env,
        cwd=str(workspace),
    )


@asynccontextmanager
async def _connect(
    workspace: Path, home: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    errlog = open(home / "server-stderr.log", "a")  # noqa: SIM115 - closed below
    try:
        async with (
            stdio_client(_params(workspace, home, env), errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
    finally:
        errlog.close()


def _with_client(
    workspace: Path,
    home: Path,
    body: Callable[[ClientSession], Awaitable[T]],
    env: Mapping[str, str] | None = None,
) -> T:
    async def main() -> T:
        async with _connect(workspace, home, env) as session:
            return await body(session)

    return anyio.run(main)


def _ok(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


# --------------------------------------------------------------------------- workspaces


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


def _pytest_workspace(root: Path, *, red: bool, verbose: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    # -v: one line per finished test, which is what live progress counts
    addopts = "-p no:cacheprovider" + (" -v" if verbose else "")
    (root / "pyproject.toml").write_text(f'[tool.pytest.ini_options]\naddopts = "{addopts}"\n')
    (root / "calc.py").write_text(
        "def add(a, b):\n    return a - b\n" if red else "def add(a, b):\n    return a + b\n"
    )
    (root / "test_calc.py").write_text(
        "from calc import add\n\n"
        "def test_add_small():\n    assert add(1, 2) == 3\n\n"
        "def test_add_zero():\n    assert add(0, 0) == 0\n\n"
        "def test_add_negative():\n    assert add(-1, -1) == -2\n"
    )
    return root


def _fix(root: Path) -> None:
    path = root / "calc.py"
    before = path.stat().st_mtime_ns
    path.write_text("def add(a, b):\n    return a + b\n")
    # the fix has the red file's size; written in the second the red run compiled it, Python
    # would take the cached bytecode (mtime in seconds and size) for current and run the bug
    os.utime(path, ns=(before + 2 * 10**9, before + 2 * 10**9))


# --------------------------------------------------------------------------- tools and schemas


def test_lists_every_tool_with_input_and_output_schemas(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)

    async def body(s: ClientSession) -> Any:
        return await s.list_tools()

    tools = {t.name: t for t in _with_client(ws, home, body).tools}
    assert set(tools) == set(TOOL_NAMES)
    for tool in tools.values():
        assert tool.description, tool.name
        assert tool.input_schema["type"] == "object"
        out = tool.output_schema
        assert out is not None and out["type"] == "object", tool.name
        assert "session_id" in out["properties"] and "session_id" in out["required"], tool.name

    run_in = tools["test_run"].input_schema
    assert set(run_in["properties"]) >= RUN_ARGS
    assert not run_in.get("required")  # every argument of test_run is optional
    framework = run_in["properties"]["framework"]["anyOf"][0]["enum"]
    assert set(framework) == {"vitest", "jest", "npm-test", "pytest", "node:test", "go", "cargo", "mocha",
                              "unittest", "bun"}
    assert run_in["properties"]["timeout_ms"]["anyOf"][0]["minimum"] == 1
    run_out = tools["test_run"].output_schema or {}
    assert {"ok", "outcome", "summary", "failures", "result_ref", "job_id"} <= set(run_out["properties"])
    assert set(tools["bug_open"].input_schema["required"]) == {"unit", "test", "title"}
    assert set(tools["bug_transition"].input_schema["required"]) == {"bug_id", "to"}
    assert tools["test_probe"].annotations is not None and tools["test_probe"].annotations.read_only_hint
    integration = tools["integration_run"]
    assert "browser steps" in (integration.description or "")
    it_out = integration.output_schema or {}
    assert {"failures", "more_failures", "aborted", "result_ref"} <= set(it_out["properties"])
    case_failure = it_out["$defs"]["CaseFailureOutput"]["properties"]
    wanted = {"case_id", "failed_step", "reason", "message", "expected", "got", "artifacts"}
    assert wanted <= set(case_failure)
    assert "screenshot" in case_failure["artifacts"]["description"]


def test_disabled_workspace_offers_no_tools(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=True)
    (ws / "greenloop.toml").write_text("enabled = false\n")

    async def body(s: ClientSession) -> tuple[Any, CallToolResult]:
        return await s.list_tools(), await s.call_tool("test_run", {})

    listed, call = _with_client(ws, home, body)
    assert listed.tools == []
    assert call.is_error
    assert not (ws / ".greenloop").exists()  # nothing ran, nothing recorded


def test_bad_arguments_come_back_as_tool_errors_naming_the_argument(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)

    async def body(s: ClientSession) -> tuple[list[CallToolResult], Any]:
        calls = [
            await s.call_tool("test_run", {"timeout": 5000}),
            await s.call_tool("test_run", {"timeout_ms": -5}),
            await s.call_tool("test_run", {"framework": "mocha-ish"}),
            await s.call_tool("test_run", {"timeout_ms": "soon"}),
            await s.call_tool("bug_transition", {"bug_id": "BUG-1", "to": "done"}),
            await s.call_tool("bug_open", {"unit": "api"}),
            await s.call_tool("test_job", {"job_id": "job-does-not-exist"}),
            await s.call_tool("no_such_tool", {}),
        ]
        return calls, await s.list_tools()  # the server is still serving afterwards

    calls, listed = _with_client(ws, home, body)
    assert all(c.is_error for c in calls), [_text(c) for c in calls]
    unknown, negative, framework, wrong_type, status, missing, job, tool = (_text(c) for c in calls)
    assert "unknown argument 'timeout'" in unknown and "timeout_ms" in unknown
    assert "'timeout_ms'" in negative and "-5" in negative
    assert "'framework'" in framework and "pytest" in framework
    assert "'timeout_ms'" in wrong_type
    assert "'to'" in status and "verified" in status
    assert "'test'" in missing and "'title'" in missing
    assert "job-does-not-exist" in job
    assert "no_such_tool" in tool
    assert len(listed.tools) == len(TOOL_NAMES)
    assert not (ws / ".greenloop" / "runs").exists() or not any((ws / ".greenloop" / "runs").iterdir())


def test_stdout_carries_only_protocol_messages(tmp_path: Path, home: Path) -> None:
    """A raw JSON-RPC conversation: every byte the server writes to stdout is a JSON message."""
    ws = _pytest_workspace(tmp_path / "ws", red=True)
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "test_probe", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "test_run", "arguments": {}}},
        {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "tools/call",
            "params": {"name": "test_run", "arguments": {"x": 1}},
        },
    ]
    replies = _raw_conversation(ws, home, messages, 5)  # json.loads raises on any stray output
    by_id = {r["id"]: r for r in replies if "id" in r}
    assert set(by_id) == {1, 2, 3, 4, 5}
    assert by_id[3]["result"]["isError"] is False
    assert by_id[4]["result"]["structuredContent"]["outcome"] == "red"
    assert by_id[5]["result"]["isError"] is True


def test_bad_workspace_is_refused_before_serving(tmp_path: Path, home: Path) -> None:
    params = _params(tmp_path, home)
    args = [*params.args[:-1], str(tmp_path / "missing")]
    proc = subprocess.run(
        [params.command, *args], input="", capture_output=True, text=True, env=params.env, timeout=60
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "--workspace" in proc.stderr


# --------------------------------------------------------------------------- probe, run, closure


def test_probe_run_red_then_green_and_the_gate_sees_the_session(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=True, verbose=True)
    seen_progress: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen_progress.append((progress, total))

    async def body(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["probe"] = _ok(await s.call_tool("test_probe", {}))
        out["closure0"] = _ok(await s.call_tool("test_closure_check", {}))
        out["red"] = _ok(await s.call_tool("test_run", {}, progress_callback=on_progress))
        out["closure1"] = _ok(await s.call_tool("test_closure_check", {}))
        _fix(ws)
        out["green"] = _ok(await s.call_tool("test_run", {}))
        out["closure2"] = _ok(await s.call_tool("test_closure_check", {}))
        return out

    out = _with_client(ws, home, body)
    probe, red, green = out["probe"], out["red"], out["green"]
    assert probe["framework"] == "pytest"
    assert any(f.endswith("test_calc.py") for f in probe["test_files"])
    # No hook, no session variable: the runs belong to the workspace (never to a private
    # session of the connection that no gate reads), and every result says so.
    sessions = {probe["session_id"], red["session_id"], green["session_id"], out["closure2"]["session_id"]}
    assert sessions == {None}

    assert out["closure0"]["satisfied"] is True  # nothing recorded yet: allow

    assert red["ok"] is False and red["outcome"] == "red" and red["background"] is False
    assert red["summary"] == {"total": 3, "passed": 1, "failed": 2, "skipped": 0}
    failed_names = {f["test"] for f in red["failures"]}
    assert any("test_add_small" in n for n in failed_names), failed_names
    first = red["failures"][0]
    assert first["file"] and first["file"].endswith("test_calc.py") and first["message"]
    assert red["result_ref"] and Path(red["result_ref"]).is_file()
    assert seen_progress, "no progress notification during the run"
    assert all(b[0] > a[0] for a, b in itertools.pairwise(seen_progress))  # progress grows
    assert seen_progress[-1][0] == 3  # all three tests done

    assert out["closure1"]["satisfied"] is False
    assert out["closure1"]["last_run"]["run_id"] == red["run_id"]
    assert out["closure1"]["last_run"]["ok"] is False

    assert green["ok"] is True and green["outcome"] == "green" and green["failures"] == []
    assert green["summary"]["passed"] == 3
    assert out["closure2"]["satisfied"] is True
    assert out["closure2"]["last_run"]["run_id"] == green["run_id"]


def test_text_content_is_the_agent_format_and_structured_content_the_whole_record(
    tmp_path: Path, home: Path
) -> None:
    from greenloop import agent_format, api
    from greenloop.mcp.fast import RERUN
    from greenloop.result import RunResult

    ws = _pytest_workspace(tmp_path / "ws", red=True)

    async def body(s: ClientSession) -> list[CallToolResult]:
        calls = [await s.call_tool("test_run", {}), await s.call_tool("test_run", {})]
        calls.append(await s.call_tool("test_closure_check", {}))
        return calls

    first, second, check = _with_client(ws, home, body)
    records = [_ok(first), _ok(second)]
    for call, record in zip((first, second), records, strict=True):
        run = RunResult.from_json(json.loads(Path(record["result_ref"]).read_text()))
        extra = {"session_source": record["session_source"], "background": False, "job_id": None}
        assert record == {**api.bounded(run), **extra}  # the whole record, as before
        said = agent_format.once_keys(run.notes) if call is first else []  # long-lived notes: once
        assert _text(call) == agent_format.run_text(run, new_once=said, rerun=RERUN, cwd=str(ws.resolve()))
    assert "tests' environment differs" in _text(first) and "tests' environment differs" not in _text(second)
    assert _text(check) == agent_format.check_text(_ok(check), run_again="call test_run")
    assert _text(check).startswith("NOT satisfied: last run ")


def test_a_narrowed_test_run_leaves_the_failure_owed_in_the_closure_check(tmp_path: Path, home: Path) -> None:
    """Issue 31 on the MCP path: red, then `test_run` narrowed to a test that passes, is not done."""
    ws = _pytest_workspace(tmp_path / "ws", red=True)
    owed = "test_calc.py::test_add_small"

    async def body(s: ClientSession) -> dict[str, Any]:
        red = _ok(await s.call_tool("test_run", {"session_id": "agent-9"}))
        narrowed = _ok(await s.call_tool("test_run", {"session_id": "agent-9",
                                                      "target": "test_calc.py::test_add_zero"}))
        check = _ok(await s.call_tool("test_closure_check", {"session_id": "agent-9"}))
        _fix(ws)
        exact = _ok(await s.call_tool("test_run", {"session_id": "agent-9", "target": owed}))
        after = _ok(await s.call_tool("test_closure_check", {"session_id": "agent-9"}))
        return {"red": red, "narrowed": narrowed, "check": check, "exact": exact, "after": after}

    out = _with_client(ws, home, body)
    assert out["red"]["outcome"] == "red" and out["narrowed"]["outcome"] == "green"
    check = out["check"]
    assert check["satisfied"] is False and check["holding"] == "owed"
    names = {o["test"]: o for o in check["owed"]}
    assert names[owed]["run_id"] == out["red"]["run_id"] and names[owed]["reason"] == "failed"
    assert "failed in " + out["red"]["run_id"] in names[owed]["why"]
    # test_add_negative failed too, and nothing has shown it passing since.
    assert check["owed_count"] == 2 and out["exact"]["outcome"] == "green"
    assert out["after"]["satisfied"] is False and [o["test"] for o in out["after"]["owed"]] == [
        "test_calc.py::test_add_negative"
    ]


def test_a_call_can_name_its_session_and_the_env_can_name_the_connections(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=True)

    async def body(s: ClientSession) -> dict[str, Any]:
        return {
            "named": _ok(await s.call_tool("test_run", {"session_id": "agent-7", "target": "test_calc.py"})),
            "named_check": _ok(await s.call_tool("test_closure_check", {"session_id": "agent-7"})),
            "own_check": _ok(await s.call_tool("test_closure_check", {})),
        }

    out = _with_client(ws, home, body, env={"GREENLOOP_SESSION": "harness-42"})
    assert out["named"]["session_id"] == "agent-7" and out["named"]["ok"] is False
    assert out["named_check"]["session_id"] == "agent-7"
    assert out["named_check"]["satisfied"] is False
    assert out["named_check"]["last_run"]["run_id"] == out["named"]["run_id"]
    assert out["own_check"]["session_id"] == "harness-42"
    assert out["own_check"]["session_source"] == "env:GREENLOOP_SESSION"
    assert out["named"]["session_source"] == "explicit"
    assert out["own_check"]["satisfied"] is True  # the run went to agent-7, not to this session


def test_a_request_meta_can_name_the_session(tmp_path: Path, home: Path) -> None:
    """A client that sends its session in a request's _meta gets its runs recorded there."""
    ws = _pytest_workspace(tmp_path / "ws", red=True)
    meta = cast(RequestParamsMeta, {"sessionId": "meta-1"})  # a key the SDK's TypedDict leaves open

    async def body(s: ClientSession) -> dict[str, Any]:
        return {
            "run": _ok(await s.call_tool("test_run", {}, meta=meta)),
            "check": _ok(await s.call_tool("test_closure_check", {}, meta=meta)),
            "plain": _ok(await s.call_tool("test_closure_check", {})),
        }

    out = _with_client(ws, home, body)
    assert out["run"]["session_id"] == "meta-1" and out["run"]["session_source"] == "meta"
    assert out["check"]["session_id"] == "meta-1" and out["check"]["satisfied"] is False
    assert out["plain"]["session_id"] is None and out["plain"]["session_source"] == "none"


def test_connections_of_two_sessions_keep_their_runs_apart(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=True)

    async def run(s: ClientSession) -> dict[str, Any]:
        return _ok(await s.call_tool("test_run", {}))

    async def check(s: ClientSession) -> dict[str, Any]:
        return _ok(await s.call_tool("test_closure_check", {}))

    first = _with_client(ws, home, run, env={"CODEX_THREAD_ID": "thread-a"})
    second = _with_client(ws, home, check, env={"CLAUDE_CODE_SESSION_ID": "claude-b"})
    anyone = _with_client(ws, home, check)
    assert first["session_id"] == "thread-a" and second["session_id"] == "claude-b"
    assert second["satisfied"] is True  # thread-a's red run is not claude-b's
    assert anyone["session_id"] is None and anyone["satisfied"] is False  # the workspace's latest is red


# --------------------------------------------------------------------------- background jobs


def test_background_run_returns_a_job_at_once_and_test_job_polls_it_to_the_end(
    tmp_path: Path, home: Path
) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    # The job cannot end before the test releases it: no timing in this test.
    (ws / "test_gate.py").write_text(
        "import pathlib, time\n\n"
        "def test_waits_for_release():\n"
        "    deadline = time.monotonic() + 120\n"
        "    while not pathlib.Path('release.flag').exists() and time.monotonic() < deadline:\n"
        "        time.sleep(0.02)\n"
        "    assert pathlib.Path('release.flag').exists()\n"
    )

    texts: dict[str, str] = {}

    async def body(s: ClientSession) -> dict[str, Any]:
        job = _ok(await s.call_tool("test_run", {"run_in_background": True}))
        polled = await s.call_tool("test_job", {"job_id": job["job_id"]})
        first = _ok(polled)
        texts["first"] = _text(polled)
        (ws / "release.flag").write_text("go")
        waited = await s.call_tool("test_job", {"job_id": job["job_id"], "wait": True, "wait_ms": 60_000})
        done = _ok(waited)
        texts["done"] = _text(waited)
        closure = _ok(await s.call_tool("test_closure_check", {}))
        return {"job": job, "first": first, "done": done, "closure": closure}

    out = _with_client(ws, home, body)
    job = out["job"]
    # what a model reads: where the job stands, then its run in the agent format (one line, green)
    assert texts["first"].startswith(f"job {job['job_id']}: ") and "wait=true" in texts["first"]
    assert re.fullmatch(r"green: 4 passed \(pytest, \d+\.\ds\)", texts["done"]), texts["done"]
    assert job["background"] is True and job["job_id"] and job["run_id"] is None
    assert out["first"]["status"] in ("starting", "running") and out["first"]["finished"] is False
    assert out["first"]["session_id"] == job["session_id"]
    done = out["done"]
    assert done["status"] == "done" and done["job_id"] == job["job_id"]
    assert done["result"]["ok"] is True and done["result"]["summary"]["passed"] == 4
    assert out["closure"]["last_run"]["run_id"] == done["result"]["run_id"]  # recorded for the session


# --------------------------------------------------------------------------- cancellation


def _marked_pids(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(entry))
    return found


def test_cancelling_a_hung_run_kills_its_whole_process_tree(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    marker = f"greenloop-hang-{os.getpid()}-{time.monotonic_ns()}"
    (ws / "test_hang.py").write_text(
        "import pathlib, subprocess, sys, time\n\n"
        "def test_hang():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "    pathlib.Path('started.flag').write_text('x')\n"
        "    time.sleep(300)\n"
    )
    outcome: dict[str, Any] = {}

    async def body(s: ClientSession) -> None:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                outcome["result"] = await s.call_tool("test_run", {"timeout_ms": 600_000})

            tg.start_soon(call)
            with anyio.fail_after(60):
                while not (ws / "started.flag").exists() or not _marked_pids(marker):
                    await anyio.sleep(0.05)
            outcome["before"] = _marked_pids(marker)
            tg.cancel_scope.cancel()  # the client gives up: a notifications/cancelled goes out
        # The server kills the tree while this connection stays open; wait for it to be gone.
        with anyio.fail_after(30):
            while _marked_pids(marker):
                await anyio.sleep(0.1)
        outcome["after"] = await s.call_tool("test_closure_check", {})

    try:
        _with_client(ws, home, body)
    finally:
        for pid in _marked_pids(marker):  # never leave a process behind, even on failure
            os.kill(pid, signal.SIGKILL)
    assert "result" not in outcome  # the call was cancelled, not answered
    assert outcome["before"]
    assert _marked_pids(marker) == []
    assert not outcome["after"].is_error  # the server still serves after a cancel


# --------------------------------------------------------------------------- bugs


def _devloop_project(root: Path) -> Path:
    (root / "units" / "api").mkdir(parents=True)
    (root / "units.json").write_text(
        json.dumps({"units": [{"id": "api", "kind": "be", "path": "units/api", "start": ["node", "x.js"]}]})
    )
    return root


def test_open_list_and_transition_bugs(tmp_path: Path, home: Path) -> None:
    project = _devloop_project(tmp_path / "proj")

    async def body(s: ClientSession) -> dict[str, Any]:
        args = {"unit": "api", "test": "POST /api/todos gives 201", "title": "create returns 500"}
        out: dict[str, Any] = {}
        out["opened"] = _ok(await s.call_tool("bug_open", {**args, "severity": "high"}))
        out["again"] = _ok(await s.call_tool("bug_open", args))
        bug_id = out["opened"]["bug"]["id"]
        out["fixing"] = _ok(await s.call_tool("bug_transition", {"bug_id": bug_id, "to": "fixing"}))
        out["illegal"] = await s.call_tool("bug_transition", {"bug_id": bug_id, "to": "verified"})
        out["missing"] = await s.call_tool("bug_transition", {"bug_id": "BUG-nope", "to": "fixing"})
        out["fixed"] = _ok(
            await s.call_tool("bug_transition", {"bug_id": bug_id, "to": "fixed", "fix_ref": "abc123"})
        )
        out["list_fixed"] = _ok(await s.call_tool("bug_list", {"status": "fixed"}))
        out["list_open"] = _ok(await s.call_tool("bug_list", {"status": "open"}))
        out["list_unit"] = _ok(await s.call_tool("bug_list", {"unit": "api"}))
        return out

    out = _with_client(project, home, body)
    opened = out["opened"]["bug"]
    assert opened["status"] == "open" and opened["unit_id"] == "api" and opened["severity"] == "high"
    assert opened["dedup_key"] == "api:POST /api/todos gives 201"
    assert out["opened"]["created"] is True
    assert out["again"]["bug"]["id"] == opened["id"]  # same unit and test: the open bug is reused
    assert out["again"]["created"] is False
    assert out["fixing"]["bug"]["status"] == "fixing" and out["fixing"]["from"] == "open"
    assert out["fixing"]["session_id"] is None  # no session: the connection's label names the mover
    assert out["fixing"]["bug"]["by"].startswith("mcp-")
    assert out["illegal"].is_error and "verified" in _text(out["illegal"])
    assert out["missing"].is_error and "BUG-nope" in _text(out["missing"])
    assert out["fixed"]["bug"]["status"] == "fixed" and "abc123" in out["fixed"]["bug"]["fix_refs"]
    assert [b["id"] for b in out["list_fixed"]["bugs"]] == [opened["id"]]
    assert out["list_fixed"]["count"] == 1
    assert out["list_open"]["bugs"] == []
    assert len(out["list_unit"]["bugs"]) == 1
    lines = (project / "bugs.ndjson").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["open", "fixing", "fixed"]


def test_a_client_that_goes_away_mid_run_leaves_no_process_behind(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    marker = f"greenloop-orphan-{os.getpid()}-{time.monotonic_ns()}"
    (ws / "test_hang.py").write_text(
        "import pathlib, subprocess, sys, time\n\n"
        "def test_hang():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "    pathlib.Path('started.flag').write_text('x')\n"
        "    time.sleep(300)\n"
    )

    async def body(s: ClientSession) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.call_tool, "test_run", {"timeout_ms": 600_000})
            with anyio.fail_after(60):
                while not (ws / "started.flag").exists() or not _marked_pids(marker):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        # leaving the client closes stdin, then SIGTERMs the server (the SDK's shutdown)

    async def main() -> None:
        # A raw stdio transport so that leaving it is a plain disconnect, not a polite cancel.
        async with _connect(ws, home) as session:
            await body(session)

    try:
        anyio.run(main)
        deadline = time.monotonic() + 30
        while _marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _marked_pids(marker)
    finally:
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
    assert left == []


@pytest.mark.parametrize("tool", ["test_run", "integration_run"])
def test_sigterm_to_the_server_stops_its_runs_before_it_exits(tmp_path: Path, home: Path, tool: str) -> None:
    marker = f"greenloop-term-{os.getpid()}-{time.monotonic_ns()}"
    if tool == "integration_run":
        ws = _integration_project(tmp_path / "proj", "slow-start", marker)
    else:
        ws = _pytest_workspace(tmp_path / "ws", red=False)
        (ws / "test_hang.py").write_text(
            "import subprocess, sys, time\n\n"
            "def test_hang():\n"
            f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
            "    time.sleep(300)\n"
        )
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": {}}},
    ]
    params = _params(ws, home)
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=params.env,
        cwd=str(ws),
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        proc.stdin.flush()  # stdin stays open: this is not a disconnect
        deadline = time.monotonic() + 60
        while not _marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked_pids(marker), "the hung test never started"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
        left = _marked_pids(marker)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
    assert left == []  # gone by the time the server exited
    assert code == 0


def test_test_job_can_cancel_a_background_run_and_its_tree(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    marker = f"greenloop-job-{os.getpid()}-{time.monotonic_ns()}"
    (ws / "test_hang.py").write_text(
        "import pathlib, subprocess, sys, time\n\n"
        "def test_hang():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "    pathlib.Path('started.flag').write_text('x')\n"
        "    time.sleep(300)\n"
    )

    async def body(s: ClientSession) -> dict[str, Any]:
        job = _ok(await s.call_tool("test_run", {"run_in_background": True}))
        with anyio.fail_after(60):
            while not (ws / "started.flag").exists() or not _marked_pids(marker):
                await anyio.sleep(0.05)
        stopped = _ok(await s.call_tool("test_job", {"job_id": job["job_id"], "cancel": True}))
        with anyio.fail_after(30):
            while _marked_pids(marker):
                await anyio.sleep(0.1)
        again = _ok(await s.call_tool("test_job", {"job_id": job["job_id"]}))
        return {"stopped": stopped, "again": again}

    try:
        out = _with_client(ws, home, body)
    finally:
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
    assert out["stopped"]["status"] == "cancelled" and out["stopped"]["finished"] is True
    assert out["again"]["status"] == "cancelled"
    assert _marked_pids(marker) == []


# --------------------------------------------------------------------------- integration

PINGER = """\
import json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

if sys.argv[1:2] == ["slow-start"]:
    time.sleep(300)  # never becomes healthy: the run waits on its health check


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/api/hang":
            time.sleep(300)  # a case that never gets its answer
        body = json.dumps({"ok": True} if self.path == "/api/health" else {"pong": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


HTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ["PORT"])), Handler).serve_forever()
"""


def _integration_project(root: Path, *argv: str) -> Path:
    (root / "units" / "pinger").mkdir(parents=True)
    (root / "integration").mkdir()
    (root / "units" / "pinger" / "server.py").write_text(PINGER)
    unit = {"id": "pinger", "kind": "be", "start": [sys.executable, "server.py", *argv]}
    (root / "units.json").write_text(json.dumps({"units": [unit]}))
    step = {"unit": "pinger", "call": "GET /api/ping"}
    cases = [
        {
            "id": "ping-ok",
            "involves": ["pinger"],
            "steps": [{**step, "expect": {"status": 200, "json": {"$.pong": True}}}],
        },
        {"id": "ping-created", "involves": ["pinger"], "steps": [{**step, "expect": {"status": 201}}]},
    ]
    if "hang" in argv:
        cases.insert(0, {"id": "hangs", "steps": [{"unit": "pinger", "call": "GET /api/hang"}]})
    (root / "integration" / "spec.json").write_text(json.dumps({"cases": cases}))
    return root


def test_integration_run_through_mcp(tmp_path: Path, home: Path) -> None:
    project = _integration_project(tmp_path / "proj")
    news: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        news.append(message or "")

    async def body(s: ClientSession) -> dict[str, Any]:
        return {
            "one": _ok(await s.call_tool("integration_run", {"case": ["ping-ok"]})),
            "all": _ok(await s.call_tool("integration_run", {}, progress_callback=on_progress)),
            "bugs": _ok(await s.call_tool("bug_list", {"source": "integration_test"})),
            "unknown": await s.call_tool("integration_run", {"case": ["no-such-case"]}),
        }

    out = _with_client(project, home, body)
    one, every = out["one"], out["all"]
    assert one["ok"] is True and one["cases_total"] == 1 and one["cases_passed"] == 1
    assert one["session_id"] is None
    assert every["ok"] is False and every["cases_total"] == 2 and every["cases_failed"] == 1
    failure = every["failures"][0]
    assert failure["case_id"] == "ping-created" and failure["expected"] == {"status": 201}
    assert every["surviving_processes"] == []
    assert (project / every["result_ref"]).is_file() or Path(every["result_ref"]).is_file()
    assert [b["status"] for b in out["bugs"]["bugs"]] == ["open"]
    assert every["more_failures"] == [] and every["aborted"] is False
    assert failure["message"] and failure["artifacts"] == {}
    assert out["unknown"].is_error and "no-such-case" in _text(out["unknown"])
    assert any("ping-created" in m for m in news), news  # progress names the case being run


def test_cancelling_an_integration_run_stops_its_units(tmp_path: Path, home: Path) -> None:
    marker = f"greenloop-unit-{os.getpid()}-{time.monotonic_ns()}"
    project = _integration_project(tmp_path / "proj", "slow-start", marker)

    async def body(s: ClientSession) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.call_tool, "integration_run", {})
            with anyio.fail_after(60):
                while not _marked_pids(marker):
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.fail_after(30):
            while _marked_pids(marker):
                await anyio.sleep(0.1)

    try:
        _with_client(project, home, body)
        left = _marked_pids(marker)
    finally:
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
    assert left == []


# --------------------------------------------------------------------------- warm handshake


def _raw_conversation(
    ws: Path, home: Path, messages: list[dict[str, Any]] | list[object], answers: int
) -> list[dict[str, Any]]:
    """Send `messages` at once, read until `answers` replies came, then close stdin."""
    params = _params(ws, home)
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=params.env,
        cwd=str(ws),
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: list[dict[str, Any]] = []
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        buffered = b""
        while len([r for r in replies if "id" in r]) < answers and time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stdout], [], [], 1.0)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buffered += chunk
            *lines, buffered = buffered.split(b"\n")
            replies.extend(json.loads(line) for line in lines if line.strip())
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
        rest = buffered + proc.stdout.read()
        replies.extend(json.loads(line) for line in rest.splitlines() if line.strip())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return replies


def test_a_warm_start_answers_the_handshake_exactly_as_the_sdk_did(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "test_probe", "arguments": {}},
        },
        {"jsonrpc": "2.0", "id": 4, "method": "ping"},
    ]
    cold = _raw_conversation(ws, home, messages, 4)
    caches = list((home / ".cache" / "greenloop").glob("mcp-handshake-*.json"))
    assert len(caches) == 1  # the SDK's answers were remembered
    warm = _raw_conversation(ws, home, messages, 4)
    for replies in (cold, warm):
        ids = [r["id"] for r in replies if "id" in r]
        assert sorted(ids) == [1, 2, 3, 4]  # one answer each: the replayed initialize is not answered twice
    cold_by, warm_by = ({r["id"]: r for r in rs} for rs in (cold, warm))
    assert warm_by[1]["result"] == cold_by[1]["result"]
    assert warm_by[2]["result"] == cold_by[2]["result"]
    assert warm_by[3]["result"]["structuredContent"]["framework"] == "pytest"
    # the warm start resolves the session at the call, as the cold one does (here: none)
    assert warm_by[3]["result"]["structuredContent"]["session_id"] is None
    assert cold_by[3]["result"]["structuredContent"]["session_id"] is None


def test_the_handshake_cache_follows_enabled(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)

    async def names(s: ClientSession) -> list[str]:
        return [t.name for t in (await s.list_tools()).tools]

    assert len(_with_client(ws, home, names)) == len(TOOL_NAMES)  # writes the cache
    (ws / "greenloop.toml").write_text("enabled = false\n")
    assert _with_client(ws, home, names) == []
    (ws / "greenloop.toml").write_text("enabled = true\n")
    assert len(_with_client(ws, home, names)) == len(TOOL_NAMES)


def test_timeout_ms_kills_a_hung_run_and_says_so(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    marker = f"greenloop-timeout-{os.getpid()}-{time.monotonic_ns()}"
    (ws / "test_hang.py").write_text(
        "import subprocess, sys, time\n\n"
        "def test_hang():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "    time.sleep(300)\n"
    )

    async def body(s: ClientSession) -> dict[str, Any]:
        return _ok(await s.call_tool("test_run", {"timeout_ms": 3000}))

    try:
        out = _with_client(ws, home, body)
        left = _marked_pids(marker)
    finally:
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
    assert out["timed_out"] is True and out["ok"] is False and out["outcome"] == "broken"
    assert left == []


def test_cancelling_an_integration_run_mid_case_writes_an_aborted_result(tmp_path: Path, home: Path) -> None:
    """The run's cancel event (not an interrupt): the hanging case stops, the units are torn
    down and result.json says aborted, with the case that was running marked so."""
    marker = f"greenloop-unit-{os.getpid()}-{time.monotonic_ns()}"
    project = _integration_project(tmp_path / "proj", "hang", marker)
    news: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        news.append(message or "")

    async def body(s: ClientSession) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(s.call_tool, "integration_run", {}, progress_callback=on_progress))
            with anyio.fail_after(60):
                while "case hangs" not in news:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.fail_after(30):
            while _marked_pids(marker) or not list(project.glob("integration/runs/*/result.json")):
                await anyio.sleep(0.1)

    try:
        _with_client(project, home, body)
        left = _marked_pids(marker)
    finally:
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
    assert left == []
    [result_path] = project.glob("integration/runs/*/result.json")
    result = json.loads(result_path.read_text())
    assert result["aborted"] is True and result["ok"] is False and result["crashed"] is False
    assert [c["status"] for c in result["cases"]] == ["aborted", "not_run", "not_run"]
    assert result["surviving_processes"] == [] and result["bugs_opened"] == []


def test_bounded_integration_keeps_a_big_result_small() -> None:
    failures = [
        {"case_id": f"c{i}", "message": "m" * 5000, "stderr_excerpt": "e" * 50000, "artifacts": {}}
        for i in range(80)
    ]
    data: dict[str, Any] = {
        "ok": False,
        "failures": failures,
        "cases": [{"id": f"c{i}", "status": "failed", "message": "x" * 900} for i in range(150)],
        "notes": ["n" * 2000] * 40,
    }
    out = bounded_integration(data)
    assert [f["case_id"] for f in out["failures"]] == ["c0", "c1", "c2", "c3", "c4"]
    assert out["more_failures"] == [f"c{i}" for i in range(5, 55)] and out["more_failures_omitted"] == 25
    assert len(out["cases"]) == 100 and out["cases_omitted"] == 50 and len(out["notes"]) == 20
    assert len(json.dumps(out)) < 40_000
    assert out["cases"][0] == {"id": "c0", "status": "failed"}
    assert data["failures"][0]["message"] == "m" * 5000  # the input is not changed


def test_test_run_limit_follows_the_config_as_the_call_finds_it(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """api.test_run loads the config for each call, so the tool's limit does too."""
    from greenloop.config import Config
    from greenloop.mcp import calls as mcp_calls
    from greenloop.mcp import fast as mcp_fast
    from greenloop.mcp import tools as mcp_tools

    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(home))
    ws = tmp_path / "ws"
    ws.mkdir()
    limits: list[float] = []

    class Recording(mcp_calls.Stopwatch):
        def __init__(self, tool: str, limit_s: float, cancel: Any = None, running: Any = None) -> None:
            if cancel is not None:  # the run's own stopwatch, not the config read's
                limits.append(limit_s)
            super().__init__(tool, limit_s, cancel, running)

    monkeypatch.setattr(mcp_tools, "Stopwatch", Recording)
    monkeypatch.setattr(mcp_tools, "bounded_run", lambda *_a: ({"ok": True}, "green"))
    state = mcp_calls.ServerState(ws.resolve(), "s1", Config(default_timeout_ms=1000), mcp_fast.Running())
    [tool] = [t for t in mcp_tools.build_tools(state) if t.name == "test_run"]

    def run(config: str, **arguments: Any) -> float:
        (ws / "greenloop.toml").write_text(config)
        out = anyio.run(partial(tool.fn, None, **arguments)).structured_content
        assert out["session_id"] == "s1" and out["ok"] is True
        return limits[-1] - mcp_fast.RUN_MARGIN_S

    assert run("default_timeout_ms = 7000\n") == 7.0  # not the 1000 the server started with
    assert run("default_timeout_ms = 9000\n") == 9.0  # changed between calls
    assert run("default_timeout_ms = 9000\n", timeout_ms=3000) == 3.0
    assert run("default_timeout_ms = 'soon'\n") == 1.0  # unloadable: the server's (the run reports it)


# --------------------------------------------------------------------------- a strict wire


class _RawServer:
    """`greenloop mcp` as a subprocess driven line by line: write one raw line, read the
    answers that come back within a time limit (an answer that never comes is a hang)."""

    def __init__(self, ws: Path, home: Path) -> None:
        params = _params(ws, home)
        self.proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=params.env,
            cwd=str(ws),
        )
        self.buffered = b""

    def send(self, line: str | dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        text = line if isinstance(line, str) else json.dumps(line)
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def answers(self, count: int = 1, timeout: float = 60) -> list[dict[str, Any]]:
        assert self.proc.stdout is not None
        out: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            if b"\n" not in self.buffered:
                ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
                if not ready:
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.buffered += chunk
                continue
            line, self.buffered = self.buffered.split(b"\n", 1)
            if line.strip():
                out.append(json.loads(line))  # anything else on stdout fails here
        return out

    def ask(self, line: str | dict[str, Any]) -> dict[str, Any]:
        self.send(line)
        got = self.answers(1)
        assert got, f"no answer to {line!r}"
        return got[0]

    def close(self) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


_INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def _call(rid: int, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def test_every_malformed_line_gets_its_json_rpc_error_and_the_server_goes_on(
    tmp_path: Path, home: Path
) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    server = _RawServer(ws, home)
    try:
        assert "result" in server.ask(_INIT)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        cases: list[tuple[str | dict[str, Any], int, Any, str]] = [
            ('{"jsonrpc":"2.0","id":1,', -32700, None, "not valid JSON"),
            ("hello world", -32700, None, "not valid JSON"),
            ("[1,2,3]", -32600, None, "batch"),
            ("[]", -32600, None, "batch"),
            ("5", -32600, None, "JSON object"),
            ({"id": 6, "method": "ping"}, -32600, 6, '"jsonrpc"'),
            ({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": 5}, -32600, 7, '"params"'),
            ({"jsonrpc": "2.0", "id": None, "method": "ping"}, -32600, None, '"id"'),
            ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, -32600, None, '"id"'),
            ({"jsonrpc": "2.0", "id": 8, "method": 5}, -32600, 8, '"method"'),
            ({"jsonrpc": "2.0", "id": 9}, -32600, 9, '"method"'),
            (_call(10, {}), -32602, 10, "params.name"),
            (_call(11, {"name": "test_run", "arguments": "x"}), -32602, 11, "params.arguments"),
            (_call(12, {"arguments": {}}), -32602, 12, "params.name"),
        ]
        for line, code, rid, words in cases:
            reply = server.ask(line)
            assert reply.get("error", {}).get("code") == code, (line, reply)
            assert reply["id"] == rid, (line, reply)
            assert words in reply["error"]["message"], (line, reply)
        # a wrong type is refused strictly, naming the field, and nothing runs
        strict = server.ask(_call(13, {"name": "test_run", "arguments": {"timeout_ms": "5"}}))
        assert strict["result"]["isError"] is True
        text = strict["result"]["content"][0]["text"]
        assert "'timeout_ms'" in text and "integer" in text and '"5"' in text
        flag = server.ask(_call(14, {"name": "test_job", "arguments": {"job_id": "j", "wait": "true"}}))
        assert "'wait'" in flag["result"]["content"][0]["text"]
        # the server still serves
        pong = server.ask({"jsonrpc": "2.0", "id": 15, "method": "ping"})
        assert pong == {"jsonrpc": "2.0", "id": 15, "result": {}}
    finally:
        assert server.close() == 0
    assert not (ws / ".greenloop" / "runs").exists() or not any((ws / ".greenloop" / "runs").iterdir())


def test_malformed_lines_are_answered_while_the_sdk_still_loads(tmp_path: Path, home: Path) -> None:
    """The first lines of a conversation come before the SDK is up: they are answered too."""
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    server = _RawServer(ws, home)
    try:
        server.send("hello world")
        server.send("[1,2,3]")
        first = server.answers(2, timeout=10)  # well before the SDK's import would end here
        assert [r["error"]["code"] for r in first] == [-32700, -32600]
        assert "result" in server.ask(_INIT)
    finally:
        assert server.close() == 0


def test_strict_arguments_and_annotations_through_the_sdk_client(tmp_path: Path, home: Path) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)

    async def body(s: ClientSession) -> tuple[Any, list[CallToolResult]]:
        listed = await s.list_tools()
        calls = [
            await s.call_tool("test_run", {"timeout_ms": "5"}),
            await s.call_tool("test_run", {"last_failed": "yes"}),
            await s.call_tool("test_job", {"job_id": "j", "wait_ms": "100"}),
            await s.call_tool("bug_open", {"unit": "u", "test": "t", "title": "x", "affected_units": "u"}),
        ]
        return listed, calls

    listed, calls = _with_client(ws, home, body)
    for call, field in zip(calls, ("timeout_ms", "last_failed", "wait_ms", "affected_units"), strict=True):
        assert call.is_error and f"'{field}'" in _text(call), _text(call)
    tools = {t.name: t for t in listed.tools}
    for tool in tools.values():
        ann = tool.annotations
        assert ann is not None, tool.name
        assert ann.read_only_hint is not None and ann.idempotent_hint is not None, tool.name
        assert ann.open_world_hint is False, tool.name
        if not ann.read_only_hint:
            assert ann.destructive_hint is not None, tool.name
        assert tool.input_schema.get("additionalProperties") is False, tool.name
    # test_job(cancel=true) kills a run's processes: not read-only, destructive
    annotated = {name: tool.annotations for name, tool in tools.items() if tool.annotations is not None}
    assert tools["test_job"].annotations is not None and annotated["test_job"].read_only_hint is False
    assert annotated["test_job"].destructive_hint is True
    assert annotated["test_run"].destructive_hint is True
    for name in ("test_probe", "test_closure_check", "bug_list"):
        assert annotated[name].read_only_hint is True, name
    assert not (ws / ".greenloop" / "runs").exists() or not any((ws / ".greenloop" / "runs").iterdir())


# --------------------------------------------------------------------------- cold start, fast lane


def _keys(value: Any) -> Any:
    """The shape of a JSON value: dict keys (recursively), lists of objects by their first."""
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(value[0])] if value and isinstance(value[0], dict) else "list"
    return None


def test_the_shipped_handshake_snapshot_is_fresh() -> None:
    """The snapshot a first start answers from must be the SDK's for this very code: after
    changing mcp/outputs.py, mcp/tools.py or mcp/server.py (or upgrading the SDK), run
    `python scripts/mcp_handshake`."""
    from greenloop.mcp.handshake import SNAPSHOT_PATH, snapshot_key

    snapshot = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))
    assert snapshot["key"] == snapshot_key(), "stale: run python scripts/mcp_handshake"
    tools = snapshot["enabled"]["tools_list"]["2025-06-18"]
    if isinstance(tools, str):
        tools = snapshot["enabled"]["tools_list"][tools]
    assert [t["name"] for t in tools["tools"]] == list(TOOL_NAMES)


def test_a_first_start_answers_the_handshake_without_the_sdk(tmp_path: Path, home: Path) -> None:
    """No cache yet: initialize and tools/list come from the shipped snapshot, as the SDK
    answers them, long before the SDK could (a client like Codex gives up after ~1.5 s)."""
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    handshake = [
        _INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ]

    def first_start(env: dict[str, str]) -> tuple[float, dict[int, Any]]:
        params = _params(ws, home, env)
        started = time.monotonic()
        proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=params.env,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in handshake).encode())
        proc.stdin.flush()
        by_id: dict[int, Any] = {}
        while len(by_id) < 2:
            msg = json.loads(proc.stdout.readline())
            by_id[msg["id"]] = msg["result"]
        elapsed = time.monotonic() - started
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        return elapsed, by_id

    fast, answers = first_start({"XDG_CACHE_HOME": str(tmp_path / "cache-a")})
    slow, sdk = first_start({"XDG_CACHE_HOME": str(tmp_path / "cache-b"), "GREENLOOP_MCP_HANDSHAKE": "sdk"})
    assert answers == sdk  # exactly the SDK's answers
    assert [t["name"] for t in answers[1]["tools"]] == list(TOOL_NAMES)
    assert fast < slow / 2, (fast, slow)  # the SDK's import is not in the first figure


def test_the_first_test_run_is_served_while_the_sdk_loads_as_the_sdk_serves_it(
    tmp_path: Path, home: Path
) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=True)
    server = _RawServer(ws, home)
    run = {"name": "test_run", "arguments": {}, "_meta": {"progressToken": "first"}}
    try:
        assert "result" in server.ask(_INIT)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send(_call(1, run))
        got: list[dict[str, Any]] = []  # the progress notes, then the answer: read until it comes
        while not any(m.get("id") == 1 for m in got):
            more = server.answers(1, timeout=120)
            assert more, got
            got += more
        first = next(m for m in got if m.get("id") == 1)["result"]
        notes = [m for m in got if m.get("method") == "notifications/progress"]
        # an SDK-only tool answers once the SDK is up; the next test_run is the SDK's
        assert server.ask(_call(2, {"name": "test_probe", "arguments": {}}))["result"]["isError"] is False
        second = server.ask(_call(3, {"name": "test_run", "arguments": {}}))["result"]
    finally:
        assert server.close() == 0
    assert first.get("_meta") == {"greenloop/lane": "fast"}, first
    assert "_meta" not in second or "greenloop/lane" not in second["_meta"]
    a, b = first["structuredContent"], second["structuredContent"]
    assert _keys(a) == _keys(b)  # the same shape, every default filled
    for key in ("session_id", "outcome", "summary", "framework", "ok"):
        assert a[key] == b[key], key  # the same connection's session, the same run
    assert a["outcome"] == "red" and a["summary"]["failed"] == 2
    # the text content is the agent format on both paths; the record is structuredContent
    texts = [first["content"][0]["text"], second["content"][0]["text"]]
    for text in texts:
        assert "red: 2 failed, 1 passed of 3 (pytest, " in text, text
        assert text.splitlines().count("rerun the failures: test_run with last_failed=true") == 1
    fails = [[line for line in t.splitlines() if line.startswith("FAIL ")] for t in texts]
    assert fails[0] == fails[1] and len(fails[0]) == 2
    assert first["isError"] is False
    assert notes and notes[-1]["params"]["progress"] == 3 and notes[-1]["params"]["progressToken"] == "first"


def test_cancelling_a_run_on_the_fast_lane_kills_its_tree_and_answers_nothing(
    tmp_path: Path, home: Path
) -> None:
    ws = _pytest_workspace(tmp_path / "ws", red=False)
    marker = f"greenloop-lane-{os.getpid()}-{time.monotonic_ns()}"
    (ws / "test_hang.py").write_text(
        "import subprocess, sys, time\n\n"
        "def test_hang():\n"
        f"    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', {marker!r}])\n"
        "    time.sleep(300)\n"
    )
    server = _RawServer(ws, home)
    try:
        assert "result" in server.ask(_INIT)
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        server.send(_call(1, {"name": "test_run", "arguments": {"timeout_ms": 600_000}}))
        deadline = time.monotonic() + 120
        while not _marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _marked_pids(marker)
        server.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
        deadline = time.monotonic() + 60
        while _marked_pids(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _marked_pids(marker) == []
        pong = server.ask({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert pong["id"] == 2  # no answer to the cancelled call came before it
        server.send(_call(3, {"name": "test_closure_check", "arguments": {}}))
        later = server.answers(1, timeout=120)
        assert [m.get("id") for m in later] == [3]
    finally:
        for pid in _marked_pids(marker):
            os.kill(pid, signal.SIGKILL)
        assert server.close() == 0


@pytest.mark.parametrize("naming", ["initialize", "request-meta"])
def test_a_client_that_shows_structured_content_to_its_model_is_answered_text_first(
    tmp_path: Path, home: Path, naming: str
) -> None:
    # Claude Code shows its model JSON.stringify(structuredContent) whenever a result has it:
    # the agent format would never be read. It is answered without outputSchema and
    # structuredContent; any other client keeps both. Claude Code names itself in
    # initialize, or (the stateless protocol, no initialize) in every request's _meta.
    ws = _pytest_workspace(tmp_path / "ws", red=True)

    def conversation(client: str) -> dict[Any, dict[str, Any]]:
        info = {"name": client, "version": "0"}
        meta = {"io.modelcontextprotocol/clientInfo": info} if naming == "request-meta" else {}
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info}
        messages: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "test_run", "arguments": {}, "_meta": meta},
            },
        ]
        if naming == "request-meta":  # the initialize names nobody: the requests do
            init["clientInfo"] = {"name": "", "version": "0"}
        return {r["id"]: r for r in _raw_conversation(ws, home, messages, 3) if "id" in r}

    claude, other = conversation("claude-code"), conversation("some-client")
    assert all("outputSchema" not in t for t in claude[2]["result"]["tools"])
    assert "structuredContent" not in claude[3]["result"]
    text = claude[3]["result"]["content"][0]["text"]
    assert text.startswith("FAIL ") and '"session_source"' not in text
    assert any("outputSchema" in t for t in other[2]["result"]["tools"])
    assert other[3]["result"]["structuredContent"]["outcome"] == "red"
