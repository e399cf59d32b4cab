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

`--warm` also times `greenloop.api.test_run` in an already-running process (the MCP server's
way), and the runner run as greenloop plans it (its machine report) without greenloop
(`runner+report`): the share of the overhead that is the runner's own reporting.

    python bench/runners_overhead_js.py [--reps 5] [--only mocha|unittest|bun] [--sandbox MODE] [--warm]
"""

from __future__ import annotations

import sys
from pathlib import Path

from timing import FILES, PER_FILE, RUNNERS, SuiteBuilder, bench_env, js_workspace, parser, run_suites


def mocha_suite(root: Path) -> list[str]:
    js_workspace(root, {"devDependencies": {"mocha": "12.0.3"}})
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
    js_workspace(root, {"scripts": {"test": "bun test"}})
    for f in range(FILES):
        body = "".join(f"  it('t {f} {i}', () => expect({i} + 1).toBe({i + 1}))\n" for i in range(PER_FILE))
        head = "import { describe, it, expect } from 'bun:test'\n"
        text = f"{head}describe('file {f}', () => {{\n{body}}})\n"
        (root / f"big_{f}.test.ts").write_text(text)
    return [str(root / "node_modules" / ".bin" / "bun"), "test"]


SUITES: dict[str, SuiteBuilder] = {
    "mocha": mocha_suite, "unittest": unittest_suite, "bun": bun_suite,
}


def main() -> int:
    args = parser(__doc__, 5, SUITES).parse_args()
    suites = dict(SUITES) if not args.only else {args.only: SUITES[args.only]}
    for js in ("mocha", "bun"):
        if js in suites and not (RUNNERS / ".bin" / js).exists():
            print(f"{js} is not installed in tests/runners (npm ci there); skipping it")
            suites.pop(js)
    run_suites(suites, args, bench_env())
    return 0


if __name__ == "__main__":
    sys.exit(main())
