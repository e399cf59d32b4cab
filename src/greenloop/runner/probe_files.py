"""What probe learns by reading a few test files (only when no runner is declared).

Rule 5 of probe (no runner declared, test files found) reads the first few test files to
tell bun's tests from node:test's and unittest's from pytest's. Reading is bounded: at most
MAX_FILES files and MAX_BYTES of each, so the answer stays instant on a large tree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MAX_BYTES", "MAX_FILES", "uses_bun_test", "uses_unittest_only"]

MAX_FILES = 50
MAX_BYTES = 64 * 1024

_BUN_TEST = re.compile(r"""(?:from\s+|require\s*\(\s*|import\s*\(\s*)['"]bun:test['"]""")
_UNITTEST = re.compile(r"^\s*(?:import unittest\b|from unittest import\b)", re.M)
_TESTCASE = re.compile(r"\b(?:unittest\.)?(?:IsolatedAsync)?TestCase\b")
_PYTEST = re.compile(r"^\s*(?:import pytest\b|from pytest\b|from _pytest\b)|@pytest\.", re.M)


def _has(text: str, word: str, pattern: re.Pattern[str]) -> bool:
    """Does `pattern`, every match of which holds `word`, match the text? The substring test
    first answers most files without the regular expression, which would try each position
    of the file (a unittest file names pytest nowhere, a node:test file bun:test nowhere)."""
    return word in text and pattern.search(text) is not None


def _head(root: Path, rel: str) -> str:
    try:
        with open(root / rel, encoding="utf-8", errors="replace") as fh:
            return fh.read(MAX_BYTES)
    except OSError:
        return ""


def uses_bun_test(root: Path, files: Sequence[str]) -> bool:
    """Does any of the first test files import `bun:test`?"""
    for rel in files[:MAX_FILES]:
        text = _head(root, rel)
        if _has(text, "bun:test", _BUN_TEST):
            return True
    return False


def _discoverable(root: Path, rel: str) -> bool:
    """Does `python -m unittest` (discovery from the root) reach this file? Only through
    folders that are packages (an `__init__.py` in each)."""
    parts = rel.split("/")[:-1]
    return all((root.joinpath(*parts[: i + 1]) / "__init__.py").is_file() for i in range(len(parts)))


def uses_unittest_only(root: Path, files: Sequence[str]) -> bool:
    """Do the Python test files all use unittest.TestCase and none of them pytest?

    A file of bare `def test_…` functions needs pytest (unittest would collect nothing from
    it), so one such file, or one that imports pytest, answers pytest; so does a file in a
    folder that is not a package, which unittest's discovery does not enter.
    """
    looked = files[:MAX_FILES]
    if not looked:
        return False
    for rel in looked:
        if not rel.rsplit("/", 1)[-1].startswith("test"):
            return False  # unittest discovers test*.py only; pytest also takes *_test.py
        if not _discoverable(root, rel):
            return False  # `python -m unittest` would not find it; pytest would
        text = _head(root, rel)
        if _has(text, "pytest", _PYTEST) or not (_UNITTEST.search(text) and _TESTCASE.search(text)):
            return False
    return True
