"""`greenloop mcp [--workspace PATH]`: serve the model tools over MCP on stdio."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

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
    from greenloop import session
    from greenloop.mcp_server import Running, build_server, new_session_id, serve_stdio

    # One connection is one session, unless the environment names the agent's session
    # (GREENLOOP_SESSION, the harness's variable): then runs land where the hooks look.
    sid = session.resolve(None, env=os.environ, mcp_context=new_session_id())
    running = Running()
    server = build_server(workspace, config=cfg, session_id=sid, running=running)
    serve_stdio(server, running)
    return 0
