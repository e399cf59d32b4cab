"""Drive one `codex exec` (or `codex exec resume`) turn offline: `python codex_offline.py SPEC.json`.

Meant to run inside a fresh network namespace (`unshare -rn`, loopback brought up first), so
that nothing but 127.0.0.1 is reachable: the scripted model (responses_server.ResponsesServer)
and a proxy trap (responses_server.ProxyTrap) both listen there, in this process. The proxy
variables point at the trap; NO_PROXY lets Codex reach the model directly.

The spec: {"codex": path, "cwd": path, "env": {...}, "argv": [...] (after `codex`),
"codex_home": path, "config": CODEX_HOME's config.toml with "{base_url}" for the model's URL,
"plan": [answers, responses_server.Answer.to_json], "timeout": seconds, "out": path}. The
result written to `out`: whether the namespace was isolated, the exit code, stdout, stderr,
seconds, every request the model got, the script's errors, what is left of the plan, and
what reached the trap.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.responses_server import Answer, Model, ProxyTrap, ResponsesServer


def isolated() -> bool:
    """Whether only loopback is reachable (a connection to a public address fails at once)."""
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1).close()  # TEST-NET-1
    except OSError as exc:
        return exc.errno == 101  # ENETUNREACH: no route off this namespace
    return False


def main() -> int:
    spec: dict[str, Any] = json.loads(Path(sys.argv[1]).read_text())
    model = Model([Answer.from_json(a) for a in spec["plan"]])
    result: dict[str, Any] = {"isolated": isolated()}
    with ProxyTrap() as trap, ResponsesServer(model) as server:
        Path(spec["codex_home"], "config.toml").write_text(
            spec["config"].replace("{base_url}", server.base_url)
        )
        env = {**spec["env"], **trap.env()}
        start = time.monotonic()
        try:
            proc = subprocess.run(
                [spec["codex"], *spec["argv"]],
                cwd=spec["cwd"],
                env=env,
                capture_output=True,
                text=True,
                timeout=spec["timeout"],
                stdin=subprocess.DEVNULL,
                check=False,
            )
            code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, stdout, stderr = -9, str(exc.stdout or ""), f"timed out after {spec['timeout']} s"
        result.update(
            code=code,
            stdout=stdout,
            stderr=stderr,
            seconds=round(time.monotonic() - start, 2),
            requests=[
                {"method": r.method, "path": r.path, "headers": r.headers, "body": r.body}
                for r in server.requests
            ],
            errors=server.errors,
            plan_left=len(model.plan),
        )
    result["trap"] = trap.hits
    Path(spec["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
