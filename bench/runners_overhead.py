"""Wall time of `greenloop run` against the bare runner, on 2,000-test go and cargo suites.

Builds a 2,000-test Go module (20 files of 100 tests, one package) and a 2,000-test crate
(20 modules of 100 tests), standard library only, in a temporary folder; then times,
alternately in the same run, the bare runner as a person types it (`go test ./...`,
`cargo test`) and `greenloop run --json` on the same workspace (which adds `-json` /
`--no-fail-fast`, parses the output and stores the run). Both sides share the toolchain's
caches, warmed once before timing. Prints the median wall time and CPU time of each side and
their ratios, like bench/run_overhead.py (`--sandbox full-access` by default: greenloop's own
overhead; pass `--sandbox workspace-write` to include bubblewrap).

    python bench/runners_overhead.py [--reps 5] [--only go|cargo] [--sandbox MODE]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES, PER_FILE = 20, 100


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


def timed(argv: list[str], cwd: Path, env: dict[str, str], expect: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process tree: user + system of every child)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != expect:
        raise SystemExit(f"{argv[:4]} exited {done.returncode}, expected {expect}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--only", choices=("go", "cargo"))
    ap.add_argument("--sandbox", default="full-access")
    args = ap.parse_args()

    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(CI="1", NO_COLOR="1", GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local")
    env.update(CARGO_NET_OFFLINE="true", CARGO_TERM_COLOR="never")
    for var in ("CLAUDECODE", "AI_AGENT", "CURSOR_AGENT", "GITHUB_ACTIONS", "FORCE_COLOR"):
        env.pop(var, None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    suites = {"go": go_suite, "cargo": cargo_suite}
    if args.only:
        suites = {args.only: suites[args.only]}
    for name in list(suites):
        if shutil.which(name) is None:
            print(f"{name} is not installed; skipping it")
            suites.pop(name)
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        for name, build in suites.items():
            ws = Path(tmp) / name
            bare = build(ws)
            ours = [sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", args.sandbox]
            if name == "go":
                ours += ["--target", "-count=1 ./..."]
            timed(bare, ws, env, 0)  # build once: both sides then run the cached test binary
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
                f"{name:6s} 2,000 tests  bare {b:6.3f}s  greenloop run {o:6.3f}s  ratio {o / b:5.3f}  "
                f"(+{o - b:.3f}s) "
                f"(median of {args.reps}, sandbox {args.sandbox}; CPU bare {bc:.3f}s, "
                f"greenloop {oc:.3f}s, ratio {oc / bc:5.3f})"
            )
    # Context: greenloop is a second Python process beside the runner; its interpreter's own
    # start-up is a floor no code in greenloop can lower, and these suites run in well under a second.
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        starts = [timed([sys.executable, "-c", "pass"], Path(tmp), env, 0)[0] for _ in range(5)]
    print(f"context: `python -c pass` takes {statistics.median(starts):.3f}s here (part of greenloop's side)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
