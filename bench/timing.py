"""The timing loop the overhead benches share: the bare runner against greenloop, alternately.

Each side is timed as a whole process tree: its wall time and its CPU time (user + system of
every child process, from `getrusage(RUSAGE_CHILDREN)`), which a machine busy with other work
disturbs less than wall time. Both sides are warmed once (filesystem, bytecode, the runner's
own caches) and then run in alternating order, so a load that comes and goes falls on both.

`warm_compare` measures the other way greenloop is used: `greenloop.api.test_run` called in an
already-running Python process (what the MCP server's `test_run` tool does), where the
interpreter's start and greenloop's imports are paid once, not per run. With it,
`report_compare` times the runner run exactly as greenloop plans it (its machine report) but
without greenloop: the part of the overhead that is the runner's own reporting, which no code
in greenloop's process can take back.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNNERS = REPO / "tests" / "runners" / "node_modules"
FILES, PER_FILE = 20, 100  # 2,000 tests: 20 files of 100

# Variables that would make greenloop (or a runner) behave as under an agent or in GitHub's CI.
AGENT_VARIABLES = ("CLAUDECODE", "AI_AGENT", "CURSOR_AGENT", "GITHUB_ACTIONS", "FORCE_COLOR")

SuiteBuilder = Callable[[Path], list[str]]


@dataclass(frozen=True)
class Sample:
    """One side's time: wall seconds and CPU seconds of its process tree."""

    wall: float
    cpu: float


@dataclass(frozen=True)
class Comparison:
    """The medians of both sides over `reps` alternating runs."""

    bare: Sample
    ours: Sample
    reps: int

    @property
    def ratio(self) -> float:
        return self.ours.wall / self.bare.wall

    @property
    def cpu_ratio(self) -> float:
        return self.ours.cpu / self.bare.cpu


def bench_env(**extra: str) -> dict[str, str]:
    """The environment both sides run in: greenloop from this checkout, no colour, no agent."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(CI="1", NO_COLOR="1", **extra)
    for var in AGENT_VARIABLES:
        env.pop(var, None)
    # Measure an ordinary installation: bytecode is cached after the warm-up run, as it is for
    # anyone who runs greenloop twice (some sandboxes set PYTHONDONTWRITEBYTECODE for everything).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str], expect: int = 0) -> Sample:
    """Run `argv` to its end; its wall time and the CPU time of its process tree."""
    before = _cpu(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    cpu = _cpu(resource.RUSAGE_CHILDREN) - before
    if done.returncode != expect:
        raise SystemExit(f"{argv[:4]} exited {done.returncode}, expected {expect}")
    return Sample(elapsed, cpu)


def _medians(samples: list[Sample]) -> Sample:
    return Sample(statistics.median(s.wall for s in samples), statistics.median(s.cpu for s in samples))


def alternate(bare: Callable[[], Sample], ours: Callable[[], Sample], reps: int) -> Comparison:
    """Warm each side once, then time them `reps` times each, swapping the order every rep."""
    bare()
    ours()
    bare_t: list[Sample] = []
    ours_t: list[Sample] = []
    for i in range(reps):
        pair = [(bare, bare_t), (ours, ours_t)]
        for run, into in pair if i % 2 == 0 else reversed(pair):
            into.append(run())
    return Comparison(_medians(bare_t), _medians(ours_t), reps)


def greenloop_run(ws: Path, sandbox: str, *extra: str) -> list[str]:
    """`greenloop run WS --json` as a person types it, in a fresh interpreter."""
    return [sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", sandbox, *extra]


def cli_compare(bare: list[str], ours: list[str], ws: Path, env: dict[str, str], reps: int) -> Comparison:
    """The bare runner's command against `greenloop run`'s, each a fresh process tree."""
    return alternate(lambda: timed(bare, ws, env), lambda: timed(ours, ws, env), reps)


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _in_process(call: Callable[[], object]) -> Sample:
    """Wall and CPU time of `call` in this process: its own threads and every child it waited for."""
    before = _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    call()
    elapsed = time.perf_counter() - start
    return Sample(elapsed, _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN) - before)


def warm_compare(
    bare: list[str], ws: Path, env: dict[str, str], reps: int, sandbox: str, target: str | None = None
) -> Comparison:
    """The bare runner against `greenloop.api.test_run` in this already-running process (the
    warm path of the MCP server and the Python API). Both sides are timed from this process,
    the same way: its own CPU (greenloop's threads; the fork of the bare runner) plus its
    children's."""
    sys.path.insert(0, str(REPO / "src"))
    from greenloop import api

    def ours() -> None:
        result = api.test_run(ws, sandbox=sandbox, target=target)
        if not result.ok:
            raise SystemExit(f"greenloop.api.test_run on {ws}: {result.outcome} ({result.crash_reason})")

    def bare_run() -> None:
        done = subprocess.run(bare, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0:
            raise SystemExit(f"{bare[:4]} exited {done.returncode}, expected 0")

    with _environment(env):
        return alternate(lambda: _in_process(bare_run), lambda: _in_process(ours), reps)


def planned_runner(ws: Path, report_dir: Path, target: str | None) -> tuple[list[str], dict[str, str]]:
    """The runner's command and added variables exactly as greenloop plans them (its machine
    report, progress stream and, for unittest, greenloop's result collector), for running
    without greenloop: the part of the overhead that happens inside the runner."""
    sys.path.insert(0, str(REPO / "src"))
    from greenloop.runner.plan import RunOptions, plan
    from greenloop.runner.probe import probe

    planned = plan(probe(str(ws), files=False), RunOptions(target=target), report_dir=str(report_dir),
                   default_timeout_ms=600_000)
    return list(planned.argv), dict(planned.env)


def report_compare(
    bare: list[str], ws: Path, env: dict[str, str], reps: int, target: str | None = None
) -> Comparison:
    """The bare runner against the same runner writing greenloop's machine report (no greenloop
    process): how much of greenloop's overhead is the runner's own reporting."""
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-report-") as tmp:
        argv, extra = planned_runner(ws, Path(tmp), target)
        with_report = {**env, **extra}
        return alternate(lambda: timed(bare, ws, env), lambda: timed(argv, ws, with_report), reps)


def compare_line(
    name: str, width: int, what: str, c: Comparison, sandbox: str, side: str = "greenloop"
) -> str:
    """One suite's figures: both sides' median wall and CPU time and their ratios."""
    return (
        f"{name:{width}s} 2,000 tests  bare {c.bare.wall:6.3f}s  {what} {c.ours.wall:6.3f}s  "
        f"ratio {c.ratio:5.3f}  (+{c.ours.wall - c.bare.wall:.3f}s; median of {c.reps}, sandbox {sandbox}; "
        f"CPU bare {c.bare.cpu:.3f}s, {side} {c.ours.cpu:.3f}s, ratio {c.cpu_ratio:5.3f})"
    )


def interpreter_start_line(env: dict[str, str]) -> str:
    """Context: greenloop is a second Python process beside the runner; its interpreter's own
    start-up (site, .pth hooks) is a floor no code in greenloop can lower."""
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        starts = [timed([sys.executable, "-c", "pass"], Path(tmp), env).wall for _ in range(5)]
    return (f"context: `python -c pass` takes {statistics.median(starts):.3f}s here "
            "(part of greenloop's side, not the runner's)")


def load_line() -> str:
    """How busy the machine was: its load average against its cores."""
    one, five, _ = os.getloadavg()
    return f"machine: {os.cpu_count()} cores, load average {one:.1f} (1 min), {five:.1f} (5 min)"


def js_workspace(root: Path, package: dict[str, object]) -> None:
    """A JavaScript workspace: package.json and the runners installed in tests/runners."""
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "package.json").write_text(json.dumps({"name": "b", "private": True, **package}))
    os.symlink(RUNNERS, root / "node_modules")


def parser(doc: str | None, reps: int, suites: dict[str, SuiteBuilder]) -> argparse.ArgumentParser:
    """The options every overhead bench takes."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--only", choices=tuple(suites))
    ap.add_argument("--sandbox", default="full-access")
    ap.add_argument("--warm", action="store_true",
                    help="also time greenloop.api.test_run in this already-running process")
    return ap


def run_suites(
    suites: dict[str, SuiteBuilder],
    args: argparse.Namespace,
    env: dict[str, str],
    targets: dict[str, str] | None = None,
) -> float:
    """Build each suite in a temporary folder, print its CLI comparison (and with `--warm` its
    in-process one); return the worst wall-time ratio."""
    width = max(len(name) for name in suites) + 1 if suites else 0
    worst = 0.0
    print(load_line())
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        for name, build in suites.items():
            ws = Path(tmp) / name
            bare = build(ws)
            target = (targets or {}).get(name)
            ours = greenloop_run(ws, args.sandbox, *(["--target", target] if target else []))
            cli = cli_compare(bare, ours, ws, env, args.reps)
            worst = max(worst, cli.ratio)
            print(compare_line(name, width, "greenloop run", cli, args.sandbox), flush=True)
            if args.warm:
                warm = warm_compare(bare, ws, env, args.reps, args.sandbox, target)
                print(compare_line(name, width, "api.test_run ", warm, args.sandbox), flush=True)
                inside = report_compare(bare, ws, env, args.reps, target)
                print(compare_line(name, width, "runner+report", inside, "none", "with report"), flush=True)
    print(interpreter_start_line(env))
    print(load_line())
    return worst
