"""Stop-hook latency as a fresh process against `python -c pass`, measured side by side (issue 4, Speed).

The hook answers a Claude Code Stop event for a session whose last run is red, so every
invocation does the real work: parse the event, load the config, open the state database,
decide, record the interception, print the block. (The budget is set high so every round
steers.) The two commands alternate, each measured `--rounds` times; the medians and their
ratio are printed. Target: hook p50 <= 2x `python -c pass`.

Usage: python bench/hook_latency.py [--rounds N] [--importtime]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def hook_argv() -> list[str]:
    """The installed console script next to this interpreter, else `python -m greenloop`."""
    script = Path(sys.executable).parent / "greenloop"
    if script.is_file():
        with script.open("rb") as fh:
            head = fh.read(200)
        if head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]:
            return [str(script), "hook", "claude-code"]
    return [sys.executable, "-m", "greenloop", "hook", "claude-code"]


def prepare(ws: Path) -> None:
    from greenloop.closure import Counts, RunRecord
    from greenloop.store import Store

    (ws / "greenloop.toml").write_text("max_intercept_rounds = 1000000\n")
    with Store(ws) as store:
        store.record_run(
            RunRecord(
                "run-bench",
                ok=False,
                at=time.time(),
                outcome="red",
                session_id="bench",
                summary=Counts(10, 8, 2, 0),
                failing=("tests/test_a.py::test_one", "tests/test_a.py::test_two"),
            )
        )


def timed(argv: list[str], stdin: bytes, env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child): CPU time is the steadier figure on a busy machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed: {proc.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--importtime", action="store_true", help="also print the slowest imports of one hook"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="greenloop-hook-bench-") as tmp:
        ws = Path(tmp)
        prepare(ws)
        env = {**os.environ, "GREENLOOP_CONFIG_HOME": str(ws / "no-user-config")}
        env.pop("CLAUDE_PROJECT_DIR", None)
        event = json.dumps(
            {
                "session_id": "bench",
                "transcript_path": str(ws / "t.jsonl"),
                "cwd": str(ws),
                "hook_event_name": "Stop",
                "permission_mode": "default",  # Claude Code sends it: the mode-event check runs too
                "stop_hook_active": False,
                "last_assistant_message": "done",
            }
        ).encode()
        hook = hook_argv()
        baseline = [sys.executable, "-c", "pass"]
        check = subprocess.run(hook, input=event, capture_output=True, env=env, cwd=ws, check=False)
        if b'"decision": "block"' not in check.stdout:
            raise SystemExit(f"the hook did not steer: {check.stdout!r} {check.stderr!r}")
        for _ in range(3):  # warm the page cache for both
            timed(baseline, b"", env, ws)
            timed(hook, event, env, ws)
        base_t: list[tuple[float, float]] = []
        hook_t: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            base_t.append(timed(baseline, b"", env, ws))
            hook_t.append(timed(hook, event, env, ws))
        b50, h50 = (statistics.median(t[0] for t in ts) for ts in (base_t, hook_t))
        b90, h90 = (statistics.quantiles([t[0] for t in ts], n=10)[-1] for ts in (base_t, hook_t))
        bcpu, hcpu = (statistics.median(t[1] for t in ts) for ts in (base_t, hook_t))
        print(f"hook command: {' '.join(hook)}  (load average {os.getloadavg()[0]:.1f})")
        for name, p50, p90, cpu in (("python -c pass", b50, b90, bcpu), ("Stop hook", h50, h90, hcpu)):
            print(
                f"{name:15}: p50 {p50 * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  cpu p50 {cpu * 1000:6.1f} ms"
            )
        print(
            f"ratio p50 hook / python -c pass = {h50 / b50:.2f} wall, {hcpu / bcpu:.2f} cpu (target <= 2.00)"
        )
        if args.importtime:
            p = subprocess.run(
                [sys.executable, "-X", "importtime", "-m", "greenloop", "hook", "claude-code"],
                input=event,
                capture_output=True,
                env=env,
                cwd=ws,
                check=False,
            )
            rows = []
            for line in p.stderr.decode().splitlines():
                parts = line.split("|")
                if len(parts) == 3 and parts[1].strip().isdigit():
                    rows.append((int(parts[1]), parts[2].rstrip()))
            print("slowest imports (cumulative us):")
            for us, name in sorted(rows, reverse=True)[:15]:
                print(f"  {us:8d} {name}")
        return 0 if h50 / b50 <= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
