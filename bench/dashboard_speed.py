"""The dashboard on a big history: each page's server time, and how fast a run's new output
line reaches an open stream. Targets: every page at most 200 ms with 10,000 stored runs and
5,000 bugs; an output line at the client within 250 ms.

Builds the history the way greenloop writes it (runs recorded through the store with a
result.json each, a bug log of opened and moved bugs, sessions with gate decisions), then, in
the same run: times each page through a real `greenloop serve` process on loopback (median of
several requests, measured at the client, so it includes the HTTP round trip) and the latency
of an output line (a line appended to a live run's stdout.txt until an SSE client on the run's
stream has it). Usage: python bench/dashboard_speed.py [--runs N] [--bugs N] [--repeat K]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from greenloop import layout
from greenloop.bugs.log import BugLog
from greenloop.closure import store
from greenloop.closure.gate import Gate
from greenloop.config import Config
from greenloop.dashboard import live
from greenloop.model import Failure, Summary
from greenloop.result import RunResult


def build(ws: Path, runs: int, bugs: int) -> None:
    (ws / ".git").mkdir(parents=True)
    base = time.time() - runs
    with store.Store(ws, warn=lambda _m: None) as st:
        for i in range(runs):
            run_id = f"run-{i:06d}"
            failed = (Failure(test=f"tests/test_{i % 40}.py::test_case_{i % 7}", message="assert 1 == 2",
                              expected="2", got="1"),) if i % 4 == 0 else ()
            result = RunResult(
                run_id=run_id, ok=not failed, outcome="red" if failed else "green", framework="pytest",
                command="pytest", exit_code=1 if failed else 0,
                summary=Summary(total=120, passed=120 - len(failed), failed=len(failed)),
                failures=failed, duration_ms=900 + i % 300,
                result_ref=str(layout.run_dir(ws, run_id) / "result.json"),
                session_id=f"session-{i % 200}", output_tail="." * 2000,
            )
            folder = layout.run_dir(ws, run_id)
            folder.mkdir(parents=True)
            (folder / "result.json").write_text(json.dumps(result.to_json()))
            st.record_run(store.run_record(result, at=base + i, session_id=result.session_id))
    gate = Gate(ws, config=Config(max_intercept_rounds=2))
    for s in range(0, 200, 10):
        gate.on_turn_stopping(f"session-{s}")
    log = BugLog(ws / "bugs.ndjson")
    for i in range(bugs):
        b = log.open(unit_id="ws", test_name=f"tests/test_{i}.py::test_case", title=f"bug {i}",
                     run_id=f"run-{i:06d}", by="bench").bug
        if i % 3 == 0:
            log.transition(b.id, "fixed", by="bench", closed_by=f"run-{i + 1:06d}", evidence="test_passed")


def get(port: int, path: str, token: str) -> tuple[int, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    t = time.perf_counter()
    conn.request("GET", path, headers={"Cookie": f"greenloop_token={token}"})
    r = conn.getresponse()
    r.read()
    elapsed = time.perf_counter() - t
    conn.close()
    return r.status, elapsed


def line_latency(port: int, token: str, ws: Path, repeat: int) -> list[float]:
    """Append a line to a live run's output; time until the run's SSE stream delivers it."""
    run_id = "run-live-bench"
    folder = layout.run_dir(ws, run_id)
    folder.mkdir(parents=True)
    out = folder / "stdout.txt"
    out.write_text("")
    live.announce(str(ws), run_id, str(folder), "pytest")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", f"/runs/{run_id}/stream", headers={"Cookie": f"greenloop_token={token}"})
    response = conn.getresponse()
    assert response.status == 200
    times = []
    buf = b""
    for i in range(repeat):
        marker = f"marker-{i}"
        t = time.perf_counter()
        with out.open("a") as fh:
            fh.write(f"tests/test_x.py::test_{i} PASSED {marker}\n")
        while marker.encode() not in buf:
            chunk = response.fp.read1(65536)
            if not chunk:
                raise RuntimeError("the stream ended")
            buf += chunk
        times.append(time.perf_counter() - t)
        buf = b""
        time.sleep(0.05)
    conn.close()
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--bugs", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="gl-dash-bench-") as tmp:
        ws = Path(tmp) / "ws"
        t = time.perf_counter()
        build(ws, args.runs, args.bugs)
        print(f"history: {args.runs} runs, {args.bugs} bugs (built in {time.perf_counter() - t:.1f} s)")
        proc = subprocess.Popen([sys.executable, "-m", "greenloop", "serve", str(ws), "--port", "0"],
                                stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert proc.stdout is not None
            found = None
            while found is None:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("greenloop serve exited")
                found = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
            port, token = int(found.group(1)), found.group(2)
            pages = ["/", "/?page=100", "/?outcome=red", "/?session=session-7", "/runs/run-009999",
                     "/sessions", "/sessions/session-10", "/bugs", "/bugs/" + _some_bug(ws), "/integration"]
            worst = 0.0
            print(f"{'page':32} {'median':>9} {'max':>9}")
            for path in pages:
                get(port, path, token)  # warm: imports, the first page of the database
                samples = []
                for _ in range(args.repeat):
                    status, elapsed = get(port, path, token)
                    assert status == 200, (path, status)
                    samples.append(elapsed)
                med = statistics.median(samples)
                worst = max(worst, med)
                print(f"{path:32} {med * 1000:8.1f}ms {max(samples) * 1000:8.1f}ms")
            lat = line_latency(port, token, ws, args.repeat * 3)
            print(f"slowest page median: {worst * 1000:.1f} ms (target 200 ms)")
            print(f"output line to the stream: median {statistics.median(lat) * 1000:.1f} ms, "
                  f"max {max(lat) * 1000:.1f} ms (target 250 ms)")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
    return 0


def _some_bug(ws: Path) -> str:
    with (ws / "bugs.ndjson").open() as fh:
        return str(json.loads(fh.readline())["id"])


if __name__ == "__main__":
    raise SystemExit(main())
