"""`greenloop sandbox set|show`: record a session's sandbox mode event; show the resolved policy."""

from __future__ import annotations

import argparse
import json
import os
import sys

from greenloop.errors import ExitCode, UsageError
from greenloop.system import enforcers, sandbox

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
    from greenloop.closure.store import Store

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
    return ExitCode.OK


def show(args: argparse.Namespace) -> int:
    """Print the policy a run would get now (mode, where it came from), the enforcers this
    machine offers, and which one the mode resolves to and why.

    Exit 0 when the resolved mode can run here (`auto` always can, unconfined when nothing
    enforces it, and says so), 3 when a mode asked for by name cannot be enforced.
    """
    workspace = _workspace(str(args.path))
    session = str(args.session).strip() if getattr(args, "session", None) else None
    policy = sandbox.resolve_for(workspace, explicit=getattr(args, "mode", None), session_id=session)
    status = enforcers.probe_bwrap()
    checks = enforcers.available_enforcers()
    refusal: sandbox.SandboxUnavailable | None = None
    chosen: enforcers.Enforcement | None = None
    try:
        chosen = enforcers.enforce(policy, bwrap=status)
    except sandbox.SandboxUnavailable as exc:
        refusal = exc
    why = _why(policy, chosen, checks, refusal)
    # What the run could reach: bubblewrap's namespace has only loopback; Landlock, no enforcer
    # and full-access leave the host's network.
    network = "loopback" if chosen is not None and chosen.enforcer == "bwrap" else "host"
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    **policy.to_json(),
                    "network": network,
                    "session_id": session,
                    "enforcer": chosen.enforcer if chosen else None,
                    "enforced_by": chosen.enforced_by if chosen else None,
                    "why": why,
                    "enforcers": [c._asdict() for c in checks],
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
        print(f"network:    {network}")
        for c in checks:
            label = f"{'bubblewrap' if c.name == 'bwrap' else 'Landlock'}:".ljust(12)
            print(f"{label}{'available' if c.available else 'unavailable'}: {c.detail}")
            if c.fix:
                print(f"            to get it: {c.fix}")
        print(f"enforced:   {why}")
    if refusal is not None:
        print(f"greenloop: {refusal.message}", file=sys.stderr)
        return refusal.exit_code
    return ExitCode.OK


def _why(
    policy: sandbox.Policy,
    chosen: enforcers.Enforcement | None,
    checks: tuple[enforcers.EnforcerCheck, ...],
    refusal: sandbox.SandboxUnavailable | None,
) -> str:
    """One sentence: which enforcer the mode resolves to, and why that one."""
    if not policy.sandboxed:
        return "nothing: full-access runs without a sandbox (the host's filesystem and network)"
    if refusal is not None or chosen is None:
        return (
            f"nothing: {policy.mode} was asked for by name and neither enforcer works here, "
            "so runs are refused"
        )
    if chosen.enforcer == "bwrap":
        return f"bubblewrap ({chosen.enforced_by}): the strongest enforcer, available here"
    if chosen.enforcer == "landlock":
        return (
            f"Landlock ({chosen.enforced_by}) because bubblewrap is unavailable; it confines writes "
            "but not the network"
        )
    fixes = "; or ".join(c.fix for c in checks if c.fix)
    return (
        f"NOT ENFORCED: auto runs without a sandbox because neither enforcer works here. To get one: {fixes}"
    )
