"""The MCP server through the SDK's real client, with `greenloop mcp` as a stdio subprocess.

Every test starts a fresh server process (one connection = one session) against a real
workspace in tmp_path, runs real pytest suites through it, and checks what a model would
read: structured results, errors as tool results, the gate's view of the session.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult

from greenloop.mcp_server import TOOL_NAMES

T = TypeVar("T")

RUN_ARGS = {"framework", "target", "last_failed", "command", "timeout_ms", "run_in_background", "session_id"}


# --------------------------------------------------------------------------- client helpers


def _params(workspace: Path, home: Path, env: Mapping[str, str] | None = None) -> StdioServerParameters:
    child_env = {
        "GREENLOOP_CONFIG_HOME": str(home),
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
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


def _pytest_workspace(root: Path, *, red: bool) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
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
    (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")


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
    assert RUN_ARGS <= set(run_in["properties"])
    assert not run_in.get("required")  # every argument of test_run is optional
    framework = run_in["properties"]["framework"]["anyOf"][0]["enum"]
    assert set(framework) == {"vitest", "jest", "npm-test", "pytest", "node:test"}
    assert run_in["properties"]["timeout_ms"]["anyOf"][0]["minimum"] == 1
    run_out = tools["test_run"].output_schema or {}
    assert {"ok", "outcome", "summary", "failures", "result_ref", "job_id"} <= set(run_out["properties"])
    assert set(tools["bug_open"].input_schema["required"]) == {"unit", "test", "title"}
    assert set(tools["bug_transition"].input_schema["required"]) == {"bug_id", "to"}
    assert tools["test_probe"].annotations is not None and tools["test_probe"].annotations.read_only_hint


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
    params = _params(ws, home)
    proc = subprocess.run(
        [params.command, *params.args],
        input="".join(json.dumps(m) + "\n" for m in messages),
        capture_output=True,
        text=True,
        env=params.env,
        cwd=str(ws),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    replies = [json.loads(line) for line in lines]  # raises on any stray non-JSON output
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
