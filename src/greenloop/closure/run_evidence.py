"""A run's evidence for the gate, gathered when the run is recorded: which tests it named
failed, passed and skipped, whether it ran the whole suite, and what the working tree shows
taken away since the session began (greenloop.closure.marks). Also the session's start
record (fingerprint and marks snapshot), taken at its first hook event or first run.

All of this happens at record time (after a run, in a PostToolUse hook, at a session's first
event), never on the steady-state Stop path: the Stop hook reads the rows it leaves.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from greenloop.closure.evidence import MarkNote, RunEvidence

if TYPE_CHECKING:
    from greenloop.closure.store import Store
    from greenloop.model import Failure
    from greenloop.result import RunResult

__all__ = [
    "command_scope",
    "ensure_start",
    "evidence_of",
    "evidence_of_parse",
    "failed_of",
    "fold_attached",
    "hooks_of",
    "marks_module",
    "marks_now",
    "snapshot",
    "suite_of",
]


def marks_module() -> Any:
    """greenloop.closure.marks, or None where this greenloop has none (its rules are then skipped)."""
    try:
        return importlib.import_module("greenloop.closure.marks")
    except ImportError:
        return None


def snapshot(root: str) -> str | None:
    """The test files' marks and declarations now (marks.snapshot), or None when unreadable."""
    marks = marks_module()
    if marks is None:
        return None
    try:
        return str(marks.snapshot(root))
    except Exception:  # the snapshot is evidence, never the reason a hook or a run fails
        return None


def marks_now(root: str, baseline: str | None) -> tuple[MarkNote, ...] | None:
    """What the working tree shows taken away since `baseline` (marks.taken_away); None when
    it cannot be read, so the rules that need it are skipped rather than guessed."""
    marks = marks_module()
    if marks is None:
        return None
    try:
        return tuple(MarkNote.of(m) for m in marks.taken_away(root, baseline))
    except Exception:
        return None


def hooks_of(failures: Iterable[Failure]) -> tuple[str, ...]:
    """The names of the failures that are a setup or teardown hook's, not a test's."""
    return tuple(dict.fromkeys(f.test for f in failures if f.kind == "hook"))


def failed_of(failures: Iterable[Failure]) -> tuple[tuple[str, str | None, int | None], ...]:
    """(name, file, line) of each failing test once. A load failure names a file, not a test
    (the run stays red by its outcome), and a flaky one passed on its rerun: neither is owed."""
    seen: dict[str, tuple[str, str | None, int | None]] = {}
    for f in failures:
        if f.kind != "load" and not f.flaky and f.test not in seen:
            seen[f.test] = (f.test, f.file, f.line)
    return tuple(seen.values())


def suite_of(framework: str | None, workspace: str) -> str:
    """Which suite a run ran: its runner and its folder."""
    import os

    return f"{framework or ''}:{os.path.abspath(workspace)}"


def evidence_of(result: RunResult, marks: tuple[MarkNote, ...] | None) -> RunEvidence:
    """What a RunResult says about individual tests."""
    return RunEvidence(
        failed=failed_of(result.failures),
        hooks=hooks_of(result.failures),
        passed=result.passed_tests,
        skipped=result.skipped_tests,
        total=result.summary.total,
        ok=result.ok,
        whole_suite=result.selection is None and result.shard is None,
        marks=marks,
        suite=suite_of(result.framework, result.workspace or "."),
    )


def ensure_start(
    store: Store, workspace: str, session_id: str, fingerprint: Callable[[], str | None] | None = None
) -> str | None:
    """Record the session's start (working-tree fingerprint and marks snapshot) unless it has
    one; returns the marks snapshot the session's runs compare against."""
    start = store.session_start(session_id)
    if start is not None:
        return start.marks
    if fingerprint is None:
        from greenloop.system.tree_digest import now

        fp = now(workspace)
    else:
        fp = fingerprint()
    snap = snapshot(workspace)
    store.start_session_evidence(
        session_id, fp, snap
    )  # one statement: atomic inside or outside a transaction
    return snap


def fold_attached(store: Store, workspace: str, run_id: str, session_id: str, result_ref: str | None) -> None:
    """Fold a run that a hook gave to its session (`Store.attach_run`) into that session's owed
    tests, from the run's result.json; a run without one (or an unreadable one) adds nothing."""
    if not result_ref:
        return
    import json

    from greenloop.result import RunResult

    try:
        with open(result_ref, encoding="utf-8") as fh:
            result = RunResult.from_json(json.load(fh))
    except (OSError, ValueError, KeyError, TypeError):
        return
    row = store.conn.execute("SELECT at, marks FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return
    try:
        marks = None if row[1] is None else tuple(MarkNote.of(m) for m in json.loads(row[1]))
    except (ValueError, TypeError, AttributeError):
        marks = None
    if marks is None:
        marks = marks_now(workspace, ensure_start(store, workspace, session_id))
    with store.transaction():
        store.record_evidence(session_id, run_id, float(row[0]), evidence_of(result, marks))


# A shell test command is narrowed when it names tests or files, or filters by name.
_NAME_FILTERS = frozenset(
    {
        "-k",
        "-t",
        "--testNamePattern",
        "--test-name-pattern",
        "-run",
        "--grep",
        "-g",
        "--lf",
        "--last-failed",
        "--only-failures",
        "--changed",
        "-o",
        "--onlyChanged",
    }
)


def command_scope(command: str) -> tuple[str, ...] | None:
    """What a test command the agent ran in its shell covers: () the whole suite (it names no
    test file, node id or folder and filters no names: `pytest -q`), the files and folders it
    names whole (`pytest tests/test_a.py`), or None when it picks tests by name (`pytest -k
    add`, a node id, `vitest -t cart`): such a run clears only the tests it names."""
    import re
    import shlex

    try:
        words = shlex.split(command)
    except ValueError:
        return None
    paths: list[str] = []
    for word in words:
        if word in ("&&", "||", ";", "|"):
            continue
        if word.split("=", 1)[0] in _NAME_FILTERS or "::" in word:
            return None
        if word.startswith("-"):
            continue
        if re.search(r"\.(py|[cm]?[jt]sx?|go|rs)$", word) or (
            "/" in word and not word.startswith("/") and not re.search(r"(^|/)(\.?bin|node_modules)/", word)
        ):
            paths.append(word[2:] if word.startswith("./") else word)
    # The runner's own name ("pytest", "python", "vitest") is neither a path nor a filter.
    return tuple(p for p in paths if not re.search(r"(^|/)(python[\d.]*|py\.test|pytest)$", p))


def evidence_of_parse(
    parsed: Any, command: str, ok: bool, framework: str = "", workspace: str = "."
) -> RunEvidence:
    """What a test command's parsed output (a ParseResult) says about individual tests."""
    scope = command_scope(command)
    return RunEvidence(
        failed=failed_of(parsed.failures),
        hooks=hooks_of(parsed.failures),
        passed=parsed.passed_tests,
        skipped=parsed.skipped_tests,
        total=parsed.summary.total,
        ok=ok,
        whole_suite=scope == (),
        scope=scope or (),
        suite=suite_of(framework, workspace),
    )
