"""What the offline drivers of the Anthropic-speaking agent CLIs share (Qwen Code, Copilot CLI).

The driver side (`run_plan`, run as a script inside a fresh network namespace by
qwen_offline.py and copilot_offline.py): the scripted model server (model_server.py), whose
script goes to the CLI's agent requests only (`ScriptedModel.is_main`, each CLI's own rule;
side calls get a short text), and claude_offline.py's proxy trap; each turn runs the CLI once.

The test side (`drive`): write the plan, run the driver in a network namespace when the
machine can give one (`netns_works`), and check what every such test needs: nothing tried to
leave the machine, every turn exited 0 and used its script, and no MCP server or hook process
outlived the CLI.

The plan: {"argv": [...], "cwd": path, "env": {...}, "out": path, "turns": [{"args": [...],
"script": [model_server items], "timeout": seconds}]}. The result (per turn: exit code,
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
from e2e.helpers import netns_works, processes_under, wait_until
from e2e.model_server import DONE, ModelServer

__all__ = ["ScriptedModel", "drive", "netns_works", "run_plan"]


class ScriptedModel(ModelServer):
    """model_server.ModelServer, playing its script to the CLI's agent requests (`is_main`)."""

    @staticmethod
    def is_main(body: dict[str, Any]) -> bool:
        """Whether a request is of the CLI's own agent loop (each CLI's subclass says how)."""
        raise NotImplementedError

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if not self.is_main(body):
                return {"text": "ok"}
            return self.script.pop(0) if self.script else DONE


def run_plan(plan_path: str, model: type[ScriptedModel], url_variable: str) -> int:
    """Play a plan's turns against the CLI; `url_variable` names the model server for it."""
    plan = json.loads(Path(plan_path).read_text())
    trap = Trap()
    result: dict[str, Any] = {"turns": [], "isolated": isolated()}
    with model() as server:
        proxy = f"http://127.0.0.1:{trap.port}"
        env = {
            **plan["env"],
            url_variable: server.url,
            **{name: proxy for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")},
            **{name.lower(): proxy for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")},
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


def drive(
    runner: Path, name: str, argv: list[str], ws: Path, env: dict[str, str], turns: list[dict[str, Any]],
    *, netns: bool, turn_timeout: float,
) -> dict[str, Any]:  # fmt: skip
    """Run the turns through the driver script `runner` (in a network namespace when `netns`)
    and check them; the driver's result."""
    tmp = ws.parent
    out = tmp / f"{name}-out.json"
    plan = {"argv": argv, "cwd": str(ws), "env": env, "out": str(out), "turns": turns}
    (tmp / "plan.json").write_text(json.dumps(plan))
    command = [sys.executable, str(runner), str(tmp / "plan.json")]
    if netns:
        command = ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]
    budget = turn_timeout * len(turns) + 60
    p = subprocess.run(command, capture_output=True, text=True, timeout=budget, check=False)
    assert p.returncode == 0 and out.exists(), p.stderr
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["trap"] == [], f"requests tried to leave the machine: {result['trap']}"
    if netns:
        assert result["isolated"] is True
    else:
        print("no user namespaces here: isolation rests on the proxy trap alone", file=sys.stderr)
    for t in result["turns"]:
        print(f"{name} turn: {t['seconds']} s, {len(t['requests'])} model requests", file=sys.stderr)
        assert t["code"] == 0, (t["stdout"][-2000:], t["stderr"][-3000:])
        assert t["script_left"] == 0, t["stderr"][-3000:]
    # The CLI ends its MCP server and hook processes with itself.
    assert wait_until(lambda: not processes_under(ws), timeout=10), processes_under(ws)
    return result
