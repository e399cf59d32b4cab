"""`classify`: the one place where a run's exit and parse become an outcome.

Three outcomes that are never confused:

- green:  exit 0, at least one test ran, none failed, not timed out, not interrupted;
- red:    tests failed (next_action "retry_coder");
- broken: the runner could not start or is not installed, crashed, timed out, was interrupted,
          ran no tests, could only fail to load the code under test (next_action "retry_tester";
          when other tests failed too the run is red, the load failures listed beside them), left a
          planned machine report missing or unreadable, or exited non-zero without any failing
          test recognised.
"""

from __future__ import annotations

from typing import NamedTuple

from greenloop.model import ParseResult, Plan, RawRun

__all__ = ["Verdict", "classify"]


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
    from greenloop.frameworks.results import load_failures_only, load_note

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
    if total == 0 and parsed.summary.passed == 0 and plan.selection == "affected" and raw.exit_code == 0:
        # `vitest related` / `--findRelatedTests` found no test importing the changed files
        why = "no tests ran: no test reaches the changed files (--affected); this is not a green run"
        return Verdict(False, "broken", False, why, None, (*notes, why))
    if total == 0 and parsed.summary.passed == 0 and said and raw.exit_code not in (None, 0):
        # the runner wrote its (empty) report and said why it ran nothing: pytest's INTERNALERROR
        notes.append(f"no tests ran: the runner stopped with exit code {raw.exit_code}")
        return broken(f"the runner stopped before running any test: {said}")
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
