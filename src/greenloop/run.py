"""execute(plan) -> RunResult: the one place where exceptions and exits become outcomes.

The process layer (proc.py) reports what happened (exit code, deadline, interruption); the
parsers (frameworks/) say what the runner reported; this module cross-checks the two and
decides, in `classify`, between three outcomes that are never confused:

- green:  exit 0, at least one test ran, none failed, not timed out, not interrupted;
- red:    tests failed (next_action "retry_coder");
- broken: the runner could not start or is not installed, crashed, timed out, was interrupted,
          ran no tests, could only fail to load the code under test (next_action "retry_tester";
          when other tests failed too the run is red, the load failures listed beside them), left a
          planned machine report missing or unreadable, or exited non-zero without any failing
          test recognised.

The machine report greenloop planned is the primary source; the runner's text output is the
fallback (streamed from disk, never read whole into memory) and the notes say which was used.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from greenloop import proc
from greenloop.config import Config
from greenloop.model import (
    Failure,
    ParseResult,
    Plan,
    Progress,
    RawRun,
    RunResult,
    SandboxInfo,
)

if TYPE_CHECKING:
    from greenloop.sandbox import Launch, Policy

__all__ = ["Verdict", "classify", "execute", "output_tail"]

ProgressCallback = Callable[[Progress], None]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)")


# ----------------------------------------------------------------------------- parsing


def _lines(*paths: str) -> Iterator[str]:
    """The lines of the output files, one at a time (a 100 MB log never sits in memory)."""
    for path in paths:
        try:
            fh = open(path, encoding="utf-8", errors="replace", newline=None)  # noqa: SIM115
        except OSError:
            continue
        with fh:
            yield from (line.rstrip("\n") for line in fh)


def _parse_text(framework: str, stdout_path: str, stderr_path: str, root: str | None) -> ParseResult:
    from greenloop import frameworks

    fw = framework if framework else "npm-test"  # npm-test sniffs which runner wrote the output
    try:
        return frameworks.parse_text(fw, _lines(stdout_path, stderr_path), root=root)
    except Exception as exc:  # parsing is total by contract; a parser bug is still not a test failure
        note = f"the {fw} text parser failed ({type(exc).__name__}: {exc}); counts are unknown"
        return ParseResult(notes=(note,))


def _parse_report(fmt: str, path: str, root: str | None) -> ParseResult:
    from greenloop import frameworks

    try:
        return frameworks.parse_report(fmt, path, root=root)
    except Exception as exc:
        return ParseResult(notes=(f"the {fmt} report could not be read ({type(exc).__name__}: {exc})",))


def _with_hints(
    failures: tuple[Failure, ...], framework: str, language: str, root: str | None = None
) -> tuple[Failure, ...]:
    from greenloop import hints

    try:  # root: the hints read the failing lines and called functions from the runner's folder
        return hints.apply(failures, framework=framework or None, language=language, root=root)
    except Exception as exc:  # a hint-table bug must not turn a red run into a crash
        note = f"hints could not be built ({type(exc).__name__}: {exc})"
        return tuple(f._replace(hint=f.hint or note) for f in failures)


# Runners whose report can leave out what their text shows: bun writes no JUnit file when
# only files that fail to load ran, and leaves errors outside tests (a file that cannot load)
# out of the file when it writes one, yet prints every result and its closing counts.
_TEXT_IS_WHOLE = frozenset({"bun"})


def _silent_failure(raw: RawRun, parsed: ParseResult) -> bool:
    """A runner that failed while its report lists no failure (vitest's JSON leaves out
    unhandled errors; a crash after the report was written): its text output may say why."""
    failing = parsed.summary.failed or parsed.failures
    return not failing and raw.exit_code not in (None, 0) and not raw.timed_out and not raw.aborted


def _with_text_failures(report: ParseResult, text: ParseResult) -> ParseResult:
    """The report's result plus the failures only the text output shows, with a note."""
    known = {(f.test, f.kind) for f in report.failures}
    extra = tuple(f for f in text.failures if (f.test, f.kind) not in known)
    if not extra:
        return report
    s = report.summary
    summary = s._replace(total=s.total + len(extra), failed=s.failed + len(extra))
    names = ", ".join(f.test for f in extra[:3]) + (" …" if len(extra) > 3 else "")
    note = (
        f"the runner exited non-zero but its report lists no failure; {len(extra)} failure(s) "
        f"taken from the text output: {names}"
    )
    return report._replace(
        summary=summary,
        failures=(*report.failures, *extra),
        notes=(*report.notes, note),
        load_error=report.load_error or text.load_error,
    )


def _shortened(value: str | None) -> bool:
    # vitest's JSON report has only the assertion message, whose values chai shortens
    # ('Unexpected end at index 7, expected }…') or leaves out (toThrow's "but got '…'")
    return value is None or "…" in value


def _with_text_values(report: ParseResult, text: ParseResult) -> ParseResult:
    """The report's failures with expected/got from the text output of the same run where the
    report's are missing or shortened: the printed `Expected:`/`Received:` lines and diffs
    hold the full values."""
    printed = {f.test: f for f in text.failures if f.expected is not None or f.got is not None}
    failures = list(report.failures)
    changed = False
    for i, f in enumerate(failures):
        t = printed.get(f.test)
        if t is None or not (_shortened(f.expected) or _shortened(f.got)):
            continue
        failures[i] = f._replace(expected=t.expected if t.expected is not None else f.expected,
                                 got=t.got if t.got is not None else f.got)
        changed = True
    return report._replace(failures=tuple(failures)) if changed else report


_Running = list[tuple[str, str | None, int | None]]  # (test name, file, line)


def _stopped_in(plan: Plan, root: str | None) -> tuple[_Running, list[Failure]]:
    """A run stopped before it finished: the tests that were running (name, file, line) and
    the failures the runner's partial stream recorded in detail (pytest's plugin)."""
    if not plan.stream_file:
        return [], []
    try:
        if plan.framework == "pytest":
            from greenloop.frameworks.pytest_report import read_stream

            part = read_stream(plan.stream_file, root)
            if part is None:
                return [], []
            running: _Running = [(name, name.split("::", 1)[0], line) for name, line in part.running]
            return running, list(part.failures)
        if plan.framework == "node:test":
            from greenloop.frameworks.node_test import running_tests

            return running_tests(plan.stream_file, root), []
        if plan.framework in ("mocha", "unittest"):
            from greenloop.frameworks import stream

            return stream.running_tests(plan.stream_file, root), []
    except Exception:  # a torn record never turns a timeout into a crash of greenloop
        return [], []
    return [], []


def _with_stopped_tests(plan: Plan, raw: RawRun, parsed: ParseResult, root: str | None) -> ParseResult:
    """What a run stopped at its deadline (or interrupted) had seen: the partial counts and
    failures already parsed from its output and report, the detailed failures of the
    runner's stream, and one failure of kind "timeout" per test that was still running."""
    running, streamed = _stopped_in(plan, root)
    failures = list(parsed.failures)
    if streamed:  # the stream's failures carry details a cut text output does not
        detailed = {f.test for f in streamed}
        failures = [f for f in failures if f.test not in detailed] + streamed
    why = f"timed out after {plan.timeout_ms} ms" if raw.timed_out else "was interrupted"
    notes = list(parsed.notes)
    for name, file, line in running:
        failures.append(Failure(
            test=name, file=file, line=line, kind="timeout",
            message=f"still running when the run {why}; the whole process tree was stopped",
        ))
    if running:
        names = ", ".join(n for n, _, _ in running[:3]) + (" …" if len(running) > 3 else "")
        notes.append(f"the run {why} while {names} {'was' if len(running) == 1 else 'were'} running; "
                     "the counts and failures are those seen before it stopped")
    elif plan.framework in ("pytest", "node:test", "mocha", "unittest"):
        notes.append(f"the run {why}; no test was running (it stopped outside any test); the counts "
                     "and failures are those seen before it stopped")
    else:
        notes.append(f"the run {why}; the counts and failures are those its output showed before it "
                     f"stopped ({plan.framework or 'the runner'} does not say which test was running)")
    s = parsed.summary
    seen = max(s.failed, sum(1 for f in failures if f.kind != "timeout"))
    summary = s._replace(failed=seen + len(running), total=s.passed + s.skipped + seen + len(running))
    return parsed._replace(summary=summary, failures=tuple(failures), notes=tuple(notes))


# ----------------------------------------------------------------------------- outcome


class Verdict(NamedTuple):
    """What `classify` decided from the process and the parse."""

    ok: bool
    outcome: str
    crashed: bool
    crash_reason: str | None
    next_action: str | None
    notes: tuple[str, ...]


def classify(plan: Plan, raw: RawRun, parsed: ParseResult, *, report_ok: bool | None,
             said: str | None = None) -> Verdict:
    """Cross-check the process with the parse. `report_ok` None: no machine report was planned.
    `said`: the runner's own error lines (frameworks.common.runner_error) when its output
    was not recognised as a test run."""
    from greenloop.frameworks.common import load_failures_only, load_note

    notes: list[str] = []
    failed = parsed.summary.failed or len(parsed.failures)
    total = parsed.summary.total

    def broken(reason: str | None, next_action: str | None = "retry_tester", crashed: bool = True) -> Verdict:
        return Verdict(False, "broken", crashed, reason, next_action, tuple(notes))

    if raw.spawn_error is not None:
        return broken(f"the command could not start: {raw.spawn_error}", None)
    if raw.timed_out:
        reason = f"timed out after {plan.timeout_ms} ms; the whole process tree was stopped"
        stopped = [f.test for f in parsed.failures if f.kind == "timeout"]
        if stopped:
            more = f" (and {len(stopped) - 1} more)" if len(stopped) > 1 else ""
            reason += f" while {stopped[0]} was running{more}"
        before = failed - len(stopped)
        if before > 0:
            notes.append(f"{before} test(s) had failed before the timeout")
        return broken(reason, None)
    if raw.aborted:
        return broken("interrupted before the run finished; the whole process tree was stopped", None)
    if parsed.load_error and load_failures_only(parsed):
        return broken(f"the suite could not load the code under test: {parsed.load_error}")
    if report_ok is False:
        fmt = plan.report_format or "machine"
        if said:  # the runner said why it stopped: that is the reason, in its own words
            notes.append(f"the {fmt} report was missing after exit code {raw.exit_code}")
            return broken(f"the runner stopped before running the tests: {said}")
        reason = f"the {fmt} report was missing or invalid after exit code {raw.exit_code}"
        if raw.signal:
            reason += f" (killed by signal {raw.signal})"
        return broken(reason + "; the runner likely crashed before writing it (see stdout.txt/stderr.txt)")
    if raw.signal:
        return broken(f"the runner was killed by signal {raw.signal}")
    if failed:
        if parsed.load_error:  # some files could not load, other tests failed normally: red
            notes.append(load_note(parsed))
        if raw.exit_code == 0:
            notes.append(f"the runner exited 0 but reported {failed} failing test(s)")
        return Verdict(False, "red", False, None, "retry_coder", tuple(notes))
    if total == 0 and parsed.summary.passed == 0:
        notes.append(
            f"no tests ran (exit code {raw.exit_code}): check the target, the test file names "
            "and the runner's include patterns"
        )
        return broken("no tests ran", "retry_tester", crashed=False)
    if raw.exit_code != 0:
        if said:
            return broken(f"the runner exited with code {raw.exit_code} before any test result: {said}")
        return broken(
            f"the runner exited with code {raw.exit_code} but no failing test was recognised "
            "(see stdout.txt/stderr.txt)"
        )
    return Verdict(True, "green", False, None, None, tuple(notes))


def output_tail(stdout_path: str, stderr_path: str, chars: int) -> str:
    """The last `chars` characters of the run's output (stdout, then stderr), without ANSI codes."""
    if chars <= 0:
        return ""
    parts: list[str] = []
    for path in (stdout_path, stderr_path):
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as fh:
                fh.seek(max(0, size - chars * 4 - 64))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        text = _ANSI.sub("", text).replace("\r\n", "\n")
        if text.strip():
            parts.append(text[-chars:])
    return "\n".join(parts)[-chars:]


# ----------------------------------------------------------------------------- execute


class _Counter:
    """Counts finished tests for live progress, from two sources: the NDJSON lines greenloop's
    reporter for the runner appends per finished test (Plan.progress_file), and the runner's
    text output (frameworks.progress_counts) for runs without such a reporter or when it
    could not load. Once the stream has a line it is the count shown (the text output can
    count a suite as a test). The callback gets one snapshot per poll that moved a count."""

    def __init__(self, framework: str, on_progress: ProgressCallback, started: float) -> None:
        from greenloop.frameworks import progress_counts

        self.framework = framework or "npm-test"
        self.on_progress = on_progress
        self.started = started
        self.text = {"pass": 0, "fail": 0, "skip": 0}
        self.events = {"pass": 0, "fail": 0, "skip": 0}
        self.changed = False
        self.lock = threading.Lock()
        self.count_line = progress_counts

    def snapshot(self) -> Progress:
        with self.lock:
            text, events = dict(self.text), dict(self.events)
        c = events if any(events.values()) else text
        return Progress(
            passed=c["pass"],
            failed=c["fail"],
            skipped=c["skip"],
            elapsed_ms=int((time.monotonic() - self.started) * 1000),
        )

    def line(self, text: str) -> None:
        """One line of the runner's text output."""
        found = self.count_line(self.framework, text)
        if not found:
            return
        with self.lock:
            for kind, n in found.items():
                if kind in self.text:
                    self.text[kind] += n
            self.changed = True

    def event(self, text: str) -> None:
        """One NDJSON line of the progress stream: {"status": "pass"|"fail"|"skip", "count"?: n}."""
        import json

        try:
            record = json.loads(text)
            kind = record["status"]
            n = int(record.get("count", 1))
        except (ValueError, TypeError, KeyError, AttributeError):
            return  # a torn or foreign line: skipped, never fatal
        with self.lock:
            if kind in self.events and n > 0:
                self.events[kind] += n
                self.changed = True

    def flush(self) -> None:
        """After a poll of the files: report once if any count moved."""
        with self.lock:
            changed, self.changed = self.changed, False
        if changed:
            self.on_progress(self.snapshot())


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
    stdout_path = str(run_dir / "stdout.txt")
    stderr_path = str(run_dir / "stderr.txt")
    workspace = workspace or plan.cwd
    started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time()))
    notes = list(plan.notes)
    framework = plan.framework or None

    def result(raw: RawRun | None, verdict: Verdict, parsed: ParseResult, info: SandboxInfo) -> RunResult:
        failures = parsed.failures
        if failures:
            failures = _with_hints(failures, plan.framework, config.hint_language, plan.cwd)
        if failures and info.enforced_by:  # writes or connections the sandbox stopped say so
            from greenloop.sandbox import apply_denial_hints

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
            result_ref=str(run_dir / "result.json"),
            workspace=str(workspace),
            started_at=started_at,
            next_action=verdict.next_action,
            passed_tests=parsed.passed_tests,
            selection=plan.selection,
        )

    if plan.unavailable is not None:
        for path in (stdout_path, stderr_path):
            Path(path).touch()
        verdict = Verdict(False, "broken", True, f"runner not installed: {plan.unavailable}", None, ())
        info = SandboxInfo(policy.mode, None, str(workspace))  # resolved, not enforced
        return result(None, verdict, ParseResult(), info)

    from greenloop.sandbox import DENIED_PREFIX, SandboxUnavailable, launch

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
    from greenloop.sandbox import DENIED_PREFIX, bwrap_denial, signal_exit

    info = launched.info
    bwrapped = (info.enforced_by or "").startswith("bubblewrap")
    if launched.env_note:
        notes.append(launched.env_note)
    started = time.monotonic()
    counter = _Counter(plan.framework, on_progress, started) if on_progress is not None else None
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

    report_ok: bool | None = None
    parsed = ParseResult()
    root = plan.cwd  # failures' files are relative to where the runner ran (its node ids are)
    if plan.report_file and raw.spawn_error is None:
        parsed = _parse_report(plan.report_format or "", plan.report_file, root)
        if not parsed.recognized and plan.fallback_report_file and os.path.exists(plan.fallback_report_file):
            parsed = _parse_report(plan.fallback_report_format or "", plan.fallback_report_file, root)
            if parsed.recognized:
                notes.append(
                    f"the {plan.report_format} report was not written (the runner did not load "
                    f"greenloop's plugin); results come from the {plan.fallback_report_format} report"
                )
        report_ok = parsed.recognized
        if not report_ok and (raw.timed_out or raw.aborted) and (parsed.summary.total or parsed.failures):
            # node's TAP file stops where the run was stopped: what it holds is exact so far
            notes.append(f"the {plan.report_format} report was cut short by the stop; counts come "
                         "from the entries it holds")
        elif not report_ok:
            text = _parse_text(plan.framework, stdout_path, stderr_path, root)
            notes.append(
                f"the {plan.report_format} report was missing or invalid; counts come from the text output"
            )
            parsed = text._replace(notes=(*parsed.notes, *text.notes))
            if text.recognized and plan.framework in _TEXT_IS_WHOLE:
                report_ok = True  # the runner's own closing counts were read: not a crash
        elif plan.framework in _TEXT_IS_WHOLE and raw.exit_code not in (None, 0):
            from greenloop.frameworks.bun import with_text_errors

            parsed = with_text_errors(parsed, _parse_text(plan.framework, stdout_path, stderr_path, root))
        elif plan.framework == "vitest" and not (raw.timed_out or raw.aborted) and (
            raw.exit_code not in (None, 0)
            or any(_shortened(f.expected) or _shortened(f.got) for f in parsed.failures if f.kind == "test")
        ):
            # vitest's JSON report leaves out its unhandled errors (a dead worker among them)
            # and shortens values: the text output of the same run has both
            from greenloop.frameworks.vitest_errors import with_unhandled_errors

            text = _parse_text(plan.framework, stdout_path, stderr_path, root)
            parsed = with_unhandled_errors(parsed, text, plan.report_file, root)
            silent = _silent_failure(raw, parsed)
            parsed = _with_text_failures(parsed, text) if silent else _with_text_values(parsed, text)
        elif _silent_failure(raw, parsed):
            parsed = _with_text_failures(parsed, _parse_text(plan.framework, stdout_path, stderr_path, root))
    elif raw.spawn_error is None:
        parsed = _parse_text(plan.framework, stdout_path, stderr_path, root)
        if plan.shell:  # (npm-test's plan already says why it has no report)
            notes.append("results parsed from the text output of a verbatim command")
    if parsed.timed_out and not raw.timed_out:  # the runner's own deadline (go test -timeout)
        notes.append(f"the {plan.framework} runner's own timeout stopped the run before greenloop's")
        raw = raw._replace(timed_out=True)
    if raw.timed_out or raw.aborted:
        report_ok = None  # the missing report is a consequence, not the reason
        parsed = _with_stopped_tests(plan, raw, parsed, root)
    said = None
    if not parsed.recognized and raw.exit_code not in (None, 0) and not (raw.timed_out or raw.aborted):
        from greenloop.frameworks.common import relativize, runner_error

        said = runner_error(_lines(stdout_path, stderr_path))
        said = relativize(said, root) if said else None
    verdict = classify(plan, raw, parsed, report_ok=report_ok, said=said)
    if counter is not None:
        with contextlib.suppress(Exception):
            on_progress(counter.snapshot())  # type: ignore[misc]
    return result(raw, verdict, parsed, info)
