"""vitest's JSON report (`--reporter=json --outputFile=…`): counts, failures with their
assertion's location, files that could not load, and the contract greenloop's own vitest
command reads (`parse_json_report`: passed/failed/broken with the next action)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from greenloop.frameworks.common import (
    bounded_join,
    expected_got,
    relativize,
    strip_ansi,
    test_frame,
    trim_stack,
)
from greenloop.frameworks.json_report import ReportTally, read_json_report
from greenloop.frameworks.results import load_failures_only, load_note
from greenloop.model import Failure, ParseResult, Summary

__all__ = [
    "VitestReport", "failure_from_text", "no_tests", "no_tests_failure", "parse_json_report", "parse_report",
]


def _split_failure_message(text: str) -> tuple[str, str]:
    """A failureMessages entry is `Error: message\\n    at frame…`: split message from stack."""
    lines = strip_ansi(text).splitlines()
    msg: list[str] = []
    i = 0
    while i < len(lines) and not lines[i].lstrip().startswith("at "):
        msg.append(lines[i])
        i += 1
    return "\n".join(msg).strip(), "\n".join(lines[i:])


def failure_from_text(test: str, file: str | None, text: str, root: str | None,
                      kind: Literal["test", "load", "hook"] = "test",
                      location: dict[str, Any] | None = None) -> Failure:
    """One failure from the text of a failing test as vitest wrote it (message, then the stack)."""
    message, stack = _split_failure_message(text)
    exp, got = expected_got(message.splitlines())
    ufile, uline, origin = test_frame(stack, file, root)
    line: int | None = None
    if location and isinstance(location.get("line"), int):
        line = int(location["line"])
    elif uline is not None:
        line = uline
        file = ufile or file
    return Failure(
        test=test,
        file=relativize(file, root) if file else None,
        line=line,
        origin=origin,
        message=bounded_join(message.splitlines()[:20]),
        expected=exp,
        got=got,
        stack=trim_stack(stack, root),
        kind=kind,
    )


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """Parse vitest's JSON report. Missing or invalid gives recognized=False and a note."""
    return read_json_report(path, root, _parse_report_data)


def _parse_report_data(data: dict[str, Any], root: str | None) -> ParseResult:
    tally = ReportTally()
    notes: list[str] = []
    for r, file, rel in tally.files(data, root):
        assertions = [a for a in r.get("assertionResults") or () if isinstance(a, dict)]
        status = r.get("status")
        message = relativize(strip_ansi(str(r.get("message") or "")), root)  # no temp paths
        # "pending" never finished: the run stopped early (bail) or the worker running the file
        # died; vitest's own Tests line counts such a test nowhere, and neither does this
        finished = [a for a in assertions if a.get("status") != "pending"]
        if len(finished) < len(assertions):
            notes.append(f"{rel}: {len(assertions) - len(finished)} test(s) never reported a result (the run "
                         "stopped early, or the worker running the file died)")
        tally.count(finished, _assertion_name, partial(_assertion_failure, file=file, root=root))
        has_failed_test = any(a.get("status") == "failed" for a in assertions)
        if status == "failed" and not assertions and no_tests(message):
            # the file loaded and declares no test: vitest fails the run for it, in its words
            tally.failed += 1
            tally.failures.append(no_tests_failure(rel, message))
        elif status == "failed" and not assertions:
            tally.failed += 1
            first = message.splitlines()[0] if message else "failed to load"
            tally.load_errors.append(f"{rel}: {first}")
            tally.failures.append(Failure(test=rel, file=rel, message=bounded_join(message.splitlines()[:20]),
                                          kind="load", stack=trim_stack(message, root)))
        elif status == "failed" and not has_failed_test:
            # A hook threw: vitest skips the suite's tests and the JSON carries no detail. Name
            # the failure after the describe path all the skipped tests share.
            tally.failed += 1
            paths = [[str(x) for x in a.get("ancestorTitles") or ()] for a in assertions]
            common = paths[0] if paths else []
            for p in paths[1:]:
                n = 0
                while n < min(len(common), len(p)) and common[n] == p[n]:
                    n += 1
                common = common[:n]
            name = " > ".join(common) if common else rel
            tally.failures.append(Failure(
                test=name, file=rel, kind="hook",
                message=message or "a beforeAll/afterAll hook failed; vitest's JSON report carries no "
                "detail (the text output's 'Failed Suites' block has it)",
            ))
    result = tally.result(data.get("startTime"))
    return result._replace(notes=(*result.notes, *notes)) if notes else result


_NO_TESTS = "No test suite found in file"


def no_tests(message: str) -> bool:
    """Is this vitest's word for a test file that loaded and declares no test? (Not a file
    that could not load: its code ran.)"""
    return message.removeprefix("Error: ").startswith(_NO_TESTS)


def no_tests_failure(file: str, message: str) -> Failure:
    """The failure of a test file that loaded and declares no test, in vitest's words; its hint
    says what vitest wants (the hint rules would read it as a failing assertion or a load)."""
    return Failure(
        test=file, file=file, kind="test", message=message.splitlines()[0] if message else _NO_TESTS,
        hint=f"vitest found no test in {file}, a file it takes for a test file (it loaded fine): add "
        "a test to it, or rename it or exclude it in vitest's config if it holds no tests",
    )


def _assertion_failure(a: dict[str, Any], file: str, root: str | None) -> Failure:
    msgs = a.get("failureMessages") or [""]
    loc = a.get("location") if isinstance(a.get("location"), dict) else None
    return failure_from_text(_assertion_name(a), file, str(msgs[0]), root, "test", loc)


def _assertion_name(a: dict[str, Any]) -> str:
    """A test's name as failures carry it: its describe path and title, joined by ' > '."""
    ancestors = [str(x) for x in a.get("ancestorTitles") or ()]
    return " > ".join([*ancestors, str(a.get("title") or a.get("fullName") or "")])


@dataclass(frozen=True)
class VitestReport:
    """The Tester seed's contract for a vitest JSON report."""

    ok: bool
    crashed: bool
    crash_reason: str | None
    summary: Summary
    failures: tuple[Failure, ...]
    duration_ms: int | None
    next_action: Literal["retry_coder", "retry_tester"] | None = None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The contract as JSON data."""
        return {
            "ok": self.ok,
            "crashed": self.crashed,
            "crash_reason": self.crash_reason,
            "summary": self.summary.to_json(),
            "failures": [f.to_json() for f in self.failures],
            "duration_ms": self.duration_ms,
            "next_action": self.next_action,
            "notes": list(self.notes),
        }


def parse_json_report(path: str | os.PathLike[str], root: str | None = None) -> VitestReport:
    """Read a vitest JSON report into `{ok, crashed, crash_reason, summary, failures, duration_ms}`.

    A missing or invalid report is crashed with its reason. A suite that cannot load the code
    under test (SyntaxError, missing module) is crashed with next_action "retry_tester";
    ordinary failing tests give next_action "retry_coder", also when some files could not
    load beside them (those are failures of kind "load", with a note).
    """
    res = parse_report(os.fspath(path), root)
    if not res.recognized:
        reason = res.notes[0] if res.notes else "vitest JSON report unreadable"
        return VitestReport(ok=False, crashed=True, crash_reason=reason, summary=res.summary,
                            failures=res.failures, duration_ms=res.duration_ms,
                            next_action="retry_tester", notes=res.notes)
    if res.load_error and load_failures_only(res):
        return VitestReport(ok=False, crashed=True,
                            crash_reason=f"the suite could not load the code under test: {res.load_error}",
                            summary=res.summary, failures=res.failures, duration_ms=res.duration_ms,
                            next_action="retry_tester", notes=res.notes)
    if res.summary.total == 0:
        return VitestReport(ok=False, crashed=True, crash_reason="no tests ran", summary=res.summary,
                            failures=(), duration_ms=res.duration_ms, next_action="retry_tester",
                            notes=res.notes)
    failed = res.summary.failed > 0
    notes = (*res.notes, load_note(res)) if res.load_error else res.notes
    return VitestReport(ok=not failed, crashed=False, crash_reason=None, summary=res.summary,
                        failures=res.failures, duration_ms=res.duration_ms,
                        next_action="retry_coder" if failed else None, notes=notes)


