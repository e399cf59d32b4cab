"""`greenloop bugs list` on a 100,000-line bug log, as a fresh process (target: under 0.5 s).

Builds a log the way greenloop writes one (bugs opened by runs, most of them moved on
through fixing, fixed and verified; stack traces in `detail`: about 880 bytes a line, on
the heavy side), then times, in the same run, a bare `python -c pass` and the list commands,
each as a new process through the `greenloop` console script, and prints the medians side
by side. Nothing is cached between calls (there is no fold cache), so every call is a cold
one: the first call on a log, one after another process appended a line, and one after the
log was edited by hand all cost the same. Usage: python bench/bugs_list.py [--lines N] [--repeat K]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from greenloop.bugs.log import BugLog

STATUSES = ("open", "fixing", "fixed", "verified")


def build_log(path: Path, lines: int, seed: int = 7) -> int:
    """Write `lines` records; return how many bugs they describe."""
    rnd = random.Random(seed)
    units = [f"unit-{i:02d}" for i in range(12)]
    out: list[str] = []
    n = 0
    while len(out) < lines:
        n += 1
        unit = rnd.choice(units)
        test = f"POST /api/things/{n} rejects a bad payload with 400"
        stamp = f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:{n % 60:02d}:00Z"
        rec = {
            "id": f"bug-202611{1 + n % 28:02d}-{n % 24:02d}{n % 60:02d}-{n & 0xFFFF:04x}{n >> 16:x}",
            "source": rnd.choice(("unit_test", "unit_test", "unit_test", "integration_test")),
            "unit_id": unit, "run_id": f"run-20261101-120000-{n:06x}", "test_name": test,
            "dedup_key": f"{unit}:{test}", "category": "unknown",
            "severity": rnd.choice(("medium", "medium", "high", "critical")),
            "title": f"{test}: expected 400, got 500",
            "detail": "AssertionError: expected 500 to be 400 // Object.is equality\n"
                      + "".join(f"    at frame{k} (tests/things.spec.ts:{k * 7}:13)\n" for k in range(5)),
            "affected_units": [unit], "status": "open", "fix_refs": [],
            "created_at": stamp, "updated_at": stamp, "by": "greenloop run",
        }
        for status in STATUSES[: rnd.choice((1, 2, 3, 4, 4, 4))]:
            rec = {**rec, "status": status}
            if status != "open":
                rec["fix_refs"] = [*rec["fix_refs"], f"run-{status}-{n}"]
            out.append(json.dumps(rec, ensure_ascii=False))
    path.write_text("\n".join(out[:lines]) + "\n", encoding="utf-8")
    return n


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def timed(
    argv: list[str], repeat: int, before: Callable[[], None] | None = None
) -> tuple[float, float, int]:
    """Median wall time and median CPU time (user + system) of the child, and its output size.

    CPU time is printed too because on a busy machine wall time mostly measures the queue."""
    walls, cpus = [], []
    size = 0
    for _ in range(repeat):
        if before is not None:
            before()
        c0, t0 = _child_cpu(), time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
        cpus.append(_child_cpu() - c0)
        size = len(done.stdout)
    return statistics.median(walls), statistics.median(cpus), size


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        log = Path(tmp) / "bugs.ndjson"
        bugs = build_log(log, opts.lines)
        old = time.time() - 60
        os.utime(log, (old, old))  # written a minute ago, as a log usually was
        size = log.stat().st_size
        print(f"log: {opts.lines} lines, {bugs} bugs, {size / 1e6:.1f} MB "
              f"({size / opts.lines:.0f} bytes a line)")
        script = shutil.which("greenloop", path=str(Path(sys.executable).parent)) or shutil.which("greenloop")
        entry = [script] if script else [sys.executable, "-m", "greenloop"]
        gl = [*entry, "bugs", "list", "--project", tmp]
        writer = BugLog(log)
        counter = iter(range(10**6))

        def append_one() -> None:  # another process appended a line since the last call
            writer.open(unit_id="bench", test_name=f"appended {next(counter)}", title="new")

        cases: list[tuple[str, list[str], Callable[[], None] | None]] = [
            ("python -c pass", [sys.executable, "-c", "pass"], None),
            ("greenloop --version", [*entry, "--version"], None),
            ("bugs list", gl, None),
            ("bugs list --status open", [*gl, "--status", "open"], None),
            ("bugs list --json", [*gl, "--json"], None),
            ("bugs list, a line appended since", gl, append_one),  # last: it changes the log
        ]
        base = None
        print(f"{'':<40} {'wall':>8}     {'cpu':>8}     (cpu ratio to python -c pass, output)")
        for name, argv, before in cases:
            t, cpu, size = timed(argv, opts.repeat, before)
            base = base or cpu
            print(f"{name:<40} {t * 1000:8.1f} ms  {cpu * 1000:8.1f} ms  ({cpu / base:5.1f}x, "
                  f"{size / 1e6:.1f} MB out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
