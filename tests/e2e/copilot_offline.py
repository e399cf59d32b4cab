"""Drive the real GitHub Copilot CLI offline: `python copilot_offline.py PLAN.json`.

Meant to run inside a fresh network namespace (`unshare -rn`, loopback brought up first), so
that nothing but 127.0.0.1 is reachable: the scripted model server (model_server.py, the
Anthropic Messages API, which Copilot CLI speaks with its own-provider mode,
COPILOT_PROVIDER_TYPE=anthropic and COPILOT_PROVIDER_BASE_URL; COPILOT_OFFLINE=true turns off
GitHub sign-in, telemetry and updates) and claude_offline.py's proxy trap both listen there.
HTTP(S)_PROXY and ALL_PROXY point at the trap, which records every connection it gets (a
request that tried to leave the machine); NO_PROXY lets the model server be reached directly.

Copilot's agent requests are told apart from its side calls (titles, summaries) by the tools
they offer (`is_main`: its shell tool, `bash`): they get the script, one item per request;
the others get a short text.

The plan and its result are cli_offline.py's (`run_plan`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.cli_offline import ScriptedModel, run_plan

__all__ = ["CopilotModel", "is_main"]

SHELL_TOOL = "bash"


def is_main(body: dict[str, Any]) -> bool:
    """A request of Copilot's own agent loop: it offers the agent's shell tool."""
    tools = body.get("tools")
    return isinstance(tools, list) and any(isinstance(t, dict) and t.get("name") == SHELL_TOOL for t in tools)


class CopilotModel(ScriptedModel):
    """cli_offline.ScriptedModel, playing its script to this CLI's agent requests."""

    is_main = staticmethod(is_main)


if __name__ == "__main__":
    sys.exit(run_plan(sys.argv[1], CopilotModel, "COPILOT_PROVIDER_BASE_URL"))
