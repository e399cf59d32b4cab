"""How every parser closes: the ParseResult built from its counts, failures and notes, the
note of a text output whose closing counts never came, a failure past the detail bound, a
runner's own JSON report read or refused with a note, and what load failures mean for the run.

Parsers count differently (their runners' closing lines differ); what they hand back is
built here, so each result carries the same fields the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from greenloop.model import Failure, ParseResult, Summary

__all__ = [
    "closing_result",
    "counts_seen",
    "distinct_values",
    "load_error_of",
    "load_failures_only",
    "load_note",
    "read_json_object",
    "summary_of",
    "unclosed_note",
    "undetailed",
]

Counts = tuple[int, int, int]  # (passed, failed, skipped)
_UNDETAILED_MESSAGE = 200  # characters of the message a failure past the detail bound keeps


def closing_result(
    counts: Counts,
    failures: Iterable[Failure],
    *,
    notes: Iterable[str] = (),
    recognized: bool = True,
    duration_ms: int | None = None,
    load_errors: list[str] | None = None,
    passed_names: Iterable[str] = (),
    skipped_names: Iterable[str] = (),
    timed_out: bool = False,
) -> ParseResult:
    """The ParseResult a parser hands back: its (passed, failed, skipped) counts, the failures
    it listed, its notes, and the files that could not load (as `load_error`)."""
    return ParseResult(
        summary=summary_of(*counts),
        failures=tuple(distinct_values(f) for f in failures),
        notes=tuple(notes),
        recognized=recognized,
        duration_ms=duration_ms,
        load_error=load_error_of(load_errors or []),
        passed_tests=tuple(passed_names),
        skipped_tests=tuple(skipped_names),
        timed_out=timed_out,
    )


def distinct_values(failure: Failure) -> Failure:
    """The failure without expected and got when they read the same: two equal texts say
    nothing of what differs (shortened reprs, values whose difference the text hides), and
    nothing is better than the same text twice."""
    if failure.expected is not None and failure.expected == failure.got:
        return failure._replace(expected=None, got=None)
    return failure


def counts_seen(progress: Mapping[str, int], failures_listed: int) -> Counts:
    """(passed, failed, skipped) from the finished-test lines seen, when the runner's closing
    counts never came: a failure listed in detail counts even if its own line was missed."""
    return progress["pass"], max(progress["fail"], failures_listed), progress["skip"]


def unclosed_note(counts: Counts, missing: str, unrecognised: str) -> str:
    """The note of a text output without its closing counts: `missing` (what was not found) and
    where the counts come from, or `unrecognised` when no test line was seen either."""
    return f"{missing}; counts come from the lines seen" if any(counts) else unrecognised


def undetailed(failure: Failure) -> Failure:
    """A failure past MAX_DETAILED_FAILURES: named, placed and counted, its message cut."""
    return Failure(
        test=failure.test,
        file=failure.file,
        line=failure.line,
        kind=failure.kind,
        message=failure.message[:_UNDETAILED_MESSAGE],
    )


def read_json_object(path: str, key: str, why_missing: str, what: str) -> dict[str, Any] | ParseResult:
    """The JSON object of a runner's report, or the unrecognised result that says why not:
    missing (`why_missing` says what that means), not JSON, or without its `key` dict (then
    it is not `what`)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return ParseResult(notes=(f"report {path} is missing: the runner never wrote it ({why_missing})",))
    except (OSError, ValueError) as exc:
        return ParseResult(notes=(f"report {path} is not valid JSON ({type(exc).__name__}: {exc})",))
    if not isinstance(data, dict) or not isinstance(data.get(key), dict):
        return ParseResult(notes=(f"report {path} has no '{key}': not {what}",))
    return data


def summary_of(passed: int, failed: int, skipped: int) -> Summary:
    """The Summary of these counts (total is their sum)."""
    return Summary(total=passed + failed + skipped, passed=passed, failed=failed, skipped=skipped)


def load_error_of(load_errors: list[str]) -> str | None:
    """A result's `load_error`: the first five files that could not load, or None."""
    return "; ".join(load_errors[:5]) if load_errors else None


def load_failures_only(parsed: ParseResult) -> bool:
    """Did the suite fail only because files could not load (no other test failed)?

    The rule every surface applies (run.classify, vitest_report.parse_json_report, the hooks): when
    some files fail to load and other tests fail normally, the run is red (the load failures
    are listed as failures of kind "load", with a note); only when the load failures are all
    there is, is the run broken with next_action "retry_tester".
    """
    if not parsed.load_error:
        return False
    loads = sum(1 for f in parsed.failures if f.kind == "load")
    others = len(parsed.failures) - loads
    return others == 0 and parsed.summary.failed <= max(loads, 1)


def load_note(parsed: ParseResult) -> str:
    """The note of a red run that also has files which could not load."""
    return (
        f"some test files could not load ({parsed.load_error}); they are listed as failures of "
        'kind "load" beside the tests that failed'
    )
