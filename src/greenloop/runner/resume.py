"""Continuing an interrupted unit run whose runner did not finish: keep the test files that
finished, run the others again, and write one result (`greenloop run --mode resume`).

greenloop.runner.recover decides what a resume token names; when the run's runner did not write its
report (greenloop was killed and its runner with it, the machine went down, or the runner
was still running and the resume stopped it), this module continues it:

1. the records the runner left (greenloop.runner.resume_records) say which test files the run was to
   run, which finished and which had started;
2. the files that had not finished run again, in the runner's own dialect (a target of those
   files, as plan.py builds it), in the run folder's `resume-<n>/`; a file that was half done
   runs again whole and its finished tests are dropped, so no test counts twice;
3. one result merges the kept files' tests with the rerun's, its `resume` saying which files
   came from which attempt, stored under the interrupted run's id.

When the files cannot be known (a runner without such records, a run narrowed by a verbatim
command, last_failed, a shard or runner flags in its target), `continue_run` says why and the
caller runs the whole suite again.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from greenloop.model import Failure, ParseResult, Plan, Progress, RawRun, Summary
from greenloop.result import ResumeInfo, RunResult, SandboxInfo
from greenloop.runner.resume_records import FileTests, Finished, read

__all__ = ["continue_run", "process_start", "still_running", "stop_runner"]


def process_start(pid: int) -> str | None:
    """When a process started (clock ticks since boot): with its pid, it names one process,
    never a later one that reuses the pid."""
    from greenloop.system import procfs

    found = procfs.stat(pid)
    return str(found.start) if found is not None else None


def still_running(data: dict[str, Any]) -> int | None:
    """The pid of the greenloop process still running the run `data` (run.json) records, or None
    when it has stopped (its pid is gone or belongs to a later process). This process itself
    does not count: its own run that ended in an exception is over."""
    from greenloop.system import procfs

    who = data.get("greenloop")
    if not (isinstance(who, list) and len(who) == 2 and isinstance(who[0], int)):
        return None
    pid, start = who
    if pid == os.getpid():
        return None
    return pid if start is not None and procfs.alive(pid) and process_start(pid) == start else None


def stop_runner(run_dir: Path) -> str | None:
    """Stop what still runs of an interrupted run (a runner outlives greenloop: it has its own
    session), so that nothing it finishes later counts beside the resume; a note, or None when
    nothing ran. Its processes are the ones greenloop started (they carry a process token)
    holding a file of the run's folder open (its output, its reports; a runner may keep them
    under other descriptors than 1 and 2), and whatever carries their token; a dashboard or a
    `tail` reading the same files carries none and is left alone."""
    from greenloop.system import proc, procfs

    inside = str(run_dir) + os.sep
    found: list[int] = []
    tokens: set[str] = set()
    prefix = proc.TOKEN_VAR.encode() + b"="
    for pid in procfs.pids():
        if pid == os.getpid():
            continue
        with contextlib.suppress(OSError):
            fds = os.listdir(f"/proc/{pid}/fd")
            if not any(_link(f"/proc/{pid}/fd/{fd}").startswith(inside) for fd in fds):
                continue
            env = procfs.environ(pid) or []
            token = next((v[len(prefix):].decode() for v in env if v.startswith(prefix)), None)
            if token is not None and procfs.alive(pid):
                found.append(pid)
                tokens.add(token)
    if not found:
        return None
    for token in tokens:
        proc.kill_token(token)
    return (f"resume: the runner of {run_dir.name} was still running after greenloop stopped (pids "
            f"{found}); it was stopped, and the resume went on from what had finished")


def _link(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def _why_not(plan: Plan, options: dict[str, Any]) -> str | None:
    """Why this run cannot be continued file by file, or None."""
    if options.get("command") or plan.shell:
        return "a verbatim command runs what it runs: greenloop cannot narrow it to the unfinished files"
    if options.get("last_failed"):
        return "a last_failed run is already narrowed to the previous failures"
    if plan.shard is not None:
        return "a shard's files are chosen by the runner's split, which a list of files would change"
    target = shlex.split(options.get("target") or "")
    if plan.framework != "pytest" and any(t.startswith("-") for t in target):
        return "its target carries runner options, which a list of files would not keep"
    return None


def _targets(plan: Plan, found: Finished, files: list[str], narrowed: bool) -> list[str]:
    """The rerun's target in the runner's dialect: the files; for a narrowed pytest run the
    files' collected node ids (what the run chose of them); vitest takes filters, so its
    files go as absolute paths (a relative one would also match a longer path)."""
    if plan.framework == "pytest" and narrowed:
        return [nodeid for file in files for nodeid in found.tests_of.get(file, ())]
    if plan.framework == "vitest":
        return [os.path.join(plan.cwd, f) for f in files]
    return files


def _sum(kept: list[FileTests]) -> FileTests:
    return FileTests(
        sum(k.passed for k in kept), sum(k.failed for k in kept), sum(k.skipped for k in kept),
        tuple(t for k in kept for t in k.passed_tests), tuple(f for k in kept for f in k.failures),
        tuple(t for k in kept for t in k.skipped_tests),
    )


def continue_run(
    workspace: Path,
    run_dir: Path,
    data: dict[str, Any],
    *,
    on_progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
) -> RunResult | str:
    """The interrupted run continued (one merged result under its run id, not yet recorded),
    or why it cannot be continued file by file (the caller then runs the whole suite)."""
    from greenloop.runner import recover

    plan = recover.plan_of(data)
    options = dict(data.get("options") or {})
    why = _why_not(plan, options)
    found = read(plan) if why is None else why
    if isinstance(found, str):
        return found
    unfinished = [f for f in found.files if f not in found.done]
    half = [f for f in unfinished if f in found.started]
    kept_files = [f for f in found.files if f in found.done]
    kept = _sum([found.done[f] for f in kept_files])
    rerun: RunResult | None = None
    attempt = 1 + sum(1 for p in run_dir.glob("resume-*") if p.is_dir())
    if unfinished:
        targets = _targets(plan, found, unfinished, narrowed=bool(options.get("target")))
        if not targets:
            return "the unfinished files' tests could not be named for the runner"
        rerun = _run_again(workspace, run_dir, data, plan, targets, attempt,
                           on_progress=on_progress, cancel=cancel)
    dropped = sum(found.seen.get(f, 0) for f in half)
    info = ResumeInfo(from_run=run_dir.name, kept=kept.total, kept_files=tuple(kept_files),
                      rerun_files=tuple(unfinished), dropped=dropped,
                      rerun_run=rerun.run_id if rerun is not None else None)
    return _merged(workspace, run_dir, plan, kept, rerun, info, half)


def _run_again(workspace: Path, run_dir: Path, data: dict[str, Any], plan: Plan, targets: list[str],
               attempt: int, *, on_progress: Callable[[Progress], None] | None,
               cancel: threading.Event | None) -> RunResult:
    """The unfinished files, run as the interrupted run would have run them, in resume-<n>/."""
    from greenloop import config as config_mod
    from greenloop.runner.plan import RunOptions
    from greenloop.runner.plan import plan as make_plan
    from greenloop.runner.probe import probe
    from greenloop.runner.run import execute
    from greenloop.system.sandbox import parse_mode, resolve_for

    options = dict(data.get("options") or {})
    cfg = config_mod.load(workspace)
    sandbox = options.get("sandbox")
    explicit = str(parse_mode(sandbox, field="sandbox")) if sandbox else None
    policy = resolve_for(workspace, explicit=explicit, session_id=data.get("session_id"), default=cfg.sandbox)
    detection = probe(plan.cwd, files=False)._replace(framework=plan.framework, root=plan.cwd)
    folder = run_dir / f"resume-{attempt}"
    asked = RunOptions(plan.framework, shlex.join(targets), False, None, plan.timeout_ms)
    again = make_plan(detection, asked, report_dir=str(folder), default_timeout_ms=cfg.default_timeout_ms)
    return execute(again, run_id=f"{run_dir.name}-resume-{attempt}", run_dir=folder, config=cfg,
                   on_progress=on_progress, cancel=cancel, policy=policy, workspace=str(workspace))


def _merged(workspace: Path, run_dir: Path, plan: Plan, kept: FileTests, rerun: RunResult | None,
            info: ResumeInfo, half: list[str]) -> RunResult:
    """One result: the kept files' tests and the rerun's, each test counted once."""
    from greenloop.config import load
    from greenloop.frameworks.results import load_error_of
    from greenloop.runner.results import output_tail, with_hints
    from greenloop.runner.verdict import classify

    cfg = load(workspace)
    kept_failures = with_hints(kept.failures, plan.framework, cfg.hint_language, plan.cwd) \
        if kept.failures else ()
    r = rerun.summary if rerun is not None else Summary()
    summary = Summary(total=kept.total + r.total, passed=kept.passed + r.passed,
                      failed=kept.failed + r.failed, skipped=kept.skipped + r.skipped, flaky=r.flaky)
    failures: tuple[Failure, ...] = (*kept_failures, *(rerun.failures if rerun is not None else ()))
    passed = (*kept.passed_tests, *(rerun.passed_tests if rerun is not None else ()))
    skipped = (*kept.skipped_tests, *(rerun.skipped_tests if rerun is not None else ()))
    notes = [*plan.notes, *(rerun.notes if rerun is not None else ()),
             _note(info, half, rerun.command if rerun is not None else "")]
    if rerun is not None and rerun.outcome == "broken" and rerun.crash_reason != "no tests ran":
        return rerun._replace(
            run_id=run_dir.name, summary=summary, failures=failures, passed_tests=passed,
            skipped_tests=skipped, notes=tuple(dict.fromkeys(notes)), result_ref=str(run_dir / "result.json"),
            workspace=str(workspace), selection=plan.selection, command=plan.command_text, resume=info)
    loads = [f"{f.test}: {(f.message.splitlines() or ['failed to load'])[0]}"
             for f in failures if f.kind == "load"]
    parsed = ParseResult(summary=summary, failures=failures, recognized=True, passed_tests=passed,
                         skipped_tests=skipped, load_error=load_error_of(loads))
    stdout, stderr = str(run_dir / "stdout.txt"), str(run_dir / "stderr.txt")
    # the rerun's own code when it failed; else what the runner says of a run with (or without)
    # failing tests (a rerun that found no test left, pytest's 5, is not a failure of the run)
    exit_code = 0 if not summary.failed else (
        rerun.exit_code if rerun is not None and rerun.failures and rerun.exit_code else 1)
    took = rerun.duration_ms if rerun is not None else 0
    raw = RawRun(exit_code=exit_code, timed_out=False, aborted=False, duration_ms=took,
                 stdout_path=stdout, stderr_path=stderr)
    verdict = classify(plan, raw, parsed, report_ok=True)
    tail = (rerun.output_tail if rerun is not None
            else output_tail(stdout, stderr, cfg.summary_tail_chars))
    return RunResult(
        run_id=run_dir.name, ok=verdict.ok, outcome=verdict.outcome,  # type: ignore[arg-type]
        framework=plan.framework or None, command=plan.command_text, exit_code=exit_code,
        crashed=verdict.crashed, crash_reason=verdict.crash_reason, summary=summary, failures=failures,
        output_tail=tail, notes=tuple(dict.fromkeys([*notes, *verdict.notes])), duration_ms=raw.duration_ms,
        sandbox=rerun.sandbox if rerun is not None else SandboxInfo(),
        result_ref=str(run_dir / "result.json"), workspace=str(workspace),
        started_at=rerun.started_at if rerun is not None else None, next_action=verdict.next_action,
        passed_tests=passed, skipped_tests=skipped, selection=plan.selection, resume=info,
    )


def _note(info: ResumeInfo, half: list[str], command: str) -> str:
    kept = (f"{info.kept} test(s) of the {len(info.kept_files)} file(s) that had finished were kept"
            if info.kept_files else "no test file had finished")
    if not info.rerun_files:
        return (f"resume of {info.from_run}: greenloop and its runner stopped before the report was "
                f"written, but every test file had finished; {kept} and nothing ran again")
    shown = command if len(command) <= 500 else command[:500] + " …"
    note = (f"resume of {info.from_run}: its runner had not finished; {kept}, and the "
            f"{len(info.rerun_files)} other file(s) ran again as {info.rerun_run} ({shown})")
    if half:
        names = ", ".join(half[:3]) + (" …" if len(half) > 3 else "")
        note += (f"; {names} {'was' if len(half) == 1 else 'were'} half done when the run stopped: "
                 f"{info.dropped} finished test(s) there were dropped and the whole file ran again, "
                 "so no test counts twice")
    return note
