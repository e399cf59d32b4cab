"""execute(plan) -> RunResult: start the planned run under its sandbox and make its result.

The process layer (proc.py) reports what happened (exit code, deadline, interruption); the
run's report and output are read by results.py; verdict.py's `classify` cross-checks the two
and decides the outcome (green, red or broken). A sandbox that refuses to start the command
is a denial, reported as broken with the reason, never a test failure.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from greenloop import layout
from greenloop.config import Config
from greenloop.model import ParseResult, Plan, RawRun
from greenloop.result import RunResult, SandboxInfo
from greenloop.runner.progress import ProgressCallback, ProgressCounter
from greenloop.runner.results import output_tail, read_results, with_hints
from greenloop.runner.verdict import Verdict, classify
from greenloop.system import proc
from greenloop.timefmt import iso_seconds

if TYPE_CHECKING:
    from greenloop.system.launcher import Launch
    from greenloop.system.sandbox import Policy

__all__ = ["execute"]


def execute(
    plan: Plan,
    *,
    run_id: str,
    run_dir: Path,
    config: Config,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    policy: Policy,
    workspace: str | None = None,
    on_start: Callable[[], None] | None = None,
    on_exit: Callable[[], object] | None = None,
) -> RunResult:
    """Run `plan` under the sandbox `policy` with its output in `run_dir` and return the final
    RunResult (never raises for anything the run does; KeyboardInterrupt still propagates after
    the tree is stopped).

    `on_start` is called once the runner has started: the caller's work that can overlap the
    suite (api.test_run imports the after-step modules and prunes old runs there). `on_exit` is
    called once the whole tree has stopped, before the output is parsed: work that must see the
    tree the run left but can overlap the parse (api.test_run starts the working-tree
    fingerprint there)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    stdout_path = str(run_dir / layout.STDOUT_NAME)
    stderr_path = str(run_dir / layout.STDERR_NAME)
    workspace = workspace or plan.cwd
    started_at = iso_seconds(time.time())
    notes = list(plan.notes)
    framework = plan.framework or None

    def result(raw: RawRun | None, verdict: Verdict, parsed: ParseResult, info: SandboxInfo) -> RunResult:
        failures = parsed.failures
        if failures:
            failures = with_hints(failures, plan.framework, config.hint_language, plan.cwd)
        if failures and info.enforced_by:  # writes or connections the sandbox stopped say so
            from greenloop.system.denials import apply_denial_hints

            failures = apply_denial_hints(failures, info, language=config.hint_language)
        return RunResult(
            run_id=run_id,
            ok=verdict.ok,
            outcome=verdict.outcome,  # type: ignore[arg-type]
            framework=framework,
            command=plan.command_text,
            exit_code=raw.exit_code if raw else None,
            timed_out=raw.timed_out if raw else False,
            aborted=raw.aborted if raw else False,
            crashed=verdict.crashed,
            crash_reason=verdict.crash_reason,
            summary=parsed.summary,
            failures=failures,
            output_tail=output_tail(stdout_path, stderr_path, config.summary_tail_chars),
            notes=tuple(dict.fromkeys([*notes, *parsed.notes, *verdict.notes])),
            duration_ms=raw.duration_ms if raw else 0,
            sandbox=info,
            result_ref=str(run_dir / layout.RESULT_NAME),
            workspace=str(workspace),
            started_at=started_at,
            next_action=verdict.next_action,
            passed_tests=parsed.passed_tests,
            skipped_tests=parsed.skipped_tests,
            selection=plan.selection,
            affected=plan.affected,
        )

    if plan.nothing is not None:  # an --affected run that found nothing to run: not green
        for path in (stdout_path, stderr_path):
            Path(path).touch()
        verdict = Verdict(False, "broken", False, f"no tests ran: {plan.nothing}", None, ())
        return result(None, verdict, ParseResult(), SandboxInfo(policy.mode, None, str(workspace)))
    if plan.unavailable is not None:
        for path in (stdout_path, stderr_path):
            Path(path).touch()
        verdict = Verdict(False, "broken", True, f"runner not installed: {plan.unavailable}", None, ())
        info = SandboxInfo(policy.mode, None, str(workspace))  # resolved, not enforced
        return result(None, verdict, ParseResult(), info)

    from greenloop.system.launcher import launch
    from greenloop.system.sandbox import DENIED_PREFIX, SandboxUnavailable

    try:
        # the bubblewrap argv (a verbatim command runs as `/bin/sh -c` inside it) or the Landlock
        # step the child runs before exec, and the child environment (an allow-list when
        # sandboxed); SandboxUnavailable when a mode asked for by name cannot be enforced here
        launched = launch(plan, policy)
    except SandboxUnavailable as exc:  # refused before anything started: a denial, not a failure
        for path in (stdout_path, stderr_path):
            Path(path).touch()
        verdict = Verdict(False, "broken", True, DENIED_PREFIX + exc.message, None, ())
        return result(None, verdict, ParseResult(), SandboxInfo(policy.mode, None, str(workspace)))
    info = launched.info
    notes.extend(launched.notes)  # which enforcer, what it leaves out, or that there was none
    try:
        return _execute_launched(
            plan,
            launched,
            notes,
            result,
            stdout_path,
            stderr_path,
            on_progress=on_progress,
            cancel=cancel,
            on_start=on_start,
            on_exit=on_exit,
        )
    finally:
        launched.close()  # the Landlock ruleset, the run's private temporary folder


def _execute_launched(
    plan: Plan,
    launched: Launch,
    notes: list[str],
    result: Callable[[RawRun | None, Verdict, ParseResult, SandboxInfo], RunResult],
    stdout_path: str,
    stderr_path: str,
    *,
    on_progress: ProgressCallback | None,
    cancel: threading.Event | None,
    on_start: Callable[[], None] | None,
    on_exit: Callable[[], object] | None,
) -> RunResult:
    """The rest of `execute` once the launch is decided: run, cross-check, parse, classify."""
    from greenloop.system.enforcers import bwrap_denial, signal_exit
    from greenloop.system.sandbox import DENIED_PREFIX

    info = launched.info
    bwrapped = (info.enforced_by or "").startswith("bubblewrap")
    if launched.env_note:
        notes.append(launched.env_note)
    started = time.monotonic()
    counter = ProgressCounter(plan.framework, on_progress, started) if on_progress is not None else None
    for report in (plan.report_file, plan.fallback_report_file, plan.progress_file):
        if report:
            with contextlib.suppress(OSError):
                os.unlink(report)  # a stale report must never pass for this run's
    raw = proc.run_to_completion(
        launched.argv[0] if launched.shell else launched.argv,
        cwd=plan.cwd,
        env=launched.env_dict,
        timeout_s=plan.timeout_ms / 1000,
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        shell=launched.shell,
        on_line=counter.line if counter else None,
        cancel=cancel,
        on_spawn=on_start,
        follow={plan.progress_file: counter.event} if counter and plan.progress_file else None,
        on_read=counter.flush if counter else None,
        before_exec=launched.before_exec,
    )
    if on_exit is not None:
        with contextlib.suppress(Exception):  # the caller's own work never disturbs the result
            on_exit()
    if raw.survivors:
        notes.append(f"{len(raw.survivors)} process(es) survived the shutdown: pids {list(raw.survivors)}")
    if bwrapped:
        raw = signal_exit(raw)  # bwrap's 128+N back to "killed by signal N"
    if bwrapped:
        denied = bwrap_denial(raw)
    else:  # Landlock: only its own step failing is a denial; a missing command stays one
        denied = raw.spawn_error if raw.spawn_error and proc.BEFORE_EXEC_FAILED in raw.spawn_error else None
    if denied is not None:  # the sandbox refused before the command ran: a denial, not a test failure
        refusal = ("the sandbox refused to start the command; no test ran",)
        refused = Verdict(False, "broken", True, DENIED_PREFIX + denied, None, refusal)
        return result(raw, refused, ParseResult(), info)
    parsed, report_ok, raw, said = read_results(plan, raw, notes, stdout_path, stderr_path)
    verdict = classify(plan, raw, parsed, report_ok=report_ok, said=said)
    if counter is not None:
        with contextlib.suppress(Exception):
            on_progress(counter.snapshot())  # type: ignore[misc]
    return result(raw, verdict, parsed, info)
