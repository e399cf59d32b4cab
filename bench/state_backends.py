"""Gate decision latency with the SQLite and the PostgreSQL state backend, side by side, under
16 concurrent sessions.

Two measurements, each run for both backends in the same invocation:

- `hook`: real Stop-hook processes, started exactly as `greenloop init` writes them
  (`greenloop.hooks.config_merge.hook_command`), 16 sessions at once (one thread per session starts its
  hook, waits for it, starts the next): the time an agent waits for the answer, interpreter
  start and imports included.
- `gate`: the Gate API in 16 processes, one per session, each calling
  `Gate.on_turn_stopping` in a loop: the decision itself (open the store, one transaction,
  close) without process start.

A `hook, 1 session` row measures the same hook with one session alone, for scale.
Every session's last run is red and the budget is set high, so every decision steers and
writes an interception. PostgreSQL is a throwaway server this script starts with the test
suite's helper (tests/pg_server.py: initdb + pg_ctl on 127.0.0.1, fsync off), or the server
`--url` names. Prints p50 and p99 for each backend and measurement.

Usage: python bench/state_backends.py [--rounds N] [--sessions N] [--url postgresql://…]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SESSIONS = 16

GATE_WORKER = r"""
import json, sys, time
from greenloop.closure.gate import Gate
ws, session, rounds, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
gate = Gate(ws, harness="bench")
gate.on_turn_stopping(session)  # warm: imports, prepared statements, the page cache
while time.time() < start_at:
    time.sleep(0.002)
took = []
for _ in range(rounds):
    t = time.perf_counter()
    if gate.on_turn_stopping(session).kind != "steer":
        raise SystemExit("the gate did not steer")
    took.append(time.perf_counter() - t)
print(json.dumps(took))
"""


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    """The server `url` names, or a throwaway one (tests/pg_server.py) stopped on the way out."""
    if url:
        yield url
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import pg_server

    server = pg_server.start()
    try:
        yield server.url()
    finally:
        server.stop()


def prepare(ws: Path, env: dict[str, str], sessions: int) -> None:
    """A workspace whose sessions each have a red last run, with a budget no round spends."""
    (ws / ".git").mkdir(parents=True)
    (ws / "greenloop.toml").write_text("max_intercept_rounds = 1000000\n")
    code = (
        "import sys, time\n"
        "from greenloop.closure.transitions import Counts, RunRecord\n"
        "from greenloop.closure.store import Store\n"
        "with Store(sys.argv[1]) as store:\n"
        "    for n in range(int(sys.argv[2])):\n"
        "        store.record_run(RunRecord(f'run-{n}', ok=False, at=time.time(), outcome='red',\n"
        "            session_id=f'bench-{n}', summary=Counts(10, 8, 2, 0), failing=('t::one', 't::two')))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(ws), str(sessions)], env=env, check=True)


def stop_event(ws: Path, session: str) -> bytes:
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(ws / "t.jsonl"),
            "cwd": str(ws),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
            "last_assistant_message": "done",
        }
    ).encode()


def run_hook(argv: list[str], event: bytes, env: dict[str, str], ws: Path) -> tuple[bytes, bytes, float]:
    """One hook process: its stdout, its stderr and the CPU seconds it used (its own rusage,
    from wait4: the steadier figure on a machine other work keeps busy)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ws
    )
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(event)
    proc.stdin.close()
    out, err = proc.stdout.read(), proc.stderr.read()  # a hook's stderr is a line or two
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stdout.close()
    proc.stderr.close()
    return out, err, usage.ru_utime + usage.ru_stime


def hook_latencies(
    ws: Path, env: dict[str, str], sessions: int, rounds: int
) -> tuple[list[float], list[float]]:
    """Real hook processes, one thread per session, all sessions at once: (wall, CPU) seconds."""
    from greenloop.hooks.config_merge import hook_command

    argv = shlex.split(hook_command("claude-code"))
    took: list[float] = []
    cpus: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()

    def session_loop(n: int) -> None:
        event = stop_event(ws, f"bench-{n}")
        for _ in range(rounds):
            start = time.perf_counter()
            out, err, cpu = run_hook(argv, event, env, ws)
            elapsed = time.perf_counter() - start
            with lock:
                if b'"decision": "block"' not in out:
                    failures.append(err.decode())
                took.append(elapsed)
                cpus.append(cpu)

    threads = [threading.Thread(target=session_loop, args=(n,)) for n in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(f"{len(failures)} hooks did not steer; the first said: {failures[0]}")
    return took, cpus


def gate_latencies(ws: Path, env: dict[str, str], sessions: int, rounds: int) -> list[float]:
    """The Gate API in one process per session, all deciding at once."""
    start_at = time.time() + 3.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GATE_WORKER, str(ws), f"bench-{n}", str(rounds), str(start_at)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for n in range(sessions)
    ]
    took: list[float] = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"a gate worker failed: {err}")
        took += json.loads(out)
    return took


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="hook processes per session")
    parser.add_argument("--gate-rounds", type=int, default=50, help="Gate API decisions per session")
    parser.add_argument("--sessions", type=int, default=SESSIONS)
    parser.add_argument("--url", help="a PostgreSQL server to use (default: start a throwaway one)")
    args = parser.parse_args()
    base = {k: v for k, v in os.environ.items() if k not in ("GREENLOOP_STATE_URL", "CLAUDE_PROJECT_DIR")}
    rows: list[tuple[str, str, list[float], list[float] | None]] = []
    with tempfile.TemporaryDirectory(prefix="greenloop-state-bench-") as tmp, postgres(args.url) as url:
        base["GREENLOOP_CONFIG_HOME"] = str(Path(tmp) / "no-user-config")
        backends = {"sqlite": base, "postgresql": {**base, "GREENLOOP_STATE_URL": url}}
        for name, env in backends.items():
            ws = Path(tmp) / name
            prepare(ws, env, args.sessions)
            rows.append((name, "hook, 1 session", *hook_latencies(ws, env, 1, args.rounds)))
            rows.append((name, "hook", *hook_latencies(ws, env, args.sessions, args.rounds)))
            rows.append((name, "gate", gate_latencies(ws, env, args.sessions, args.gate_rounds), None))
    print(
        f"{args.sessions} concurrent sessions; load average {os.getloadavg()[0]:.1f}; {os.cpu_count()} cores"
    )
    print("hook: real Stop-hook processes (hook_command), one thread per session")
    print("hook, 1 session: the same, one session alone (what one hook costs without contention)")
    print("gate: Gate.on_turn_stopping in one process per session (decision only)")
    for name, kind, took, cpus in rows:
        p50, p99 = percentile(took, 50) * 1000, percentile(took, 99) * 1000
        cpu = f"  hook cpu p50 {percentile(cpus, 50) * 1000:6.1f} ms" if cpus else ""
        print(f"{name:10} {kind:15}: p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  ({len(took)} decisions){cpu}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
