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

The plan: {"argv": [copilot], "cwd": path, "env": {...}, "out": path, "turns": [{"args":
[...], "script": [model_server items], "timeout": seconds}]}. The result (per turn: exit code,
output, seconds, the requests the model server got, what was left of the script; the trap's
connections; whether the network was isolated) is written to `out` as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.claude_offline import Trap, isolated
from e2e.model_server import DONE, ModelServer

__all__ = ["CopilotModel", "is_main"]

SHELL_TOOL = "bash"


def is_main(body: dict[str, Any]) -> bool:
    """A request of Copilot's own agent loop: it offers the agent's shell tool."""
    tools = body.get("tools")
    return isinstance(tools, list) and any(isinstance(t, dict) and t.get("name") == SHELL_TOOL for t in tools)


class CopilotModel(ModelServer):
    """model_server.ModelServer, playing its script to Copilot's agent requests."""

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if not is_main(body):
                return {"text": "ok"}
            return self.script.pop(0) if self.script else DONE


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    trap = Trap()
    result: dict[str, Any] = {"turns": [], "isolated": isolated()}
    with CopilotModel() as server:
        proxy = f"http://127.0.0.1:{trap.port}"
        env = {
            **plan["env"],
            "COPILOT_PROVIDER_BASE_URL": server.url,
            "HTTPS_PROXY": proxy,
            "HTTP_PROXY": proxy,
            "ALL_PROXY": proxy,
            "https_proxy": proxy,
            "http_proxy": proxy,
            "all_proxy": proxy,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        for turn in plan["turns"]:
            with server.lock:
                server.script = list(turn["script"])
                before = len(server.requests)
            start = time.monotonic()
            try:
                p = subprocess.run(
                    [*plan["argv"], *turn["args"]],
                    cwd=plan["cwd"],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=turn.get("timeout", 180),
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
                code, stdout, stderr = p.returncode, p.stdout, p.stderr
            except subprocess.TimeoutExpired as exc:
                code, stdout, stderr = -9, str(exc.stdout or ""), f"timed out: {exc.stderr!r}"
            with server.lock:
                requests, left = server.requests[before:], len(server.script)
            result["turns"].append(
                {
                    "code": code,
                    "stdout": stdout,
                    "stderr": stderr,
                    "seconds": round(time.monotonic() - start, 2),
                    "requests": requests,
                    "script_left": left,
                }
            )
    result["trap"] = trap.hits
    Path(plan["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
