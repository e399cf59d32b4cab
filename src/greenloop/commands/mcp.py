"""`greenloop mcp [--workspace PATH]`: serve the model tools over MCP on stdio."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from greenloop import config as config_mod
from greenloop.errors import ExitCode, UsageError

__all__ = ["serve"]


def serve(args: argparse.Namespace) -> int:
    """Check the workspace and config first (exit 2, nothing served), then serve until EOF."""
    workspace = Path(args.workspace)
    if not workspace.is_dir():
        raise UsageError(
            f"--workspace {args.workspace!r} is not a folder; pass the project folder the tools work in"
        )
    cfg = config_mod.load(workspace)  # a bad config is reported before the first message
    from greenloop.closure import session
    from greenloop.mcp import fast as mcp_fast
    from greenloop.mcp import handshake as mcp_handshake
    from greenloop.mcp import wire as mcp_wire

    # Own the wire first, then answer the handshake from the cache while the SDK loads.
    wire = mcp_wire.Wire.claim()
    cache = mcp_handshake.HandshakeCache(
        mcp_handshake.cache_dir(os.environ), enabled=cfg.enabled, env=os.environ
    )
    running = mcp_fast.Running()  # the calls in flight, the fast lane's and the SDK's
    # The session the environment names (GREENLOOP_SESSION, the harness's variable), if
    # any; otherwise each call resolves its own (the request's _meta, the process tree),
    # so runs land where the harness's hooks look. The connection id is only a label.
    # Resolved before the SDK loads: the fast lane's calls resolve theirs the same way.
    sid, source = session.resolve_with_source(None, env=os.environ)
    label = mcp_fast.new_session_id()
    loaded: dict[str, Any] = {}
    ready = threading.Event()
    go = threading.Event()  # warm_handshake's word to start importing the SDK

    def load() -> None:
        try:
            # the library first: the fast lane's first run needs it, and it is what the
            # shell's `greenloop run` loads too; the SDK once the lane lets it
            import greenloop.api  # noqa: F401

            go.wait()
            from greenloop.mcp import server as mcp_server

            server = mcp_server.build_server(
                workspace,
                config=cfg,
                session_id=sid,
                running=running,
                label=label,
                session_source=source,
            )
            loaded.update(module=mcp_server, server=server)
        except BaseException as exc:
            loaded["error"] = exc
        finally:
            ready.set()

    threading.Thread(target=load, name="mcp-load", daemon=True).start()
    lane = mcp_fast.FastLane(
        wire,
        workspace=workspace,
        config=cfg,
        resolve=lambda named, meta: mcp_fast.call_session(workspace.resolve(), sid, source, named, meta),
        running=running,
    )
    with _stop_runs_on_signals(running):
        replay, swallow = mcp_wire.warm_handshake(wire, cache, ready, lane if cfg.enabled else None, go)
        ready.wait()
    if "error" in loaded:
        running.stop_all(mcp_fast.STOP_WAIT_S)
        raise loaded["error"]
    output = mcp_wire.Output(wire, cache, swallow)

    def watch(msg: dict[str, Any]) -> None:
        output.watch(msg)
        lane.see(msg)  # a cancellation of a call still on the fast lane

    stdin = mcp_wire.Input(wire, replay, watch)
    try:
        loaded["module"].serve_stdio(loaded["server"], running, stdin=stdin, stdout=output)
    finally:
        running.stop_all(mcp_fast.STOP_WAIT_S)  # the client went away: so do the lane's runs
    return ExitCode.OK


@contextlib.contextmanager
def _stop_runs_on_signals(running: Any) -> Iterator[None]:
    """Until the SDK serves (it then watches SIGTERM/SIGHUP itself): a signal stops the fast
    lane's runs and their process trees, then the process exits, as it will later."""
    from greenloop.mcp.fast import STOP_WAIT_S

    def stop(signum: int, frame: Any) -> None:
        running.stop_all(STOP_WAIT_S)
        os._exit(ExitCode.OK)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
