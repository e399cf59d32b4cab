"""A `last_failed` rerun in each runner's dialect: the failing tests by name, their files.

The previous run's failures become a name filter (vitest and jest `-t`, pytest's node ids (`-k`
when they are not paths from the run's folder), node:test
`--test-name-pattern`, mocha `--grep`, bun `-t`, unittest ids) plus the failing files where the
runner takes files; a runner that cannot filter runs the full suite, and a note says why.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from greenloop.model import Failure
from greenloop.result import RunResult
from greenloop.runner.dialects import DIALECTS

__all__ = ["last_failed_args", "name_pattern", "native_last_failed_notes"]

_SEP = re.compile(r" (?:>|›) ")


def name_pattern(names: Sequence[str], *, anchored: bool = True) -> str:
    """A regex matching any of `names`, where a ` > ` / ` › ` separator also matches a space.

    vitest and jest match `-t` against the full name joined with spaces; greenloop shows it
    joined with ` > `. Both forms match.
    """
    alts = []
    for name in dict.fromkeys(names):
        parts = _SEP.split(name)
        alts.append("(?: > | › | )".join(re.escape(p) for p in parts))
    body = "|".join(alts)
    return f"^(?:{body})$" if anchored else f"(?:{body})"


def _leaf(name: str) -> str:
    leaf = name.rsplit("::", 1)[-1]
    return _SEP.split(leaf)[-1]


_K_SAFE = re.compile(r"^[\w.\-\[\]]+$")


def _pytest_k(names: Sequence[str]) -> str:
    """`-k` takes identifiers; a parametrised id with other characters falls back to its function."""
    words: list[str] = []
    for name in names:
        leaf = _leaf(name)
        if not _K_SAFE.match(leaf):
            leaf = leaf.split("[", 1)[0]
        if _K_SAFE.match(leaf) and leaf not in words:
            words.append(leaf)
    return " or ".join(words)


def _pytest_node_ids(root: str, failures: Sequence[Failure]) -> list[str] | None:
    """The failures' node ids (`tests/test_a.py::TestA::test_x[1-2]`) as pytest's arguments,
    and the files that could not load; None when a name is not a node id whose file is there
    from the run's folder (pytest's rootdir elsewhere, a renamed file): then `-k` by name."""
    ids: list[str] = []
    for f in failures:
        if f.kind == "load":
            path = f.file or f.test
            if path and os.path.isfile(os.path.join(root, path)) and path not in ids:
                ids.append(path)
            continue
        head = f.test.split("::", 1)[0]
        if "::" not in f.test or not os.path.isfile(os.path.join(root, head)):
            return None
        if f.test not in ids:
            ids.append(f.test)
    return ids or None


def _failing_files(root: str, failures: Sequence[Failure]) -> list[str]:
    files: list[str] = []
    for f in failures:
        if not f.file:
            continue
        path = f.file if os.path.isabs(f.file) else os.path.join(root, f.file)
        if os.path.exists(path):
            rel = os.path.relpath(path, root)
            if rel not in files:
                files.append(rel)
    return files


def last_failed_args(framework: str, root: str, previous: RunResult | None, notes: list[str]) -> list[str]:
    """The extra argv of a `last_failed` rerun; empty (with a note saying why) for the full suite."""
    if previous is None:
        notes.append("last_failed: no previous run is stored for this workspace; ran the full suite")
        return []
    failures = previous.failures
    if not failures:
        notes.append(f"last_failed: the previous run {previous.run_id} had no failures; ran the full suite")
        return []
    dialect = DIALECTS[framework]
    if dialect.name_flag is None:
        notes.append(f"last_failed: {framework} cannot filter tests by name; ran the full suite")
        return []
    files = _failing_files(root, failures)
    names = [f.test for f in failures if f.kind != "load" and f.test]
    args: list[str] = []
    if framework in ("vitest", "jest"):
        if names:
            args += ["-t", name_pattern(names)]
        args += files
    elif framework == "pytest":
        ids = _pytest_node_ids(root, failures)
        if ids:  # exactly the failures: a passing test of the same name elsewhere does not run
            args += ids
        else:
            expr = _pytest_k(names)
            if expr:
                args += ["-k", expr]
            args += files
    elif framework == "node:test":
        if names:
            args.append(f"--test-name-pattern={name_pattern([_leaf(n) for n in names])}")
        args += files
    elif framework in ("mocha", "bun"):
        # The name filter alone: a failure's file is where it failed (possibly a helper module,
        # or the module a test file could not import), and mocha would run any file it is
        # given as a test file. Every test file loads, only the named tests run.
        from greenloop.frameworks.bun import name_filter
        from greenloop.frameworks.mocha import grep_pattern

        pattern = grep_pattern(failures) if framework == "mocha" else name_filter(failures)
        if pattern:
            args += ["--grep" if framework == "mocha" else "-t", pattern]
    elif framework == "unittest":
        from greenloop.frameworks.unittest import rerun_ids

        args += rerun_ids(failures)
    if not args:
        notes.append("last_failed: the previous failures carry no names or files; ran the full suite")
        return []
    notes.append(f"last_failed: reran {len(failures)} failure(s) of {previous.run_id}")
    return args


def native_last_failed_notes(previous: RunResult | None) -> list[str]:
    """The notes of a go or cargo `last_failed` run (they build their own filters)."""
    if previous is None:
        return ["last_failed: no previous run is stored for this workspace; ran the full suite"]
    if not previous.failures:
        return [f"last_failed: the previous run {previous.run_id} had no failures; ran the full suite"]
    return [f"last_failed: reran {len(previous.failures)} failure(s) of {previous.run_id}"]
