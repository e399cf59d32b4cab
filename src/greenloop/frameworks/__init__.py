"""One module per test runner, listed in one plain dict (no registration magic); what each
module provides is the Framework Protocol of frameworks/base.py.

The entry points other modules call:

- `parse_text(framework, lines)`: streaming, total parse of a runner's human output;
- `parse_report(report_format, path)`: the machine report greenloop plans, read by the module
  REPORT_READERS names for its format;
- `progress_event(framework, line)`: "pass" / "fail" / "skip" for one finished-test line.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from greenloop.model import ParseResult

if TYPE_CHECKING:
    # Names for the type checker only: importing a planning module of this package (go_plan,
    # cargo_plan) before the runner starts must not pay for the parsers' shared code
    # (common imports dataclasses, which imports inspect, ast and dis).
    from greenloop.frameworks.base import CountsProgress, Framework, ReportReader
    from greenloop.frameworks.common import Event

__all__ = [
    "MODULES",
    "REPORT_READERS",
    "module",
    "parse_report",
    "parse_text",
    "progress_counts",
    "progress_event",
]

# framework id -> its module, imported on first use (a run needs one parser, not all six)
MODULES: dict[str, str] = {
    "vitest": "greenloop.frameworks.vitest",
    "jest": "greenloop.frameworks.jest",
    "npm-test": "greenloop.frameworks.npm_test",
    "pytest": "greenloop.frameworks.pytest",
    "node:test": "greenloop.frameworks.node_test",
    "go": "greenloop.frameworks.go",
    "cargo": "greenloop.frameworks.cargo",
    "mocha": "greenloop.frameworks.mocha",
    "unittest": "greenloop.frameworks.unittest",
    "bun": "greenloop.frameworks.bun",
}


def module(framework: str) -> Framework | None:
    """The module of `framework`, or None when it is not known."""
    name = MODULES.get(framework)
    # (base.py has mypy prove each module in MODULES is a Framework)
    return cast("Framework", importlib.import_module(name)) if name else None


# report format -> the module whose `parse_report` reads it (a ReportReader)
REPORT_READERS: dict[str, str] = {
    "vitest-json": "greenloop.frameworks.vitest_report",
    "jest-json": "greenloop.frameworks.jest",
    "junit": "greenloop.frameworks.junit",
    "node-tap": "greenloop.frameworks.node_test",
    "pytest-json": "greenloop.frameworks.pytest_report",
    "go-json": "greenloop.frameworks.go_report",
    "nextest-junit": "greenloop.frameworks.nextest",
    "mocha-json": "greenloop.frameworks.mocha",
    "unittest-json": "greenloop.frameworks.unittest",
    "bun-junit": "greenloop.frameworks.bun",
}


def parse_text(framework: str, lines: Iterable[Any], root: str | None = None) -> ParseResult:
    """Parse a runner's text output, one line at a time. Never raises.

    `root` (optional) shortens absolute paths under it to workspace-relative ones.
    """
    mod = module(framework)
    if mod is None:
        return ParseResult(notes=(f"unknown framework {framework!r}; known: {', '.join(MODULES)}",))
    from greenloop.frameworks.common import capped

    return capped(mod.parse_text(lines, root=root))


def parse_report(report_format: str, path: str, root: str | None = None) -> ParseResult:
    """Parse a runner's machine report. Missing or invalid: recognized=False with a note."""
    from greenloop.frameworks.common import capped

    return capped(_parse_report(report_format, path, root))


def _parse_report(report_format: str, path: str, root: str | None) -> ParseResult:
    name = REPORT_READERS.get(report_format)
    if name is None:
        known = ", ".join(REPORT_READERS)
        return ParseResult(notes=(f"unknown report format {report_format!r}; known: {known}",))
    try:
        # (base.py has mypy prove each module in REPORT_READERS is a ReportReader)
        reader = cast("ReportReader", importlib.import_module(name))
        return reader.parse_report(path, root)
    except Exception as exc:  # totality: a report never crashes the caller
        return ParseResult(notes=(f"report {path} could not be read: {type(exc).__name__}: {exc}",))


def progress_event(framework: str, line: str) -> Event | None:
    """The event of one finished-test line of the runner's default reporter, else None."""
    mod = module(framework)
    if mod is None:
        return None
    try:
        return mod.progress_event(line)
    except Exception:
        return None


def progress_counts(framework: str, line: str) -> dict[Event, int] | None:
    """How many tests one output line reports finished, by event; None for other lines.

    Unlike `progress_event` this also counts lines that stand for several tests: pytest's
    rows of dots and vitest's per-file lines (the only per-test truth of vitest's agent
    reporter, which omits passing tests). Summing it over a run gives the live counts.
    """
    mod = module(framework)
    if mod is None:
        return None
    try:
        if hasattr(mod, "progress_counts"):
            return cast("CountsProgress", mod).progress_counts(line)
        ev = mod.progress_event(line)
        return {ev: 1} if ev else None
    except Exception:
        return None
