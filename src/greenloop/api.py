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

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from greenloop import layout
from greenloop.errors import UsageError
from greenloop.model import FRAMEWORKS, Detection, Progress, ShardInfo
from greenloop.result import RunResult
from greenloop.runner.after_run import after_run, announce, finalize, unit_status
from greenloop.runner.preload import Preload, parser_modules
from greenloop.runner.run_store import (
    KEEP_RUNS,
    RESULT_FILE,
    UNREADABLE,
    latest_run,
    list_runs,
    load_run,
    previous_run,
    prune_runs,
    read_result,
    runs_root,
    store_result,
)
from greenloop.runner.shards import check_shard, mark_shard

if TYPE_CHECKING:
    from greenloop.closure.gate import ClosureCheck

__all__ = [
    "RESULT_FILE",
    "bounded",
    "dashboard_link",
    "first_said",
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
FIELD_CHARS = 4000  # per text field of a failure in the bounded view
MAX_NAMES = 50  # failures listed by name in the bounded view
RUN_MODES = ("test", "retry", "resume")


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
    affected: bool | None = False,
) -> RunResult:
    """Plan, execute and store one run; return its final RunResult (see the module docstring).

    `mode`: "test" runs as asked; "retry" reruns after the coder changed code: the previous
    run's failures first (in the runner's own dialect), then, if they pass, the whole suite,
    as one result whose `retry` says which failures were fixed, which remain and which are new;
    "resume" continues the run `resume_token` names (greenloop.runner.recover).

    `shard` ("I/N"): run only shard I of N in the runner's own dialect (docs/scale.md); the
    result's `selection` is "shard" and `greenloop merge` folds the N results into one.

    `rerun_failures` (K): rerun the failing tests up to K times in the runner's own dialect; a
    test that fails, then passes is `flaky` (docs/scale.md, "Flaky tests").

    `affected`: run only the tests the files changed since git HEAD can break, plus every test
    the session owes (greenloop.runner.affected); the result's `selection` is "affected". None
    (what MCP test_run passes when the call leaves it out): the config's `affected`, for a run
    that chooses no tests itself."""
    if affected is not None and not isinstance(affected, bool):
        raise UsageError(f"affected must be true or false, got {affected!r}")
    if affected:
        given = (("target", target is not None), ("last_failed", bool(last_failed)),
                 ("command", command is not None), ("shard", shard not in (None, "")),
                 ("mode " + str(mode), mode != "test"))
        clash = [name for name, on in given if on]
        if clash:
            raise UsageError(f"affected chooses the tests itself: drop {', '.join(clash)} (or drop affected)")
    if mode not in RUN_MODES:
        raise UsageError(f"mode must be one of {', '.join(RUN_MODES)}, got {mode!r}")
    if isinstance(rerun_failures, bool) or not isinstance(rerun_failures, int) or rerun_failures < 0:
        raise UsageError(f"rerun_failures (--rerun-failures) must be a whole number >= 0 (e.g. 2), "
                         f"got {rerun_failures!r}")
    the_shard = check_shard(shard, target=target, last_failed=last_failed, command=command, mode=mode)
    if (mode == "resume") != (resume_token is not None):
        raise UsageError("mode resume needs resume_token (a result's resume_token), and resume_token "
                         "goes only with mode resume")
    if mode == "resume":
        from greenloop.runner.retry import resume

        ws = _workspace(workspace)
        return resume(test_run, ws, str(resume_token), on_progress=on_progress, cancel=cancel)
    if mode == "retry":
        if target is not None or last_failed or command is not None:
            raise UsageError("mode retry chooses the tests itself: drop target, last_failed and command")
        from greenloop.runner.retry import retry

        return retry(test_run, _workspace(workspace), framework=framework, timeout_ms=timeout_ms,
                     session_id=session_id, sandbox=sandbox, on_progress=on_progress, cancel=cancel,
                     **({"rerun_failures": rerun_failures} if rerun_failures else {}))
    from greenloop import config as config_mod
    from greenloop.runner.plan import RunOptions, plan
    from greenloop.runner.probe import probe
    from greenloop.runner.run import execute
    from greenloop.system.fingerprint import Pending

    ws = _workspace(workspace)
    sandbox_mode = _check_args(framework, target, last_failed, command, timeout_ms, session_id, sandbox)
    cfg = config_mod.load(ws)  # once: the session lookup and the sandbox policy read it too
    by_config = affected is None and cfg.affected and target is None and not last_failed and command is None \
        and the_shard is None
    affected = bool(affected) or by_config
    if session_id is None:
        # The caller's session, resolved before the run so that its sandbox mode applies and
        # the run is recorded under it (greenloop.closure.session: variables, then the process tree).
        from greenloop.closure import session as session_mod

        session_id = session_mod.resolve(workspace=ws, config=cfg)
    # The sandbox policy: this call's mode > the session's latest mode event > config default.
    from greenloop.system.sandbox import resolve_for

    policy = resolve_for(ws, explicit=sandbox_mode, session_id=session_id, config=cfg)
    detection = probe(str(ws), files=False)  # plan needs no test file list
    if detection.root != str(ws) and framework is not None:
        detection = Detection(framework=None, root=str(ws), package_manager=detection.package_manager)
    run_id = layout.new_run_id()
    run_dir = layout.run_dir(detection.root, run_id)
    previous: RunResult | None = None
    whose: str | None = None
    if last_failed and command is None:
        from greenloop.closure import session as session_mod

        previous, whose = previous_run(detection.root, ws, session_id or session_mod.resolve())
    changes = None
    if affected:
        changes = _affected_changes(detection.root, ws, session_id)
    from greenloop.runner.affected_cov import fold_run, wanted  # (the run folds its map below)

    the_plan = plan(
        detection,
        RunOptions(framework, target, last_failed, command, timeout_ms, the_shard, changes,
                   coverage_map=cfg.coverage_map and wanted(detection.root, cfg.affected)),
        report_dir=str(run_dir),
        default_timeout_ms=cfg.default_timeout_ms,
        previous=previous,
    )
    if whose is not None:
        the_plan = the_plan._replace(notes=(*the_plan.notes, whose))
    if by_config:
        the_plan = the_plan._replace(notes=(
            "affected: the config's `affected = true` made this an affected run; pass affected: false "
            "for the whole suite", *the_plan.notes))
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
                     "command": command, "timeout_ms": timeout_ms, "sandbox": sandbox,
                     **({"affected": True} if affected else {})},
        )
        announce(str(ws), run_id, str(run_dir), the_plan.framework or None, dashboard)
        prune_runs(detection.root, keep=KEEP_RUNS, protect=run_id)

    preload = Preload(parser_modules(the_plan.report_format, the_plan.framework), then=while_running)
    fingerprint = Pending(str(ws))
    unit = layout.unit_of(ws)
    if unit is not None:  # a DevLoop unit: the registry says it is being tested
        unit_status(unit, "testing", run_id, write_back=cfg.write_unit_status)
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
        unit_dir = layout.unit_run_dir(unit[0], unit[1], run_id) if unit else None
        if the_plan.shard is not None:
            result = mark_shard(result, the_plan)
        if rerun_failures and result.outcome == "red" and not result.aborted and not the_plan.shell:
            from greenloop.runner.reruns import rerun_failing

            result = rerun_failing(result, the_plan, detection, rerun_failures, run_dir=run_dir, config=cfg,
                                   policy=policy, workspace=str(ws), cancel=cancel)
        result = finalize(result, session_id=session_id, ref=unit_dir / RESULT_FILE if unit_dir else None,
                          root=detection.root)
        final = after_run(str(ws), result, fingerprint=fingerprint.result, session_resolved=True)
        final = fold_run(final, the_plan, detection.root, str(run_dir))  # a whole pytest run's map
        if final.ok and final.selection is None and final.shard is None and session_id and command is None:
            from greenloop.runner.affected import record_green

            record_green(detection.root, session_id, run_id)  # --affected counts changes from here
        if unit is not None:
            status = "passed" if final.ok else "failed"
            note = unit_status(unit, status, run_id, write_back=cfg.write_unit_status)
            if note:
                final = final._replace(notes=(*final.notes, note))
        store_result(final, run_dir, unit_dir)
    finally:
        preload.join()
        fingerprint.close()
        for root, _ in dashboard:
            from greenloop.dashboard import live

            live.finished(root, run_id)
    if not preload.started:  # the runner never started (not installed, sandbox refused)
        prune_runs(detection.root, keep=KEEP_RUNS, protect=run_id)
    return final


def _affected_changes(root: str, ws: Path, session_id: str | None) -> Any:
    """The changed files and the session's owed tests an `--affected` run selects from."""
    from greenloop.runner.affected import changes

    owed: list[tuple[str, str | None]] = []
    if session_id is not None:
        from greenloop.closure.store import Store

        try:
            with Store(ws, warn=lambda _m: None) as st:
                rows, _count = st.owed(session_id, limit=100_000)
        except Exception:  # an unreadable state database: nothing known owed
            rows = ()
        owed = [(o.test, o.file) for o in rows]
    return changes(root, owed, session_id)


def flaky_tests(workspace: str | os.PathLike[str], *, limit: int = 1000) -> dict[str, Any]:
    """Flaky tests from the stored history (`greenloop flaky`): tests one run failed and another
    passed with the same working-tree fingerprint, and tests a run's reruns found flaky."""
    from greenloop.closure.store import Store
    from greenloop.runner import flaky

    ws = _workspace(workspace)
    root = runs_root(ws)
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
                stored = read_result(path)
            except UNREADABLE:
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
            named.append((name, read_result(name)))
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
    root = runs_root(ws)
    run_id = layout.new_run_id()
    layout.make_state_dir(layout.state_dir(root))
    run_dir = layout.run_dir(root, run_id)
    merged = merge.merge(named, run_id=run_id, tail_chars=cfg.summary_tail_chars, workspace=str(ws))
    merged = merged._replace(session_id=session_id, result_ref=str(run_dir / RESULT_FILE))
    final = after_run(str(ws), merged)
    store_result(final, run_dir, None)
    prune_runs(root, keep=KEEP_RUNS, protect=run_id)
    return final


def test_closure_check(workspace: str | os.PathLike[str], session_id: str | None = None) -> ClosureCheck:
    """Is this session's last recorded run green? (`greenloop check`)."""
    from greenloop.closure.gate import closure_check

    return closure_check(str(_workspace(workspace)), session_id)


def dashboard_link(workspace: str | os.PathLike[str], path: str) -> str | None:
    """The link to `path` on the dashboard serving this workspace, if one runs."""
    from greenloop.dashboard import live

    serving = live.find_serving(os.fspath(workspace))
    return serving[1].link(path) if serving is not None else None


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
    # the bug bridge's and the gate's evidence, as long as the suite: result_ref has it
    del data["passed_tests"], data["skipped_tests"]
    if data.get("affected"):  # the changed files and chosen tests, as many as names are shown
        data["affected"] = {k: v[:MAX_NAMES] if isinstance(v, list) else v
                            for k, v in data["affected"].items()}
    return data


def first_said(workspace: str | os.PathLike[str], session_id: str | None, keys: list[str]) -> set[str]:
    """Of the notes `keys` (agent_format.once_key), those this session has not been told yet,
    recorded now as told. A state that cannot be used says them all: said twice beats never."""
    from greenloop.closure.store import Store, state_errors

    try:
        with Store(workspace, warn=lambda _m: None) as store:
            return store.first_said(session_id, keys)
    except state_errors():
        return set(keys)
