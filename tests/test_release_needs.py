"""`release` (issue 27): what ending a turn needs once the session changed files. "owed" (the
default): nothing owed and a green last run of the tree as it is; "affected": a green --affected
or whole-suite run of the tree as it is; "full": a green whole-suite run of it. Real pytest runs
in a real git repository, through the Claude Code hook adapter (bench/false_done.py's agent)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from false_done import CALC_FIXED, Agent, calc_ws, git_commit

from greenloop import api
from greenloop.closure.store import Store
from greenloop.config import load
from greenloop.errors import ConfigError


def _session(tmp_path: Path, release: str | None) -> Agent:
    ws = calc_ws(tmp_path / "ws")
    if release is not None:
        (ws / "greenloop.toml").write_text(f'release = "{release}"\n')
    git_commit(ws)
    agent = Agent(ws).prompt()
    assert agent.run() == "red"  # test_add fails
    agent.write("calc.py", CALC_FIXED)
    assert agent.run(last_failed=True) == "green"  # the fix, verified by rerunning test_add alone
    return agent


def _affected(agent: Agent) -> str:
    result = api.test_run(agent.ws, session_id=agent.session, affected=True)
    assert result.selection == "affected", result.notes
    return result.outcome


def test_by_default_an_owed_test_rerun_alone_verifies_its_fix(tmp_path: Path) -> None:
    agent = _session(tmp_path, None)
    assert agent.stop() == "allow", agent.message


def test_affected_asks_for_an_affected_run_after_a_narrowed_one_then_allows(tmp_path: Path) -> None:
    agent = _session(tmp_path, "affected")
    assert agent.stop() == "steer"
    assert "greenloop run --affected" in agent.message and "affected=true" in agent.message, agent.message
    assert _affected(agent) == "green"
    assert agent.stop() == "allow", agent.message


def test_full_asks_for_the_whole_suite_even_after_an_affected_run(tmp_path: Path) -> None:
    agent = _session(tmp_path, "full")
    assert _affected(agent) == "green"
    assert agent.stop() == "steer"
    assert "whole suite" in agent.message and "`greenloop run`" in agent.message, agent.message
    assert agent.run() == "green"
    assert agent.stop() == "allow", agent.message


def test_an_edit_after_the_covering_run_is_the_stale_rule_and_then_coverage_again(tmp_path: Path) -> None:
    agent = _session(tmp_path, "full")
    assert agent.run() == "green"
    agent.write("calc.py", CALC_FIXED + "\n\ndef sub(a, b):\n    return a - b\n")
    assert agent.stop() == "steer" and "files changed since the last run" in agent.message
    assert agent.run("test_calc.py::test_mul") == "green"  # narrowed, after the edit
    agent.prompt()  # a new turn: the stale rule asked once in the last one
    assert agent.stop() == "steer" and "whole suite" in agent.message, agent.message


def test_check_says_what_the_gate_would(tmp_path: Path) -> None:
    agent = _session(tmp_path, "affected")
    from greenloop.closure.check import closure_check

    check = closure_check(agent.ws, agent.session)
    assert not check.satisfied and check.holding == "uncovered", check
    assert any("greenloop run --affected" in n for n in check.notes), check.notes
    assert _affected(agent) == "green"
    assert closure_check(agent.ws, agent.session).satisfied


def test_asked_once_then_the_turn_ends_unresolved_with_the_reason(tmp_path: Path) -> None:
    agent = _session(tmp_path, "affected")
    assert agent.stop() == "steer"
    assert agent.stop() == "release", agent.message
    assert "no run that covers the change passed" in agent.message
    with Store(agent.ws) as store:
        records = store.unresolved_records(agent.session)
    assert [r["reason"] for r in records] == ["change not covered"], records


def test_a_session_that_changed_nothing_is_never_held_for_coverage(tmp_path: Path) -> None:
    ws = calc_ws(tmp_path / "ws", **{"calc.py": CALC_FIXED})
    (ws / "greenloop.toml").write_text('release = "full"\n')
    git_commit(ws)
    agent = Agent(ws).prompt()
    assert agent.run("test_calc.py::test_mul") == "green"  # a look, no edit
    assert agent.stop() == "allow", agent.message


def test_the_agents_own_narrowed_shell_run_is_not_a_whole_suite_run(tmp_path: Path) -> None:
    agent = _session(tmp_path, "full")
    agent.shell(f"{sys.executable} -m pytest -q test_calc.py::test_mul")
    assert agent.stop() == "steer" and "whole suite" in agent.message, agent.message
    agent.shell(f"{sys.executable} -m pytest -q")
    assert agent.stop() == "allow", agent.message


def test_a_wrong_release_is_refused_with_the_choices(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text('release = "sometimes"\n')
    with pytest.raises(ConfigError) as err:
        load(tmp_path)
    assert "release" in str(err.value) and "owed" in str(err.value) and "full" in str(err.value)
