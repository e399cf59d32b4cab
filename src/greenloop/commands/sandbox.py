"""`greenloop sandbox set|show`: record a session's sandbox mode event; show the resolved policy."""

from __future__ import annotations

import argparse
import json
import os
import sys

from greenloop import sandbox
from greenloop.errors import UsageError

__all__ = ["set_mode", "show"]


def _workspace(path: str) -> str:
    if not os.path.isdir(path):
        raise UsageError(f"--path {path!r} is not a folder: pass the workspace folder (default: .)")
    return os.path.realpath(path)


def _session(value: object) -> str:
    session = str(value or "").strip()
    if not session:
        raise UsageError("--session is empty: pass the agent session id the mode applies to")
    return session


def set_mode(args: argparse.Namespace) -> int:
    """Record a sandbox mode event: the session's later runs use it unless a run passes --sandbox.

    An unknown mode is bad input (exit 2, nothing recorded), naming it and listing the modes.
    """
    from greenloop.store import Store

    mode = sandbox.parse_mode(args.mode, field="MODE")
    session = _session(args.session)
    workspace = _workspace(str(args.path))
    with Store(workspace) as st:
        st.record_sandbox_mode(session, mode)
    if getattr(args, "json", False):
        print(json.dumps({"session_id": session, "mode": mode, "workspace": workspace}))
    else:
        print(
            f"session {session}: sandbox mode {mode} recorded for {workspace} "
            "(a run's --sandbox still overrides it)"
        )
    return 0


def show(args: argparse.Namespace) -> int:
    """Print the policy a run would get now (mode, where it came from) and whether bwrap works.

    Exit 0 when the resolved mode can be enforced here, 3 when it needs bubblewrap and bubblewrap
    is missing or cannot start.
    """
    workspace = _workspace(str(args.path))
    session = str(args.session).strip() if getattr(args, "session", None) else None
    policy = sandbox.resolve_for(workspace, explicit=getattr(args, "mode", None), session_id=session)
    status = sandbox.probe_bwrap()
    enforceable = status.available or not policy.sandboxed
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    **policy.to_json(),
                    "session_id": session,
                    "enforced_by": status.enforced_by if policy.sandboxed and status.available else None,
                    "bwrap": {
                        "available": status.available,
                        "path": status.path,
                        "version": status.version,
                        "loopback": status.loopback,
                        "reason": status.reason,
                    },
                }
            )
        )
    else:
        print(f"mode:       {policy.mode} (from {policy.source})")
        print(f"workspace:  {policy.workspace_root}")
        print(f"network:    {policy.network}")
        if status.available:
            loopback = "up" if status.loopback else "DOWN"
            print(f"bubblewrap: {status.path} ({status.enforced_by}; loopback {loopback})")
        else:
            print(f"bubblewrap: unavailable: {status.reason}")
    if not enforceable:
        try:
            status.require(policy.mode)
        except sandbox.SandboxUnavailable as exc:
            print(f"greenloop: {exc.message}", file=sys.stderr)
            return exc.exit_code
    return 0
