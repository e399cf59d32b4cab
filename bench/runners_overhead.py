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

    python bench/runners_overhead.py [--reps 5] [--only go|cargo] [--sandbox MODE] [--warm]
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


def main() -> int:
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
