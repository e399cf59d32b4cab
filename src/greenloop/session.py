"""Which agent session a run or a check belongs to (issue 4, part 1).

In order: an explicit id (`--session S`, a tool's `session_id` argument), the
`GREENLOOP_SESSION` variable, the harness's own variable (Claude Code sets
`CLAUDE_CODE_SESSION_ID` for every command its Bash tool runs), then the MCP client's
context (the MCP server passes its connection's id in). None means the run belongs to the
workspace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = ["ENV_VARS", "resolve", "resolve_with_source"]

ENV_VARS = ("GREENLOOP_SESSION", "CLAUDE_CODE_SESSION_ID")


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def resolve_with_source(
    explicit: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    mcp_context: str | None = None,
) -> tuple[str | None, str]:
    """(session id or None, where it came from: "argument", a variable name, "mcp" or "none")."""
    env = os.environ if env is None else env
    if _clean(explicit):
        return _clean(explicit), "argument"
    for name in ENV_VARS:
        value = _clean(env.get(name))
        if value:
            return value, name
    if _clean(mcp_context):
        return _clean(mcp_context), "mcp"
    return None, "none"


def resolve(
    explicit: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    mcp_context: str | None = None,
) -> str | None:
    """The session id, or None for a workspace-level run."""
    return resolve_with_source(explicit, env=env, mcp_context=mcp_context)[0]
