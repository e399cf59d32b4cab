"""Wall time of a 2,000-test suite run whole against the same suite run as 4 shards, then merged.

Builds the 2,000-test pytest and vitest suites of bench/run_overhead.py and times, alternately
in the same run:

- whole: one `greenloop run --json` of the suite;
- sharded: `greenloop run --shard I/4 --json` for I = 1..4 started together (each writing its
  result to rI.json), and once all four have ended, `greenloop merge r1.json … r4.json`.

Prints the median wall time and CPU time (of every process of the side) of both, their ratio,
and the merge's own wall time. The four shards share this machine's cores, as four CI jobs on
one runner would (a machine busy with other work gives four processes a larger share of its
cores than one, which the CPU figures show); on separate machines the sharded side's wall
time would be the slowest shard's plus the merge.

    python bench/shard_wall.py [--reps 5] [--only pytest|vitest] [--sandbox MODE]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from run_overhead import SUITES
from timing import RUNNERS, Sample, bench_env, greenloop_run, load_line, timed

SHARDS = 4


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sharded(ws: Path, out: Path, env: dict[str, str], sandbox: str) -> tuple[Sample, float]:
    """The four shards side by side, then their merge: (the whole side's time, the merge's wall)."""
    before = _children_cpu()
    start = time.perf_counter()
    results = [out / f"r{i}.json" for i in range(1, SHARDS + 1)]
    running = []
    for i, path in enumerate(results, 1):
        with path.open("w") as fh:
            argv = greenloop_run(ws, sandbox, "--shard", f"{i}/{SHARDS}")
            running.append(subprocess.Popen(argv, cwd=ws, env=env, stdout=fh, stderr=subprocess.DEVNULL))
    for proc, path in zip(running, results, strict=True):
        if proc.wait() != 0:
            raise SystemExit(f"shard {path.stem[1:]}/{SHARDS} exited {proc.returncode}, expected 0")
    merge_argv = [sys.executable, "-m", "greenloop", "merge", *map(str, results), "--path", str(ws)]
    merge = timed(merge_argv, ws, env)
    return Sample(time.perf_counter() - start, _children_cpu() - before), merge.wall


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", choices=tuple(SUITES))
    ap.add_argument("--sandbox", default="full-access")
    args = ap.parse_args()
    suites = dict(SUITES) if not args.only else {args.only: SUITES[args.only]}
    if "vitest" in suites and not (RUNNERS / ".bin" / "vitest").exists():
        print("vitest is not installed in tests/runners (npm ci there); skipping it")
        suites.pop("vitest")
    env = bench_env()
    print(load_line())
    print(f"this machine has {os.cpu_count()} cores: the {SHARDS} shards share them, so the sharded side "
          "shows what splitting costs on one machine, not what it saves across CI machines")
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        for name, build in suites.items():
            ws = Path(tmp) / name
            build(ws)
            out = Path(tmp) / f"{name}-results"
            out.mkdir()
            whole_argv = greenloop_run(ws, args.sandbox)
            timed(whole_argv, ws, env)  # warm caches (filesystem, bytecode, vitest's transforms)
            sharded(ws, out, env, args.sandbox)
            whole: list[Sample] = []
            split: list[Sample] = []
            merges: list[float] = []
            for i in range(args.reps):
                for side in ("whole", "sharded") if i % 2 == 0 else ("sharded", "whole"):
                    if side == "whole":
                        whole.append(timed(whole_argv, ws, env))
                    else:
                        sample, merge_wall = sharded(ws, out, env, args.sandbox)
                        split.append(sample)
                        merges.append(merge_wall)
            w = statistics.median(t.wall for t in whole)
            sh = statistics.median(t.wall for t in split)
            wc = statistics.median(t.cpu for t in whole)
            sc = statistics.median(t.cpu for t in split)
            print(
                f"{name:7s} 2,000 tests  one process {w:6.3f}s  {SHARDS} shards + merge {sh:6.3f}s  "
                f"ratio {sh / w:5.3f}  (merge alone {statistics.median(merges):.3f}s; median of {args.reps}, "
                f"sandbox {args.sandbox}; CPU one process {wc:.3f}s, sharded {sc:.3f}s)",
                flush=True,
            )
    print(load_line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
