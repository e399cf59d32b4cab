"""What the sandbox costs: a 2,000-test pytest suite under workspace-write vs full-access.

Every side goes through the same path a run takes (launcher.launch for the argv and the child
environment, proc.run_to_completion to run it), alternating sandboxed and unsandboxed runs
so that machine noise falls on all, after one warm-up of each. The sandboxed sides are each
enforcer this machine offers: bubblewrap, and Landlock (bubblewrap taken away through
$GREENLOOP_BWRAP). Prints each side's median wall time and its ratio to full-access
(target: sandboxed / unsandboxed <= 1.05).

With --api the two sides are whole `greenloop.api.test_run` calls instead (planning, parsing
the JUnit report and storing the result included).

Usage: python bench/sandbox_cost.py [--rounds N] [--tests N] [--api]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from greenloop.model import Plan
from greenloop.system import enforcers, landlock, launcher, proc, sandbox

# side name -> (mode, environment additions that pick the enforcer)
SIDES: dict[str, tuple[str, dict[str, str]]] = {
    "full-access": ("full-access", {}),
    "bubblewrap": ("workspace-write", {}),
    "landlock": ("workspace-write", {enforcers.BWRAP_ENV_VAR: "/nonexistent/bwrap"}),
}

TARGET = 1.05


def make_suite(root: Path, tests: int, per_file: int = 100) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    for f in range((tests + per_file - 1) // per_file):
        n = min(per_file, tests - f * per_file)
        body = "".join(
            f"def test_case_{f}_{i}():\n    assert sum(range({i})) == {i * (i - 1) // 2}\n\n"
            for i in range(n)
        )
        (root / f"test_part_{f:03d}.py").write_text(body)


def run_once(ws: Path, side: str, logs: Path) -> float:
    mode, extra = SIDES[side]
    plan = Plan(
        framework="pytest",
        argv=(sys.executable, "-m", "pytest", "-q", "-p", "no:randomly"),
        cwd=str(ws),
        timeout_ms=600_000,
    )
    start = time.perf_counter()
    launch = launcher.launch(plan, sandbox.resolve(ws, explicit=mode), base_env={**os.environ, **extra})
    try:
        raw = proc.run_to_completion(
            list(launch.argv),
            cwd=str(ws),
            env=launch.env_dict,
            timeout_s=600,
            stdout_path=str(logs / "out.txt"),
            stderr_path=str(logs / "err.txt"),
            shell=launch.shell,
            before_exec=launch.before_exec,
        )
    finally:
        launch.close()
    took = time.perf_counter() - start
    if raw.exit_code != 0:
        tail = (logs / "out.txt").read_text(errors="replace")[-2000:]
        raise SystemExit(f"the {mode} run failed (exit {raw.exit_code}):\n{tail}")
    return took


def api_once(ws: Path, side: str, logs: Path) -> float:
    from greenloop import api

    mode, extra = SIDES[side]
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        start = time.perf_counter()
        result = api.test_run(ws, framework="pytest", sandbox=mode)
        took = time.perf_counter() - start
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if not result.ok:
        raise SystemExit(f"the {mode} run was {result.outcome}: {result.crash_reason or result.summary}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7, help="measured runs per side (default 7)")
    ap.add_argument("--tests", type=int, default=2000, help="tests in the suite (default 2000)")
    ap.add_argument("--api", action="store_true", help="time whole api.test_run calls")
    args = ap.parse_args()

    status = enforcers.probe_bwrap()
    ll = landlock.probe()
    sides = ["full-access"]
    for name, usable, why in (
        ("bubblewrap", status.available, status.reason),
        ("landlock", ll.available, ll.reason),
    ):
        if usable:
            sides.append(name)
        else:
            print(f"{name} is not usable here ({why}); its side is left out", file=sys.stderr)
    if len(sides) == 1:
        return 3
    once = api_once if args.api else run_once
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-sandbox-") as tmp:
        ws, logs = Path(tmp) / "suite", Path(tmp) / "logs"
        logs.mkdir()
        make_suite(ws, args.tests)
        times: dict[str, list[float]] = {side: [] for side in sides}
        for side in times:  # warm-up: imports and page cache for every side
            once(ws, side, logs)
        for r in range(args.rounds):
            order = list(times) if r % 2 == 0 else list(reversed(times))
            for side in order:
                times[side].append(once(ws, side, logs))
    plain = statistics.median(times["full-access"])
    what = "api.test_run" if args.api else "launch + proc.run_to_completion"
    print(f"suite: {args.tests} pytest tests, {args.rounds} alternating rounds per side ({what})")
    if status.available:
        print(f"bubblewrap: {status.enforced_by} at {status.path}")
    if ll.available:
        print(f"landlock: {ll.enforced_by}")
    for side in sides:
        print(
            f"{side:<12} median {statistics.median(times[side]) * 1000:8.1f} ms   runs: {_fmt(times[side])}"
        )
    for side in sides[1:]:
        ratio = statistics.median(times[side]) / plain
        verdict = "ok" if ratio <= TARGET else "OVER TARGET"
        print(f"ratio {side}/full-access = {ratio:.3f} (target <= {TARGET}): {verdict}")
    return 0


def _fmt(values: list[float]) -> str:
    return " ".join(f"{v * 1000:.0f}" for v in values)


if __name__ == "__main__":
    raise SystemExit(main())
