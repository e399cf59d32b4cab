"""Sharding on real runners: `--shard I/N` in each runner's own dialect. The N shards of a suite
are disjoint and together are the whole suite: the shards' totals add up to the whole run's
and the union of their passed tests is the whole run's, for pytest, vitest, jest, node:test and
an npm test script that runs `node --test`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from greenloop import api
from greenloop.result import RunResult
from greenloop.schema import validate_run_result

from .helpers import cli, js_workspace, node_workspace, py_workspace

pytestmark = pytest.mark.e2e

FILES = 6  # three tests a file; `c3` fails
SHARDS = 3


def _pytest(root: Path) -> Path:
    files = {
        f"tests/test_f{i}.py": (
            "def test_a():\n    pass\n\n"
            "def test_b():\n    pass\n\n"
            f"def test_c():\n    assert {i} != 3\n"
        )
        for i in range(1, FILES + 1)
    }
    return py_workspace(root, files)


def _js(runner: str) -> Callable[[Path], Path]:
    head = "import { test, expect } from 'vitest'\n" if runner == "vitest" else ""

    def build(root: Path) -> Path:
        files = {
            f"f{i}.test.js": (
                f"{head}test('a{i}', () => {{}})\ntest('b{i}', () => {{}})\n"
                f"test('c{i}', () => {{ expect({i}).not.toBe(3) }})\n"
            )
            for i in range(1, FILES + 1)
        }
        return js_workspace(root, runner, files)

    return build


def _node_files() -> dict[str, str]:
    return {
        f"test/f{i}.test.js": (
            "const test = require('node:test')\nconst assert = require('node:assert')\n"
            f"test('a{i}', () => {{}})\ntest('b{i}', () => {{}})\n"
            f"test('c{i}', () => {{ assert.notStrictEqual({i}, 3) }})\n"
        )
        for i in range(1, FILES + 1)
    }


def _node(root: Path) -> Path:
    return node_workspace(root, _node_files())


def _npm_node(root: Path) -> Path:
    ws = node_workspace(root, _node_files())
    (ws / "package.json").write_text(json.dumps({"name": "ws", "private": True,
                                                 "scripts": {"test": "node --test"}}))
    return ws


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "pytest": _pytest,
    "vitest": _js("vitest"),
    "jest": _js("jest"),
    "node:test": _node,
    "npm-test": _npm_node,
}


def run_shards(ws: Path, total: int = SHARDS) -> tuple[RunResult, list[RunResult]]:
    whole = api.test_run(ws, session_id="whole", sandbox="full-access")
    shards = [api.test_run(ws, session_id=f"shard{i}", sandbox="full-access", shard=f"{i}/{total}")
              for i in range(1, total + 1)]
    return whole, shards


@pytest.mark.parametrize("framework", list(BUILDERS))
def test_shards_are_disjoint_and_cover_the_suite(tmp_path: Path, framework: str) -> None:
    ws = BUILDERS[framework](tmp_path / "ws")
    whole, shards = run_shards(ws)
    assert whole.framework == framework and whole.summary.total == 3 * FILES, whole
    assert whole.selection is None and whole.shard is None
    for i, s in enumerate(shards, 1):
        assert s.framework == framework
        assert s.selection == "shard" and s.shard is not None
        assert (s.shard.index, s.shard.total) == (i, SHARDS)
        assert s.to_json()["shard"] == {"index": i, "total": SHARDS}
        assert validate_run_result(s.to_json()) == []
        assert s.outcome in ("green", "red"), s
    # together: the same totals and exactly the same tests
    for key in ("total", "passed", "failed", "skipped"):
        assert sum(getattr(s.summary, key) for s in shards) == getattr(whole.summary, key), key
    passed = [t for s in shards for t in s.passed_tests]
    assert len(passed) == len(set(passed)), "a test ran in two shards"
    assert set(passed) == set(whole.passed_tests)
    if framework != "npm-test":  # a script's text output does not name passed tests
        assert len(passed) == 3 * FILES - 1
    failing = [f.test for s in shards for f in s.failures]
    assert failing == [f.test for f in whole.failures]
    assert sum(1 for s in shards if s.outcome == "red") == 1

    # greenloop merge folds the N results into the whole run's
    refs = [str(s.result_ref) for s in shards]
    merged = api.merge_results(list(reversed(refs)), workspace=ws, session_id="merger")
    assert merged.outcome == "red" and not merged.ok and merged.selection is None and merged.shard is None
    assert merged.summary == whole.summary
    assert set(merged.passed_tests) == set(whole.passed_tests)
    assert [f.test for f in merged.failures] == [f.test for f in whole.failures]
    assert merged.duration_ms == max(s.duration_ms for s in shards)
    assert any(f"{sum(s.duration_ms for s in shards)} ms summed" in n for n in merged.notes)
    assert validate_run_result(merged.to_json()) == []
    stored = json.loads(Path(str(merged.result_ref)).read_text())
    assert stored["run_id"] == merged.run_id and stored["summary"] == whole.summary.to_json()


def test_pytest_shard_is_stable_across_runs(tmp_path: Path) -> None:
    ws = _pytest(tmp_path / "ws")
    first = api.test_run(ws, session_id="a", sandbox="full-access", shard="2/3")
    again = api.test_run(ws, session_id="a", sandbox="full-access", shard="2/3")
    assert first.passed_tests and sorted(first.passed_tests) == sorted(again.passed_tests)


def test_empty_shard_is_an_empty_part_not_a_broken_run(tmp_path: Path) -> None:
    ws = _js("vitest")(tmp_path / "ws")
    last = api.test_run(ws, session_id="s", sandbox="full-access", shard="8/8")  # 6 files, 8 shards
    assert last.outcome == "green" and last.ok and last.summary.total == 0, last
    assert any("holds no test" in n for n in last.notes)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--shard", "3/2"], "out of range"),
        (["--shard", "0/2"], "out of range"),
        (["--shard", "x"], "must be I/N"),
        (["--shard", "1/2", "--last-failed"], "drop last_failed"),
        (["--shard", "1/2", "--command", "true"], "drop command"),
    ],
)
def test_bad_shard_exits_2_naming_the_fix_and_starts_nothing(
    tmp_path: Path, args: list[str], fragment: str
) -> None:
    ws = _pytest(tmp_path / "ws")
    r = cli("run", str(ws), *args)
    assert r.code == 2, r
    assert "shard" in r.stderr and fragment in r.stderr, r.stderr
    assert not (ws / ".greenloop").exists()


def test_npm_test_script_with_an_unknown_runner_is_refused(tmp_path: Path) -> None:
    ws = node_workspace(tmp_path / "ws", _node_files())
    (ws / "package.json").write_text(json.dumps({"name": "ws", "scripts": {"test": "ava"}}))
    r = cli("run", str(ws), "--shard", "1/2", "--json")
    assert r.code == 2 and "test script's runner" in r.stderr and "--framework" in r.stderr, r
    assert not (ws / ".greenloop" / "runs").exists() or not any((ws / ".greenloop" / "runs").iterdir())


def test_cli_shard_json(tmp_path: Path) -> None:
    ws = _node(tmp_path / "ws")
    r = cli("run", str(ws), "--shard", "1/2", "--json", "--sandbox", "full-access")
    data = r.json
    assert r.code in (0, 1) and data["selection"] == "shard" and data["shard"] == {"index": 1, "total": 2}
    assert "--test-shard=1/2" in data["command"]


def test_merge_records_the_whole_suite_for_the_gate_and_the_bug_log(tmp_path: Path) -> None:
    ws = _pytest(tmp_path / "ws")
    shards = [api.test_run(ws, session_id="ci", sandbox="full-access", shard=f"{i}/3") for i in (1, 2, 3)]
    refs = [str(s.result_ref) for s in shards]
    red = next(s for s in shards if s.outcome == "red")

    # a missing shard: broken, names the missing index, never green, never closes the suite
    partial = [str(s.result_ref) for s in shards if s is not red]
    broken = api.merge_results(partial, workspace=ws, session_id="gate")
    assert red.shard is not None
    assert broken.outcome == "broken" and f"{red.shard.index}/3 missing" in (broken.crash_reason or "")
    assert broken.selection == "shard"
    assert not api.test_closure_check(ws, "gate").satisfied

    merged = api.merge_results(refs, workspace=ws, session_id="gate")
    assert merged.outcome == "red"
    bug = merged.failures[0].bug_id
    # the same bug the red shard opened here (one bug log, deduplicated by unit and test)
    assert bug and bug == red.failures[0].bug_id and not merged.bugs_opened
    check = api.test_closure_check(ws, "gate")
    assert not check.satisfied and check.last_run is not None and check.last_run.run_id == merged.run_id

    # the fix: every shard green, the merge is a green run of the whole suite and closes the bug
    (ws / "tests" / "test_f3.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n\n"
                                             "def test_c():\n    pass\n")
    green = [api.test_run(ws, session_id="ci", sandbox="full-access", shard=f"{i}/3") for i in (1, 2, 3)]
    done = api.merge_results([str(s.result_ref) for s in green], workspace=ws, session_id="gate")
    assert done.outcome == "green" and done.ok and done.exit_code == 0 and done.selection is None
    assert done.summary.total == 18 and done.summary.passed == 18
    assert api.test_closure_check(ws, "gate").satisfied
    from greenloop.bugs.log import BugLog, bug_log_path

    assert BugLog(bug_log_path(ws)).get(bug).status == "fixed"


def test_merge_refuses_what_is_not_one_suites_shards(tmp_path: Path) -> None:
    ws = _pytest(tmp_path / "ws")
    a = api.test_run(ws, session_id="ci", sandbox="full-access", shard="1/2")
    b = api.test_run(ws, session_id="ci", sandbox="full-access", shard="1/3")
    whole = api.test_run(ws, session_id="ci", sandbox="full-access")
    before = sorted(p.name for p in (ws / ".greenloop" / "runs").iterdir())
    for files, fragment in (
        ([a.result_ref, b.result_ref], "mixed N"),
        ([a.result_ref, a.result_ref], "both shard 1/2"),
        ([a.result_ref, whole.result_ref], "not a shard's result"),
        ([str(ws / "nope.json")], "cannot read"),
        ([str(ws / "pytest.ini")], "not a greenloop result.json"),
    ):
        r = cli("merge", *[str(f) for f in files], "--path", str(ws))
        assert r.code == 2 and fragment in r.stderr, (fragment, r)
    assert sorted(p.name for p in (ws / ".greenloop" / "runs").iterdir()) == before  # nothing written


def _git(ws: Path, *args: str) -> str:
    import subprocess

    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin", "HOME": str(ws)}
    done = subprocess.run(["git", *args], cwd=ws, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_shards_of_different_commits_are_refused(tmp_path: Path) -> None:
    ws = _pytest(tmp_path / "ws")
    (ws / ".git").rmdir()
    _git(ws, "init", "-q", "-b", "main")
    (ws / ".gitignore").write_text(".greenloop/\nbugs.ndjson\ntimeline.ndjson\n")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "one")
    first = api.test_run(ws, session_id="ci", sandbox="full-access", shard="1/2")
    assert first.shard is not None and first.shard.commit == _git(ws, "rev-parse", "HEAD")
    assert first.to_json()["shard"]["commit"] == first.shard.commit
    (ws / "tests" / "test_new.py").write_text("def test_new():\n    pass\n")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "two")
    _git(ws, "pack-refs", "--all")  # the commit is then read from packed-refs
    second = api.test_run(ws, session_id="ci", sandbox="full-access", shard="2/2")
    assert second.shard is not None and second.shard.commit == _git(ws, "rev-parse", "HEAD")
    assert second.shard.commit != first.shard.commit
    r = cli("merge", str(first.result_ref), str(second.result_ref), "--path", str(ws))
    assert r.code == 2 and "different commits" in r.stderr, r


def test_background_shard_and_human_summary(tmp_path: Path) -> None:
    ws = _pytest(tmp_path / "ws")
    started = cli("run", str(ws), "--shard", "2/3", "--rerun-failures", "1", "--background", "--json",
                  "--sandbox", "full-access")
    assert started.code == 0, started
    job = cli("job", started.json["job_id"], str(ws), "--wait", "--json", timeout=180)
    result = job.json["result"]
    assert result["selection"] == "shard" and result["shard"]["index"] == 2 and result["shard"]["total"] == 3
    human = cli("run", str(ws), "--shard", "1/3", "--sandbox", "full-access")
    assert "[pytest, shard 1/3]" in human.stdout, human.stdout
