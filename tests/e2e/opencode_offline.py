"""Run OpenCode's server offline and drive one session through it: `python opencode_offline.py PLAN.json`.

Meant to run inside a fresh network namespace (`unshare -rn`, loopback brought up first), so
that nothing but 127.0.0.1 is reachable: the scripted model server (model_server.py, the
Anthropic Messages API, which OpenCode's bundled @ai-sdk/anthropic provider speaks) and
`opencode serve` both listen there, inside the namespace.

OpenCode cannot refuse a stop: greenloop's plugin sends the agent back when the session goes
idle (hooks/opencode.py), and a standalone `opencode run` exits at idle before that can
happen. So the session is driven through the server's HTTP API, as OpenCode's TUI drives it:
`POST /session`, then per user turn `POST /session/{id}/message` (which answers when the
agent's loop ends), then waiting until the session has been idle, with no new model request,
for `quiet` seconds: the plugin's corrective rounds happen in between.

The plan: {"argv": [opencode, "serve", …], "cwd", "env", "model_config": {…} (merged into
the project's opencode.json, with the model server's URL put in for BASE_URL), "turns":
[{"prompt", "script": [model_server items]}], "timeout", "quiet", "out"}. The report written
to `out`: per turn the text of the last user message of every request the agent's loop made
(`main`), its time and whether it timed out; the server's log tail; whether the network was
isolated.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.model_server import ModelServer, last_user_text


def is_agent_request(body: dict[str, Any]) -> bool:
    """A request of OpenCode's agent loop (it offers the bash tool); titles and the like do not."""
    tools = body.get("tools")
    return isinstance(tools, list) and any(isinstance(t, dict) and t.get("name") == "bash" for t in tools)


class OpenCodeModel(ModelServer):
    """model_server.ModelServer, playing its script to OpenCode's agent requests."""

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if not is_agent_request(body):
                return {"text": "ok"}
            return self.script.pop(0) if self.script else {"text": "Done."}


def isolated() -> bool:
    """Whether an address off this machine is unreachable (the namespace has only loopback)."""
    try:
        with socket.create_connection(("192.0.2.1", 443), timeout=2):
            return False
    except OSError:
        return True


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Api:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read()
        return json.loads(text) if text else None


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    cwd = Path(plan["cwd"])
    report: dict[str, Any] = {"isolated": isolated(), "turns": [], "errors": []}
    deadline = time.monotonic() + plan["timeout"]
    port = free_port()
    with OpenCodeModel() as model:
        config_path = cwd / "opencode.json"
        config = json.loads(config_path.read_text())
        extra = json.loads(json.dumps(plan["model_config"]).replace("BASE_URL", model.url + "/v1"))
        config.update(extra)
        config_path.write_text(json.dumps(config, indent=2))
        log = open(Path(plan["out"]).with_suffix(".log"), "w")  # noqa: SIM115
        argv = [*plan["argv"], "--port", str(port), "--hostname", "127.0.0.1"]
        server = subprocess.Popen(argv, cwd=cwd, env=plan["env"], stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # fmt: skip
        api = Api(port)
        try:
            started = time.monotonic()
            while time.monotonic() < deadline:
                try:
                    api.call("GET", "/session", timeout=5)
                    break
                except OSError:
                    time.sleep(0.5)
            report["startup_seconds"] = round(time.monotonic() - started, 1)
            session = api.call("POST", "/session", {"title": "greenloop e2e"})["id"]
            report["session_id"] = session
            for turn in plan["turns"]:
                report["turns"].append(run_turn(api, model, session, turn, deadline, plan["quiet"]))
        except Exception as exc:  # the report says what went wrong; the test fails on it
            report["errors"].append(f"{type(exc).__name__}: {exc}")
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
            log.close()
    report["log_tail"] = Path(plan["out"]).with_suffix(".log").read_text(errors="replace")[-6000:]
    Path(plan["out"]).write_text(json.dumps(report, indent=2))
    return 0


def run_turn(api: Api, model: ModelServer, session: str, turn: dict[str, Any], deadline: float,
             quiet: float) -> dict[str, Any]:  # fmt: skip
    with model.lock:
        model.script = list(turn["script"])
        first = len(model.requests)
    started = time.monotonic()
    parts = [{"type": "text", "text": turn["prompt"]}]
    left = max(1.0, deadline - time.monotonic())
    api.call("POST", f"/session/{session}/message", {"parts": parts}, timeout=left)
    seen, still_since, timed_out = -1, time.monotonic(), False
    while True:  # the plugin's corrective rounds: until idle and nothing new for `quiet` seconds
        with model.lock:
            count = len(model.requests)
        status = api.call("GET", "/session/status")
        busy = isinstance(status, dict) and session in status and status[session].get("type") != "idle"
        if count != seen or busy:
            seen, still_since = count, time.monotonic()
        elif time.monotonic() - still_since >= quiet:
            break
        if time.monotonic() > deadline:
            timed_out = True
            break
        time.sleep(0.5)
    with model.lock:
        bodies = [r["body"] for r in model.requests[first:] if isinstance(r["body"], dict)]
        left = len(model.script)
    main = [last_user_text(b) for b in bodies if is_agent_request(b)]
    return {"main": main, "seconds": round(time.monotonic() - started, 1), "timed_out": timed_out,
            "script_left": left}  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
