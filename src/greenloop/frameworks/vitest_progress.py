"""Live progress of a vitest run, one output line at a time, for every vitest reporter: the
finished-test lines of the tree and verbose reporters, the per-file counts of the default
and agent reporters, and the dot reporter's characters. The tree line shapes are shared with
the text parser (frameworks/vitest.py)."""

from __future__ import annotations

import re

from greenloop.frameworks.common import Event, strip_ansi

__all__ = ["FILE_COUNTS", "FILE_LINE", "FILE_TREE_LINE", "TREE_LINE", "progress_counts", "progress_event"]

# a finished test (or file) in the tree: indent, status mark, the rest
TREE_LINE = re.compile(r"^(\s*)([✓✔×✗✖↓□])\s+(.+?)\s*$")
# the end of a file's line in the tree: `(3 tests | 1 failed) 12ms`
FILE_LINE = re.compile(r"\((?:\d+ tests?|no tests?)[^)]*\)(?: \d+m?s)?$")


def progress_event(line: str) -> Event | None:
    """One event per finished test line of vitest's tree/verbose output (file lines skipped)."""
    if not line or ("✓" not in line and "×" not in line and "↓" not in line and "□" not in line):
        return None
    m = TREE_LINE.match(strip_ansi(line))
    if not m or FILE_LINE.search(m.group(3)):
        return None
    sym = m.group(2)
    return "pass" if sym in "✓✔" else "fail" if sym in "×✗✖" else "skip"


# a file's counts in the tree: `(5 tests | 2 failed | 1 skipped)`
FILE_COUNTS = re.compile(r"\((\d+) tests?((?: \| \d+ [a-z]+)*)\)")
# a file's line in the default reporter's tree: `❯ tests/a.test.js (3 tests | 1 failed)`
FILE_TREE_LINE = re.compile(r"^(\s*)(❯)\s+(.+?)\s*$")
_DOT_LINE = re.compile(r"^[·x\-*]+$")


def progress_counts(line: str) -> dict[Event, int] | None:
    """Counts one line adds to live progress, for every vitest reporter at once.

    The default and agent reporters print a line per finished file with its counts (the
    agent reporter lists only failing tests under it, so the file line is the whole truth);
    the tests indented under it are not counted again. The verbose reporter prints one
    `file > test` line per test; the dot reporter one character per test.
    """
    if not line:
        return None
    s = strip_ansi(line)
    m = TREE_LINE.match(s) or FILE_TREE_LINE.match(s)
    if m:
        rest = m.group(3)
        fm = FILE_COUNTS.search(rest) if FILE_LINE.search(rest) else None
        if fm:
            parts = dict((w, int(n)) for n, w in re.findall(r"(\d+) ([a-z]+)", fm.group(2)))
            total = int(fm.group(1))
            failed = parts.get("failed", 0)
            skipped = parts.get("skipped", 0) + parts.get("todo", 0)
            return {"pass": max(total - failed - skipped, 0), "fail": failed, "skip": skipped}
        if len(m.group(1)) <= 1 and " > " in rest:  # verbose: " ✓ file > test 1ms"
            ev = progress_event(s)
            return {ev: 1} if ev else None
        return None
    if _DOT_LINE.match(s.strip()) and s.strip():
        t = s.strip()
        return {"pass": t.count("·"), "fail": t.count("x"), "skip": t.count("-") + t.count("*")}
    return None


