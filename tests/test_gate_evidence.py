"""The session's evidence (issue 31): the pure rules that fold runs into owed tests, the pure
gate deciding on them, and the store keeping them (both backends)."""

from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path
from typing import NamedTuple

import pytest

from greenloop.closure.evidence import MarkNote, OwedTest, RunEvidence, matches, owed_after
from greenloop.closure.gate import decide, needs_fingerprint
from greenloop.closure.messages import rerun_command
from greenloop.closure.run_evidence import command_scope, evidence_of
from greenloop.closure.store import Store, record_result
from greenloop.closure.transitions import ClosureState, Counts, RunRecord
from greenloop.config import Config, validate
from greenloop.errors import ConfigError
from greenloop.model import Failure, Summary
from greenloop.result import RunResult

A, B, C = "tests/test_a.py::test_add", "tests/test_a.py::test_sub", "tests/test_b.py::test_mul"


def failed(*names: str) -> tuple[tuple[str, str | None, int | None], ...]:
    return tuple((n, n.split("::")[0], 3) for n in names)


def fold(
    owed: dict[str, OwedTest], guarded: frozenset[str], ev: RunEvidence, run_id: str
) -> dict[str, OwedTest]:
    write, clear, _ = owed_after(owed, guarded, ev, run_id, 1.0)
    out = {k: v for k, v in owed.items() if k not in clear}
    out.update({o.test: o for o in write})
    return out


# ------------------------------------------------------------------ the pure rules


def test_a_failure_is_owed_until_that_same_test_passes() -> None:
    owed = fold(
        {}, frozenset(), RunEvidence(failed=failed(A, B), passed=(C,), total=3, whole_suite=True), "r1"
    )
    assert {o.test: (o.reason, o.run_id) for o in owed.values()} == {A: ("failed", "r1"), B: ("failed", "r1")}
    # A narrowed run that passes only A clears only A; B keeps the run that made it owed.
    owed = fold(owed, frozenset(), RunEvidence(passed=(A,), total=1, ok=True), "r2")
    assert list(owed) == [B] and owed[B].run_id == "r1"
    # A narrowed green run of another test clears nothing.
    assert fold(owed, frozenset(), RunEvidence(passed=(C,), total=1, ok=True), "r3") == owed


def test_a_guarded_test_that_is_skipped_or_gone_stays_owed() -> None:
    guarded = frozenset({A, B, C})
    ev = RunEvidence(passed=(B,), skipped=(A,), total=2, ok=True, whole_suite=True)  # C vanished
    owed = fold({}, guarded, ev, "r2")
    assert owed[A].reason == "skipped" and owed[C].reason == "removed" and B not in owed
    # A whole-suite run that does not name every test it counted says nothing of vanished tests.
    sparse = RunEvidence(passed=(B,), total=3, ok=True, whole_suite=True)
    assert fold({}, guarded, sparse, "r2") == {}


def test_a_mark_in_the_working_tree_gives_the_file_and_line() -> None:
    mark = MarkNote("tests/test_a.py", 12, "skip", "test_add", "@pytest.mark.skip")
    ev = RunEvidence(passed=(B,), skipped=(A,), total=2, ok=True, whole_suite=True, marks=(mark,))
    (row,) = fold({}, frozenset({A, B}), ev, "r2").values()
    assert (row.test, row.reason, row.file, row.line, row.detail) == (
        A,
        "skipped",
        "tests/test_a.py",
        12,
        "@pytest.mark.skip",
    )
    # A skip mark on a test the session never guarded is the author's business.
    assert fold({}, frozenset({B}), ev._replace(skipped=()), "r2") == {}


def test_a_dot_only_mark_is_owed_while_it_is_there_even_when_nothing_failed() -> None:
    only = MarkNote("src/cart.test.js", 4, "only", "adds", "it.only(")
    owed = fold({}, frozenset(), RunEvidence(passed=("cart > adds",), total=1, ok=True, marks=(only,)), "r1")
    (row,) = owed.values()
    assert row.reason == "only" and row.file == "src/cart.test.js" and row.line == 4
    assert (
        fold(owed, frozenset(), RunEvidence(passed=("cart > adds",), total=1, ok=True, marks=()), "r2") == {}
    )
    # A run that could not read the tree leaves the mark owed.
    assert fold(owed, frozenset(), RunEvidence(total=1, ok=True, marks=None), "r2") == owed


def test_a_green_run_that_names_no_test_clears_what_it_covered() -> None:
    owed = fold({}, frozenset(), RunEvidence(failed=failed(A, C), total=2), "r1")
    in_file = RunEvidence(total=2, ok=True, scope=("tests/test_a.py",))
    assert list(fold(owed, frozenset(), in_file, "r2")) == [C]
    assert fold(owed, frozenset(), RunEvidence(total=2, ok=True, whole_suite=True), "r2") == {}


def test_names_match_declarations() -> None:
    assert matches("tests/test_a.py::test_add", "test_add") and matches("cart > adds two", "adds two")
    assert matches("tests/test_a.py::test_add[1-2]", "tests/test_a.py::test_add")
    assert not matches("tests/test_a.py::test_add_more", "test_add") and not matches("x", None)
    assert matches("tests/test_a.py::test_add", None, "tests/test_a.py")


def test_shell_commands_say_what_they_cover() -> None:
    assert command_scope("python -m pytest -q") == ()
    assert command_scope("cd app && npx vitest run") == ()
    assert command_scope("pytest tests/test_a.py -x") == ("tests/test_a.py",)
    assert (
        command_scope("pytest -k add") is None and command_scope("pytest tests/test_a.py::test_add") is None
    )


def test_a_run_result_becomes_evidence() -> None:
    result = RunResult(
        "r1",
        False,
        "red",
        "pytest",
        "pytest",
        1,
        summary=Summary(4, 1, 2, 1),
        failures=(
            Failure(A, "tests/test_a.py", 3),
            Failure("tests/test_c.py", kind="load"),
            Failure(B, flaky=True),
        ),
        passed_tests=(C,),
        skipped_tests=("tests/test_b.py::test_div",),
        selection="target",
    )
    ev = evidence_of(result, None)
    assert ev.failed == ((A, "tests/test_a.py", 3),) and ev.passed == (C,) and not ev.whole_suite
    assert ev.skipped == ("tests/test_b.py::test_div",)


# ------------------------------------------------------------------ the pure gate


def owing(*rows: OwedTest, **kw: object) -> ClosureState:
    green = RunRecord(
        "r2",
        ok=True,
        at=2.0,
        outcome="green",
        session_id="s1",
        summary=Counts(1, 1, 0, 0),
        framework="pytest",
        fingerprint="fp",
    )
    fields: dict[str, object] = {"turn_seq": 1, "last_run": green, "owed": rows, "owed_count": len(rows)}
    fields.update(kw)
    return ClosureState("s1", **fields)  # type: ignore[arg-type]


def test_an_owed_test_after_a_green_run_steers_naming_it_and_the_rerun() -> None:
    d = decide(owing(OwedTest(A, "failed", "r1")), Config())
    assert d.kind == "steer" and d.rule == "owed"
    assert f"{A} (failed in r1)" in d.message and f"`greenloop run --target {A}`" in d.message
    assert f'test_run with target="{A}"' in d.message and "Intercept 1 of 2" in d.message


def test_owed_tests_are_bounded_then_counted() -> None:
    rows = tuple(OwedTest(f"t.py::test_{i}", "failed", "r1") for i in range(5))
    d = decide(owing(*rows, owed_count=40), Config())
    assert (
        "t.py::test_4" in d.message
        and "(+35 more)" in d.message
        and "this session owes 40 tests that no later run has shown passing" in d.message
    )


def test_a_taken_away_test_says_why_and_who_may_accept_it() -> None:
    d = decide(owing(OwedTest(A, "skipped", "r2", 0, "tests/test_a.py", 12, "@pytest.mark.skip")), Config())
    assert d.rule == "taken_away"
    assert "skipped in this session: tests/test_a.py:12 @pytest.mark.skip" in d.message
    # The steer is read by the agent: it says who may accept, never the command (a person's).
    assert "only a person can accept it" in d.message and "greenloop accept" not in d.message
    d = decide(owing(OwedTest(C, "removed", "r2")), Config())
    assert "no longer in the suite" in d.message


def test_owed_rounds_count_towards_the_budget_then_release_with_the_reason() -> None:
    d = decide(owing(OwedTest(A, "failed", "r1"), intercepts_this_turn=2, steered=("owed", "owed")), Config())
    assert d.kind == "release" and d.unresolved and "unresolved (owed)" in d.message and A in d.message


def test_stale_green_steers_once_then_releases() -> None:
    state = owing(fingerprint_now="fp2")
    assert needs_fingerprint(state, Config()) and not needs_fingerprint(state, Config(stale_green="note"))
    d = decide(state, Config())
    assert d.kind == "steer" and d.rule == "stale" and "files changed since the last run (r2)" in d.message
    d = decide(state._replace(intercepts_this_turn=1, steered=("stale",)), Config(max_intercept_rounds=5))
    assert (
        d.kind == "release" and "unresolved (stale)" in d.message and "after 1 corrective round;" in d.message
    )
    assert decide(state, Config(stale_green="note")).kind == "allow"
    assert decide(state._replace(fingerprint_now="fp"), Config()).kind == "allow"  # nothing changed


def test_no_run_after_edits_steers_once_and_can_be_turned_off() -> None:
    state = ClosureState("s1", turn_seq=1, start_fingerprint="a", fingerprint_now="b")
    d = decide(state, Config())
    assert d.kind == "steer" and d.rule == "not_run" and "recorded no test run" in d.message
    assert decide(state._replace(steered=("not_run",), intercepts_this_turn=1), Config()).kind == "release"
    assert decide(state, Config(require_run=False)).kind == "allow"
    assert decide(state._replace(fingerprint_now="a"), Config()).kind == "allow"  # changed nothing


def test_the_new_messages_in_chinese() -> None:
    zh = Config(hint_language="zh")
    assert "本会话仍欠 1 个测试" in decide(owing(OwedTest(A, "failed", "r1")), zh).message
    assert "文件已更改" in decide(owing(fingerprint_now="x"), zh).message
    assert (
        "没有记录任何测试运行"
        in decide(ClosureState("s1", start_fingerprint="a", fingerprint_now="b"), zh).message
    )


def test_the_rerun_command_per_runner() -> None:
    assert rerun_command((OwedTest(A, "failed", "r"),), "pytest")[1] == A
    js = (
        OwedTest("cart > adds", "failed", "r", 0, "src/cart.test.js"),
        OwedTest(".only x", "only", "r", 0, "a.js"),
    )
    assert rerun_command(js, "vitest") == (
        "greenloop run --target 'src/cart.test.js a.js'",
        "src/cart.test.js a.js",
    )
    assert rerun_command((OwedTest("x", "failed", "r"),), "jest") == ("greenloop run", "")


def test_the_config_keys_are_checked_in_both_spellings() -> None:
    assert validate({"staleGreen": "note", "requireRun": False}, "x") == {
        "stale_green": "note",
        "require_run": False,
    }
    with pytest.raises(ConfigError, match=r"'stale_green' must be one of steer, note \(got 'warn'\)"):
        validate({"stale_green": "warn"}, "greenloop.toml")
    with pytest.raises(ConfigError, match="'requireRun' must be true or false"):
        validate({"requireRun": "yes"}, "greenloop.toml")


# ------------------------------------------------------------------ the store, both backends


@pytest.mark.usefixtures("state_backend")
def test_the_store_folds_runs_and_counts_acceptances_out(tmp_path: Path) -> None:
    red = RunRecord("r1", ok=False, at=1.0, session_id="s1", summary=Counts(3, 1, 2, 0))
    green = RunRecord("r2", ok=True, at=2.0, outcome="green", session_id="s1", summary=Counts(3, 2, 0, 1))
    with Store(tmp_path) as store:
        store.record_run(red, RunEvidence(failed=failed(A, B), passed=(C,), total=3, whole_suite=True))
        owed, count = store.owed("s1")
        assert count == 2 and [(o.test, o.reason, o.run_id, o.line) for o in owed] == [
            (A, "failed", "r1", 3),
            (B, "failed", "r1", 3),
        ]
        start = store.session_start("s1")
        assert start is not None and start.baseline == (C,)  # what its first whole-suite run passed
        store.record_run(green, RunEvidence(passed=(A, C), skipped=(B,), total=3, ok=True, whole_suite=True))
        owed, count = store.owed("s1")
        assert count == 1 and owed[0].test == B and owed[0].reason == "skipped"
        state = store.state("s1")
        assert state.owed_count == 1 and state.last_run is not None and state.last_run.run_id == "r2"
        # A person accepts the skip (workspace-wide): no longer owed; the record says who and why.
        accepted = store.add_acceptance(B, "flaky upstream, tracked in #12", "ana")
        assert store.owed("s1") == ((), 0)
        assert store.acceptances(session_id="s1") == [accepted] and accepted.by == "ana"
        # An acceptance never covers a failure.
        store.record_run(
            RunRecord("r3", ok=False, at=3.0, session_id="s1"), RunEvidence(failed=failed(B), total=1)
        )
        assert store.owed("s1")[1] == 1
        with pytest.raises(ValueError, match="needs a test, a reason"):
            store.add_acceptance(B, " ", "ana")


@pytest.mark.usefixtures("state_backend")
def test_an_owing_green_run_does_not_clear_the_unresolved_record(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        store.record_run(
            RunRecord("r1", ok=False, at=1.0, session_id="s1"), RunEvidence(failed=failed(A), total=1)
        )
        with store.transaction():
            store.mark_released("s1", 0, "r1", "owed")
        narrowed = RunRecord("r2", ok=True, at=2.0, outcome="green", session_id="s1", selection="target")
        store.record_run(narrowed, RunEvidence(passed=(C,), total=1, ok=True))
        [record] = store.unresolved_records("s1")
        assert record["reason"] == "owed" and store.state("s1").unresolved
        store.record_run(
            RunRecord("r3", ok=True, at=3.0, session_id="s1"), RunEvidence(passed=(A,), total=1, ok=True)
        )
        assert store.unresolved_records("s1") == [] and not store.state("s1").unresolved


@pytest.mark.usefixtures("state_backend")
def test_a_session_of_two_thousand_tests_records_a_run_in_a_few_ms(
    tmp_path: Path, state_backend: str
) -> None:
    names = tuple(f"tests/test_{i // 50}.py::test_{i}" for i in range(2000))
    with Store(tmp_path) as store:
        store.record_run(
            RunRecord("r0", ok=True, at=0.5, session_id="s1"),
            RunEvidence(passed=names, total=2000, ok=True, whole_suite=True),
        )
        start = store.session_start("s1")
        assert start is not None and start.baseline is not None and len(start.baseline) == 2000
        took = []
        for i in range(1, 6):
            half = names[:1000] if i % 2 else names[1000:]
            ev = RunEvidence(failed=failed(*half[:200]), passed=names[200:], total=2000, whole_suite=True)
            t = time.perf_counter()
            store.record_run(RunRecord(f"r{i}", ok=False, at=float(i), session_id="s1"), ev)
            took.append(time.perf_counter() - t)
        assert store.owed("s1")[1] == 200
    took.sort()
    limit = 0.05 if state_backend == "sqlite" else 0.25  # a loaded shared machine; typical is a few ms
    assert took[len(took) // 2] < limit, took


# ------------------------------------------------------------------ marks, through record_result


class Mark(NamedTuple):  # greenloop.closure.marks.Mark's fields
    file: str
    line: int
    kind: str
    test: str | None
    text: str


def test_a_runs_marks_are_read_against_the_sessions_start_and_name_the_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """greenloop.closure.marks is read at record time: a snapshot at the session's start, then
    `taken_away(root, that snapshot)` for each run (a stand-in module with its API here)."""
    seen: list[tuple[str, str | None]] = []
    now: list[Mark] = []

    def snapshot(root: str) -> str:
        seen.append(("snapshot", root))
        return '{"marks": []}'

    def taken_away(root: str, baseline: str | None) -> tuple[Mark, ...]:
        seen.append(("taken_away", baseline))
        return tuple(now)

    marks = types.ModuleType("greenloop.closure.marks")
    marks.snapshot = snapshot  # type: ignore[attr-defined]
    marks.taken_away = taken_away  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "greenloop.closure.marks", marks)
    red = RunResult(
        "run-1",
        False,
        "red",
        "pytest",
        "pytest",
        1,
        summary=Summary(2, 1, 1, 0),
        failures=(Failure(A, "tests/test_a.py", 3),),
        passed_tests=(B,),
        session_id="s1",
    )
    record_result(tmp_path, red, session_id="s1", fingerprint=lambda: "fp")
    assert seen == [("snapshot", str(tmp_path)), ("taken_away", '{"marks": []}')]
    now[:] = [
        Mark("tests/test_a.py", 2, "skip", "test_add", "@pytest.mark.skip"),
        Mark("web/cart.test.js", 7, "only", "adds", "it.only("),
    ]
    green = red._replace(
        run_id="run-2",
        ok=True,
        outcome="green",
        summary=Summary(2, 1, 0, 1),
        failures=(),
        passed_tests=(B,),
        skipped_tests=(A,),
    )
    record_result(tmp_path, green, session_id="s1", fingerprint=lambda: "fp")
    with Store(tmp_path) as store:
        owed, count = store.owed("s1")
        row = store.conn.execute("SELECT marks FROM runs WHERE run_id = 'run-2'").fetchone()
    assert count == 2 and json.loads(row[0])[0]["line"] == 2
    by_reason = {o.reason: o for o in owed}
    assert (by_reason["skipped"].test, by_reason["skipped"].file, by_reason["skipped"].line) == (
        A,
        "tests/test_a.py",
        2,
    )
    assert by_reason["only"].file == "web/cart.test.js" and by_reason["only"].line == 7
    d = decide(ClosureState("s1", owed=owed, owed_count=count), Config())
    assert "skipped in this session: tests/test_a.py:2 @pytest.mark.skip" in d.message
    assert ".only web/cart.test.js:7" in d.message


@pytest.mark.usefixtures("state_backend")
def test_two_suites_of_one_session_never_make_each_other_vanish(tmp_path: Path) -> None:
    """A monorepo: the whole suite of one package names none of the other's tests."""
    api, web = "pytest:/repo/api", "pytest:/repo/web"
    with Store(tmp_path) as store:
        whole = RunEvidence(passed=(A, B), total=2, ok=True, whole_suite=True, suite=api)
        store.record_run(RunRecord("r1", ok=True, at=1.0, session_id="s1"), whole)
        other = RunEvidence(passed=(C,), total=1, ok=True, whole_suite=True, suite=web)
        store.record_run(RunRecord("r2", ok=True, at=2.0, session_id="s1"), other)
        assert store.owed("s1") == ((), 0)
        # The first suite run again without B: B is gone from it.
        store.record_run(
            RunRecord("r3", ok=True, at=3.0, session_id="s1"), whole._replace(passed=(A,), total=1)
        )
        owed, _ = store.owed("s1")
        assert [(o.test, o.reason) for o in owed] == [(B, "removed")]
        start = store.session_start("s1")
        assert start is not None and set(start.baseline or ()) == {A, B, C}


@pytest.mark.usefixtures("state_backend")
def test_a_session_using_workspace_runs_owes_what_they_failed(tmp_path: Path) -> None:
    """Runs no session claimed (the gate uses the workspace's runs for a session with none of
    its own): a narrowed green one after a red one still leaves the failure owed."""
    from greenloop.closure.gate import Gate

    clock = iter(float(t) for t in range(100, 200))
    gate = Gate(tmp_path, config=Config(), clock=lambda: next(clock))
    gate.on_turn_start("s1")
    with Store(tmp_path) as store:
        red = RunRecord("r1", ok=False, at=150.0, outcome="red")
        store.record_run(red, RunEvidence(failed=failed(A), passed=(B,), total=2, whole_suite=True))
        narrowed = RunRecord("r2", ok=True, at=151.0, outcome="green", selection="target")
        store.record_run(narrowed, RunEvidence(passed=(B,), total=1, ok=True))
    d = gate.on_turn_stopping("s1")
    assert d.kind == "steer" and f"{A} (failed in r1)" in d.message
    with Store(tmp_path) as store:  # a workspace run that passes it clears it
        store.record_run(
            RunRecord("r3", ok=True, at=152.0, outcome="green"), RunEvidence(passed=(A,), total=1, ok=True)
        )
    assert gate.on_turn_stopping("s1").kind == "allow"


def test_a_terse_whole_suite_green_clears_only_its_own_suites_failures() -> None:
    ev = RunEvidence(failed=failed(A, C), total=2, whole_suite=True, suite="pytest:/repo/api")
    write, _, _ = owed_after({}, frozenset(), ev, "r1", 1.0, frozenset())
    owed = {o.test: o for o in write}
    other = RunEvidence(total=5, ok=True, whole_suite=True, suite="pytest:/repo/web")
    assert owed_after(owed, frozenset({A, C}), other, "r2", 2.0, frozenset())[1] == []  # another suite
    same = other._replace(suite="pytest:/repo/api")
    assert owed_after(owed, frozenset({A, C}), same, "r2", 2.0, frozenset({A, C}))[1] == [A, C]


def test_a_failing_hook_is_owed_until_a_run_covering_its_file_has_it_pass() -> None:
    from greenloop.closure.evidence import HOOK_DETAIL

    hook = 'db > "before all" hook for "reads"'
    red = RunEvidence(
        failed=((hook, "test/db.spec.js", 3), ("math > adds badly", "test/math.spec.js", 6)),
        hooks=(hook,),
        passed=("math > adds",),
        total=3,
        whole_suite=True,
    )
    rows, _clear, guards = owed_after({}, frozenset(), red, "run-1", 1.0)
    owed = {r.test: r for r in rows}
    assert owed[hook].reason == "failed" and owed[hook].detail == HOOK_DETAIL
    assert hook not in guards  # no run reports a hook passed: never "no longer in the suite"
    guarded = frozenset(guards) | {"math > adds"}
    # another file run on its own says nothing of the hook
    other = RunEvidence(passed=("math > adds", "math > adds badly"), total=2, ok=True,
                        scope=("test/math.spec.js",))
    rows2, clear2, _ = owed_after(owed, guarded, other, "run-2", 2.0)
    assert hook not in clear2 and "math > adds badly" in clear2 and rows2 == []
    owed.pop("math > adds badly")
    # the hook's file run again, the hook fixed: its tests pass and the hook is cleared
    again = RunEvidence(passed=("db > reads",), total=1, ok=True, scope=("test/",))
    assert owed_after(owed, guarded, again, "run-3", 3.0)[1] == [hook]
    # a whole-suite run in which the hook still fails keeps it owed, and is never "removed"
    still = RunEvidence(failed=((hook, "test/db.spec.js", 3),), hooks=(hook,),
                        passed=("math > adds", "math > adds badly"), total=3, whole_suite=True)
    rows4, clear4, _ = owed_after(owed, guarded, still, "run-4", 4.0)
    assert hook not in clear4 and all(r.reason != "removed" for r in rows4)
    green = RunEvidence(passed=("math > adds", "math > adds badly", "db > reads"), total=3, ok=True,
                        whole_suite=True)
    rows5, clear5, _ = owed_after(owed, guarded, green, "run-5", 5.0)
    assert clear5 == [hook] and rows5 == []


def test_an_expected_failure_mark_makes_a_pass_no_proof() -> None:
    """`it.fails('adds')` / `test.failing` / an xfail that passes: the runner reports the owed
    test passed because it still fails. It stays owed, as taken away, naming the mark."""
    fails = MarkNote("math.test.js", 5, "xfail", "adds", "it.fails('adds', () => {")
    owed = fold({}, frozenset(), RunEvidence(failed=failed("math > adds"), total=2), "r1")
    ev = RunEvidence(passed=("math > adds", "math > multiplies"), total=2, ok=True, whole_suite=True,
                     marks=(fails,))
    (row,) = fold(owed, frozenset({"math > adds", "math > multiplies"}), ev, "r2").values()
    assert (row.test, row.reason, row.file, row.line) == ("math > adds", "skipped", "math.test.js", 5)
    # Without the mark the same pass clears it; another test's xfail mark is not this one's.
    assert fold(owed, frozenset(), ev._replace(marks=()), "r2") == {}
    other = fails._replace(test="multiplies")
    assert "math > adds" not in fold(owed, frozenset(), ev._replace(marks=(other,)), "r2")


@pytest.mark.parametrize("in_git", [False, True])
def test_a_prose_edit_is_not_a_code_change(tmp_path: Path, in_git: bool) -> None:
    """A changelog or README written after a green run (or in a session that ran nothing)
    leaves the working tree's fingerprint as it was: the stale-green and no-run rules hold on
    code. A code file, a test file or a data file still changes it; so does a git commit."""
    import subprocess

    from greenloop.system.fingerprint import working_tree
    from greenloop.system.tree_digest import now

    (tmp_path / "calc.py").write_text("x = 1\n")
    if in_git:
        git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "calc.py"], check=True)
        subprocess.run([*git, "commit", "-qm", "one"], check=True)
    before = now(tmp_path)
    assert before is not None and before.startswith("git:" if in_git else "walk:")
    (tmp_path / "CHANGELOG.md").write_text("# Changes\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.rst").write_text("Guide\n=====\n")
    assert now(tmp_path) == before == working_tree(str(tmp_path))
    (tmp_path / "data.txt").write_text("42\n")
    assert now(tmp_path) != before


# ------------------------------------------------------------------ config written during the session


@pytest.mark.parametrize(
    ("written", "rule"),
    [
        ("enabled = false\n", "owed"),
        ("max_intercept_rounds = 0\n", "owed"),
        ('stale_green = "note"\n', "stale"),
    ],
)
def test_a_config_loosened_during_the_session_does_not_loosen_its_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str, rule: str
) -> None:
    """An agent that writes `enabled = false` (or a smaller budget, or `stale_green = "note"`)
    into greenloop.toml is still held, and told why; a session that begins after the edit gets
    the config as written, and so does one whose config said so from its start."""
    import os

    from greenloop.closure.gate import Gate

    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "no-user-config"))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("x = 1\n")
    Gate(ws).on_turn_start("s1")
    with Store(ws) as store:
        start = store.session_start("s1")
        assert start is not None
        if rule == "owed":
            store.record_run(RunRecord("r1", ok=False, at=start.at + 1, session_id="s1"),
                             RunEvidence(failed=failed(A), total=1))
        else:
            from greenloop.system.tree_digest import now

            store.record_run(RunRecord("r1", ok=True, at=start.at + 1, outcome="green", session_id="s1",
                                       fingerprint=now(ws)), RunEvidence(passed=(A,), total=1, ok=True))
            (ws / "calc.py").write_text("x = 2\n")  # an edit after the green run
    config = ws / "greenloop.toml"
    config.write_text(written)
    os.utime(config, (start.at + 5, start.at + 5))
    d = Gate(ws).on_turn_stopping("s1")
    assert d.kind == "steer" and d.rule == rule, d
    assert f"{written.strip()} in {config} was written during this session" in d.message
    assert "applies from the next session" in d.message
    from greenloop.closure.check import closure_check

    verdict = closure_check(ws, "s1")  # `greenloop check` agrees
    assert not verdict.satisfied and verdict.holding == rule
    assert any("written during this session" in n for n in verdict.notes)
    # A session that begins after the edit is judged by the config as written.
    gate = Gate(ws)
    gate.on_turn_start("s2")
    assert gate.on_turn_stopping("s2").kind == "allow"
    # Written before the session began: it is the project's config, and it applies.
    os.utime(config, (start.at - 5, start.at - 5))
    assert Gate(ws).on_turn_stopping("s1").kind != "steer"


def test_a_config_made_stricter_during_the_session_applies_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from greenloop.closure.gate import Gate

    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "no-user-config"))
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = 1\n")
    Gate(tmp_path).on_turn_start("s1")
    with Store(tmp_path) as store:
        start = store.session_start("s1")
        assert start is not None
        store.record_run(RunRecord("r1", ok=False, at=start.at + 1, session_id="s1"),
                         RunEvidence(failed=failed(A), total=1))
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = 3\n")
    os.utime(tmp_path / "greenloop.toml", (start.at + 5, start.at + 5))
    d = Gate(tmp_path).on_turn_stopping("s1")
    assert d.kind == "steer" and d.budget == 3 and "written during this session" not in d.message
