"""The bridges: unit runs and integration runs turned into bug events.

The run records are built the way run.py builds them (the bridge reads nothing else); one
scenario goes through the real `api.test_run` with a real pytest suite, red then green.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from greenloop.bugs import bridge, record
from greenloop.bugs.log import BugLog
from greenloop.errors import UsageError
from greenloop.model import Failure, Summary
from greenloop.result import RunResult


def project(tmp_path: Path, *units: str) -> Path:
    root = tmp_path / "proj"
    for u in units:
        (root / "units" / u).mkdir(parents=True)
    (root / "units.json").write_text(json.dumps({"units": [{"id": u} for u in units]}))
    return root


def red(run_id: str, *failures: Failure) -> RunResult:
    return RunResult(run_id=run_id, ok=False, outcome="red", framework="vitest", command="vitest run",
                     exit_code=1, summary=Summary(total=5, passed=5 - len(failures), failed=len(failures)),
                     failures=failures, next_action="retry_coder")


def green(run_id: str) -> RunResult:
    return RunResult(run_id=run_id, ok=True, outcome="green", framework="vitest", command="vitest run",
                     exit_code=0, summary=Summary(total=5, passed=5))


def broken(run_id: str, reason: str, **kw: object) -> RunResult:
    return RunResult(run_id=run_id, ok=False, outcome="broken", framework="vitest", command="vitest run",
                     exit_code=kw.pop("exit_code", 1), crashed=kw.pop("crashed", True),  # type: ignore[arg-type]
                     crash_reason=reason, output_tail="SyntaxError: Unexpected token", **kw)  # type: ignore[arg-type]


F_TITLE = Failure(test="POST /api/todos > missing title gives 400", expected="400", got="500",
                  stack="TypeError: Cannot read properties of undefined (reading 'length')")
F_LIST = Failure(test="GET /api/todos > lists created todos", message="expected [] to have length 1")


def test_red_opens_reuses_then_green_fixes(tmp_path: Path) -> None:
    root = project(tmp_path, "todo-be", "todo-fe")
    ws = str(root / "units" / "todo-be")
    first = bridge.bridge_unit_run(ws, red("run-1", F_TITLE, F_LIST))
    assert len(first.bugs_opened) == 2 and first.bugs_transitioned == ()
    assert [f.bug_id for f in first.failures] == list(first.bugs_opened)
    log = BugLog(root / "bugs.ndjson")
    b_title, b_list = (log.get(i) for i in first.bugs_opened)
    assert (b_title.unit_id, b_title.source, b_title.run_id, b_title.severity) == (
        "todo-be", "unit_test", "run-1", "high")  # 500 in got
    assert b_title.title == "POST /api/todos > missing title gives 400: expected 400, got 500"
    assert "TypeError" in b_title.detail and b_title.by == "greenloop run"
    assert b_list.severity == "medium" and b_list.title.endswith("expected [] to have length 1")
    # the other unit's bug is not touched by this unit's runs
    other = bridge.bridge_unit_run(str(root / "units" / "todo-fe"), red("run-fe", F_TITLE))
    # the same failure again: the open bug is reused, nothing new is listed
    again = bridge.bridge_unit_run(ws, red("run-2", F_TITLE))
    assert again.bugs_opened == () and again.failures[0].bug_id == b_title.id
    # someone claims one; then a green run fixes both, reporting where each came from
    log.transition(b_list.id, "fixing", by="coder")
    done = bridge.bridge_unit_run(ws, green("run-3"))
    assert sorted(done.bugs_transitioned, key=lambda t: t["id"]) == sorted(
        [{"id": b_title.id, "from": "open", "to": "fixed", "evidence": "suite_passed"},
         {"id": b_list.id, "from": "fixing", "to": "fixed", "evidence": "suite_passed"}],
        key=lambda t: t["id"])
    assert log.get(b_title.id).fix_refs == ("run-3",)
    assert log.get(other.bugs_opened[0]).status == "open"
    # green again: nothing left to move
    assert bridge.bridge_unit_run(ws, green("run-4")).bugs_transitioned == ()
    # the same test failing after its fix is a regression: a new bug
    regress = bridge.bridge_unit_run(ws, red("run-5", F_TITLE))
    assert len(regress.bugs_opened) == 1 and regress.bugs_opened[0] != b_title.id


def test_broken_runs(tmp_path: Path) -> None:
    root = project(tmp_path, "profile-be")
    ws = str(root / "units" / "profile-be")
    crash = bridge.bridge_unit_run(ws, broken("run-1", "the suite could not load the code under test"))
    assert len(crash.bugs_opened) == 1
    log = BugLog(root / "bugs.ndjson")
    infra = log.get(crash.bugs_opened[0])
    assert (infra.source, infra.test_name, infra.unit_id) == ("unit_test_infra", record.INFRA_TEST_NAME,
                                                             "profile-be")
    assert "could not load" in infra.title and "SyntaxError" in infra.detail
    # crashing again reuses it; a timeout is the same kind of bug
    timeout = broken("run-2", "timed out after 60000 ms", timed_out=True)
    assert bridge.bridge_unit_run(ws, timeout).bugs_opened == ()
    # no tests ran, or a person interrupted: nothing to track
    for result in (broken("run-3", "no tests ran", crashed=False, exit_code=5),
                   broken("run-4", "interrupted", aborted=True)):
        out = bridge.bridge_unit_run(ws, result)
        assert out.bugs_opened == () and any(n.startswith("bugs:") for n in out.notes)
    assert len(log.fold().bugs) == 1
    # the suite runs again (red): the infra bug is fixed, the failure opens its own bug
    after = bridge.bridge_unit_run(ws, red("run-5", F_LIST))
    assert after.bugs_transitioned == (
        {"id": infra.id, "from": "open", "to": "fixed", "evidence": "suite_ran"},)
    assert len(after.bugs_opened) == 1


def test_red_without_recognised_failures_is_not_lost(tmp_path: Path) -> None:
    ws = tmp_path / "lib"
    ws.mkdir()
    out = bridge.bridge_unit_run(str(ws), red("run-1"))
    assert len(out.bugs_opened) == 1
    # not a DevLoop project: the workspace's .greenloop/
    bug = BugLog(ws / ".greenloop" / "bugs.ndjson").get(out.bugs_opened[0])
    assert bug.unit_id == "lib" and "no failing test was recognised" in bug.title


def test_unwritable_log_becomes_a_note(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".greenloop" / "bugs.ndjson").mkdir(parents=True)  # cannot be opened as a file, even by root
    out = bridge.bridge_unit_run(str(ws), red("run-1", F_TITLE))
    assert out.bugs_opened == () and out.failures[0].bug_id is None
    assert any("could not update" in n for n in out.notes)


@dataclass
class CaseFailure:  # what the integration runner hands over (an object, not a dict)
    case_id: str
    failed_step: int | str | None
    reason: str
    expected: object
    got: object
    involves: Sequence[str] = field(default_factory=list)


def test_integration_bridge(tmp_path: Path) -> None:
    root = project(tmp_path, "todo-be", "todo-fe", "auth-be")
    log = BugLog(root / "bugs.ndjson")
    unit_bug = bridge.bridge_unit_run(str(root / "units" / "todo-be"), red("run-u1", F_TITLE)).bugs_opened[0]
    bridge.bridge_unit_run(str(root / "units" / "todo-be"), green("run-u2"))  # fixed, awaiting verification
    auth_bug = bridge.bridge_unit_run(str(root / "units" / "auth-be"), red("run-a1", F_LIST)).bugs_opened[0]
    bridge.bridge_unit_run(str(root / "units" / "auth-be"), green("run-a2"))

    failures: list[CaseFailure | dict[str, object]] = [
        {"case_id": "create-then-list", "failed_step": 2, "reason": "status mismatch",
         "expected": {"status": 200}, "got": {"status": 502}, "involves": ["todo-be", "todo-fe"],
         "stderr_excerpt": "Error: connect ECONNREFUSED"},
        CaseFailure("auth-login", "POST /api/login", "body mismatch", {"$.token": "exists"}, None,
                    ["auth-be"]),
    ]
    red_run = bridge.bridge_integration_run(str(root), failures, run_id="run-int-1", ok=False,
                                          covered_units=["todo-be", "todo-fe", "auth-be"])
    assert len(red_run.bugs_opened) == 2 and red_run.bugs_transitioned == ()
    case_bug = log.get(red_run.bug_ids["create-then-list"])
    assert (case_bug.source, case_bug.unit_id, case_bug.test_name, case_bug.affected_units) == (
        "integration_test", "integration", "create-then-list", ("todo-be", "todo-fe"))
    assert case_bug.severity == "high" and "ECONNREFUSED" in case_bug.detail
    assert case_bug.title.startswith("create-then-list step 2: expected")
    assert log.get(red_run.bug_ids["auth-login"]).severity == "critical"  # the case is about auth
    # listed under each unit it involves
    assert {b.id for b in log.list(unit="todo-fe").bugs} == {case_bug.id}
    # the same case failing again reuses its bug
    again = bridge.bridge_integration_run(str(root), failures[:1], run_id="run-int-2", ok=False,
                                        covered_units=["todo-be", "todo-fe"])
    assert again.bugs_opened == () and again.bug_ids == {"create-then-list": case_bug.id}
    # a red integration run verifies nothing
    assert log.get(unit_bug).status == "fixed"

    # green, covering the todo units only: their case bug is fixed and verified, the fixed
    # unit bug is verified; auth-be was not covered, so its bugs stay where they are
    ok = bridge.bridge_integration_run(str(root), [], run_id="run-int-3", ok=True,
                                     covered_units=["todo-be", "todo-fe"], passed_cases=["create-then-list"])
    assert ok.bugs_opened == ()
    moves = [(t["id"], t["from"], t["to"]) for t in ok.bugs_transitioned]
    assert (case_bug.id, "open", "fixed") in moves and (case_bug.id, "fixed", "verified") in moves
    assert (unit_bug, "fixed", "verified") in moves and len(moves) == 3
    assert log.get(case_bug.id).status == "verified" and "run-int-3" in log.get(unit_bug).fix_refs
    assert log.get(auth_bug).status == "fixed"
    assert log.get(red_run.bug_ids["auth-login"]).status == "open"
    # without passed_cases, a green run has no evidence about any case: integration bugs stay;
    # the fixed unit bug of a covered unit is verified
    ok2 = bridge.bridge_integration_run(str(root), [], run_id="run-int-4", ok=True, covered_units=["auth-be"])
    assert {(t["id"], t["to"], t["evidence"]) for t in ok2.bugs_transitioned} == {
        (auth_bug, "verified", "integration_passed")}
    assert log.get(red_run.bug_ids["auth-login"]).status == "open"
    # the case itself passing answers its bug: fixed and, the run being green, verified
    ok3 = bridge.bridge_integration_run(str(root), [], run_id="run-int-5", ok=True, covered_units=["auth-be"],
                                      passed_cases=["auth-login"])
    assert [(t["to"], t["evidence"]) for t in ok3.bugs_transitioned] == [
        ("fixed", "case_passed"), ("verified", "case_passed")]
    closed = log.get(red_run.bug_ids["auth-login"])
    assert (closed.closed_by, closed.evidence) == ("run-int-5", "case_passed")
    assert {b.status for b in log.fold().bugs} == {"verified"}
    with pytest.raises(UsageError, match="case_id"):
        bridge.bridge_integration_run(str(root), [{"reason": "x"}], run_id="r", ok=False, covered_units=[])


def test_integration_red_run_fixes_the_cases_that_passed(tmp_path: Path) -> None:
    root = project(tmp_path, "a", "b")
    log = BugLog(root / "bugs.ndjson")
    fail = [{"case_id": "one", "reason": "x", "involves": ["a"]}, {"case_id": "two", "reason": "y",
                                                                    "involves": ["b"]}]
    first = bridge.bridge_integration_run(str(root), fail, run_id="r1", ok=False, covered_units=["a", "b"],
                                        passed_cases=[])
    # case one passes now, case two still fails: one's bug is fixed (not verified), two's stays open
    second = bridge.bridge_integration_run(str(root), fail[1:], run_id="r2", ok=False,
                                         covered_units=["a", "b"], passed_cases=["one"])
    assert second.bugs_transitioned == (
        {"id": first.bug_ids["one"], "from": "open", "to": "fixed", "evidence": "case_passed"},)
    assert log.get(first.bug_ids["one"]).fix_refs == ("r2",)
    assert log.get(first.bug_ids["two"]).status == "open"
    # a case both failed and passed (a retried case) is not fixed by its pass
    third = bridge.bridge_integration_run(str(root), fail[1:], run_id="r3", ok=False,
                                        covered_units=["b"], passed_cases=["two"])
    assert third.bugs_transitioned == () and log.get(first.bug_ids["two"]).status == "open"


PYTEST_CASES = """
def add(a, b):
    return a - b  # the bug


def test_adds():
    assert add(2, 3) == 5


def test_auth_rejects_empty_token():
    assert add(0, 0) == 0
"""


@pytest.mark.e2e
def test_real_runs_red_then_green(tmp_path: Path) -> None:
    """A real pytest suite in a DevLoop unit, through api.test_run: red opens, green fixes."""
    from greenloop import api

    root = project(tmp_path, "calc")
    unit = root / "units" / "calc"
    (unit / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    test_file = unit / "test_calc.py"
    test_file.write_text(PYTEST_CASES)
    first = api.test_run(unit, timeout_ms=60_000)
    assert first.outcome == "red", first.notes
    assert len(first.bugs_opened) == 1 and first.failures[0].bug_id == first.bugs_opened[0]
    bug = BugLog(root / "bugs.ndjson").get(first.bugs_opened[0])
    assert bug.unit_id == "calc" and "test_adds" in bug.test_name and bug.run_id == first.run_id
    stored = json.loads((Path(first.result_ref or "")).read_text()) if first.result_ref else None
    if stored is not None:  # the unit's result.json carries the bug ids too
        assert stored["bugs_opened"] == list(first.bugs_opened)
    test_file.write_text(PYTEST_CASES.replace("a - b  # the bug", "a + b"))
    second = api.test_run(unit, timeout_ms=60_000)
    assert second.outcome == "green", second.notes
    assert second.bugs_transitioned == (
        {"id": bug.id, "from": "open", "to": "fixed", "evidence": "test_passed"},)
    assert BugLog(root / "bugs.ndjson").get(bug.id).fix_refs == (second.run_id,)
    assert sys.executable  # the suite ran under this interpreter's pytest


# --- evidence: a bug moves to fixed only on a run that executed its own test -------------------


def named_green(run_id: str, *passed: str, selection: str | None = None) -> RunResult:
    return green(run_id)._replace(passed_tests=passed, selection=selection)


def test_a_narrowed_green_run_closes_only_the_bugs_whose_tests_it_ran(tmp_path: Path) -> None:
    root = project(tmp_path, "todo-be")
    ws = str(root / "units" / "todo-be")
    first = bridge.bridge_unit_run(ws, red("run-1", F_TITLE, F_LIST))
    b_title, b_list = first.bugs_opened
    log = BugLog(root / "bugs.ndjson")
    # a targeted run of another test: green, yet it says nothing about either bug
    other = bridge.bridge_unit_run(
        ws, named_green("run-2", "GET /api/todos > empty list", selection="target"))
    assert other.bugs_transitioned == ()
    assert {log.get(b).status for b in (b_title, b_list)} == {"open"}
    # a narrowed run without names (a text fallback) has no evidence either
    assert bridge.bridge_unit_run(ws, named_green("run-3", selection="last_failed")).bugs_transitioned == ()
    # the run that executed F_TITLE's test and saw it pass closes that bug, and only that one
    done = bridge.bridge_unit_run(ws, named_green("run-4", F_TITLE.test, selection="target"))
    assert done.bugs_transitioned == (
        {"id": b_title, "from": "open", "to": "fixed", "evidence": "test_passed"},)
    closed = log.get(b_title)
    assert (closed.status, closed.closed_by, closed.evidence, closed.fix_refs) == (
        "fixed", "run-4", "test_passed", ("run-4",))
    assert log.get(b_list).status == "open" and log.get(b_list).closed_by is None
    # the line in bugs.ndjson says which run closed it
    last = json.loads((root / "bugs.ndjson").read_text().splitlines()[-1])
    assert (last["id"], last["closed_by"], last["evidence"]) == (b_title, "run-4", "test_passed")


def test_a_red_run_closes_the_bugs_whose_tests_passed_in_it(tmp_path: Path) -> None:
    root = project(tmp_path, "todo-be")
    ws = str(root / "units" / "todo-be")
    b_title, b_list = bridge.bridge_unit_run(ws, red("run-1", F_TITLE, F_LIST)).bugs_opened
    mixed = red("run-2", F_LIST)._replace(passed_tests=(F_TITLE.test, "something else"))
    out = bridge.bridge_unit_run(ws, mixed)
    assert out.bugs_transitioned == (
        {"id": b_title, "from": "open", "to": "fixed", "evidence": "test_passed"},)
    assert out.failures[0].bug_id == b_list and BugLog(root / "bugs.ndjson").get(b_list).status == "open"


def test_a_whole_suite_green_run_that_names_its_tests_keeps_a_bug_whose_test_is_gone(tmp_path: Path) -> None:
    root = project(tmp_path, "todo-be")
    ws = str(root / "units" / "todo-be")
    b_title, b_list = bridge.bridge_unit_run(ws, red("run-1", F_TITLE, F_LIST)).bugs_opened
    out = bridge.bridge_unit_run(ws, named_green("run-2", F_LIST.test, "a renamed test"))
    assert [t["id"] for t in out.bugs_transitioned] == [b_list]
    assert BugLog(root / "bugs.ndjson").get(b_title).status == "open"
    assert any(b_title in n and "did not run their tests" in n for n in out.notes)


def test_old_log_lines_without_closing_keys_still_fold(tmp_path: Path) -> None:
    """Lines written before `closed_by`/`evidence` existed read back on the fast path."""
    old = {"id": "bug-20260101-0000-aaaa", "source": "unit_test", "unit_id": "u", "run_id": "r",
           "test_name": "t", "dedup_key": "u:t", "category": "unknown", "severity": "medium",
           "title": "T", "detail": "", "affected_units": ["u"], "status": "open", "fix_refs": [],
           "created_at": "x", "updated_at": "x", "by": None}
    path = tmp_path / "bugs.ndjson"
    path.write_text(json.dumps(old) + "\n")
    log = BugLog(path)
    bug = log.get(str(old["id"]))
    assert (bug.status, bug.closed_by, bug.evidence) == ("open", None, None) and log.warnings == ()
    moved = log.transition(bug.id, "fixed", by="me").bug
    assert (moved.closed_by, moved.evidence) == (None, "by hand")


DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"


@pytest.mark.e2e
def test_demo_a_green_run_of_one_other_test_leaves_the_discount_bug_open(tmp_path: Path) -> None:
    """examples/demo through api.test_run: the full run opens the discount bug; a green run
    targeting only another test leaves it open; a run of its own test after the fix closes it."""
    import shutil
    import subprocess

    from greenloop import api

    ws = tmp_path / "demo"
    # (what `scripts/demo` left in the checkout: its run's state, bug log and timeline, stays out)
    shutil.copytree(DEMO, ws, ignore=shutil.ignore_patterns(".greenloop", ".venv", "__pycache__",
                                                           "bugs.ndjson*", "timeline.ndjson"))
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    full = api.test_run(ws, timeout_ms=60_000)
    assert full.outcome == "red" and len(full.bugs_opened) == 1
    discount = full.failures[0]
    assert discount.test.endswith("test_discount_code_takes_ten_percent_off")
    one = api.test_run(ws, target="tests/test_cart.py::test_empty_cart_costs_nothing", timeout_ms=60_000)
    assert one.outcome == "green" and one.selection == "target"
    assert one.passed_tests == ("tests/test_cart.py::test_empty_cart_costs_nothing",)
    assert one.bugs_transitioned == ()
    log = BugLog(ws / ".greenloop" / "bugs.ndjson")
    assert log.get(full.bugs_opened[0]).status == "open"
    cart = ws / "cart.py"
    cart.write_text(cart.read_text().replace("total * 10 // 100", "total * 90 // 100"))
    own = api.test_run(ws, target=discount.test, timeout_ms=60_000)
    assert own.outcome == "green", own.output_tail
    assert own.bugs_transitioned == (
        {"id": full.bugs_opened[0], "from": "open", "to": "fixed", "evidence": "test_passed"},)
    assert log.get(full.bugs_opened[0]).closed_by == own.run_id
    # greenloop's state folder ignores itself: git status shows only the user's own files
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ws,
                            capture_output=True, text=True, check=True).stdout
    assert ".greenloop" not in status
    assert (ws / ".greenloop" / ".gitignore").read_text().splitlines()[-1] == "*"
