"""Stop-hook latency as a fresh process against `python -c pass`, measured side by side.

The hook is run exactly as `greenloop init` writes it (`greenloop.hooks.config_merge.hook_command`: this
interpreter with `-I -S`, greenloop's folder on sys.path) and answers a Claude Code Stop
event for a session whose last run is red, so every invocation does the real work: parse the
event, load the config (a greenloop.toml), bind the session to its harness process (here:
this benchmark), open the state database, decide, record the interception, print the block.
(The budget is set high so every round steers.) The commands alternate, each measured
`--rounds` times; the medians and the ratio are printed. Target: hook p50 <= 1.5x
`python -c pass`. `python -I -S -c pass` is shown too: the floor of any hook started that way.

`--green`: the session's last run is green instead and the tree unchanged since, so the hook
allows the stop after taking the working tree's fingerprint (the gate's stale-green rule):
the Stop of an honest session.

Usage: python bench/hook_latency.py [--rounds N] [--importtime] [--green]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 1.5


def hook_argv() -> list[str]:
    """The hook command `greenloop init claude-code` writes, as an argv."""
    from greenloop.hooks.config_merge import hook_command

    return shlex.split(hook_command("claude-code"))


def prepare(ws: Path, green: bool = False) -> None:
    from greenloop.closure.store import Store
    from greenloop.closure.transitions import Counts, RunRecord

    (ws / "greenloop.toml").write_text("max_intercept_rounds = 1000000\n")
    fingerprint = None
    if green:
        from greenloop.system.fingerprint import working_tree

        fingerprint = working_tree(ws)
    with Store(ws) as store:
        store.record_run(
            RunRecord(
                "run-bench",
                ok=green,
                at=time.time(),
                outcome="green" if green else "red",
                session_id="bench",
                summary=Counts(10, 10, 0, 0) if green else Counts(10, 8, 2, 0),
                failing=() if green else ("tests/test_a.py::test_one", "tests/test_a.py::test_two"),
                fingerprint=fingerprint,
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
    parser.add_argument("--green", action="store_true", help="a green last run: the hook allows (see above)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="greenloop-hook-bench-") as tmp:
        ws = Path(tmp)
        prepare(ws, args.green)
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
        floor = [sys.executable, "-I", "-S", "-c", "pass"]
        check = subprocess.run(hook, input=event, capture_output=True, env=env, cwd=ws, check=False)
        if args.green and check.stdout.strip():
            raise SystemExit(f"the hook did not allow: {check.stdout!r} {check.stderr!r}")
        if not args.green and b'"decision": "block"' not in check.stdout:
            raise SystemExit(f"the hook did not steer: {check.stdout!r} {check.stderr!r}")
        for _ in range(3):  # warm the page cache (and greenloop's config parse cache)
            timed(baseline, b"", env, ws)
            timed(floor, b"", env, ws)
            timed(hook, event, env, ws)
        base_t: list[tuple[float, float]] = []
        floor_t: list[tuple[float, float]] = []
        hook_t: list[tuple[float, float]] = []
        for _ in range(args.rounds):
            base_t.append(timed(baseline, b"", env, ws))
            hook_t.append(timed(hook, event, env, ws))
            floor_t.append(timed(floor, b"", env, ws))
        rows = (("python -c pass", base_t), ("python -I -S -c", floor_t), ("Stop hook", hook_t))
        print(f"hook command: {shlex.join(hook)}")
        print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds each, alternating")
        for name, ts in rows:
            p50 = statistics.median(t[0] for t in ts)
            p90 = statistics.quantiles([t[0] for t in ts], n=10)[-1]
            cpu = statistics.median(t[1] for t in ts)
            ms = f"p50 {p50 * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  cpu p50 {cpu * 1000:6.1f} ms"
            print(f"{name:15}: {ms}")
        b50, h50 = (statistics.median(t[0] for t in ts) for ts in (base_t, hook_t))
        bcpu, hcpu = (statistics.median(t[1] for t in ts) for ts in (base_t, hook_t))
        print(
            f"ratio p50 hook / python -c pass = {h50 / b50:.2f} wall, {hcpu / bcpu:.2f} cpu "
            f"(target <= {TARGET:.2f})"
        )
        if args.importtime:
            p = subprocess.run(
                [hook[0], "-X", "importtime", *hook[1:]],
                input=event,
                capture_output=True,
                env=env,
                cwd=ws,
                check=False,
            )
            imports: list[tuple[int, str]] = []
            for line in p.stderr.decode().splitlines():
                parts = line.split("|")
                if len(parts) == 3 and parts[1].strip().isdigit():
                    imports.append((int(parts[1]), parts[2].rstrip()))
            print("slowest imports (cumulative us):")
            for us, name in sorted(imports, reverse=True)[:15]:
                print(f"  {us:8d} {name}")
        return 0 if h50 / b50 <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
