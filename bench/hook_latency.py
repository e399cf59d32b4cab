"""Stop-hook latency as a fresh process against `python -c pass`, measured side by side.

The hook is run exactly as `greenloop init` writes it (`greenloop.hooks.config_merge.hook_command`: this
interpreter with `-I -S`, greenloop's folder on sys.path) and answers a Claude Code Stop
event for a session whose last run is red, so every invocation does the real work: parse the
event, load the config (a greenloop.toml), bind the session to its harness process (here:
this benchmark), open the state database, decide, record the interception, print the block.
(The budget is set high so every round steers.) A second workspace measures the allow case:
the session's last run is green and the tree unchanged since, so the hook allows the stop
after taking the working tree's fingerprint (the gate's stale-green rule), the Stop of an
honest session.

The hook command is the hook client (greenloop.hook_client): the first hook starts the hook
server (greenloop.hooks.server, in a socket folder of this run's own) and the rounds measure
hooks it answers, with the server's CPU time per event added to the hook's CPU figure. The
same events answered in process (`GREENLOOP_HOOK_SERVER=0`: what a session's first hook
costs) are measured beside them.

The baseline is `python -c pass` run by a plain virtualenv's interpreter (made here with
`python -m venv --without-pip`: no .pth files of any other install in its site folder), the
cost of starting any Python program. This interpreter's `-c pass` (the virtualenv greenloop
runs from) and `-I -S -c pass` (the floor of any hook started that way) are shown too. The
commands alternate, each measured `--rounds` times; the medians and the ratios are printed.
Target: each hook p50 <= 1.5x the plain `python -c pass`.

Usage: python bench/hook_latency.py [--rounds N] [--importtime]
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


def plain_venv(tmp: Path) -> str:
    """A fresh virtualenv without pip (nothing in its site folder); its interpreter's path."""
    base = getattr(sys, "_base_executable", sys.executable)
    where = tmp / "plain-venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    return str(where / "bin" / "python")


def stop_event(ws: Path) -> bytes:
    return json.dumps(
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


def wait_for_server(folder: Path) -> int:
    """The pid of the hook server listening in `folder` (started by the first hook)."""
    from greenloop.system import procfs

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pids = [pid for pid in procfs.pids() if str(folder) in procfs.cmdline(pid) and procfs.alive(pid)]
        if pids and next(folder.glob("*.sock"), None) is not None:
            return pids[0]
        time.sleep(0.05)
    raise SystemExit(f"no hook server started in {folder}: {[p.name for p in folder.glob('*')]}")


def cpu_of(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument(
        "--importtime", action="store_true", help="also print the slowest imports of one hook (each case)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="greenloop-hook-bench-") as tmp:
        red, green = Path(tmp) / "steer", Path(tmp) / "allow"
        red.mkdir()
        green.mkdir()
        prepare(red, green=False)
        prepare(green, green=True)
        # The config parse cache is this run's own: a shared one is evicted by whatever else runs
        # greenloop on the machine, and a miss imports tomllib.
        env = {
            **os.environ,
            "GREENLOOP_CONFIG_HOME": str(Path(tmp) / "no-user-config"),
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
        }
        env.pop("CLAUDE_PROJECT_DIR", None)
        hook = hook_argv()
        plain = plain_venv(Path(tmp))
        env["GREENLOOP_HOOK_SERVER_DIR"] = str(Path(tmp) / "hook-server")  # this run's own server
        in_process = {**env, "GREENLOOP_HOOK_SERVER": "0"}
        cases: dict[str, tuple[list[str], bytes, Path, dict[str, str]]] = {
            "python -c pass (plain venv)": ([plain, "-c", "pass"], b"", red, env),
            "python -c pass (this venv)": ([sys.executable, "-c", "pass"], b"", red, env),
            "python -I -S -c pass": ([sys.executable, "-I", "-S", "-c", "pass"], b"", red, env),
            "Stop hook, allow": (hook, stop_event(green), green, env),
            "Stop hook, steer": (hook, stop_event(red), red, env),
            "in process, allow": (hook, stop_event(green), green, in_process),
            "in process, steer": (hook, stop_event(red), red, in_process),
        }
        for name in ("in process, allow", "Stop hook, allow"):  # the first also starts the server
            argv, stdin, cwd, case_env = cases[name]
            allow = subprocess.run(argv, input=stdin, capture_output=True, env=case_env, cwd=cwd, check=False)
            if allow.stdout.strip():
                raise SystemExit(f"{name}: the hook did not allow: {allow.stdout!r} {allow.stderr!r}")
        for name in ("in process, steer", "Stop hook, steer"):
            argv, stdin, cwd, case_env = cases[name]
            steer = subprocess.run(argv, input=stdin, capture_output=True, env=case_env, cwd=cwd, check=False)
            if b'"decision": "block"' not in steer.stdout:
                raise SystemExit(f"{name}: the hook did not steer: {steer.stdout!r} {steer.stderr!r}")
        server = wait_for_server(Path(env["GREENLOOP_HOOK_SERVER_DIR"]))
        for _ in range(3):  # warm the page cache (and greenloop's config parse cache)
            for argv, stdin, cwd, case_env in cases.values():
                timed(argv, stdin, case_env, cwd)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        server_cpu = 0.0
        for _ in range(args.rounds):
            for name, (argv, stdin, cwd, case_env) in cases.items():
                before = cpu_of(server) if name.startswith("Stop hook") else 0.0
                wall, cpu = timed(argv, stdin, case_env, cwd)
                if name.startswith("Stop hook"):
                    served = cpu_of(server) - before
                    server_cpu += served
                    cpu += served
                times[name].append((wall, cpu))
        print(f"hook command: {shlex.join(hook)}")
        print(f"plain venv: {plain}")
        print(f"hook server: pid {server}, {server_cpu / (2 * args.rounds) * 1000:.1f} ms of CPU per event "
              "(counted in the Stop hook's cpu figures; clock ticks, so a mean, not a p50)")
        print(f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds each, alternating")
        for name, ts in times.items():
            p50 = statistics.median(t[0] for t in ts)
            p90 = statistics.quantiles([t[0] for t in ts], n=10)[-1]
            cpu = statistics.median(t[1] for t in ts)
            ms = f"p50 {p50 * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  cpu p50 {cpu * 1000:6.1f} ms"
            print(f"{name:28}: {ms}")
        b50 = statistics.median(t[0] for t in times["python -c pass (plain venv)"])
        bcpu = statistics.median(t[1] for t in times["python -c pass (plain venv)"])
        worst = 0.0
        for name in ("Stop hook, allow", "Stop hook, steer", "in process, allow", "in process, steer"):
            h50 = statistics.median(t[0] for t in times[name])
            hcpu = statistics.median(t[1] for t in times[name])
            if name.startswith("Stop hook"):
                worst = max(worst, h50 / b50)
            served = name.startswith("Stop hook")
            target = f"(target <= {TARGET:.2f})" if served else "(no server: a session's first hook)"
            ratio = f"{h50 / b50:.2f} wall, {hcpu / bcpu:.2f} cpu"
            print(f"ratio p50 {name} / plain python -c pass = {ratio} {target}")
        os.kill(server, 15)
        if args.importtime:
            for name in ("in process, allow", "in process, steer"):
                argv, stdin, cwd, case_env = cases[name]
                print_imports(name, [argv[0], "-X", "importtime", *argv[1:]], stdin, case_env, cwd)
        return 0 if worst <= TARGET else 1


def print_imports(name: str, argv: list[str], stdin: bytes, env: dict[str, str], cwd: Path) -> None:
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env, cwd=cwd, check=False)
    imports: list[tuple[int, str]] = []
    for line in p.stderr.decode().splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            imports.append((int(parts[1]), parts[2].rstrip()))
    print(f"{name}: {len(imports)} modules imported; slowest (cumulative us):")
    for us, module in sorted(imports, reverse=True)[:15]:
        print(f"  {us:8d} {module}")


if __name__ == "__main__":
    sys.exit(main())
