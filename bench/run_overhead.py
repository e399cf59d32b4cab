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

`--warm` also times `greenloop.api.test_run` in an already-running process (the MCP server's
way), where the interpreter's start and greenloop's imports are paid once.

`--fixed` measures instead the fixed cost of a run, on a 10-test suite per runner (pytest,
unittest, go, cargo, bun, mocha): alternating in one run, `python -I -S -c pass`, the bare
runner and `greenloop run --json`; it prints the milliseconds greenloop adds (greenloop's
median minus the bare runner's) next to `python -I -S -c pass` (target: added <= 1.5x it), and
with `--warm` the warm path's ratio to the bare runner (target <= 1.05).

    python bench/run_overhead.py [--reps 7] [--only pytest|vitest] [--sandbox MODE] [--warm]
    python bench/run_overhead.py --fixed [--reps 9] [--warm]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from timing import (
    FILES,
    PER_FILE,
    RUNNERS,
    Sample,
    SuiteBuilder,
    bench_env,
    greenloop_run,
    js_workspace,
    load_line,
    parser,
    run_suites,
    timed,
    warm_compare,
)

SMALL = 10  # tests in each --fixed suite


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
    js_workspace(root, {"type": "module", "devDependencies": {"vitest": "4.1.12"}})
    for f in range(FILES):
        body = "".join(f"it('t {f} {i}', () => expect({i} + 1).toBe({i + 1}))\n" for i in range(PER_FILE))
        (root / f"big_{f}.test.js").write_text("import { it, expect } from 'vitest'\n" + body)
    return [str(root / "node_modules" / ".bin" / "vitest"), "run"]


SUITES: dict[str, SuiteBuilder] = {"pytest": pytest_suite, "vitest": vitest_suite}


def small_pytest(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "test_small.py").write_text("".join(f"def test_{i}():\n    assert {i} + 1 == {i + 1}\n\n"
                                                for i in range(SMALL)))
    return [sys.executable, "-m", "pytest"]


def small_unittest(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    body = "".join(f"    def test_{i}(self):\n        self.assertEqual({i} + 1, {i + 1})\n\n"
                   for i in range(SMALL))
    (root / "test_small.py").write_text(f"import unittest\n\n\nclass Small(unittest.TestCase):\n{body}")
    return [sys.executable, "-m", "unittest"]


def small_go(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "go.mod").write_text("module example.com/small\n\ngo 1.19\n")
    check = "\tif {i}+1 != {j} {{\n\t\tt.Fatal()\n\t}}\n"
    body = "".join(f"func TestSmall{i}(t *testing.T) {{\n" + check.format(i=i, j=i + 1) + "}\n\n"
                   for i in range(SMALL))
    (root / "small_test.go").write_text(f'package small\n\nimport "testing"\n\n{body}')
    return ["go", "test", "-count=1", "./..."]  # (-count=1: both sides run the tests, not Go's cache)


def small_cargo(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "Cargo.toml").write_text('[package]\nname = "small"\nversion = "0.1.0"\nedition = "2021"\n')
    (root / "src").mkdir()
    tests = "".join(f"    #[test]\n    fn t_{i}() {{\n        assert_eq!({i} + 1, {i + 1});\n    }}\n"
                    for i in range(SMALL))
    (root / "src" / "lib.rs").write_text(f"#[cfg(test)]\nmod tests {{\n{tests}}}\n")
    return ["cargo", "test"]


def small_bun(root: Path) -> list[str]:
    js_workspace(root, {"scripts": {"test": "bun test"}})
    (root / "small.test.js").write_text("import { test, expect } from 'bun:test'\n" + "".join(
        f"test('t {i}', () => expect({i} + 1).toBe({i + 1}))\n" for i in range(SMALL)))
    return [str(root / "node_modules" / ".bin" / "bun"), "test"]


def small_mocha(root: Path) -> list[str]:
    js_workspace(root, {"scripts": {"test": "mocha"}})
    (root / "test").mkdir()
    (root / "test" / "small.js").write_text("const assert = require('assert')\n" + "".join(
        f"it('t {i}', () => assert.strictEqual({i} + 1, {i + 1}))\n" for i in range(SMALL)))
    return [str(root / "node_modules" / ".bin" / "mocha")]


SMALL_SUITES: dict[str, SuiteBuilder] = {"pytest": small_pytest, "unittest": small_unittest, "go": small_go,
                                         "cargo": small_cargo, "bun": small_bun, "mocha": small_mocha}


def fixed_cost(reps: int, sandbox: str, warm: bool) -> int:
    """The --fixed table (see the module docstring); 1 when a target is missed."""
    env = bench_env(GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", CARGO_NET_OFFLINE="true",
                    CARGO_TERM_COLOR="never")
    print(load_line())
    missed = 0
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-fixed-") as tmp:
        for name, build in SMALL_SUITES.items():
            if name in ("go", "cargo") and shutil.which(name) is None:
                print(f"{name:8} not installed; skipped")
                continue
            ws = Path(tmp) / name
            bare = build(ws)
            if not Path(bare[0]).exists() and shutil.which(bare[0]) is None:
                print(f"{name:8} {bare[0]} is not installed (npm ci in tests/runners); skipped")
                continue
            sides = {"pass": [sys.executable, "-I", "-S", "-c", "pass"], "bare": bare,
                     "greenloop": greenloop_run(ws, sandbox)}
            for argv in sides.values():  # warm: build the test binary, caches, bytecode
                timed(argv, ws, env)
            times: dict[str, list[Sample]] = {k: [] for k in sides}
            for i in range(reps):
                order = list(sides)[i % 3:] + list(sides)[:i % 3]
                for key in order:
                    times[key].append(timed(sides[key], ws, env))
            med = {k: statistics.median(s.wall for s in v) * 1000 for k, v in times.items()}
            added = med["greenloop"] - med["bare"]
            ratio = added / med["pass"]
            missed += ratio > 1.5
            line = (f"{name:8} {SMALL} tests  python -I -S -c pass {med['pass']:6.1f} ms  "
                    f"bare {med['bare']:7.1f} ms  greenloop {med['greenloop']:7.1f} ms  "
                    f"added {added:6.1f} ms = {ratio:4.1f}x pass (target <= 1.5)")
            if warm:
                c = warm_compare(bare, ws, env, reps, sandbox)
                missed += c.ratio > 1.05
                line += (f"  warm api.test_run {c.ours.wall * 1000:7.1f} ms = {c.ratio:5.3f}x bare "
                         "(target <= 1.05)")
            print(line + f"  (medians of {reps})", flush=True)
    return 1 if missed else 0


def main() -> int:
    if "--fixed" in sys.argv:
        sys.argv.remove("--fixed")
        args = parser(__doc__, 9, SMALL_SUITES).parse_args()
        return fixed_cost(args.reps, args.sandbox, args.warm)
    args = parser(__doc__, 7, SUITES).parse_args()
    suites = dict(SUITES) if not args.only else {args.only: SUITES[args.only]}
    if "vitest" in suites and not (RUNNERS / ".bin" / "vitest").exists():
        print("vitest is not installed in tests/runners (npm ci there); skipping it")
        suites.pop("vitest")
    worst = run_suites(suites, args, bench_env())
    print(f"worst ratio {worst:.3f} (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
