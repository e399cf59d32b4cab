"""Drive the real Claude Code CLI offline: `python claude_offline.py PLAN.json`.

Meant to run inside a fresh network namespace (`unshare -rn`, loopback brought up first), so
that nothing but 127.0.0.1 is reachable: the scripted model server (model_server.py) and a
proxy trap both listen there. HTTP(S)_PROXY/ALL_PROXY point at the trap, which records every
connection it gets (a request that tried to leave the machine) and closes it; NO_PROXY lets
the model server be reached directly.

The plan: {"claude": path, "workspace": path, "env": {...}, "out": path, "turns": [{"args":
[...], "script": [...], "timeout": seconds}]}. Each turn runs `claude ARGS` in the workspace
with the model server's script set to the turn's; a turn's args may use "{session}" for the
session id the first turn reported. The result (per turn: exit code, output, seconds, the
requests the model server got; the trap's connections; whether the network was isolated) is
written to `out` as JSON.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.model_server import ModelServer


class Trap:
    """A loopback listener that records the first line of every connection and closes it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.hits: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    first = conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1")
                except OSError:
                    first = "(no request line)"
                self.hits.append(first)


def isolated() -> bool:
    """Whether only loopback is reachable (a connection to a public address fails at once)."""
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1).close()  # TEST-NET-1
    except OSError as exc:
        return exc.errno == 101  # ENETUNREACH: no route off this namespace
    return False


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    trap = Trap()
    result: dict[str, Any] = {"turns": [], "isolated": isolated()}
    with ModelServer() as server:
        env = dict(plan["env"])
        proxy = f"http://127.0.0.1:{trap.port}"
        env.update(
            ANTHROPIC_BASE_URL=server.url,
            HTTPS_PROXY=proxy,
            HTTP_PROXY=proxy,
            ALL_PROXY=proxy,
            https_proxy=proxy,
            http_proxy=proxy,
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        session = ""
        for turn in plan["turns"]:
            server.script = list(turn["script"])
            before = len(server.requests)
            args = [a.replace("{session}", session) for a in turn["args"]]
            start = time.monotonic()
            try:
                p = subprocess.run(
                    [plan["claude"], *args],
                    cwd=plan["workspace"],
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
            if not session:
                with contextlib.suppress(ValueError):
                    session = str(json.loads(stdout).get("session_id") or "")
            result["turns"].append(
                {
                    "code": code,
                    "stdout": stdout,
                    "stderr": stderr,
                    "seconds": round(time.monotonic() - start, 2),
                    "requests": server.requests[before:],
                    "script_left": len(server.script),
                }
            )
    result["trap"] = trap.hits
    result["session_id"] = session
    Path(plan["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
