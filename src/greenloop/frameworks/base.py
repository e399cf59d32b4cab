"""What the dispatcher (frameworks/__init__.py) calls on a runner's module, as Protocols.

Every module in MODULES is a `Framework`: it parses its runner's text output and names the
event of one finished-test line. A module whose runner prints lines that stand for several
tests (pytest's rows of dots, vitest's per-file lines) is also `CountsProgress`. A module
named in REPORT_READERS is a `ReportReader` of that machine report.

mypy checks that each module satisfies its Protocols through `_CHECKED` below (a module can
stand for a Protocol, PEP 544); the block costs nothing at run time, where the modules are
imported on first use. tests/test_parse_text.py checks the same of MODULES and REPORT_READERS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from greenloop.frameworks.common import Event
from greenloop.model import ParseResult

__all__ = ["CountsProgress", "Framework", "ReportReader"]


class Framework(Protocol):
    """A runner's module as the dispatcher uses it."""

    def parse_text(self, lines: Iterable[Any], root: str | None = None) -> ParseResult:
        """Parse the runner's text output, one line at a time; never raises."""
        ...

    def progress_event(self, line: str) -> Event | None:
        """pass/fail/skip of one finished-test line of the runner's default reporter, else None."""
        ...


class CountsProgress(Protocol):
    """A runner's module whose output lines may each stand for several finished tests."""

    def progress_counts(self, line: str) -> dict[Event, int] | None:
        """How many tests one line reports finished, by event; None for other lines."""
        ...


class ReportReader(Protocol):
    """A module that reads one machine report format."""

    def parse_report(self, path: str, root: str | None = None) -> ParseResult:
        """The report at `path`; missing or invalid gives recognized=False with a note."""
        ...


if TYPE_CHECKING:  # a static check only: mypy proves each module fits its Protocols
    from greenloop.frameworks import (
        bun,
        cargo,
        go,
        go_report,
        jest,
        junit,
        mocha,
        nextest,
        node_test,
        npm_test,
        pytest,
        pytest_report,
        unittest,
        vitest,
        vitest_report,
    )

    _CHECKED_FRAMEWORKS: tuple[Framework, ...] = (
        vitest, jest, npm_test, pytest, node_test, go, cargo, mocha, unittest, bun,
    )
    _CHECKED_COUNTS: tuple[CountsProgress, ...] = (pytest, vitest, unittest)
    _CHECKED_REPORTS: tuple[ReportReader, ...] = (
        vitest_report, jest, junit, node_test, pytest_report, go_report, nextest, mocha, unittest, bun,
    )
