"""Wall time of `greenloop run` against the bare runner, on 2,000-test suites.

Builds a 2,000-test pytest suite and a 2,000-test vitest suite in a temporary folder, then
times, alternately in the same run, the bare runner as a person types it (`python -m pytest`,
`vitest run`) and `greenloop run --json` on the same workspace (which adds the runner's
machine reporter, parses it and stores the run). Prints the median wall time of each side
and their ratio (the target is <= 1.05), and beside it the median CPU time of each side's
process tree, which a machine busy with other work disturbs less than wall time.

`greenloop run` is measured with `--sandbox full-access` so that the figure is greenloop's own
overhead; the cost of the bubblewrap sandbox is measured by bench/sandbox_cost.py. Pass
`--sandbox workspace-write` to measure both together.

    python bench/run_overhead.py [--reps 7] [--only pytest|vitest] [--sandbox MODE]
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

REPO = Path(__file__).resolve().parents[1]
RUNNERS = REPO / "tests" / "runners" / "node_modules"
FILES, PER_FILE = 20, 100


def pytest_suite(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    for f in range(FILES):
        body = "".join(f"def test_{f}_{i}():\n    assert {i} + 1 == {i + 1}\n\n" for i in range(PER_FILE))
        (root / f"test_big_{f}.py").write_text(body)
    # As a person types it; with pytest's cache on, as greenloop's run leaves it (both sides
    # then do the same work: the same tests, the same .pytest_cache writes).
    return [sys.executable, "-m", "pytest"]


def vitest_suite(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "package.json").write_text(
        json.dumps({"name": "b", "private": True, "type": "module", "devDependencies": {"vitest": "4.1.12"}})
    )
    os.symlink(RUNNERS, root / "node_modules")
    for f in range(FILES):
        body = "".join(f"it('t {f} {i}', () => expect({i} + 1).toBe({i + 1}))\n" for i in range(PER_FILE))
        (root / f"big_{f}.test.js").write_text("import { it, expect } from 'vitest'\n" + body)
    return [str(root / "node_modules" / ".bin" / "vitest"), "run"]


def timed(argv: list[str], cwd: Path, env: dict[str, str], expect: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree: user + system of every child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise SystemExit(f"{argv[:3]} exited {done.returncode}, expected {expect}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", choices=("pytest", "vitest"))
    ap.add_argument("--sandbox", default="full-access")
    args = ap.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(CI="1", NO_COLOR="1")
    for var in ("CLAUDECODE", "AI_AGENT", "CURSOR_AGENT", "GITHUB_ACTIONS", "FORCE_COLOR"):
        env.pop(var, None)
    # Measure an ordinary installation: bytecode is cached after the warm-up run, as it is for
    # anyone who runs greenloop twice (some sandboxes set PYTHONDONTWRITEBYTECODE for everything).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    suites = {"pytest": pytest_suite, "vitest": vitest_suite}
    if args.only:
        suites = {args.only: suites[args.only]}
    if "vitest" in suites and not (RUNNERS / ".bin" / "vitest").exists():
        print("vitest is not installed in tests/runners (npm ci there); skipping it")
        suites.pop("vitest")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        for name, build in suites.items():
            ws = Path(tmp) / name
            bare = build(ws)
            ours = [sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", args.sandbox]
            timed(bare, ws, env, 0)  # warm caches (filesystem, vitest's transform cache) for both
            timed(ours, ws, env, 0)
            bare_t: list[tuple[float, float]] = []
            ours_t: list[tuple[float, float]] = []
            for i in range(args.reps):
                pair = [(bare, bare_t), (ours, ours_t)]
                for argv, into in pair if i % 2 == 0 else reversed(pair):
                    into.append(timed(argv, ws, env, 0))
            b = statistics.median(t for t, _ in bare_t)
            o = statistics.median(t for t, _ in ours_t)
            bc = statistics.median(c for _, c in bare_t)
            oc = statistics.median(c for _, c in ours_t)
            worst = max(worst, o / b)
            print(
                f"{name:7s} 2,000 tests  bare {b:6.3f}s  greenloop run {o:6.3f}s  ratio {o / b:5.3f}  "
                f"(median of {args.reps}, sandbox {args.sandbox}; CPU bare {bc:.3f}s, "
                f"greenloop {oc:.3f}s, ratio {oc / bc:5.3f})"
            )
    # Context: greenloop is a second Python process beside the runner; its interpreter's own
    # start-up (site, .pth hooks) is a floor no code in greenloop can lower.
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        starts = [timed([sys.executable, "-c", "pass"], Path(tmp), env, 0)[0] for _ in range(5)]
    print(
        f"context: `python -c pass` takes {statistics.median(starts):.3f}s here "
        "(part of greenloop's side, not the runner's)"
    )
    print(f"worst ratio {worst:.3f} (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
