"""Bugs from test runs: a unit run or an integration run turned into bug log events.

`bridge_unit_run` turns a unit run into bug events (red: open or reuse one bug per
failure; green: fix the unit's open bugs; crashed: one `unit_test_infra` bug), and
`bridge_integration_run` does the same for an integration run (failures open
`integration_test` bugs; a green run verifies the fixed bugs of the units it covered).
A bug moves only on evidence about it; `Bug.evidence` records which.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from greenloop.bugs.log import BugLog
from greenloop.bugs.record import (
    ACTIVE,
    DETAIL_LIMIT,
    FLAKY_CATEGORY,
    INFRA_TEST_NAME,
    INTEGRATION_UNIT,
    UNRECOGNISED_TEST_NAME,
    Bug,
    Status,
    TransitionRefused,
)
from greenloop.bugs.workspace import log_for, unit_id_of
from greenloop.errors import GreenloopError, UsageError

if TYPE_CHECKING:  # only annotations: importing the bridge does not import the run records
    from greenloop.result import RunResult

__all__ = [
    "BridgeOutcome",
    "FailedCase",
    "FailedCaseLike",
    "bridge_integration_run",
    "bridge_unit_run",
]


def _as_text(v: object) -> str | None:
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _failure_title(name: str, expected: object, got: object, message: str) -> str:
    if expected is not None or got is not None:
        return f"{name}: expected {_as_text(expected)}, got {_as_text(got)}"
    first = message.strip().splitlines()[0] if message.strip() else "failed"
    return f"{name}: {first}"


def _is_no_tests(result: RunResult) -> bool:
    """A broken run that is only "no tests ran": nothing crashed, nothing timed out, nothing
    was counted. A workspace without tests has no bug to track (the gate still sees the run)."""
    if result.timed_out or result.failures or result.summary.total:
        return False
    if result.framework is None:
        return True
    return not result.crashed or "no test" in (result.crash_reason or "").lower()


def _move(
    blog: BugLog, bugs: Iterable[Bug], to: Status, *, by: str, run_id: str, moved: list[dict[str, str]],
    evidence: str,
) -> None:
    for b in bugs:
        try:
            done = blog.transition(b.id, to, by=by, fix_refs=(run_id,), closed_by=run_id, evidence=evidence)
        except TransitionRefused:
            continue  # another writer moved it first; nothing to add
        moved.append({"id": b.id, "from": done.from_status, "to": to, "evidence": evidence})


def _answered_by(result: RunResult, bugs: Sequence[Bug]) -> tuple[list[Bug], list[Bug], list[str]]:
    """Which of a unit's active test bugs this (not broken) run answers, and how.

    A bug moves to fixed only on evidence about its own test: the run names the test among
    those that ran and passed (`test_passed`). A runner whose output names no passed test
    (a text fallback, some npm scripts) gives that evidence only as a whole: a green run of
    the whole suite (`suite_passed`). A narrowed run (target, last_failed, affected, a verbatim command)
    never closes a bug whose test it did not name. Returns (by test, by suite, notes)."""
    passed = frozenset(result.passed_tests)
    whole_green = result.ok and result.selection is None
    by_test: list[Bug] = []
    by_suite: list[Bug] = []
    missing: list[str] = []
    for b in bugs:
        if b.test_name in passed:
            by_test.append(b)
        elif whole_green and (not passed or b.test_name == UNRECOGNISED_TEST_NAME):
            by_suite.append(b)
        elif whole_green:
            missing.append(b.id)
    notes = []
    if missing:
        notes.append(
            f"bugs: {len(missing)} open bug(s) ({', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}) "
            "stay open: this green run of the whole suite did not run their tests (renamed or "
            "removed?); close one by hand with `greenloop bugs transition ID --to fixed`"
        )
    return by_test, by_suite, notes


def bridge_unit_run(
    workspace: str, result: RunResult, *, clock: Callable[[], float] | None = None
) -> RunResult:
    """Bridge one unit run into the bug log and return the result with the bug fields filled.

    - red: each failure opens a bug (or reuses the open/fixing one for `unit:test`), its
      `bug_id` is written into the failure, new ids go to `bugs_opened`. A file that failed
      to load opens a `unit_test_infra` bug. A red run in which no failing test was
      recognised opens one bug for the unit so the red is not lost.
    - green: the unit's open and fixing unit-test bugs move to fixed, `fix_refs` gets the
      run id; the moves go to `bugs_transitioned`.
    - broken (crashed, timed out): one `unit_test_infra` bug per unit (reused while open).
      "No tests ran" (nothing crashed or timed out, nothing counted) and an aborted run open
      nothing: an empty suite and a person's Ctrl-C are not bugs.
    - any run that was not broken (red or green) fixes the unit's open infra bug: the suite
      ran again.
    Integration bugs are left to integration runs. The log cannot be written (read-only
    folder, full disk): the run is returned with a note, never turned into an error.
    """
    blog = log_for(workspace, clock)
    unit = unit_id_of(workspace)
    by = "greenloop run"
    opened: list[str] = []
    moved: list[dict[str, str]] = []
    failures = list(result.failures)
    notes: list[str] = []
    try:
        if result.outcome == "broken" or result.crashed or result.timed_out:
            if result.aborted:
                notes.append("bugs: an interrupted run opens no bug")
            elif _is_no_tests(result):
                notes.append("bugs: no tests ran, so there is no failure to track (no bug opened)")
            else:
                why = result.crash_reason or ("timed out" if result.timed_out else "crashed")
                o = blog.open(
                    unit_id=unit, test_name=INFRA_TEST_NAME, source="unit_test_infra",
                    title=f"the test run of {unit} broke: {why}",
                    detail=f"{why}\n\n{result.output_tail[-DETAIL_LIMIT:]}".strip(),
                    run_id=result.run_id, by=by,
                    severity="high",  # a broken suite hides every other result
                )
                if o.created:
                    opened.append(o.bug.id)
        else:
            failing = {f.test for f in failures}
            mine = [b for b in blog.fold().bugs
                    if b.unit_id == unit and b.status in ACTIVE and b.test_name not in failing]
            # The suite ran again: the runner works. A file that failed to load is answered by
            # a run of the whole suite, or by a passed test named after the file (pytest ids).
            infra = [b for b in mine if b.source == "unit_test_infra"]
            ran = [b for b in infra if b.test_name == INFRA_TEST_NAME]
            loaded = [b for b in infra if b.test_name != INFRA_TEST_NAME and (
                result.selection is None
                or any(t.startswith(b.test_name + "::") for t in result.passed_tests))]
            _move(blog, ran, "fixed", by=by, run_id=result.run_id, moved=moved, evidence="suite_ran")
            _move(blog, loaded, "fixed", by=by, run_id=result.run_id, moved=moved, evidence="file_loaded")
            # A flaky test's bug stays open when the test passes: passing is what a flaky test
            # mostly does, so only a person closes it (one bug per flaky test across runs).
            by_test, by_suite, skipped = _answered_by(
                result, [b for b in mine if b.source == "unit_test" and b.category != FLAKY_CATEGORY])
            for answered, evidence in ((by_test, "test_passed"), (by_suite, "suite_passed")):
                _move(blog, answered, "fixed", by=by, run_id=result.run_id, moved=moved, evidence=evidence)
            notes.extend(skipped)
            # A green run (config flaky = "warn") still logs its flaky tests.
            if not result.ok or any(f.flaky for f in failures):
                for i, f in enumerate(failures):
                    if result.ok and not f.flaky:
                        continue
                    title = _failure_title(f.test, f.expected, f.got, f.message)
                    o = blog.open(
                        unit_id=unit, test_name=f.test,
                        source="unit_test_infra" if f.kind == "load" else "unit_test",
                        title=f"flaky: {title}" if f.flaky else title,
                        category=FLAKY_CATEGORY if f.flaky else None,
                        detail=f.stack or f.message, run_id=result.run_id, by=by, got=f.got,
                    )
                    failures[i] = f._replace(bug_id=o.bug.id)
                    if o.created:
                        opened.append(o.bug.id)
                if not failures and not result.ok:
                    o = blog.open(
                        unit_id=unit, test_name=UNRECOGNISED_TEST_NAME,
                        title=f"tests of {unit} failed (exit {result.exit_code}) but no failing "
                              "test was recognised in the output",
                        detail=result.output_tail[-DETAIL_LIMIT:], run_id=result.run_id, by=by,
                    )
                    if o.created:
                        opened.append(o.bug.id)
        notes.extend(blog.warnings)
    except OSError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.strerror or exc}")
    except GreenloopError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.message}")
    return result._replace(
        failures=tuple(failures),
        bugs_opened=(*result.bugs_opened, *opened),
        bugs_transitioned=(*result.bugs_transitioned, *moved),
        notes=(*result.notes, *notes),
    )


@runtime_checkable
class FailedCaseLike(Protocol):
    """What the bridge reads of one failed integration case (a dict with these keys works too)."""

    case_id: str
    failed_step: int | str | None
    reason: str
    expected: Any
    got: Any
    involves: Sequence[str]


@dataclass(frozen=True)
class FailedCase:
    """One failed integration case as the bridge records it: the case, where and how it failed."""

    case_id: str
    failed_step: int | str | None = None
    reason: str = ""
    expected: Any = None
    got: Any = None
    involves: tuple[str, ...] = ()
    stderr_excerpt: str = ""

    @classmethod
    def of(cls, f: FailedCaseLike | Mapping[str, Any]) -> FailedCase:
        """Read a failed case from the run's record or its JSON; UsageError without a case_id."""
        def get(key: str, default: Any = None) -> Any:
            return f.get(key, default) if isinstance(f, Mapping) else getattr(f, key, default)

        case_id = get("case_id")
        if not case_id:
            raise UsageError("an integration failure has no case_id; every failure names its case")
        step = get("failed_step")
        return cls(
            case_id=str(case_id),
            failed_step=step if isinstance(step, (int, str)) else None,
            reason=str(get("reason") or ""),
            expected=get("expected"),
            got=get("got"),
            involves=tuple(str(u) for u in (get("involves") or ())),
            stderr_excerpt=str(get("stderr_excerpt") or ""),
        )

    def title(self) -> str:
        """The bug's title: the case, the step, and what was expected and got (or the reason)."""
        step = f" step {self.failed_step}" if self.failed_step not in (None, "") else ""
        what = (f"expected {_as_text(self.expected)}, got {_as_text(self.got)}"
                if self.expected is not None or self.got is not None else (self.reason or "failed"))
        return f"{self.case_id}{step}: {what}"

    def detail(self) -> str:
        """The bug's detail: the reason, the expected and got values, the services' stderr."""
        parts = [self.reason]
        if self.expected is not None or self.got is not None:
            parts.append(f"expected: {_as_text(self.expected)}\ngot: {_as_text(self.got)}")
        if self.stderr_excerpt:
            parts.append(f"stderr:\n{self.stderr_excerpt}")
        return "\n".join(p for p in parts if p)


@dataclass(frozen=True)
class BridgeOutcome:
    """What an integration run did to the log. `bug_ids` maps each failed case to its bug."""

    bugs_opened: tuple[str, ...] = ()
    bugs_transitioned: tuple[dict[str, str], ...] = ()
    bug_ids: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The outcome as JSON."""
        return {
            "bugs_opened": list(self.bugs_opened),
            "bugs_transitioned": [dict(t) for t in self.bugs_transitioned],
            "bug_ids": dict(self.bug_ids),
            "notes": list(self.notes),
        }


def bridge_integration_run(
    project: str,
    failures: Sequence[FailedCaseLike | Mapping[str, Any]],
    *,
    run_id: str,
    ok: bool,
    covered_units: Sequence[str],
    passed_cases: Sequence[str] | None = None,
    clock: Callable[[], float] | None = None,
) -> BridgeOutcome:
    """Bridge one integration run into the project's bug log.

    - each failure opens an `integration_test` bug (unit_id `integration`, test_name the
      case id, affected_units the case's `involves`), or reuses the open one for that case;
    - the open/fixing integration bugs of `passed_cases` move to fixed, in any run (a case
      that passes is fixed even while another case fails); a case the run did not execute
      moves nothing (without `passed_cases`, no integration bug moves);
    - a green run (`ok`) then verifies the fixed integration bugs of `passed_cases`, and the
      fixed unit bugs whose units are all in `covered_units`, with the run id in `fix_refs`
      and `closed_by`. A red run verifies nothing.
    """
    items = [FailedCase.of(f) for f in failures]
    blog = log_for(project, clock)
    by = "greenloop integrate"
    covered = set(covered_units)
    opened: list[str] = []
    moved: list[dict[str, str]] = []
    ids: dict[str, str] = {}
    notes: list[str] = []
    try:
        for f in items:
            o = blog.open(
                unit_id=INTEGRATION_UNIT, test_name=f.case_id, source="integration_test",
                title=f.title(), detail=f.detail(), run_id=run_id, by=by,
                affected_units=f.involves or None, got=f.got,
            )
            ids[f.case_id] = o.bug.id
            if o.created:
                opened.append(o.bug.id)
        # Only a case this run executed and saw pass is evidence about its bug.
        passed = set(passed_cases or ()) - set(ids)
        # A case that passed answers its bug, even in a run where another case failed.
        current = blog.fold().bugs
        answered = [b for b in current
                    if b.source == "integration_test" and b.status in ACTIVE and b.test_name in passed]
        _move(blog, answered, "fixed", by=by, run_id=run_id, moved=moved, evidence="case_passed")
        if ok:
            current = blog.fold().bugs
            cases = [b for b in current
                     if b.status == "fixed" and b.source == "integration_test" and b.test_name in passed]
            units = [b for b in current
                     if b.status == "fixed" and b.source != "integration_test"
                     and set(b.affected_units or (b.unit_id,)) <= covered]
            _move(blog, cases, "verified", by=by, run_id=run_id, moved=moved, evidence="case_passed")
            _move(blog, units, "verified", by=by, run_id=run_id, moved=moved,
                    evidence="integration_passed")
        notes.extend(blog.warnings)
    except OSError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.strerror or exc}")
    except GreenloopError as exc:
        notes.append(f"bugs: could not update {blog.path}: {exc.message}")
    return BridgeOutcome(tuple(opened), tuple(moved), ids, tuple(notes))

