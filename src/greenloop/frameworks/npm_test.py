"""`npm test` (and pnpm/yarn/bun `test` scripts): sniff which runner produced the output and
delegate to its parser.

The script line npm echoes (`> vitest run`) decides first; otherwise the runners' own
anchor lines do (` RUN  v`, `Test Files`, `Tests:`, `TAP version`, `ℹ tests`, pytest's
`test session starts`, `bun test v`); mocha's and unittest's output is known by its script line
or, failing that, by whichever parser recognises the closing summary. Lines seen before the
decision are buffered (bounded) and replayed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from greenloop.frameworks import bun, jest, mocha, node_test, pytest, unittest, vitest
from greenloop.frameworks.common import Event, LineParser, run_parser, strip_ansi
from greenloop.model import ParseResult

__all__ = ["TextParser", "parse_text", "progress_event", "sniff"]

_BUFFER_LINES = 5000
# npm and pnpm echo the script as "> vitest run", yarn and bun as "$ vitest run"; env
# assignments or wrappers (cross-env, npx) may precede the runner.
_SCRIPT = re.compile(
    r"^[>$] (?:\S+ )*?(vitest|jest|node --test|pytest|python -m pytest|mocha|bun test|python -m unittest)\b"
)
_FACTORIES: dict[str, Callable[[str | None], LineParser]] = {
    "vitest": lambda root: vitest.TextParser(root=root),
    "jest": lambda root: jest.TextParser(root=root),
    "node:test": lambda root: node_test.TextParser(root=root),
    "pytest": lambda root: pytest.TextParser(root=root),
    "mocha": lambda root: mocha.TextParser(root=root),
    "bun": lambda root: bun.TextParser(root=root),
    "unittest": lambda root: unittest.TextParser(root=root),
}
_SCRIPT_RUNNER = {"node --test": "node:test", "python -m pytest": "pytest", "bun test": "bun",
                  "python -m unittest": "unittest"}


def sniff(line: str) -> str | None:
    """Which runner a single line betrays, or None."""
    s = strip_ansi(line)
    m = _SCRIPT.match(s)
    if m:
        word = m.group(1)
        return _SCRIPT_RUNNER.get(word, word)
    if s.startswith(" RUN  v") or re.match(r"^\s*Test Files\s+\d", s) or "⎯⎯ Failed Tests" in s:
        return "vitest"
    if s.startswith(("Tests:", "Test Suites:")) or re.match(r"^\s*(PASS|FAIL) \S+\.(?:[cm]?[jt]sx?)", s):
        return "jest"
    if s.startswith("TAP version") or s.startswith("# Subtest:") or s.startswith("ℹ tests "):
        return "node:test"
    if "test session starts" in s and s.startswith("="):
        return "pytest"
    if s.startswith("bun test v"):
        return "bun"
    return None


@dataclass
class TextParser:
    """Streaming parser of npm test's text output: `feed` one line at a time, then `finish`."""

    root: str | None = None
    buffer: list[str] = field(default_factory=list)
    delegate: LineParser | None = None
    chosen: str | None = None
    npm_errors: list[str] = field(default_factory=list)

    def feed(self, line: str) -> None:
        """Read one line of npm test's output."""
        if line.startswith("npm error") or line.startswith("npm ERR!"):
            if len(self.npm_errors) < 5:
                self.npm_errors.append(line)
            return
        if self.delegate is not None:
            self.delegate.feed(line)
            return
        found = sniff(line)
        if found is not None:
            self._choose(found).feed(line)
            return
        if len(self.buffer) < _BUFFER_LINES:
            self.buffer.append(line)

    def _choose(self, name: str) -> LineParser:
        """Hand the lines seen so far to runner `name`'s parser, which takes every later line."""
        self.chosen = name
        delegate = self.delegate = _FACTORIES[name](self.root)
        for b in self.buffer:
            delegate.feed(b)
        self.buffer = []
        return delegate

    def finish(self) -> ParseResult:
        """The result of every line fed so far."""
        notes: list[str] = []
        if self.delegate is None:
            # Nothing betrayed a runner: let each parser try the buffer and keep one that
            # recognised its closing summary.
            for name, make in _FACTORIES.items():
                p = make(self.root)
                for b in self.buffer:
                    p.feed(b)
                res = p.finish()
                if res.recognized:
                    self.chosen = name
                    return _with_notes(res, [f"npm test output parsed as {name}"])
            notes.append("could not tell which runner `npm test` ran (no vitest, jest, node:test or "
                         "pytest lines found)")
            notes.extend(f"npm said: {e}" for e in self.npm_errors)
            return ParseResult(notes=tuple(notes))
        res = self.delegate.finish()
        notes.append(f"npm test output parsed as {self.chosen}")
        notes.extend(f"npm said: {e}" for e in self.npm_errors if "Missing script" in e)
        return _with_notes(res, notes)


def _with_notes(res: ParseResult, notes: list[str]) -> ParseResult:
    # the runner's whole result (its passed and skipped tests by name too), the notes first
    return res._replace(notes=(*notes, *res.notes))


def parse_text(lines: Iterable[Any], root: str | None = None) -> ParseResult:
    """Parse npm test's text output, one line at a time (total: never raises)."""
    return run_parser(lambda: TextParser(root=root), lines, "npm-test")


def progress_event(line: str) -> Event | None:
    """pass/fail/skip of one finished-test line of npm test's output, else None."""
    for fn in (vitest.progress_event, jest.progress_event, node_test.progress_event, pytest.progress_event,
               mocha.progress_event, bun.progress_event, unittest.progress_event):
        ev = fn(line)
        if ev is not None:
            return ev
    return None
