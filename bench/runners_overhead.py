"""Wall time of `greenloop run` against the bare runner, on 2,000-test go and cargo suites.

Builds a 2,000-test Go module (20 files of 100 tests, one package) and a 2,000-test crate
(20 modules of 100 tests), standard library only, in a temporary folder; then times,
alternately in the same run, the bare runner as a person types it (`go test ./...`,
`cargo test`) and `greenloop run --json` on the same workspace (which adds `-json` /
`--no-fail-fast`, parses the output and stores the run). Both sides share the toolchain's
caches, warmed once before timing. Prints the median wall time and CPU time of each side and
their ratios, like bench/run_overhead.py (`--sandbox full-access` by default: greenloop's own
overhead; pass `--sandbox workspace-write` to include bubblewrap).

`--warm` also times `greenloop.api.test_run` in an already-running process (the MCP server's
way), and the runner run as greenloop plans it (its machine report) without greenloop
(`runner+report`): the share of the overhead that is the runner's own reporting.

`--real` times instead one real open-source project per runner, as bench/affected.py gets
them (go: google/uuid, cargo: servo/rust-fnv, mocha: expressjs/express, bun: elysiajs/elysia,
from their snapshots (`--mirrors DIR`); unittest: simplejson from PyPI): the bare runner as the
project's own test script runs it, against `greenloop run --json`, alternating, medians.

    python bench/runners_overhead.py [--reps 5] [--only go|cargo] [--sandbox MODE] [--warm]
    python bench/runners_overhead.py --real [--reps 5] [--mirrors DIR] [--work DIR]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from timing import FILES, PER_FILE, SuiteBuilder, bench_env, parser, run_suites


def go_suite(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "go.mod").write_text("module example.com/big\n\ngo 1.19\n")
    (root / "big").mkdir()
    (root / "big" / "big.go").write_text("package big\n\nfunc Inc(i int) int { return i + 1 }\n")
    for f in range(FILES):
        check = '\tif Inc({i}) != {j} {{\n\t\tt.Fatal("no")\n\t}}\n'
        body = "".join(
            f"func TestBig{f}_{i}(t *testing.T) {{\n" + check.format(i=i, j=i + 1) + "}\n\n"
            for i in range(PER_FILE)
        )
        (root / "big" / f"big{f}_test.go").write_text(f'package big\n\nimport "testing"\n\n{body}')
    # -count=1: Go would otherwise replay a cached result (on both sides) instead of running
    return ["go", "test", "-count=1", "./..."]


def cargo_suite(root: Path) -> list[str]:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "Cargo.toml").write_text('[package]\nname = "big"\nversion = "0.1.0"\nedition = "2021"\n')
    lib = "pub fn inc(i: i32) -> i32 {\n    i + 1\n}\n"
    for f in range(FILES):
        tests = "".join(
            f"    #[test]\n    fn t_{i}() {{\n        assert_eq!(super::inc({i}), {i + 1});\n    }}\n"
            for i in range(PER_FILE)
        )
        lib += f"\n#[cfg(test)]\nmod m{f} {{\n{tests}}}\n"
    (root / "src").mkdir()
    (root / "src" / "lib.rs").write_text(lib)
    return ["cargo", "test"]


SUITES: dict[str, SuiteBuilder] = {"go": go_suite, "cargo": cargo_suite}


# (project, the bare command as its test script runs the runner)
REAL = {
    "go": ("git:google/uuid@2d3c2a9cc518326daf99a383f07c4d3c44317e4d", ["go", "test", "-count=1", "./..."]),
    "cargo": ("git:servo/rust-fnv@4e55052a343a4372c191141f29a17ab829cf1dbc", ["cargo", "test"]),
    "unittest": ("pypi:simplejson==3.19.3", [sys.executable, "-m", "unittest"]),
    "mocha": ("git:expressjs/express@a3714473feb3d2908add734d340e7755fd85e0a3",
              ["node_modules/.bin/mocha", "--require", "test/support/env", "--reporter", "spec",
               "--check-leaks", "test/", "test/acceptance/"]),
    "bun": ("git:elysiajs/elysia@8358ff9efbcedf9534995f5977f26b9ceab59329",
            ["node_modules/.bin/bun", "test"]),
}


def real_projects(reps: int, sandbox: str, mirrors: Path | None, work: Path) -> int:
    """The --real table: each runner's real project, bare against greenloop run."""
    import affected
    from timing import cli_compare, greenloop_run, load_line

    env = bench_env(GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", CARGO_NET_OFFLINE="true",
                    CARGO_TERM_COLOR="never")
    print(load_line())
    for runner, (source, bare) in REAL.items():
        name = source.split(":", 1)[1].split("@")[0].split("==")[0].rsplit("/", 1)[-1]
        npm_own = runner in ("mocha", "bun")
        extra = ("bun@1",) if runner == "bun" else ()
        project = affected.Project(name, source, npm_own=npm_own, npm=extra)
        try:
            ws = affected.prepare(project, work, mirrors, {})
        except affected.BenchError as e:
            print(f"{runner:8} {name}: {e}")
            continue
        if runner in ("go", "cargo") and shutil.which(runner) is None:
            print(f"{runner:8} {name}: {runner} is not installed; skipped")
            continue
        ours = greenloop_run(ws, sandbox, "--framework", runner)
        try:
            c = cli_compare(bare, ours, ws, env, reps)
        except SystemExit as e:  # a side that does not exit 0 (the project's suite is red here)
            print(f"{runner:8} {name}: {e}")
            continue
        print(f"{runner:8} {name:12} bare {c.bare.wall:6.3f}s  greenloop run {c.ours.wall:6.3f}s  "
              f"ratio {c.ratio:5.3f}  (+{c.ours.wall - c.bare.wall:.3f}s; CPU ratio {c.cpu_ratio:5.3f}; "
              f"median of {reps})", flush=True)
    return 0


def main() -> int:
    if "--real" in sys.argv:
        import argparse

        ap = argparse.ArgumentParser(description="real projects, bare runner against greenloop run")
        ap.add_argument("--real", action="store_true")
        ap.add_argument("--reps", type=int, default=5)
        ap.add_argument("--sandbox", default="full-access")
        ap.add_argument("--mirrors", type=Path)
        ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "greenloop-bench" / "runners")
        real = ap.parse_args()
        return real_projects(real.reps, real.sandbox, real.mirrors, real.work.resolve())
    args = parser(__doc__, 5, SUITES).parse_args()
    env = bench_env(GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local",
                    CARGO_NET_OFFLINE="true", CARGO_TERM_COLOR="never")
    suites = dict(SUITES) if not args.only else {args.only: SUITES[args.only]}
    for name in list(suites):
        if shutil.which(name) is None:
            print(f"{name} is not installed; skipping it")
            suites.pop(name)
    # The first (warm-up) run of each side builds the test binary; both then run the cached one.
    # -count=1: Go would otherwise replay a cached result instead of running the tests.
    run_suites(suites, args, env, targets={"go": "-count=1 ./..."})
    return 0


if __name__ == "__main__":
    sys.exit(main())
