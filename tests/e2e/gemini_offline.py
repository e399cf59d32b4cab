"""Run one Gemini CLI turn offline: `python gemini_offline.py PLAN.json`.

Meant to run inside a fresh network namespace (`unshare -rn`, loopback brought up first), so
that nothing but 127.0.0.1 is reachable: the scripted model server and the leak guard
(gemini_model.py) both listen there, inside the namespace with the CLI.

The plan: {"argv": [...], "cwd": path, "env": {...}, "steps": [{"text", "calls", "expect"}],
"timeout": seconds, "out": path, "until_guard_hit": bool}. The driver points the CLI at the
model server (GOOGLE_GEMINI_BASE_URL, unless the plan's env names another) and at the guard
(every proxy variable; NO_PROXY loopback only), runs `argv` in its own process group bounded
by `timeout` (the group is killed after it, or as soon as the guard is hit when
`until_guard_hit`), and writes to `out`: the CLI's exit code, output and time, every request
the model server got, the steps it played, its errors, the guard's hits, and whether the
network was isolated.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: e2e is a package

from e2e.gemini_model import LeakGuard, ScriptedModel, Step, isolated


def step_of(data: dict[str, Any]) -> Step:
    expect = data.get("expect")
    return Step(
        text=data.get("text"),
        calls=tuple((name, args) for name, args in data.get("calls") or ()),
        expect=tuple(expect) if isinstance(expect, list) else expect,
    )


def stop(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
    """SIGTERM the process group, give it `grace` seconds, then SIGKILL whatever is left of it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def main() -> int:
    plan = json.loads(Path(sys.argv[1]).read_text())
    result: dict[str, Any] = {"isolated": isolated()}
    with ScriptedModel() as model, LeakGuard() as guard:
        model.play([step_of(s) for s in plan["steps"]])
        env = {"GOOGLE_GEMINI_BASE_URL": model.url, **plan["env"]}
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env[name] = guard.url
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        start = time.monotonic()
        # Its own process group: the CLI re-launches itself, and a timeout must reach them all.
        proc = subprocess.Popen(
            plan["argv"],
            cwd=plan["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        timed_out = False
        if plan.get("until_guard_hit"):
            deadline = time.monotonic() + plan["timeout"]
            while not guard.hits and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            stop(proc)
            out, err = proc.communicate()
        else:
            try:
                out, err = proc.communicate(timeout=plan["timeout"])
            except subprocess.TimeoutExpired:
                timed_out = True
                stop(proc)
                out, err = proc.communicate()
        result.update(
            code=proc.returncode,
            stdout=out,
            stderr=err,
            seconds=round(time.monotonic() - start, 2),
            timed_out=timed_out,
            requests=[{"path": r.path, "body": r.body} for r in model.requests],
            played=model.played,
            steps=len(model.steps),
            errors=model.errors,
            hits=guard.hits,
        )
    Path(plan["out"]).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
