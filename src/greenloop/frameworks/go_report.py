"""go test's report: the file of test2json events `go test -json` writes, which greenloop
stores as the run's stdout.txt (format "go-json"), with the run's stderr.txt beside it (Go
prints build errors there, as text).

A report is read whole, and the four lines of each test that ran alone and passed (most of a
green run) are read by one match; every other line goes through frameworks/go.py's GoParser,
which reads events and text alike.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from greenloop.frameworks.common import run_parser
from greenloop.frameworks.go import JSON_NUMBER, PLAIN_CHAR, GoParser
from greenloop.model import ParseResult

__all__ = ["ReportParser", "parse_report"]

_WHOLE_FILE_BYTES = 32 << 20  # larger reports are read a line at a time (memory stays flat)

# The four lines of a test that ran alone and passed: run, Go's `=== RUN` and `--- PASS`
# lines, pass (most of a green run). GoParser would read each by its plain-event pattern;
# together they only make the test (if new) and mark it passed, as both output lines are
# Go's own, which a failure's body never keeps (go.py's `=== RUN` and `--- PASS` patterns
# match them, the name starting with a non-space). One match per test instead of four.
_NAME = rf"(?=\S){PLAIN_CHAR}+"
_PASSED_TEST = re.compile(
    rf'\{{"Time":"{PLAIN_CHAR}*","Action":"run","Package":"({PLAIN_CHAR}*)","Test":"({_NAME})"\}}\n'
    rf'\{{"Time":"{PLAIN_CHAR}*","Action":"output","Package":"\1","Test":"\2","Output":"=== RUN   \2\\n"\}}\n'
    rf'\{{"Time":"{PLAIN_CHAR}*","Action":"output","Package":"\1","Test":"\2",'
    rf'"Output":"--- PASS: \2 \(\d+(?:\.\d+)?s\)\\n"\}}\n'
    rf'\{{"Time":"{PLAIN_CHAR}*","Action":"pass","Package":"\1","Test":"\2","Elapsed":{JSON_NUMBER}\}}\n'
)


class ReportParser(GoParser):
    """GoParser over report files: a file up to _WHOLE_FILE_BYTES is read in one call."""

    def consume(self, paths: Iterable[str]) -> None:
        """Read each report file in turn; a file that cannot be opened is skipped."""
        for path in paths:
            try:
                fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
            except OSError:
                continue
            with fh:
                # text mode turns \r\n and a lone \r into \n: no line keeps a \r
                if os.fstat(fh.fileno()).st_size > _WHOLE_FILE_BYTES:
                    self._read(line.rstrip("\n") for line in fh)
                    continue
                text = fh.read()
            self._read_text(text)

    def _read_text(self, text: str) -> None:
        """Read a whole report: a passed test's four lines in one match (_PASSED_TEST), the
        other lines as `_read` reads them, in their order."""
        passed_test = _PASSED_TEST.match
        tests = self.tests
        lines: list[str] = []  # lines not yet read, before the next passed test
        pos, size = 0, len(text)
        while pos < size:
            m = passed_test(text, pos)
            if m is None:
                end = text.find("\n", pos)
                if end < 0:
                    end = size
                lines.append(text[pos:end])
                pos = end + 1  # the file's last newline ends a line, it starts none
                continue
            if lines:
                self._read(lines)
                lines = []
            self.events = True
            pkg, name = m.groups()
            t = tests.get((pkg, name))
            if t is None:
                if pkg:
                    self.pkgs_seen.add(pkg)
                t = self._test(pkg, name)
            t.outcome = "pass"
            pos = m.end()
        self._read(lines)


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """Read a file of `go test -json` events (greenloop stores them as the run's stdout.txt).

    Go prints build errors as text on stderr, beside the events: a run's stderr.txt next to
    its stdout.txt is read after it."""
    if not os.path.exists(path):
        return ParseResult(notes=(f"report {path} is missing: go test never wrote it",))
    paths = [path]
    if os.path.basename(path) == "stdout.txt":
        paths.append(os.path.join(os.path.dirname(path), "stderr.txt"))
    parsed = run_parser(lambda: ReportParser(root), paths, "go")
    if not parsed.recognized:
        return parsed._replace(notes=(*parsed.notes, f"report {path} holds no go test events"))
    return parsed
