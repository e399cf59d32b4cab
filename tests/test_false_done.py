"""Honest done (issue 31): every scenario of bench/false_done.py, each a scripted agent session on
a real workspace (real runners, the real state database, the Claude Code hook adapter), gets
the verdict a strict but fair reviewer expects: every escape steered, every honest session
allowed. Both rates must be 0 of their totals."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import false_done
from false_done import ESCAPES, HONEST, SCENARIOS, Outcome, rates, run_one


def test_there_are_thirty_scenarios_and_every_route_has_one() -> None:
    assert len(SCENARIOS) >= 30
    assert len({s.name for s in SCENARIOS}) == len(SCENARIOS), "scenario names must be unique"
    escapes = Counter(s.route for s in SCENARIOS if s.expect == "steer")
    honest = Counter(s.route for s in SCENARIOS if s.expect == "allow")
    assert {r: escapes[r] for r in ESCAPES if escapes[r] == 0} == {}, "an escape route with no scenario"
    assert {r: honest[r] for r in HONEST if honest[r] == 0} == {}, "an honest kind with no scenario"
    skips = {s.name for s in SCENARIOS if s.route == "skip"}
    for needed in ("pytest-mark-skip", "skipif", "xfail", "unittest", "vitest-it-skip", "describe-skip",
                   "todo", "jest-test-skip", "go-t-skip", "rust-ignore"):
        assert any(needed in name for name in skips), needed


def test_the_rates_count_what_went_wrong() -> None:
    """The counting itself: a released escape, an errored script and a steered honest session
    are each counted; a skipped scenario is counted nowhere."""
    escape = next(s for s in SCENARIOS if s.expect == "steer")
    honest = next(s for s in SCENARIOS if s.expect == "allow")
    outcomes = [
        Outcome(escape, "steer", 0.1), Outcome(escape, "release", 0.1), Outcome(escape, "allow", 0.1),
        Outcome(escape, "error", 0.1), Outcome(honest, "allow", 0.1), Outcome(honest, "steer", 0.1),
        Outcome(honest, "skipped", 0.0),
    ]
    r = rates(outcomes)
    assert (r.false_done, r.escapes, r.false_block, r.honest, r.errors) == (3, 4, 1, 2, 1)
    printed = false_done.table(outcomes)
    assert "false done:  3/4" in printed and "false block: 1/2" in printed


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    tmp = tmp_path_factory.mktemp("false-done")
    return {sc.name: run_one(sc, tmp) for sc in SCENARIOS}


# 73 sessions, each a few real runs: about 3 minutes on a loaded 2-core machine, past the
# suite's default timeout (the fixture's time counts towards the first test that uses it)
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_no_false_done_and_no_false_block(outcomes: dict[str, Outcome]) -> None:
    got = list(outcomes.values())
    wrong = {o.scenario.name: (o.scenario.expect, o.verdict, o.detail) for o in got if o.wrong}
    assert wrong == {}, false_done.table(got)
    r = rates(got)
    assert r.false_done == 0 and r.false_block == 0 and r.escapes >= 25 and r.honest >= 10, r
    if os.environ.get("GREENLOOP_TEST_NO_SKIP") == "1":
        assert [o.scenario.name for o in got if o.verdict == "skipped"] == []


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_steers_name_the_test_and_the_way_out(outcomes: dict[str, Outcome]) -> None:
    """The first line of each steer names what holds the turn."""
    said = {name: o.detail for name, o in outcomes.items() if o.verdict == "steer"}
    assert "test_calc.py::test_add (failed in" in said["narrow-to-another-passing-test"]
    assert "test_calc.py::test_add (skipped in this session" in said["skip-pytest-mark-skip"]
    assert "no longer in the suite" in said["rename-the-failing-test-and-fix"]
    assert ".only math.test.js:5" in said["only-vitest-when-nothing-failed"]
    assert "files changed since the last run" in said["stale-edit-after-green"]
    assert "recorded no test run" in said["not-run-edits-and-no-run"]
