"""One module per test runner, listed in one plain dict (no registration magic).

The entry points other modules call:

- `parse_text(framework, lines)`: streaming, total parse of a runner's human output;
- `parse_report(report_format, path)`: the machine report greenloop plans
  ("vitest-json", "jest-json", "junit", "node-tap", "pytest-json");
- `progress_event(framework, line)`: "pass" / "fail" / "skip" for one finished-test line.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType
from typing import Any

from greenloop.frameworks.common import Event, capped
from greenloop.model import ParseResult

__all__ = [
    "MODULES",
    "REPORT_FORMATS",
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
}


def module(framework: str) -> ModuleType | None:
    """The module of `framework`, or None when it is not known."""
    name = MODULES.get(framework)
    return importlib.import_module(name) if name else None


REPORT_FORMATS: tuple[str, ...] = ("vitest-json", "jest-json", "junit", "node-tap", "pytest-json")


def parse_text(framework: str, lines: Iterable[Any], root: str | None = None) -> ParseResult:
    """Parse a runner's text output, one line at a time. Never raises.

    `root` (optional) shortens absolute paths under it to workspace-relative ones.
    """
    mod = module(framework)
    if mod is None:
        return ParseResult(notes=(f"unknown framework {framework!r}; known: {', '.join(MODULES)}",))
    result: ParseResult = mod.parse_text(lines, root=root)
    return capped(result)


def parse_report(report_format: str, path: str, root: str | None = None) -> ParseResult:
    """Parse a runner's machine report. Missing or invalid: recognized=False with a note."""
    return capped(_parse_report(report_format, path, root))


def _parse_report(report_format: str, path: str, root: str | None) -> ParseResult:
    try:
        if report_format == "vitest-json":
            from greenloop.frameworks import vitest

            return vitest.parse_report(path, root)
        if report_format == "jest-json":
            from greenloop.frameworks import jest

            return jest.parse_report(path, root)
        if report_format == "junit":
            from greenloop.frameworks import junit

            return junit.parse_junit(path, root)
        if report_format == "node-tap":
            from greenloop.frameworks import node_test

            return node_test.parse_report(path, root)
        if report_format == "pytest-json":
            from greenloop.frameworks import pytest_report

            return pytest_report.parse_json_report(path, root)
    except Exception as exc:  # totality: a report never crashes the caller
        return ParseResult(notes=(f"report {path} could not be read: {type(exc).__name__}: {exc}",))
    known = ", ".join(REPORT_FORMATS)
    return ParseResult(notes=(f"unknown report format {report_format!r}; known: {known}",))


def progress_event(framework: str, line: str) -> Event | None:
    """The event of one finished-test line of the runner's default reporter, else None."""
    mod = module(framework)
    if mod is None:
        return None
    try:
        ev: Event | None = mod.progress_event(line)
        return ev
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
        fn = getattr(mod, "progress_counts", None)
        if fn is not None:
            counts: dict[Event, int] | None = fn(line)
            return counts
        ev: Event | None = mod.progress_event(line)
        return {ev: 1} if ev else None
    except Exception:
        return None
