"""`greenloop probe` on a 100,000-file tree that includes node_modules.

Builds the tree in a temporary folder (a vitest monorepo-ish workspace: 90,000 files under
node_modules, 10,000 source and test files in nested folders), then times `probe()` in this
process (median of several calls, first call included separately: a cold walk) and the whole
`greenloop probe --json` command. The target is under 0.3 s.

    python bench/probe_speed.py [--files 100000] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def build(root: Path, total: int) -> int:
    (root / "package.json").write_text(json.dumps({"name": "big", "devDependencies": {"vitest": "4"}}))
    (root / "package-lock.json").write_text("{}")
    made = 2
    nm = int(total * 0.9)
    per = 100
    for p in range(nm // per):
        folder = root / "node_modules" / f"pkg{p}" / "dist"
        folder.mkdir(parents=True)
        for i in range(per):
            (folder / f"f{i}.test.js").write_bytes(b"")
        made += per
    per_dir = 50
    d = 0
    while made < total:
        folder = root / "src" / f"area{d % 20}" / f"mod{d}"
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(min(per_dir, total - made)):
            name = f"f{i}.test.ts" if i % 5 == 0 else f"f{i}.ts"
            (folder / name).write_bytes(b"")
            made += 1
        d += 1
    return made


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    from greenloop.runner.probe import probe

    with tempfile.TemporaryDirectory(prefix="greenloop-probe-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        made = build(root, args.files)
        print(f"built {made:,} files in {time.perf_counter() - t0:.1f}s")
        start = time.perf_counter()
        d = probe(str(root))
        first = time.perf_counter() - start
        times = []
        for _ in range(args.reps):
            start = time.perf_counter()
            probe(str(root))
            times.append(time.perf_counter() - start)
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        cli_times = []
        for _ in range(args.reps):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "greenloop", "probe", str(root), "--json"],
                env=env,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            cli_times.append(time.perf_counter() - start)
        print(f"framework {d.framework}, {len(d.test_files)} test files listed, notes: {list(d.notes)}")
        print(f"probe() first call {first:.3f}s, median {statistics.median(times):.3f}s (target < 0.3 s)")
        cli_median = statistics.median(cli_times)
        print(f"`greenloop probe --json` command, median {cli_median:.3f}s (incl. interpreter start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
