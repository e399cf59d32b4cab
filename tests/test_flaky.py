"""Flaky tests, pure: the fold of reruns into a result, and the history's same-tree flips."""

from __future__ import annotations

import pytest

from greenloop.config import Config
from greenloop.errors import ConfigError
from greenloop.model import Failure, Summary
from greenloop.result import RunResult
from greenloop.runner.flaky import RunEvidence, fold_reruns, from_history, passed_in


def red(*names: str, passed: int = 1) -> RunResult:
    return RunResult(
        run_id="run-1", ok=False, outcome="red", framework="pytest", command="x", exit_code=1,
        summary=Summary(total=len(names) + passed, passed=passed, failed=len(names)),
        failures=tuple(Failure(test=n) for n in names), next_action="retry_coder",
    )


def test_flaky_failures_are_marked_and_counted_apart() -> None:
    r = fold_reruns(red("a", "b"), {"a"}, policy="fail", last_exit_code=1)
    assert [f.flaky for f in r.failures] == [True, False]
    assert r.summary == Summary(total=3, passed=1, failed=1, flaky=1)
    assert r.outcome == "red" and not r.ok


@pytest.mark.parametrize(("policy", "outcome"), [("fail", "red"), ("warn", "green")])
def test_only_flaky_failures_follow_the_policy(policy: str, outcome: str) -> None:
    r = fold_reruns(red("a"), {"a"}, policy=policy, last_exit_code=0)
    assert r.outcome == outcome and r.ok == (outcome == "green")
    assert r.summary.failed == 0 and r.summary.flaky == 1 and r.failures[0].flaky
    assert any(f'flaky = "{policy}"' in n for n in r.notes)
    if outcome == "green":
        assert r.exit_code == 0 and r.next_action is None


def test_no_flaky_test_changes_nothing_but_notes() -> None:
    base = red("a")
    r = fold_reruns(base, set(), policy="warn", last_exit_code=0, notes=("rerun 1 of 1: 0 passed",))
    assert r._replace(notes=base.notes) == base and r.notes[-1] == "rerun 1 of 1: 0 passed"


def test_passed_in_needs_the_test_named_or_a_green_rerun_naming_none() -> None:
    rerun = red("b")._replace(passed_tests=("a", "c"))
    assert passed_in(rerun, ["a", "b"]) == {"a"}
    nameless = RunResult(run_id="r", ok=True, outcome="green", framework="npm-test", command="x", exit_code=0)
    assert passed_in(nameless, ["a", "b"]) == {"a", "b"}
    assert passed_in(nameless._replace(ok=False, outcome="red"), ["a"]) == set()


def test_history_finds_flips_on_the_same_working_tree_only() -> None:
    runs = [
        RunEvidence("r1", 1.0, "fp1", ("t_flip", "t_always"), ("t_ok",)),
        RunEvidence("r2", 2.0, "fp1", ("t_always",), ("t_ok", "t_flip")),
        RunEvidence("r3", 3.0, "fp2", ("t_ok",), ("t_flip",)),  # code changed: t_ok broke, not flaky
        RunEvidence("r4", 4.0, None, ("t_flip",), None),  # no fingerprint: no evidence
        RunEvidence("r5", 5.0, "fp3", ("t_rerun",), ("t_rerun",), flaky_marked=("t_rerun",)),
    ]
    found = {t.test: t for t in from_history(runs)}
    assert set(found) == {"t_flip", "t_rerun"}
    assert found["t_flip"].failed_in == ("r1",) and found["t_flip"].passed_in == ("r2",)
    assert found["t_flip"].evidence == ("history",) and found["t_flip"].fingerprints == ("fp1",)
    assert found["t_rerun"].evidence == ("rerun",)
    assert found["t_flip"].to_json()["failed_in"] == ["r1"]


def test_json_forms_stay_symmetric_and_quiet_when_unset() -> None:
    f = Failure(test="a", flaky=True)
    assert Failure.from_json(f.to_json()) == f and f.to_json()["flaky"] is True
    assert "flaky" not in Failure(test="a").to_json()
    s = Summary(total=2, passed=1, flaky=1)
    assert Summary.from_json(s.to_json()) == s and "flaky" not in Summary(total=1).to_json()


def test_config_flaky_policy_is_validated_naming_the_field() -> None:
    assert Config().flaky == "fail" and Config.from_json({"flaky": "warn"}).flaky == "warn"
    with pytest.raises(ConfigError, match="'flaky' must be one of fail, warn"):
        Config.from_json({"flaky": "sometimes"})
