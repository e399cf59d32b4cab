"""Wall time of `greenloop run` against the bare runner for mocha, unittest and bun, on
2,000-test suites.

Builds a 2,000-test suite of each in a temporary folder (20 files of 100 tests), then times,
alternately in the same run, the bare runner as a person types it (`mocha`, `python -m
unittest`, `bun test`) and `greenloop run --json` on the same workspace (which adds the
runner's machine report: greenloop's mocha reporter, its unittest result collector, bun's
JUnit reporter; parses it and stores the run). Prints the median wall time of each side, their
ratio, and the median CPU time of each side's process tree, which a machine busy with other
work disturbs less than wall time.

`greenloop run` is measured with `--sandbox full-access` so the figure is greenloop's own
overhead (bench/sandbox_cost.py measures the sandbox); pass `--sandbox workspace-write` to
measure both together.

    python bench/runners_overhead_js.py [--reps 5] [--only mocha|unittest|bun] [--sandbox MODE]
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
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNNERS = REPO / "tests" / "runners" / "node_modules"
FILES, PER_FILE = 20, 100


def _js_root(root: Path, pkg: dict[str, object]) -> None:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "package.json").write_text(json.dumps({"name": "b", "private": True, **pkg}))
    os.symlink(RUNNERS, root / "node_modules")


def mocha_suite(root: Path) -> list[str]:
    _js_root(root, {"devDependencies": {"mocha": "12.0.3"}})
    (root / "test").mkdir()
    for f in range(FILES):
        body = "".join(
            f"  it('t {f} {i}', () => assert.strictEqual({i} + 1, {i + 1}))\n" for i in range(PER_FILE)
        )
        text = f"const assert = require('node:assert')\ndescribe('file {f}', () => {{\n{body}}})\n"
        (root / "test" / f"big_{f}.spec.js").write_text(text)
    return [str(root / "node_modules" / ".bin" / "mocha")]


def unittest_suite(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    for f in range(FILES):
        body = "".join(
            f"    def test_{i}(self):\n        self.assertEqual({i} + 1, {i + 1})\n\n"
            for i in range(PER_FILE)
        )
        head = f"import unittest\n\n\nclass TestBig{f}(unittest.TestCase):\n"
        (root / f"test_big_{f}.py").write_text(head + body)
    return [sys.executable, "-m", "unittest"]


def bun_suite(root: Path) -> list[str]:
    _js_root(root, {"scripts": {"test": "bun test"}})
    for f in range(FILES):
        body = "".join(f"  it('t {f} {i}', () => expect({i} + 1).toBe({i + 1}))\n" for i in range(PER_FILE))
        head = "import { describe, it, expect } from 'bun:test'\n"
        text = f"{head}describe('file {f}', () => {{\n{body}}})\n"
        (root / f"big_{f}.test.ts").write_text(text)
    return [str(root / "node_modules" / ".bin" / "bun"), "test"]


SUITES: dict[str, Callable[[Path], list[str]]] = {
    "mocha": mocha_suite, "unittest": unittest_suite, "bun": bun_suite,
}


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
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", choices=tuple(SUITES))
    ap.add_argument("--sandbox", default="full-access")
    args = ap.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(CI="1", NO_COLOR="1")
    for var in ("CLAUDECODE", "AI_AGENT", "CURSOR_AGENT", "GITHUB_ACTIONS", "FORCE_COLOR"):
        env.pop(var, None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an ordinary installation caches bytecode
    suites = dict(SUITES) if not args.only else {args.only: SUITES[args.only]}
    for js in ("mocha", "bun"):
        if js in suites and not (RUNNERS / ".bin" / js).exists():
            print(f"{js} is not installed in tests/runners (npm ci there); skipping it")
            suites.pop(js)
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        for name, build in suites.items():
            ws = Path(tmp) / name
            bare = build(ws)
            ours = [sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", args.sandbox]
            timed(bare, ws, env, 0)  # warm caches (filesystem, bytecode, bun's transpiler) for both
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
            print(
                f"{name:8s} 2,000 tests  bare {b:6.3f}s  greenloop run {o:6.3f}s  ratio {o / b:5.3f}  "
                f"(+{o - b:.3f}s; median of {args.reps}, sandbox {args.sandbox}; CPU bare {bc:.3f}s, "
                f"greenloop {oc:.3f}s, ratio {oc / bc:5.3f})"
            )
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        starts = [timed([sys.executable, "-c", "pass"], Path(tmp), env, 0)[0] for _ in range(5)]
    print(f"context: `python -c pass` takes {statistics.median(starts):.3f}s here "
          "(part of greenloop's side, not the runner's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
