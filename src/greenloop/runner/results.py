"""A finished run's results: its machine report, the text output as fallback and complement.

The machine report greenloop planned is the primary source; the runner's text output is the
fallback (streamed from disk, never read whole into memory) and fills in what a report leaves
out (failures outside tests, shortened values). A run stopped at its deadline keeps what it
had seen, plus one "timeout" failure per test still running. Notes say which source was used.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from greenloop.model import Failure, ParseResult, Plan, RawRun

__all__ = [
    "output_lines",
    "output_tail",
    "parse_report",
    "parse_text",
    "read_results",
    "with_hints",
    "with_text_values",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)")


def output_lines(*paths: str) -> Iterator[str]:
    """The lines of the output files, one at a time (a 100 MB log never sits in memory)."""
    for path in paths:
        try:
            fh = open(path, encoding="utf-8", errors="replace", newline=None)  # noqa: SIM115
        except OSError:
            continue
        with fh:
            yield from (line.rstrip("\n") for line in fh)


def parse_text(framework: str, stdout_path: str, stderr_path: str, root: str | None) -> ParseResult:
    """The runner's text output parsed (never raises: a parser bug becomes a note)."""
    from greenloop import frameworks

    fw = framework if framework else "npm-test"  # npm-test sniffs which runner wrote the output
    try:
        return frameworks.parse_text(fw, output_lines(stdout_path, stderr_path), root=root)
    except Exception as exc:  # parsing is total by contract; a parser bug is still not a test failure
        note = f"the {fw} text parser failed ({type(exc).__name__}: {exc}); counts are unknown"
        return ParseResult(notes=(note,))


def parse_report(fmt: str, path: str, root: str | None) -> ParseResult:
    """A machine report parsed (never raises: an unreadable report becomes a note)."""
    from greenloop import frameworks

    try:
        return frameworks.parse_report(fmt, path, root=root)
    except Exception as exc:
        return ParseResult(notes=(f"the {fmt} report could not be read ({type(exc).__name__}: {exc})",))


def with_hints(
    failures: tuple[Failure, ...], framework: str, language: str, root: str | None = None
) -> tuple[Failure, ...]:
    """The failures placed and explained: those the runner left without a line placed at their
    test's declaration (greenloop.frameworks.declared), then each given the hint rules' hint,
    both reading the run's folder `root` through one bounded reader. Never raises: a lookup
    bug leaves a failure unplaced, a hint bug becomes the hint."""
    from greenloop.frameworks.declared import with_declarations
    from greenloop.hints import hint as hints
    from greenloop.hints.source import Sources

    sources = Sources(root) if root else None  # the failing lines, the called functions' files
    with contextlib.suppress(Exception):  # a place is a convenience; the failure stands without one
        failures = with_declarations(failures, framework or None, sources)
    try:
        return hints.apply(failures, framework=framework or None, language=language, sources=sources)
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


def with_text_values(report: ParseResult, text: ParseResult) -> ParseResult:
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
            from greenloop.frameworks.node_test_stream import running_tests

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


def read_results(
    plan: Plan, raw: RawRun, notes: list[str], stdout_path: str, stderr_path: str
) -> tuple[ParseResult, bool | None, RawRun, str | None]:
    """What a finished run reported: (parse, whether its planned machine report was read (None:
    none planned, or the run was stopped), the process record (timed out when the runner's own
    deadline stopped it), the runner's own error lines when its output was no test run).

    The machine report first, its fallback report next, the text output last; the text also
    completes a report that leaves out failures or shortens values. Notes say which was used.
    """
    report_ok: bool | None = None
    parsed = ParseResult()
    root = plan.cwd  # failures' files are relative to where the runner ran (its node ids are)
    if plan.report_file and raw.spawn_error is None:
        parsed = parse_report(plan.report_format or "", plan.report_file, root)
        if not parsed.recognized and plan.fallback_report_file and os.path.exists(plan.fallback_report_file):
            parsed = parse_report(plan.fallback_report_format or "", plan.fallback_report_file, root)
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
            text = parse_text(plan.framework, stdout_path, stderr_path, root)
            notes.append(
                f"the {plan.report_format} report was missing or invalid; counts come from the text output"
            )
            parsed = text._replace(notes=(*parsed.notes, *text.notes))
            if text.recognized and plan.framework in _TEXT_IS_WHOLE:
                report_ok = True  # the runner's own closing counts were read: not a crash
        elif plan.report_format == "nextest-junit":
            from greenloop.frameworks.nextest import with_skipped_from_summary

            text = parse_text(plan.framework, stdout_path, stderr_path, root)
            parsed = with_skipped_from_summary(parsed, text)
        elif plan.framework in _TEXT_IS_WHOLE and raw.exit_code not in (None, 0):
            from greenloop.frameworks.bun import with_text_errors

            parsed = with_text_errors(parsed, parse_text(plan.framework, stdout_path, stderr_path, root))
        elif plan.framework == "vitest" and not (raw.timed_out or raw.aborted) and (
            raw.exit_code not in (None, 0)
            or any(_shortened(f.expected) or _shortened(f.got) for f in parsed.failures if f.kind == "test")
        ):
            # vitest's JSON report leaves out its unhandled errors (a dead worker among them)
            # and shortens values: the text output of the same run has both
            from greenloop.frameworks.vitest_errors import with_unhandled_errors

            text = parse_text(plan.framework, stdout_path, stderr_path, root)
            parsed = with_unhandled_errors(parsed, text, plan.report_file, root)
            silent = _silent_failure(raw, parsed)
            parsed = _with_text_failures(parsed, text) if silent else with_text_values(parsed, text)
        elif _silent_failure(raw, parsed):
            parsed = _with_text_failures(parsed, parse_text(plan.framework, stdout_path, stderr_path, root))
    elif raw.spawn_error is None:
        parsed = parse_text(plan.framework, stdout_path, stderr_path, root)
        if plan.shell:  # (npm-test's plan already says why it has no report)
            notes.append("results parsed from the text output of a verbatim command")
    if parsed.timed_out and not raw.timed_out:  # the runner's own deadline (go test -timeout)
        notes.append(f"the {plan.framework} runner's own timeout stopped the run before greenloop's")
        raw = raw._replace(timed_out=True)
    if raw.timed_out or raw.aborted:
        report_ok = None  # the missing report is a consequence, not the reason
        parsed = _with_stopped_tests(plan, raw, parsed, root)
    said = None
    ran_none = parsed.summary.total == 0 and not parsed.failures
    stopped = raw.timed_out or raw.aborted
    if (not parsed.recognized or ran_none) and raw.exit_code not in (None, 0) and not stopped:
        from greenloop.frameworks.common import relativize, runner_error

        said = runner_error(output_lines(stdout_path, stderr_path))
        said = relativize(said, root) if said else None
    return parsed, report_ok, raw, said


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
