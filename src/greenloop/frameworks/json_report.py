"""The JSON report vitest and jest share (`testResults`, one entry a test file, each with its
`assertionResults`): read or refused with a note, its tests counted as each runner's parser
walks its files, and its result with the run's duration."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from greenloop.frameworks.common import relativize
from greenloop.frameworks.results import closing_result
from greenloop.model import Failure, ParseResult

__all__ = ["ReportTally", "json_report_result", "read_json_report"]


@dataclass
class ReportTally:
    """The counts, failures and names of a JSON report as its files are read."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failures: list[Failure] = field(default_factory=list)
    passed_names: list[str] = field(default_factory=list)
    skipped_names: list[str] = field(default_factory=list)  # skipped, pending and todo alike
    load_errors: list[str] = field(default_factory=list)
    end: float | None = None

    def files(self, data: dict[str, Any], root: str | None) -> Iterator[tuple[dict[str, Any], str, str]]:
        """Each test file's entry with its path as written and relative to `root`; the latest
        end time among them is kept for the run's duration."""
        for r in data["testResults"]:
            if not isinstance(r, dict):
                continue
            file = str(r.get("name") or "")
            rel = relativize(file, root) if root else file
            if isinstance(r.get("endTime"), int | float):
                self.end = max(self.end or 0.0, float(r["endTime"]))
            yield r, file, rel

    def count(
        self,
        assertions: Iterable[dict[str, Any]],
        name_of: Callable[[dict[str, Any]], str],
        failure_of: Callable[[dict[str, Any]], Failure],
    ) -> None:
        """Count one file's tests: passed (named), failed (with its failure), else skipped
        (named: skipped, pending and todo are what a test taken away looks like)."""
        for a in assertions:
            status = a.get("status")
            if status == "passed":
                self.passed += 1
                self.passed_names.append(name_of(a))
            elif status == "failed":
                self.failed += 1
                self.failures.append(failure_of(a))
            else:
                self.skipped += 1
                self.skipped_names.append(name_of(a))

    def result(self, start: object) -> ParseResult:
        """The report's ParseResult; `start` is its startTime (ms)."""
        return json_report_result(
            self.passed, self.failed, self.skipped, self.failures, start, self.end, self.load_errors,
            self.passed_names, self.skipped_names,
        )


def _load_json_report(path: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return None, f"report {path} is missing: the runner never wrote it (it crashed or was killed)"
    except (OSError, ValueError) as exc:
        return None, f"report {path} is not valid JSON ({type(exc).__name__}: {exc})"
    if not isinstance(data, dict) or not isinstance(data.get("testResults"), list):
        return None, f"report {path} has no 'testResults' list: not a vitest/jest JSON report"
    return data, None


def read_json_report(
    path: str, root: str | None, parse_data: Callable[[dict[str, Any], str | None], ParseResult]
) -> ParseResult:
    """Read a vitest/jest JSON report (a dict with a `testResults` list) with `parse_data`.

    Missing or invalid gives recognized=False and a note; `parse_data` raising gives a note.
    """
    data, problem = _load_json_report(path)
    if data is None:
        return ParseResult(notes=(problem or "report unreadable",), recognized=False)
    try:
        return parse_data(data, root)
    except Exception as exc:
        return ParseResult(notes=(f"report {path} could not be read: {type(exc).__name__}: {exc}",))


def json_report_result(
    passed: int, failed: int, skipped: int, failures: Iterable[Failure],
    start: object, end: float | None, load_errors: list[str], passed_names: Iterable[str] = (),
    skipped_names: Iterable[str] = (),
) -> ParseResult:
    """The ParseResult of a vitest/jest JSON report from its counts and its start/end times (ms)."""
    duration = int(end - start) if end is not None and isinstance(start, int | float) else None
    return closing_result(
        (passed, failed, skipped),
        failures,
        duration_ms=max(duration, 0) if duration is not None else None,
        load_errors=load_errors,
        passed_names=passed_names,
        skipped_names=skipped_names,
    )
