"""The Python API: what the CLI and the MCP server both call.

    test_probe(workspace) -> Detection
    test_run(workspace, *, framework, target, last_failed, command, timeout_ms, session_id,
             sandbox, on_progress, cancel) -> RunResult
    merge_results(paths, *, workspace, session_id) -> RunResult   N shards' results as one run
    bounded(result, *, max_failures=5) -> dict        what a model reads
    latest_run(workspace) -> RunResult | None          the run store
    load_run(workspace, run_id) -> RunResult
    list_runs(workspace) -> list[str]

Arguments are validated before anything is started or written; bad input raises UsageError
(exit 2) naming the argument and the fix. Each run is stored under
`.greenloop/runs/<run_id>/` (result.json, stdout.txt, stderr.txt, the runner's report) and,
in a DevLoop unit folder, also under `units/<unit>/runs/<run_id>/` as the seeds lay it out.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greenloop import layout
from greenloop.errors import UsageError
from greenloop.model import FRAMEWORKS, Detection, Progress, RetryInfo, RunResult, ShardInfo

if TYPE_CHECKING:
    from greenloop.closure.gate import ClosureCheck

__all__ = [
    "RESULT_FILE",
    "bounded",
    "dashboard_link",
    "flaky_tests",
    "latest_run",
    "list_runs",
    "load_run",
    "merge_results",
    "prune_runs",
    "test_closure_check",
    "test_probe",
    "test_run",
]

RESULT_FILE = "result.json"
FIELD_CHARS = 4000  # per text field of a failure in the bounded view
MAX_NAMES = 50  # failures listed by name in the bounded view
KEEP_RUNS = 100  # stored runs kept per workspace (with their full output)


def _workspace(workspace: str | os.PathLike[str]) -> Path:
    if not isinstance(workspace, (str, os.PathLike)) or not os.fspath(workspace):
        raise UsageError("workspace must be a folder path: pass the folder that holds the tests")
    path = Path(workspace).expanduser()
    if not path.exists():
        raise UsageError(f"workspace {os.fspath(workspace)!r} does not exist: pass an existing folder")
    if not path.is_dir():
        raise UsageError(f"workspace {os.fspath(workspace)!r} is not a folder: pass the folder of the tests")
    return path.resolve()


def test_probe(workspace: str | os.PathLike[str]) -> Detection:
    """Detect the workspace's test framework without running anything."""
    from greenloop.runner.probe import probe

    return probe(str(_workspace(workspace)))


def _check_args(
    framework: object,
    target: object,
    last_failed: object,
    command: object,
    timeout_ms: object,
    session_id: object,
    sandbox: object,
) -> str | None:
    if framework is not None and framework not in FRAMEWORKS:
        raise UsageError(
            f"unknown framework {framework!r} (framework / --framework): use one of {', '.join(FRAMEWORKS)}"
        )
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise UsageError("target must be a non-empty string of space-separated paths or node ids")
    if not isinstance(last_failed, bool):
        raise UsageError(f"last_failed must be true or false, got {last_failed!r}")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise UsageError("command must be a non-empty shell command (or left out to use the detected runner)")
    bad_int = isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int)
    if timeout_ms is not None and (bad_int or timeout_ms < 1):  # type: ignore[operator]
        raise UsageError(f"timeout_ms must be whole milliseconds >= 1 (e.g. 60000), got {timeout_ms!r}")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        raise UsageError("session_id must be a non-empty string (or left out)")
    if sandbox is None or sandbox == "":
        return None
    from greenloop.system.sandbox import parse_mode

    return str(parse_mode(sandbox, field="sandbox (--sandbox)"))


def test_run(
    workspace: str | os.PathLike[str],
    *,
    framework: str | None = None,
    target: str | None = None,
    last_failed: bool = False,
    command: str | None = None,
    timeout_ms: int | None = None,
    session_id: str | None = None,
    sandbox: str | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    mode: str = "test",
    shard: str | ShardInfo | None = None,
    rerun_failures: int = 0,
    resume_token: str | None = None,
) -> RunResult:
    """Plan, execute and store one run; return its final RunResult (see the module docstring).

    `mode`: "test" runs as asked; "retry" reruns after the coder changed code: the previous
    run's failures first (in the runner's own dialect), then, if they pass, the whole suite,
    as one result whose `retry` says which failures were fixed, which remain and which are new;
    "resume" continues the run `resume_token` names (greenloop.runner.recover).

    `shard` ("I/N"): run only shard I of N in the runner's own dialect (docs/scale.md); the
    result's `selection` is "shard" and `greenloop merge` folds the N results into one.

    `rerun_failures` (K): rerun the failing tests up to K times in the runner's own dialect; a
    test that fails, then passes is `flaky` (docs/scale.md, "Flaky tests")."""
    if mode not in RUN_MODES:
        raise UsageError(f"mode must be one of {', '.join(RUN_MODES)}, got {mode!r}")
    if isinstance(rerun_failures, bool) or not isinstance(rerun_failures, int) or rerun_failures < 0:
        raise UsageError(f"rerun_failures (--rerun-failures) must be a whole number >= 0 (e.g. 2), "
                         f"got {rerun_failures!r}")
    the_shard = _check_shard(shard, target=target, last_failed=last_failed, command=command, mode=mode)
    if (mode == "resume") != (resume_token is not None):
        raise UsageError("mode resume needs resume_token (a result's resume_token), and resume_token "
                         "goes only with mode resume")
    if mode == "resume":
        return _resume(workspace, str(resume_token), on_progress=on_progress, cancel=cancel)
    if mode == "retry":
        if target is not None or last_failed or command is not None:
            raise UsageError("mode retry chooses the tests itself: drop target, last_failed and command")
        return _retry(workspace, framework=framework, timeout_ms=timeout_ms, session_id=session_id,
                      sandbox=sandbox, on_progress=on_progress, cancel=cancel,
                      **({"rerun_failures": rerun_failures} if rerun_failures else {}))
    from greenloop import config as config_mod
    from greenloop.runner.plan import RunOptions, plan
    from greenloop.runner.probe import probe
    from greenloop.runner.run import execute
    from greenloop.system.fingerprint import Pending

    ws = _workspace(workspace)
    sandbox_mode = _check_args(framework, target, last_failed, command, timeout_ms, session_id, sandbox)
    if session_id is None:
        # The caller's session, resolved before the run so that its sandbox mode applies and
        # the run is recorded under it (greenloop.closure.session: variables, then the process tree).
        from greenloop.closure import session as session_mod

        session_id = session_mod.resolve(workspace=ws)
    cfg = config_mod.load(ws)
    # The sandbox policy: this call's mode > the session's latest mode event > config default.
    from greenloop.system.sandbox import resolve_for

    policy = resolve_for(ws, explicit=sandbox_mode, session_id=session_id, default=cfg.sandbox)
    detection = probe(str(ws), files=False)  # plan needs no test file list
    if detection.root != str(ws) and framework is not None:
        detection = Detection(framework=None, root=str(ws), package_manager=detection.package_manager)
    run_id = layout.new_run_id()
    run_dir = layout.run_dir(detection.root, run_id)
    previous: RunResult | None = None
    whose: str | None = None
    if last_failed and command is None:
        from greenloop.closure import session as session_mod

        previous, whose = _previous_run(detection.root, ws, session_id or session_mod.resolve())
    the_plan = plan(
        detection,
        RunOptions(framework, target, last_failed, command, timeout_ms, the_shard),
        report_dir=str(run_dir),
        default_timeout_ms=cfg.default_timeout_ms,
        previous=previous,
    )
    if whose is not None:
        the_plan = the_plan._replace(notes=(*the_plan.notes, whose))
    # While the suite runs: import what the after-steps need and prune old runs (keeping room
    # for this one). Once it has stopped: start the working-tree fingerprint, which then
    # overlaps the parse, the bug bridge and opening the state database.
    dashboard: list[tuple[str, Any]] = []

    def while_running() -> None:
        from greenloop.runner import recover

        recover.write_run_file(
            run_dir, plan=the_plan, session_id=session_id, root=detection.root,
            config_path=detection.config_path,
            options={"framework": framework, "target": target, "last_failed": last_failed,
                     "command": command, "timeout_ms": timeout_ms, "sandbox": sandbox},
        )
        _announce(str(ws), run_id, str(run_dir), the_plan.framework or None, dashboard)
        prune_runs(detection.root, keep=KEEP_RUNS, protect=run_id)

    preload = _Preload(_parser_modules(the_plan.report_format, the_plan.framework), then=while_running)
    fingerprint = Pending(str(ws))
    unit = layout.unit_of(ws)
    if unit is not None:  # a DevLoop unit: the registry says it is being tested
        _unit_status(unit, "testing", run_id, write_back=cfg.write_unit_status)
    layout.make_state_dir(layout.state_dir(detection.root))  # planned: something will be written
    try:
        result = execute(
            the_plan,
            run_id=run_id,
            run_dir=run_dir,
            config=cfg,
            on_progress=on_progress,
            cancel=cancel,
            policy=policy,
            workspace=str(ws),
            on_start=preload.start,
            on_exit=fingerprint.start,
        )
        unit_dir = unit[0] / "units" / unit[1] / "runs" / run_id if unit else None
        if the_plan.shard is not None:
            result = _sharded(result, the_plan)
        if rerun_failures and result.outcome == "red" and not result.aborted and not the_plan.shell:
            result = _rerun(result, the_plan, detection, rerun_failures, run_dir=run_dir, config=cfg,
                            policy=policy, workspace=str(ws), cancel=cancel)
        result = _finalize(result, session_id=session_id, ref=unit_dir / RESULT_FILE if unit_dir else None,
                           root=detection.root)
        final = _after_run(str(ws), result, fingerprint=fingerprint.result)
        if unit is not None:
            status = "passed" if final.ok else "failed"
            note = _unit_status(unit, status, run_id, write_back=cfg.write_unit_status)
            if note:
                final = final._replace(notes=(*final.notes, note))
        _store(final, run_dir, unit_dir)
    finally:
        preload.join()
        fingerprint.close()
        for root, _ in dashboard:
            from greenloop.dashboard import live

            live.finished(root, run_id)
    if not preload.started:  # the runner never started (not installed, sandbox refused)
        prune_runs(detection.root, keep=KEEP_RUNS, protect=run_id)
    return final


def _rerun(result: RunResult, the_plan: Any, detection: Detection, times: int, *, run_dir: Path,
           config: Any, policy: Any, workspace: str, cancel: threading.Event | None) -> RunResult:
    """Rerun the failing tests up to `times` times, each a plan of its own narrowed to them in
    the runner's dialect (last_failed's filter: names and files), in `run_dir/rerun-<n>/`."""
    from greenloop.runner import flaky
    from greenloop.runner.plan import RunOptions, plan
    from greenloop.runner.run import execute

    still = [f for f in result.failures if f.kind == "test" and f.test]
    notes: list[str] = []
    if not still:
        notes.append("rerun_failures: no failing test to rerun (only files that failed to load or hooks)")
        return flaky.fold_reruns(result, set(), policy=config.flaky, last_exit_code=None, notes=notes)
    flaky_names: set[str] = set()
    last_exit: int | None = None
    for attempt in range(1, times + 1):
        folder = run_dir / f"rerun-{attempt}"
        previous = result._replace(failures=tuple(still))
        rerun_plan = plan(detection, RunOptions(the_plan.framework, None, True, None, the_plan.timeout_ms),
                          report_dir=str(folder), default_timeout_ms=the_plan.timeout_ms, previous=previous)
        rerun = execute(rerun_plan, run_id=f"{result.run_id}-rerun-{attempt}", run_dir=folder, config=config,
                        cancel=cancel, policy=policy, workspace=workspace)
        if rerun.outcome == "broken" or rerun.aborted:
            notes.append(f"rerun_failures: rerun {attempt} broke ({rerun.crash_reason or 'broken'}); "
                         f"stopped rerunning (output in {folder})")
            break
        passed = flaky.passed_in(rerun, (f.test for f in still))
        flaky_names |= passed
        still = [f for f in still if f.test not in passed]
        last_exit = rerun.exit_code
        notes.append(f"rerun_failures: rerun {attempt} of {times} ({rerun.run_id}): {len(passed)} passed, "
                     f"{len(still)} still failing; output in {folder}")
        if not still:
            break
    return flaky.fold_reruns(result, flaky_names, policy=config.flaky,
                             last_exit_code=last_exit if not still else result.exit_code, notes=notes)


def flaky_tests(workspace: str | os.PathLike[str], *, limit: int = 1000) -> dict[str, Any]:
    """Flaky tests from the stored history (`greenloop flaky`): tests one run failed and another
    passed with the same working-tree fingerprint, and tests a run's reruns found flaky."""
    from greenloop.closure.store import Store
    from greenloop.runner import flaky

    ws = _workspace(workspace)
    root = probe_root(ws)
    with Store(ws, warn=lambda _m: None) as st:
        records = st.runs(limit=limit)
    evidence: list[flaky.RunEvidence] = []
    unreadable = 0
    for rec in records:
        passed: tuple[str, ...] | None = None
        marked: tuple[str, ...] = ()
        for path in (layout.run_dir(root, rec.run_id) / RESULT_FILE, rec.result_ref):
            if not path:
                continue
            try:
                stored = _read_result(path)
            except _UNREADABLE:
                continue
            passed = stored.passed_tests  # evidence by name only: a run naming no test gives none
            marked = tuple(f.test for f in stored.failures if f.flaky)
            break
        else:
            unreadable += 1
        evidence.append(flaky.RunEvidence(rec.run_id, rec.at, rec.fingerprint, rec.failing, passed, marked))
    found = flaky.from_history(evidence)
    notes = []
    if unreadable:
        notes.append(f"{unreadable} run(s) have no readable result.json (pruned or moved); their passed "
                     "tests are unknown")
    if not any(r.fingerprint for r in records):
        notes.append("no run has a working-tree fingerprint; only reruns' flaky marks are known")
    return {
        "workspace": str(ws),
        "runs_examined": len(records),
        "flaky": [t.to_json() for t in found],
        "notes": notes,
    }


def _git_commit(start: str) -> str | None:
    """The commit HEAD names in the git work tree around `start`, read from git's own files
    (no process: `.git` or a worktree's `gitdir:` file, loose refs, then packed-refs); None
    outside git or when HEAD names nothing yet."""
    root = layout.git_root(start)
    if root is None:
        return None
    gitdir = os.path.join(root, ".git")
    try:
        if os.path.isfile(gitdir):  # a worktree or submodule: "gitdir: <path>"
            with open(gitdir, encoding="utf-8") as fh:
                target = fh.read().strip().removeprefix("gitdir:").strip()
            gitdir = os.path.normpath(os.path.join(root, target))
        with open(os.path.join(gitdir, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
        if not head.startswith("ref:"):
            return head or None  # a detached HEAD (CI checkouts) holds the commit itself
        ref = head[4:].strip()
        common = gitdir
        with contextlib.suppress(OSError), open(os.path.join(gitdir, "commondir"), encoding="utf-8") as fh:
            common = os.path.normpath(os.path.join(gitdir, fh.read().strip()))
        for folder in dict.fromkeys((gitdir, common)):
            with contextlib.suppress(OSError), open(os.path.join(folder, ref), encoding="utf-8") as fh:
                return fh.read().strip() or None
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        return None
    return None


def _check_shard(shard: object, *, target: object, last_failed: object, command: object,
                 mode: str) -> ShardInfo | None:
    """The validated shard, or None; a shard with anything else that narrows the run is refused
    (shards of a narrowed run would not add up to the suite `greenloop merge` reports on)."""
    if shard is None or shard == "":
        return None
    from greenloop.runner.plan import parse_shard

    parsed = parse_shard(shard)
    clash = [name for name, given in (("target", target is not None), ("last_failed", bool(last_failed)),
                                      ("command", command is not None), ("mode retry", mode == "retry"),
                                      ("mode resume", mode == "resume"))
             if given]
    if clash:
        raise UsageError(f"shard splits the whole suite: drop {', '.join(clash)} (or drop shard)")
    return parsed


def _sharded(result: RunResult, the_plan: Any) -> RunResult:
    """Mark a shard's result; a pytest shard whose report is missing did not load greenloop's
    plugin, so nothing was deselected: it ran the whole suite, and merging it would count
    every test N times, so it is broken rather than green."""
    shard = ShardInfo(the_plan.shard.index, the_plan.shard.total, commit=_git_commit(the_plan.cwd))
    result = result._replace(shard=shard, selection="shard")
    empty_exit = (0, 5) if the_plan.framework == "pytest" else (0,)  # pytest: 5 when all deselected
    if result.crash_reason == "no tests ran" and result.exit_code in empty_exit:
        # N exceeds what the runner splits (files, for vitest, jest and node:test): an empty shard
        # is not a broken one. `greenloop merge` still calls a suite with no test at all broken.
        spec = f"{the_plan.shard.index}/{the_plan.shard.total}"
        return result._replace(ok=True, outcome="green", crashed=False, crash_reason=None, next_action=None,
                               notes=(*result.notes, f"shard {spec} holds no test (more shards than the "
                                      "runner can split the suite into); it counts as an empty part"))
    if (the_plan.framework == "pytest" and not result.timed_out and not result.aborted
            and the_plan.report_file and not os.path.exists(the_plan.report_file)
            and result.outcome != "broken"):
        reason = ("shard: greenloop's pytest plugin did not load (was it disabled with -p no:…?), so "
                  "the shard was not applied and the whole suite ran; remove what disables it")
        result = result._replace(ok=False, outcome="broken", crashed=True, crash_reason=reason,
                                 next_action="retry_tester")
    return result


def merge_results(
    paths: Sequence[str | os.PathLike[str]],
    *,
    workspace: str | os.PathLike[str] = ".",
    session_id: str | None = None,
) -> RunResult:
    """Fold the result.json files of a suite's shards into one run (greenloop.runner.merge), store it
    as a run of `workspace` and record it like any run: the bug log (as a run of the whole
    suite when all N shards are there) and the session's closure state, so the gate decides on
    the whole suite. Files that are not one suite's shards: UsageError, nothing written."""
    from greenloop import config as config_mod
    from greenloop.runner import merge

    ws = _workspace(workspace)
    if isinstance(paths, (str, os.PathLike)) or not paths:
        raise UsageError("merge needs a list of the shards' result.json files (RESULT.json …)")
    if session_id is not None and (not isinstance(session_id, str) or not session_id.strip()):
        raise UsageError("session_id must be a non-empty string (or left out)")
    named: list[tuple[str, RunResult]] = []
    for path in paths:
        name = os.fspath(path)
        try:
            named.append((name, _read_result(name)))
        except OSError as exc:
            why = exc.strerror or exc
            raise UsageError(f"cannot read {name}: {why}; pass the shards' result.json files") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{name} is not a greenloop result.json ({type(exc).__name__}: {exc}); "
                             "pass the result.json each `greenloop run --shard I/N` wrote") from exc
    merge.check_shards(named)  # refused before anything is written
    cfg = config_mod.load(ws)
    if session_id is None:
        from greenloop.closure import session as session_mod

        session_id = session_mod.resolve(workspace=ws)
    root = probe_root(ws)
    run_id = layout.new_run_id()
    layout.make_state_dir(layout.state_dir(root))
    run_dir = layout.run_dir(root, run_id)
    merged = merge.merge(named, run_id=run_id, tail_chars=cfg.summary_tail_chars, workspace=str(ws))
    merged = merged._replace(session_id=session_id, result_ref=str(run_dir / RESULT_FILE))
    final = _after_run(str(ws), merged)
    _store(final, run_dir, None)
    prune_runs(root, keep=KEEP_RUNS, protect=run_id)
    return final


def test_closure_check(workspace: str | os.PathLike[str], session_id: str | None = None) -> ClosureCheck:
    """Is this session's last recorded run green? (`greenloop check`)."""
    from greenloop.closure.gate import closure_check

    return closure_check(str(_workspace(workspace)), session_id)


def _finalize(result: RunResult, *, session_id: str | None, ref: Path | None, root: str) -> RunResult:
    from greenloop.runner.recover import resume_token

    return result._replace(
        session_id=session_id,
        result_ref=str(ref) if ref is not None else result.result_ref,
        resume_token=resume_token(root, result.run_id),
    )


def _resume(workspace: str | os.PathLike[str], token: str, **callbacks: Any) -> RunResult:
    """mode resume: the finished run as it is, a run rebuilt from its runner's report, or the
    suite again with the same options (greenloop.runner.recover)."""
    from greenloop.runner import recover

    ws = _workspace(workspace)
    root = probe_root(ws)
    run_dir = recover.check(root, token)
    stored = run_dir / RESULT_FILE
    if stored.is_file():
        done = _read_result(stored)
        return done._replace(notes=(*done.notes, "resume: this run had finished; nothing ran"))
    data = recover.read_run_file(run_dir)
    rebuilt = recover.from_report(run_dir, data, str(ws))
    if rebuilt is None:
        options = {k: v for k, v in (data.get("options") or {}).items() if v not in (None, False)}
        again = test_run(ws, session_id=data.get("session_id"), **options, **callbacks)
        note = (f"resume of {run_dir.name}: its runner had not finished (no complete report), so the "
                f"suite ran again with the same options as {again.run_id}")
        again = again._replace(notes=(*again.notes, note))
        _rewrite(again, root)
        return again
    unit = layout.unit_of(ws)
    unit_dir = unit[0] / "units" / unit[1] / "runs" / rebuilt.run_id if unit else None
    result = _finalize(rebuilt, session_id=data.get("session_id"),
                       ref=unit_dir / RESULT_FILE if unit_dir else None, root=root)
    final = _after_run(str(ws), result)
    _store(final, run_dir, unit_dir)
    return final


_REPORT_MODULES: dict[str, tuple[str, ...]] = {
    "pytest-json": ("greenloop.frameworks.pytest_report",),
    "vitest-json": ("greenloop.frameworks.vitest",),
    "jest-json": ("greenloop.frameworks.jest",),
    "junit": ("greenloop.frameworks.junit",),
    "node-tap": ("greenloop.frameworks.node_test",),
    "go-json": ("greenloop.frameworks.go",),
    "nextest-junit": ("greenloop.frameworks.cargo",),
    "mocha-json": ("greenloop.frameworks.mocha",),
    "unittest-json": ("greenloop.frameworks.unittest",),
    "bun-junit": ("greenloop.frameworks.bun",),
}


def _parser_modules(report_format: str | None, framework: str | None) -> tuple[str, ...]:
    """The modules that will parse this run's output: its report's reader, or, for a runner
    read from its text output (cargo without nextest, a verbatim command), the runner's module.
    Imported while the suite runs, they are not paid for after it has ended."""
    if report_format:
        return _REPORT_MODULES.get(report_format, ())
    if framework:
        return (f"greenloop.frameworks.{framework.replace(':', '_').replace('-', '_')}",)
    return ()


class _Preload:
    """Imports what the after-steps need (report parser, bug log, store, hints, hashlib) in a
    thread once the suite has started, so they are ready when it ends, then does `then`
    (pruning old runs)."""

    def __init__(self, modules: tuple[str, ...], then: Callable[[], object]) -> None:
        self._modules = (
            *modules,
            "greenloop.bugs.bridge",
            "greenloop.closure.store",
            "greenloop.closure.session",
            "greenloop.hints.rules",
            "hashlib",  # the fingerprint's digest (~5 ms: OpenSSL), which fingerprint imports late
        )
        self._then = then
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def start(self) -> None:
        """Begin (run.execute calls it once the runner has started)."""
        if not self.started:
            self._thread.start()

    def _run(self) -> None:
        for name in self._modules:
            with contextlib.suppress(Exception):  # a failed import shows where it is needed
                importlib.import_module(name)
        with contextlib.suppress(Exception):
            self._then()

    def join(self) -> None:
        if self.started:
            self._thread.join()


RUN_MODES = ("test", "retry", "resume")


def _retry(workspace: str | os.PathLike[str], *, session_id: str | None, **options: Any) -> RunResult:
    """mode retry: the previous run's failures alone, then (if they pass) the whole suite."""
    ws = _workspace(workspace)
    if session_id is None:
        from greenloop.closure import session as session_mod

        session_id = session_mod.resolve(workspace=ws)
    root = probe_root(ws)
    previous, whose = _previous_run(root, ws, session_id)
    if previous is None:
        raise UsageError(f"mode retry needs a previous run in {ws}: run the tests once (mode test) first")
    before = [f.test for f in previous.failures]
    notes = [f"retry of {previous.run_id}"] + ([whose] if whose else [])
    first: RunResult | None = None
    if before:
        first = test_run(ws, last_failed=True, session_id=session_id, **options)
        if first.outcome != "green" or first.aborted:
            final = first
            notes.append(f"retry: the previous failures still fail in {first.run_id}; the rest of the "
                         "suite did not run (fix these first)")
        else:
            notes.append(f"retry: the previous failures passed in {first.run_id}; then the whole suite ran")
            final = test_run(ws, session_id=session_id, **options)
    else:
        notes.append(f"retry: {previous.run_id} had no failures; the whole suite ran")
        final = test_run(ws, session_id=session_id, **options)
    failing = [f.test for f in final.failures]
    passed = set(final.passed_tests)
    info = RetryInfo(
        previous_run=previous.run_id,
        first_pass_run=first.run_id if first is not None else None,
        fixed=tuple(t for t in before if t not in failing and (not passed or t in passed)),
        remain=tuple(t for t in before if t in failing),
        new=tuple(t for t in failing if t not in before),
        full_suite=final is not first,
    )
    final = final._replace(retry=info, notes=(*final.notes, *notes))
    _rewrite(final, root)
    return final


def probe_root(ws: Path) -> str:
    """Where a workspace's runs are stored (the root its probe answers for)."""
    from greenloop.runner.probe import probe

    return probe(str(ws), files=False).root


def _rewrite(result: RunResult, root: str) -> None:
    """Store a result again after adding to it (its run folder and a DevLoop unit's copy)."""
    data = result.to_json()
    refs = {str(layout.run_dir(root, result.run_id) / RESULT_FILE)}
    if result.result_ref:
        refs.add(result.result_ref)
    for ref in refs:
        if os.path.exists(ref):
            _write_json(Path(ref), data)


def _unit_status(unit: tuple[Path, str], status: Any, run_id: str, *, write_back: bool) -> str | None:
    """Record a DevLoop unit's status; a failure to record is a note, never a lost run."""
    from greenloop.devloop import units

    try:
        return units.set_status(unit[0], unit[1], status, run_id, write_back=write_back)
    except OSError as exc:
        return f"unit status: could not record {unit[1]} as {status} ({exc.strerror or exc})"


def _announce(workspace: str, run_id: str, run_dir: str, framework: str | None,
              found: list[tuple[str, Any]]) -> None:
    """Tell a running `greenloop serve` of this workspace that the run has started, so it can
    stream it (the run's preload thread calls this; nothing is read when none runs)."""
    from greenloop.dashboard import live

    serving = live.find_serving(workspace)
    if serving is not None:
        live.announce(serving[0], run_id, run_dir, framework)
        found.append(serving)


def dashboard_link(workspace: str | os.PathLike[str], path: str) -> str | None:
    """The link to `path` on the dashboard serving this workspace, if one runs."""
    from greenloop.dashboard import live

    serving = live.find_serving(os.fspath(workspace))
    return serving[1].link(path) if serving is not None else None


def _previous_run(root: str, workspace: Path, session_id: str | None) -> tuple[RunResult | None, str | None]:
    """The run whose failures `last_failed` reruns, and a note when it is not the session's own.

    The rule (README, docs/mcp.md): the session's own latest run; else (a new session, or no
    session) the workspace's latest stored run, with a note naming whose run that was."""
    if session_id is not None:
        from greenloop.closure.store import Store

        try:
            with Store(workspace, warn=lambda _m: None) as st:
                record = st.latest_run(session_id=session_id)
        except Exception:  # an unreadable state database: fall back to the run store
            record = None
        if record is not None:
            for path in (layout.run_dir(root, record.run_id) / RESULT_FILE, record.result_ref):
                if not path:
                    continue
                try:
                    return _read_result(path), None
                except _UNREADABLE:
                    continue
    latest = latest_run(root)
    if latest is None:
        return None, None
    owner = f"session {latest.session_id}" if latest.session_id else "no session"
    mine = "this session has no run yet" if session_id is not None else "no session is known"
    if session_id is not None and latest.session_id == session_id:
        return latest, None
    return latest, (f"last_failed: {mine}; used the workspace's latest run {latest.run_id} "
                    f"({owner}, {latest.started_at or 'time unknown'})")


def _note(result: RunResult, what: str, exc: Exception) -> RunResult:
    return result._replace(notes=(*result.notes, f"{what} ({type(exc).__name__}: {exc})"))


def _after_run(
    workspace: str, result: RunResult, *, fingerprint: Callable[[], str | None] | None = None
) -> RunResult:
    """Hand the final result to the bug log, then to the session record; returns it, enriched.

    The bug bridge goes first so the closure store records the final result (with bug ids);
    a failing step becomes a note, never a lost run.
    """
    from greenloop.closure import session as session_mod

    try:
        # The caller's session: its environment, else the process tree (the harness whose
        # hooks ran above this process), else none: a workspace-level run.
        sid = result.session_id or session_mod.resolve(workspace=workspace)
    except Exception as exc:
        sid = result.session_id
        result = _note(result, "the session could not be resolved", exc)
    if sid != result.session_id:
        result = result._replace(session_id=sid)
    # bugs: bridge the run into bugs.ndjson (red opens, green fixes; bug ids go into the failures)
    try:
        from greenloop.bugs.bridge import bridge_unit_run

        result = bridge_unit_run(workspace, result)
    except Exception as exc:  # bookkeeping must never lose the result of a run that happened
        result = _note(result, "the run could not be recorded in the bug log", exc)
    # timeline: what happened, in order, beside the bug log
    try:
        from greenloop.bugs.workspace import unit_id_of
        from greenloop.devloop import timeline

        problem = timeline.append(timeline.timeline_path(workspace),
                                  timeline.events_of_run(result, unit_id_of(workspace)))
        if problem:
            result = result._replace(notes=(*result.notes, problem))
    except Exception as exc:
        result = _note(result, "the run could not be added to the timeline", exc)
    # closure: record the final run for the session (or the workspace) so the gate sees it
    try:
        from greenloop.closure import store

        store.record_result(workspace, result, session_id=sid, fingerprint=fingerprint)
    except Exception as exc:
        result = _note(result, "the run could not be recorded for the gate", exc)
    return result


# ----------------------------------------------------------------------------- the run store


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomic write: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _store(result: RunResult, run_dir: Path, unit_dir: Path | None) -> None:
    data = result.to_json()
    _write_json(run_dir / RESULT_FILE, data)
    if unit_dir is None:
        return
    unit_dir.mkdir(parents=True, exist_ok=True)
    for name in ("stdout.txt", "stderr.txt"):
        src, dst = run_dir / name, unit_dir / name
        if not src.exists() or dst.exists():
            continue
        try:
            os.link(src, dst)  # same bytes, no copy of a large log
        except OSError:
            shutil.copyfile(src, dst)
    _write_json(unit_dir / RESULT_FILE, data)


def list_runs(workspace: str | os.PathLike[str]) -> list[str]:
    """Run ids with a stored result, oldest first."""
    runs = layout.state_dir(workspace) / "runs"
    found: list[tuple[int, str]] = []
    try:
        entries = list(os.scandir(runs))
    except OSError:
        return []
    for entry in entries:
        try:
            found.append((os.stat(os.path.join(entry.path, RESULT_FILE)).st_mtime_ns, entry.name))
        except OSError:
            continue
    return [name for _, name in sorted(found)]


def prune_runs(
    workspace: str | os.PathLike[str], *, keep: int = KEEP_RUNS, protect: str | None = None
) -> list[str]:
    """Delete all but the newest `keep` run folders of a workspace; returns the deleted ids.

    Folders without a result (a run killed with greenloop itself) count by their own age. Only
    `.greenloop/runs/` is pruned: a DevLoop unit's `units/<unit>/runs/` is the unit's history.
    """
    runs = layout.state_dir(workspace) / "runs"
    aged: list[tuple[int, str]] = []
    try:
        entries = [e for e in os.scandir(runs) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    for entry in entries:
        try:
            try:
                mtime = os.stat(os.path.join(entry.path, RESULT_FILE)).st_mtime_ns
            except OSError:
                mtime = entry.stat(follow_symlinks=False).st_mtime_ns
        except OSError:
            continue
        aged.append((mtime, entry.name))
    aged.sort()
    doomed = [name for _, name in aged[: max(0, len(aged) - keep)] if name != protect]
    for name in doomed:
        shutil.rmtree(runs / name, ignore_errors=True)
    return doomed


_UNREADABLE = (OSError, ValueError, KeyError, TypeError)  # what _read_result raises


def _read_result(path: str | os.PathLike[str]) -> RunResult:
    """The RunResult stored at `path` (a result.json); raises one of _UNREADABLE."""
    return RunResult.from_json(json.loads(Path(path).read_text(encoding="utf-8")))


def load_run(workspace: str | os.PathLike[str], run_id: str) -> RunResult:
    """A stored run; UsageError when it is missing or unreadable."""
    path = layout.run_dir(workspace, run_id) / RESULT_FILE
    try:
        return _read_result(path)
    except _UNREADABLE as exc:
        raise UsageError(f"run {run_id!r} has no readable result at {path}: pick one in runs/") from exc


def latest_run(workspace: str | os.PathLike[str]) -> RunResult | None:
    """The workspace's most recent stored run; torn or corrupt results are skipped."""
    for run_id in reversed(list_runs(workspace)):
        with contextlib.suppress(UsageError):
            return load_run(workspace, run_id)
    return None


# ----------------------------------------------------------------------------- bounded view


def _cut(text: str | None, limit: int = FIELD_CHARS) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters in result_ref]"


def bounded(result: RunResult, *, max_failures: int = 5) -> dict[str, Any]:
    """What a model reads: counts, the first failures in full, the rest by name, and result_ref.

    Whatever the suite printed, the size stays bounded: output_tail is already capped at
    summary_tail_chars, each failure field at FIELD_CHARS, names at MAX_NAMES.
    """
    data = result.to_json()
    failures = []
    for f in result.failures[: max(0, max_failures)]:
        d = f.to_json()
        for key in ("message", "expected", "got", "stack", "hint"):
            d[key] = _cut(d[key])
        failures.append(d)
    rest = [f.test for f in result.failures[max(0, max_failures) :]]
    data["failures"] = failures
    data["more_failures"] = rest[:MAX_NAMES]
    data["more_failures_omitted"] = max(0, len(rest) - MAX_NAMES)
    data["notes"] = [_cut(n, 500) for n in result.notes[:20]]
    del data["passed_tests"]  # the bug bridge's evidence, as long as the suite: result_ref has it
    return data
