"""A stand-in for an agent harness process, for the session-binding tests.

Run as `python tests/fake_harness.py PLAN.json`: it carries out the plan's steps in order, the
way a harness does, and prints one JSON list with each step's outcome. Steps:

- {"hook": "claude-code", "payload": {...}}: a hook invocation through `sh -c` (as harnesses
  spawn hook commands), the payload on stdin;
- {"shell": "greenloop run . --json"}: a command through `sh -c` (the agent's shell tool);
- {"mcp": [["test_run", {...}], ...]}: spawn `greenloop mcp` as this process's own child and
  call the tools over stdio (the MCP path);
- {"harness": PLAN}: a nested harness process (this script again) carrying out PLAN;
- {"pid": true}: this process's pid, so a test can name it.

The environment it is given is passed on unchanged: the tests strip every session variable,
so only the process tree can tie a run to a session.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from typing import Any

GREENLOOP = [sys.executable, "-m", "greenloop"]


def _sh(command: str, stdin: str = "") -> dict[str, Any]:
    p = subprocess.run(["sh", "-c", command], input=stdin, capture_output=True, text=True, check=False)
    return {"code": p.returncode, "stdout": p.stdout, "stderr": p.stderr}


async def _mcp(calls: list[list[Any]]) -> list[Any]:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=GREENLOOP[0], args=[*GREENLOOP[1:], "mcp", "--workspace", os.getcwd()], env=dict(os.environ)
    )
    out: list[Any] = []
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for name, arguments in calls:
                result = await s.call_tool(name, arguments)
                out.append(result.structured_content)
    return out


def carry_out(plan: list[dict[str, Any]]) -> list[Any]:
    results: list[Any] = []
    for step in plan:
        if "hook" in step:
            command = " ".join(shlex.quote(a) for a in [*GREENLOOP, "hook", step["hook"]])
            results.append(_sh(command, json.dumps(step["payload"])))
        elif "shell" in step:
            results.append(_sh(step["shell"]))
        elif "mcp" in step:
            results.append(asyncio.run(_mcp(step["mcp"])))
        elif "harness" in step:
            p = subprocess.run(
                [sys.executable, __file__, "-"],
                input=json.dumps(step["harness"]),
                capture_output=True,
                text=True,
                check=True,
            )
            results.append(json.loads(p.stdout))
        elif "pid" in step:
            results.append(os.getpid())
    return results


if __name__ == "__main__":
    with open(sys.argv[1]) if sys.argv[1] != "-" else sys.stdin as fh:
        source = fh.read()
    print(json.dumps(carry_out(json.loads(source))))
