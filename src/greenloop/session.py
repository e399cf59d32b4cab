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

__all__ = ["ENV_VARS", "resolve"]

ENV_VARS = ("GREENLOOP_SESSION", "CLAUDE_CODE_SESSION_ID")


def _clean(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return value or None


def resolve(
    explicit: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    mcp_context: str | None = None,
) -> str | None:
    """The session id, or None for a workspace-level run."""
    env = os.environ if env is None else env
    for value in (explicit, *(env.get(name) for name in ENV_VARS), mcp_context):
        if cleaned := _clean(value):
            return cleaned
    return None
