"""Integration run speed: start-up follows the slowest dependency chain; teardown is one grace.

Five units: `a -> b` is a dependency chain, `c`, `d` and `e` are independent. Each unit sleeps
a set time before it listens. In one run of this script we measure, side by side:

1. `integrate()` on the five units: the time from the call to the first case, each unit's own
   start-to-healthy time in that run (from process.log), from which the slowest dependency
   chain's readiness and the sum of all readinesses follow, and the teardown time (one unit
   ignores SIGTERM, so the teardown has to wait the grace period);
2. for context, each unit's readiness when spawned alone (health polled every 10 ms).

The claims: time to first case <= slowest chain + 0.3 s (not the sum of all units), and
teardown <= grace + 0.5 s. Exit status 1 if a claim does not hold.

    python bench/integrate_speed.py [--grace 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

from greenloop.integration.run import integrate
from greenloop.system import proc

UNIT = r'''
import os, signal, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
time.sleep(float(sys.argv[1]))
if len(sys.argv) > 2 and sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
class H(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")
ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
'''

DELAYS = {"a": 0.5, "b": 0.4, "c": 0.3, "d": 0.6, "e": 0.2}
DEPENDS = {"b": ["a"]}
CHAINS = [["a", "b"], ["c"], ["d"], ["e"]]


def make_project(root: Path) -> Path:
    (root / "unit.py").write_text(UNIT)
    units = []
    for uid, delay in DELAYS.items():
        (root / "units" / uid).mkdir(parents=True)
        argv = [sys.executable, str(root / "unit.py"), str(delay)] + (["ignore-term"] if uid == "e" else [])
        units.append({"id": uid, "kind": "be", "start": argv, "depends_on": DEPENDS.get(uid, [])})
    (root / "units.json").write_text(json.dumps({"units": units}))
    (root / "integration").mkdir()
    steps = [{"unit": u, "call": "GET /x", "expect": {"status": 200}} for u in DELAYS]
    (root / "integration" / "spec.json").write_text(json.dumps({"cases": [{"id": "all", "steps": steps}]}))
    return root


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def readiness(root: Path, uid: str) -> float:
    """Seconds from spawn to the first 200 on /api/health, for the unit started alone."""
    port = free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1"}
    argv = [sys.executable, str(root / "unit.py"), str(DELAYS[uid])]
    t0 = time.monotonic()
    child = proc.spawn(argv, cwd=str(root), env=env, stdout_path=str(root / f"alone-{uid}.log"))
    try:
        while True:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            try:
                conn.request("GET", "/api/health")
                if conn.getresponse().status == 200:
                    return time.monotonic() - t0
            except OSError:
                pass
            finally:
                conn.close()
            time.sleep(0.01)
    finally:
        child.stop(0.5)


def one_round(grace: float) -> tuple[dict[str, float], dict[str, float], float, float]:
    with tempfile.TemporaryDirectory(prefix="gl-bench-") as tmp:
        root = make_project(Path(tmp))
        alone = {uid: readiness(root, uid) for uid in DELAYS}
        marks: dict[str, float] = {}
        t0 = time.monotonic()

        def on_event(message: str) -> None:
            if message.startswith("case ") and "first_case" not in marks:
                marks["first_case"] = time.monotonic() - t0

        result = integrate(root, on_event=on_event, grace_s=grace, sandbox="full-access", record_bugs=False)
        if not result.ok:
            raise SystemExit(f"the bench run failed: {json.dumps(result.to_json(), indent=1)}")
        log = (root / result.process_log).read_text()
        m = re.search(r"teardown done in ([0-9.]+) s", log)
        teardown = float(m.group(1)) if m else float("nan")
        return alone, in_run_readiness(log), marks["first_case"], teardown


def _stamp(line: str) -> float:
    hms = line.split("T", 1)[1].split("Z", 1)[0]
    h, mi, sec = hms.split(":")
    return int(h) * 3600 + int(mi) * 60 + float(sec)


def in_run_readiness(log: str) -> dict[str, float]:
    """Each unit's own start-to-healthy time inside the integrate run (from process.log)."""
    started: dict[str, float] = {}
    ready: dict[str, float] = {}
    for line in log.splitlines():
        m = re.search(r"\[greenloop\] started (\S+) pid", line)
        if m:
            started[m.group(1)] = _stamp(line)
        m = re.search(r"\[greenloop\] health (\S+) GET \S+ -> 2\d\d", line)
        if m:
            ready[m.group(1)] = _stamp(line) - started[m.group(1)]
    return ready


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grace", type=float, default=5.0, help="teardown grace in seconds (default 5)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ok = True
    print(f"units: a ({DELAYS['a']} s) -> b ({DELAYS['b']} s); c, d, e independent; e ignores SIGTERM")
    for i in range(args.rounds):
        alone, in_run, first_case, teardown = one_round(args.grace)
        chain_alone = max(sum(alone[u] for u in c) for c in CHAINS)
        total_alone = sum(alone.values())
        # The claim is checked against the chain as it was ready in the same run: units that
        # start together share the machine's cores, so each is a little slower than alone.
        chain = max(sum(in_run[u] for u in c) for c in CHAINS)
        total = sum(in_run.values())
        limit = chain + 0.3
        tlimit = args.grace + 0.5
        good = first_case <= limit and teardown <= tlimit
        ok = ok and good
        print(
            f"round {i + 1}: readiness in the run " + " ".join(f"{u}={t:.2f}" for u, t in in_run.items())
            + f" | slowest chain {chain:.2f} s, sum of all {total:.2f} s"
            + f" | first case after {first_case:.2f} s (limit {limit:.2f}; {first_case / chain:.2f}x chain,"
            + f" {first_case / total:.2f}x sum)"
            + f" | teardown {teardown:.2f} s (limit {tlimit:.2f}) {'OK' if good else 'MISSED'}"
        )
        print(
            "         alone (one at a time) " + " ".join(f"{u}={t:.2f}" for u, t in alone.items())
            + f" | slowest chain {chain_alone:.2f} s, sum of all {total_alone:.2f} s"
            + f" | first case {first_case / chain_alone:.2f}x that chain,"
            + f" {first_case / total_alone:.2f}x that sum"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
