"""The MCP server of one workspace: its tools behind a strict argument check, served on stdio.

`build_server` gives the SDK's server the tools (greenloop.mcp.tools) and the instructions a
client shows its model, with a middleware that refuses a call with unknown or ill-typed
arguments as a tool result naming each bad argument (greenloop.mcp.args, the check the fast
lane runs too), and names what is wrong where the SDK would answer an empty -32602.
`serve_stdio` serves it until the client leaves or signals; nothing reaches stdout but
protocol (greenloop.mcp.wire owns the wire; fd 1 points at stderr).

See docs/mcp.md for the whole picture.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent
from pydantic import ValidationError

from greenloop import __version__
from greenloop.config import Config
from greenloop.mcp.args import INVALID_PARAMS, bad_arguments, tool_call_problem
from greenloop.mcp.calls import ServerState
from greenloop.mcp.fast import STOP_WAIT_S, Running
from greenloop.mcp.tools import build_tools

__all__ = ["SERVER_NAME", "build_server", "serve_stdio"]

SERVER_NAME = "greenloop"

log = logging.getLogger("greenloop.mcp")


def build_server(
    workspace: str | os.PathLike[str],
    *,
    config: Config,
    session_id: str | None,
    running: Running,
    label: str = "",
    session_source: str = "env",
) -> MCPServer[Any]:
    """The MCP server for one workspace. `session_id`: the session the environment names (None:
    each call resolves its own, `ServerState.resolve`). With `enabled = false`: no tools.

    `running` is shared with `serve_stdio` so that a signal stops the calls in flight.
    """
    state = ServerState(Path(workspace).resolve(), session_id, config, running, label, session_source)
    tools = build_tools(state) if config.enabled else []
    if config.enabled:
        instructions = (
            "greenloop runs this workspace's tests and keeps the session honest about them. "
            "After changing code, call test_run; while its result is red, fix the failures it "
            "lists and call test_run again. test_closure_check says whether the turn may end. "
            "Every result names the session it was recorded under."
        )
    else:
        instructions = "greenloop is disabled for this workspace (enabled = false): no tools are offered."
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        instructions=instructions,
        version=__version__,
        tools=tools,
        log_level="WARNING",
        middleware=[_argument_check({t.name: t for t in tools})],
    )
    return server


def serve_stdio(
    server: MCPServer[Any],
    running: Running,
    *,
    stdin: Any = None,
    stdout: Any = None,
) -> None:
    """Serve over stdio until the client closes the connection or signals the server.

    `stdin`/`stdout` are the transport's text streams (greenloop.mcp.wire gives them);
    without them the SDK claims the process's own. On stdin's end the SDK cancels the calls
    in flight, and each stops its process tree. On SIGTERM or SIGHUP (what a client sends
    when the server does not leave on its own) the calls in flight are cancelled the same
    way and waited for, then the process exits at once.
    """
    anyio.run(_serve_until_signalled, server, running, stdin, stdout)


async def _serve_until_signalled(server: MCPServer[Any], running: Running, stdin: Any, stdout: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    stopped = await anyio.to_thread.run_sync(running.stop_all, STOP_WAIT_S)
                    log.warning("%s: stopped %d running call(s); exiting", name, stopped)
                    sys.stderr.flush()
                    os._exit(0)

        tg.start_soon(watch_signals)
        # MCPServer.run_stdio_async, with the transport's streams passed in (it takes none).
        lowlevel = server._lowlevel_server
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()


def _bad_arguments(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """A message naming every bad argument of a call, or None when the arguments are fine.

    Strict: the arguments are checked against the tool's published input schema as JSON
    (greenloop.mcp.args, as the fast lane does), so "5" is no integer and "true" no boolean;
    pydantic, which validates them next, would coerce both silently."""
    return bad_arguments(tool.name, tool.parameters, arguments)


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "params"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"'{where}': {first['msg']}{more}"


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _argument_check(tools: Mapping[str, Tool]) -> Callable[..., Any]:
    """Middleware: refuse a tools/call with unknown or ill-typed arguments as a tool error."""

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            # No tool name, or arguments that are no object: not a call at all, a protocol
            # error (-32602) naming what is wrong, not a tool result.
            problem = tool_call_problem(ctx.params, list(tools))
            if problem is not None:
                raise MCPError(INVALID_PARAMS, problem)
            assert ctx.params is not None
            name = str(ctx.params.get("name"))
            tool = tools.get(name)
            if tool is None:
                return _tool_error(
                    f"greenloop has no tool '{name}'; its tools are: {', '.join(tools)}."
                    if tools
                    else "greenloop is disabled for this workspace (enabled = false in its config), "
                    "so it offers no tools; set enabled = true to use them."
                )
            message = _bad_arguments(tool, ctx.params.get("arguments") or {})
            if message is not None:
                log.info("refused %s: %s", tool.name, message)
                return _tool_error(message)
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            # The SDK answers ill-formed params with an empty -32602; name what is wrong.
            raise MCPError(INVALID_PARAMS, f"{ctx.method}: invalid params: {_first_error(exc)}") from None
        except MCPError as exc:
            if exc.code == INVALID_PARAMS and exc.message == "Invalid request parameters" and not exc.data:
                # the SDK's answer to a request before the handshake, with the same empty text
                raise MCPError(
                    INVALID_PARAMS,
                    f"{ctx.method} before the handshake: send initialize (then "
                    "notifications/initialized) first",
                ) from None
            raise

    return check
