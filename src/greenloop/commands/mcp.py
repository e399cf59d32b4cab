"""`greenloop mcp [--workspace PATH]`: serve the model tools over MCP on stdio."""

from __future__ import annotations

import argparse
import os
import threading
from pathlib import Path
from typing import Any

from greenloop import config as config_mod
from greenloop.errors import UsageError

__all__ = ["serve"]


def serve(args: argparse.Namespace) -> int:
    """Check the workspace and config first (exit 2, nothing served), then serve until EOF."""
    workspace = Path(args.workspace)
    if not workspace.is_dir():
        raise UsageError(
            f"--workspace {args.workspace!r} is not a folder; pass the project folder the tools work in"
        )
    cfg = config_mod.load(workspace)  # a bad config is reported before the first message
    from greenloop import mcp_wire, session

    # Own the wire first, then answer the handshake from the cache while the SDK loads.
    wire = mcp_wire.Wire.claim()
    cache = mcp_wire.HandshakeCache(mcp_wire.cache_dir(os.environ), enabled=cfg.enabled)
    loaded: dict[str, Any] = {}
    ready = threading.Event()

    def load() -> None:
        try:
            from greenloop import mcp_server

            running = mcp_server.Running()
            # The session the environment names (GREENLOOP_SESSION, the harness's variable), if
            # any; otherwise each call resolves its own (the request's _meta, the process tree),
            # so runs land where the harness's hooks look. The connection id is only a label.
            sid, source = session.resolve_with_source(None, env=os.environ)
            server = mcp_server.build_server(
                workspace,
                config=cfg,
                session_id=sid,
                running=running,
                label=mcp_server.new_session_id(),
                session_source=source,
            )
            loaded.update(module=mcp_server, server=server, running=running)
        except BaseException as exc:
            loaded["error"] = exc
        finally:
            ready.set()

    threading.Thread(target=load, name="mcp-load", daemon=True).start()
    replay, swallow = mcp_wire.warm_handshake(wire, cache, ready)
    ready.wait()
    if "error" in loaded:
        raise loaded["error"]
    output = mcp_wire.Output(wire, cache, swallow)
    stdin = mcp_wire.Input(wire, replay, output.watch)
    loaded["module"].serve_stdio(loaded["server"], loaded["running"], stdin=stdin, stdout=output)
    return 0
