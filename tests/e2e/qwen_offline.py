"""Drive the real Qwen Code CLI offline: `python qwen_offline.py PLAN.json`.

Meant to run inside a fresh network namespace (`unshare -rn`, loopback brought up first), so
that nothing but 127.0.0.1 is reachable: the scripted model server (model_server.py, the
Anthropic Messages API, which Qwen Code speaks with `--auth-type anthropic` and
ANTHROPIC_BASE_URL) and claude_offline.py's proxy trap both listen there. HTTP(S)_PROXY and
ALL_PROXY point at the trap, which records every connection it gets (a request that tried to
leave the machine); NO_PROXY lets the model server be reached directly.

Qwen Code's agent requests are told apart from its side calls (the managed memory extractor,
summaries) by their system prompt, "You are Qwen Code, …" (`is_main`): they get the script,
one item per request; the others get a short text.

The plan and its result are cli_offline.py's (`run_plan`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.cli_offline import ScriptedModel, run_plan

__all__ = ["QwenModel", "is_main"]

MAIN_SYSTEM = "You are Qwen Code"


def is_main(body: dict[str, Any]) -> bool:
    """A request of Qwen Code's own agent loop: its system prompt is the agent's."""
    system = body.get("system")
    if isinstance(system, list) and system and isinstance(system[0], dict):
        system = system[0].get("text")
    return isinstance(system, str) and system.startswith(MAIN_SYSTEM)


class QwenModel(ScriptedModel):
    """cli_offline.ScriptedModel, playing its script to this CLI's agent requests."""

    is_main = staticmethod(is_main)


if __name__ == "__main__":
    sys.exit(run_plan(sys.argv[1], QwenModel, "ANTHROPIC_BASE_URL"))
