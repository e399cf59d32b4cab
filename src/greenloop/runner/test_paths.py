"""Which files of a workspace are test files, and the bounded walk that finds them.

Shared by the probe (which framework, which files) and the closure gate's marks
(closure/marks.py: which tests were taken away). It imports only the standard library's `os`,
`re` and greenloop's layout, so the Stop hook can walk a workspace without the probe's imports.

The walk is breadth-first with an entry budget, never follows symlinked folders and skips
node_modules, build output, caches, hidden folders and virtualenvs.
"""

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Iterator

from greenloop.layout import NOT_CODE_DIRS

__all__ = [
    "ENTRY_BUDGET",
    "MAX_DEPTH",
    "SKIP_DIRS",
    "TEST_DIRS",
    "Walk",
    "is_test_file",
    "is_virtualenv",
    "skipped_dir",
]

ENTRY_BUDGET = 20_000  # directory entries looked at before the walk stops (and says so)
MAX_DEPTH = 12

SKIP_DIRS = NOT_CODE_DIRS | {
    ".hg",
    ".svn",
    "out",
    ".nuxt",
    ".svelte-kit",
    ".output",
    ".turbo",
    ".parcel-cache",
    ".vite",
    ".cache",
    "target",
    ".eggs",
    "site-packages",
    "bower_components",
    "jspm_packages",
    ".yarn",
    ".pnpm-store",
    "testdata",  # Go's fixture folders (often holding go.mod files of their own), never a test root
    "vendor",  # vendored third-party code (Go, PHP, Ruby)
}
TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec"})

_JS_EXT = r"(?:[cm]?[jt]sx?)"
_JS_TEST = re.compile(rf"(?:[.\-_]|^)(?:test|spec)\.{_JS_EXT}$|^test-.*\.{_JS_EXT}$")
_JS_FILE = re.compile(rf"\.{_JS_EXT}$")
_PY_TEST = re.compile(r"^(?:test_.*|.*_test)\.py$")


def is_test_file(rel: str) -> str | None:
    """'js' or 'py' when a relative path names a test file by the usual conventions."""
    parts = rel.split("/")
    name = parts[-1]
    if _PY_TEST.match(name):
        return "py"
    if _JS_TEST.search(name) and not name.endswith(".d.ts"):
        return "js"
    if _JS_FILE.search(name) and any(p in TEST_DIRS for p in parts[:-1]) and not name.endswith(".d.ts"):
        return "js"
    return None


def is_virtualenv(path: str) -> bool:
    """Is this folder a virtualenv (it holds `pyvenv.cfg`)?"""
    return os.path.isfile(os.path.join(path, "pyvenv.cfg"))


def skipped_dir(name: str) -> bool:
    """Does the walk stay out of a folder of this name (dependencies, build output, hidden)?"""
    return name in SKIP_DIRS or (name.startswith(".") and name not in TEST_DIRS)


class Walk:
    """Breadth-first walk of `root`, iterated as (folder_rel, file_rel, entry) per file.

    Folders are entered in name order, at most `max_depth` deep; after `budget` directory
    entries the walk stops and `truncated` is set. `entries` counts what it looked at.
    """

    def __init__(self, root: str, *, budget: int = ENTRY_BUDGET, max_depth: int = MAX_DEPTH) -> None:
        self.root = root
        self.budget = budget
        self.max_depth = max_depth
        self.truncated = False
        self.entries = 0

    def __iter__(self) -> Iterator[tuple[str, str, os.DirEntry[str]]]:
        queue: deque[tuple[str, str, int]] = deque([(self.root, "", 0)])
        while queue:
            folder, rel, depth = queue.popleft()
            try:
                it = os.scandir(folder)
            except OSError:
                continue
            subdirs: list[tuple[str, str]] = []
            with it:
                for entry in it:
                    self.entries += 1
                    if self.entries > self.budget:
                        self.truncated = True
                        return
                    name = entry.name
                    child_rel = f"{rel}/{name}" if rel else name
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if not skipped_dir(name):
                                subdirs.append((entry.path, child_rel))
                            continue
                        if not entry.is_file():
                            continue
                    except OSError:
                        continue
                    yield rel, child_rel, entry
            if depth < self.max_depth:
                for path, child_rel in sorted(subdirs, key=lambda t: t[1]):
                    if not is_virtualenv(path):
                        queue.append((path, child_rel, depth + 1))
