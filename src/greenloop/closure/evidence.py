"""What a session owes: the tests it saw fail, or took away, that no later run has shown passing.

Pure: `owed_after` folds one run's evidence (`RunEvidence`) into the session's owed tests
and the names it guards; `greenloop.state.evidence` stores the result and the gate reads it.

- A test that failed in any run of the session is owed (reason `failed`) until a later run
  reports that same test passed. A narrowed run (target, last_failed, shard, a verbatim
  command) clears only what it names.
- A test the session *guards* (it saw it fail, or saw it pass in its first whole-suite run)
  that a later run reports skipped, xfail or todo is owed with reason `skipped`; one that a
  later whole-suite run, naming every test it ran, no longer reports is owed with reason
  `removed`. A working-tree mark (`greenloop.closure.marks`) on a guarded test does the same
  and gives the file and line. An expected-failure mark the session added (`it.fails`,
  `test.failing`, xfail) makes its test's "passed" mean failed: it stays owed, as skipped.
- A failing setup or teardown hook (`before all`, `setUpClass`) is owed like a test, but no
  run reports a hook passed: it is cleared by a later run that covers its file (the whole
  suite, or the file or folder) without that hook failing, and it is never "no longer in the
  suite" (its name is no test's).
- A `.only` mark anywhere in a test file is owed with reason `only` while it is there: it
  narrows every later run, so nothing a run says can be trusted until it is gone.

The records are NamedTuples: `OwedTest` is read on the Stop hook's path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from greenloop.closure.owed import REASONS, TAKEN_AWAY, OwedTest

__all__ = [
    "HOOK_DETAIL",
    "REASONS",
    "TAKEN_AWAY",
    "MarkNote",
    "OwedTest",
    "RunEvidence",
    "matches",
    "owed_after",
]

_MARK_REASON = {
    "skip": "skipped",
    "xfail": "skipped",
    "todo": "skipped",
    "ignore": "skipped",
    "removed": "removed",
    "only": "only",
}
_SEPARATORS = ("::", " > ", " ", ".", "/", "#", ":")
HOOK_DETAIL = "a setup or teardown hook failed"  # an owed row's detail when it is a hook's


class MarkNote(NamedTuple):
    """A working-tree mark as evidence (greenloop.closure.marks.Mark's fields, kept as data)."""

    file: str
    line: int
    kind: str  # skip | xfail | only | todo | ignore | removed
    test: str | None
    text: str

    @classmethod
    def of(cls, mark: Any) -> MarkNote:
        """From a marks.Mark, or its JSON form."""
        if isinstance(mark, Mapping):
            return cls(
                str(mark.get("file", "")),
                int(mark.get("line") or 0),
                str(mark.get("kind", "")),
                None if mark.get("test") is None else str(mark.get("test")),
                str(mark.get("text", "")),
            )
        return cls(
            str(mark.file),
            int(mark.line),
            str(mark.kind),
            None if mark.test is None else str(mark.test),
            str(mark.text),
        )

    def to_json(self) -> dict[str, Any]:
        """The mark as JSON (kept with its run)."""
        return {"file": self.file, "line": self.line, "kind": self.kind, "test": self.test, "text": self.text}


class RunEvidence(NamedTuple):
    """What one run says about individual tests."""

    failed: tuple[tuple[str, str | None, int | None], ...] = ()  # (name, file, line), each name once
    hooks: tuple[str, ...] = ()  # the names in `failed` that are a hook's failure, not a test's
    passed: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    total: int = 0
    ok: bool = False
    whole_suite: bool = False  # not narrowed by target, last_failed, shard or a verbatim command
    marks: tuple[MarkNote, ...] | None = None  # None: the working tree was not read
    # files and folders a narrowed shell run ran whole (`pytest tests/test_a.py`): its green,
    # when it names no test, clears the failures in them
    scope: tuple[str, ...] = ()
    # which suite the run ran (its runner and folder): "no longer in the suite" compares a run
    # only with the names earlier runs of the same suite reported (a monorepo has several)
    suite: str = ""

    @property
    def names_complete(self) -> bool:
        """Whether the run named every test it counted (only then can "no longer reported" mean
        anything: a runner whose output names no passed test would make every test vanish)."""
        named = len({*self.passed, *(f[0] for f in self.failed), *self.skipped})
        return self.total > 0 and named >= self.total


def matches(name: str, test: str | None, file: str | None = None) -> bool:
    """Whether a run's test name is the test a mark declares: the same name, or the name ending
    with it after a separator (`tests/test_a.py::test_x`, `cart > adds`); with no declared
    test, a test of the mark's file."""
    if test is None:
        return bool(file) and name.startswith(f"{file}::")
    if name == test:
        return True
    if name.endswith(test):
        return any(name[: len(name) - len(test)].endswith(s) for s in _SEPARATORS)
    return any(name.startswith(test + s) for s in ("[", "::"))  # a parametrized case, a class


def _covers(ev: RunEvidence, name: str, suite_guarded: frozenset[str] | None) -> bool:
    """Whether a run that names no test ran `name`: the whole suite (of the suite where `name`
    was seen, when that is known), or a file or folder of it."""
    if ev.whole_suite:
        return suite_guarded is None or name in suite_guarded
    return any(name.startswith(p.rstrip("/") + s) for p in ev.scope for s in ("::", "/"))


def _hook_cleared(ev: RunEvidence, row: OwedTest, failed: set[str]) -> bool:
    """Whether a run shows an owed hook failure gone: it ran tests, covered the hook's file
    (the whole suite, or the file or a folder holding it) and the hook did not fail."""
    if row.test in failed or ev.total == 0:
        return False
    if ev.whole_suite:
        return True
    file = row.file or ""
    return bool(file) and any(file == p.rstrip("/") or file.startswith(p.rstrip("/") + "/") for p in ev.scope)


def _mark_for(name: str, marks: Iterable[MarkNote]) -> MarkNote | None:
    for mark in marks:
        if mark.kind != "only" and matches(name, mark.test, mark.file):
            return mark
    return None


def _inverted(name: str, marks: Iterable[MarkNote]) -> bool:
    return any(mark.kind == "xfail" and matches(name, mark.test, mark.file) for mark in marks)


def _only_key(mark: MarkNote) -> str:
    return f".only {mark.file}:{mark.line}" + (f" ({mark.test})" if mark.test else "")


def owed_after(
    owed: Mapping[str, OwedTest],
    guarded: frozenset[str],
    ev: RunEvidence,
    run_id: str,
    at: float,
    suite_guarded: frozenset[str] | None = None,
) -> tuple[list[OwedTest], list[str], list[str]]:
    """One run folded into the session's owed tests: (rows to write, names to clear, names the
    session now guards besides `guarded`). Rows already owed keep the run that made them owed.
    `suite_guarded`: the names guarded for this run's suite, the only ones a whole-suite run
    can find gone (default: every watched name)."""
    write: dict[str, OwedTest] = {}
    clear: set[str] = set()
    failed_names = {f[0] for f in ev.failed}
    marks = ev.marks or ()
    # An expected-failure mark the session added (`it.fails`, `test.failing`, an xfail that
    # passes) turns a failing test into a passing one: its "passed" says the code is still broken.
    passed = {name for name in ev.passed if not _inverted(name, marks)}
    # A whole-suite green run that names no test at all (a shell run the hook parsed from a
    # runner's terse output) still says every test it ran passed: it clears the failures,
    # except those a working-tree mark shows taken away.
    unnamed_green = ev.ok and not ev.passed and not failed_names and not ev.skipped
    for name, row in owed.items():
        if name in passed or (
            unnamed_green
            and row.reason == "failed"
            and _covers(ev, name, suite_guarded)
            and _mark_for(name, marks) is None
        ) or (row.detail == HOOK_DETAIL and _hook_cleared(ev, row, failed_names)):
            clear.add(name)
    hooks = set(ev.hooks) | {name for name, row in owed.items() if row.detail == HOOK_DETAIL}
    for name, file, line in ev.failed:
        before = owed.get(name)
        if before is None or before.reason != "failed":
            detail = HOOK_DETAIL if name in ev.hooks else ""
            write[name] = OwedTest(name, "failed", run_id, at, file, line, detail)
    watched = (guarded | set(owed) | failed_names) - hooks
    for name in ev.skipped:
        if name in watched and name not in passed and name not in failed_names:
            mark = _mark_for(name, marks)
            write[name] = _taken(owed.get(name), name, "skipped", run_id, at, mark)
    if ev.whole_suite and ev.names_complete:
        reported = set(ev.passed) | failed_names | set(ev.skipped)
        for name in (watched if suite_guarded is None else suite_guarded) - reported:
            if name not in write and not name.startswith(".only "):
                write[name] = _taken(owed.get(name), name, "removed", run_id, at, _mark_for(name, marks))
    for mark in marks:
        if mark.kind == "only":
            key = _only_key(mark)
            write[key] = owed.get(key) or OwedTest(key, "only", run_id, at, mark.file, mark.line, mark.text)
            continue
        reason = _MARK_REASON.get(mark.kind)
        if reason is None:
            continue
        for name in watched:
            if name not in passed and name not in write and matches(name, mark.test, mark.file):
                write[name] = _taken(owed.get(name), name, reason, run_id, at, mark)
    if ev.marks is not None:
        now_only = {k for k, r in write.items() if r.reason == "only"}
        clear |= {name for name, row in owed.items() if row.reason == "only" and name not in now_only}
    clear -= set(write)
    rows = [row for row in write.values() if owed.get(row.test) != row]
    return rows, sorted(clear), sorted(failed_names - guarded - hooks)


def _taken(
    before: OwedTest | None, name: str, reason: str, run_id: str, at: float, mark: MarkNote | None
) -> OwedTest:
    if before is not None and before.reason == reason and (mark is None or before.line == mark.line):
        return before
    if mark is None:
        return OwedTest(name, reason, run_id, at, before.file if before else None, None)
    return OwedTest(name, reason, run_id, at, mark.file, mark.line, mark.text)
