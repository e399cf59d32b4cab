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

    python bench/run_overhead.py [--reps 7] [--only pytest|vitest] [--sandbox MODE] [--warm]
"""

from __future__ import annotations

import sys
from pathlib import Path

from timing import FILES, PER_FILE, RUNNERS, SuiteBuilder, bench_env, js_workspace, parser, run_suites


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


def main() -> int:
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
