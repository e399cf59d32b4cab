"""The run path on real runners: workspace-relative files everywhere, what each runner's
machine report leaves out (node's junit and a failing after(); vitest's JSON and unhandled
errors), load failures beside failing tests, live progress counts, pytest through greenloop's
own report plugin (and junit when the plugin cannot load), last_failed per session, and the
closure store seeing the final result of a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop import api
from greenloop.frameworks import parse_report
from greenloop.frameworks.vitest_report import parse_json_report
from greenloop.model import Progress

from .helpers import cli, js_workspace, node_workspace, py_workspace

pytestmark = pytest.mark.e2e


def run_json(ws: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", "--sandbox", "full-access", *extra)
    assert done.stdout.strip(), done.stderr
    data: dict[str, Any] = done.json
    return done.code, data


def no_absolute_paths(r: dict[str, Any], ws: Path) -> None:
    for f in r["failures"]:
        assert f["file"] is None or not os.path.isabs(f["file"]), f
        for key in ("file", "message", "stack"):
            assert str(ws) not in (f[key] or ""), (key, f)


VITEST_MIXED = {
    "ok.test.js": "import { it, expect } from 'vitest'\nit('passes', () => { expect(1).toBe(1) })\n",
    "bad.test.js": (
        "import { it, expect } from 'vitest'\n"
        "it('fails', () => { expect(1 + 1).toBe(3) })\n"
    ),
    "broken.js": "export const add = (a, b) => {\n",
    "load.test.js": (
        "import { it, expect } from 'vitest'\nimport { add } from './broken.js'\n"
        "it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
    ),
}


def test_vitest_load_failure_beside_failing_tests_is_red_with_relative_paths(tmp_path: Path) -> None:
    ws = js_workspace(tmp_path / "ws", "vitest", VITEST_MIXED)
    code, r = run_json(ws)
    assert (code, r["outcome"], r["next_action"]) == (1, "red", "retry_coder"), r
    by_kind = {f["kind"]: f for f in r["failures"]}
    assert by_kind["test"]["test"] == "fails" and by_kind["test"]["file"] == "bad.test.js"
    assert by_kind["test"]["line"] == 2
    load = by_kind["load"]
    assert load["test"] == "load.test.js" and load["file"] == "load.test.js", load
    assert any('kind "load"' in n for n in r["notes"]), r["notes"]
    no_absolute_paths(r, ws)
    # the seed's contract reads the same report the same way
    report = ws / ".greenloop" / "runs" / r["run_id"] / "report.json"
    seed = parse_json_report(report, root=str(ws))
    assert (seed.crashed, seed.next_action) == (False, "retry_coder")
    assert any('kind "load"' in n for n in seed.notes)


def test_vitest_load_failure_alone_is_broken_for_the_tester(tmp_path: Path) -> None:
    files = {k: v for k, v in VITEST_MIXED.items() if k != "bad.test.js"}
    ws = js_workspace(tmp_path / "ws", "vitest", files)
    code, r = run_json(ws)
    assert (code, r["outcome"], r["next_action"]) == (3, "broken", "retry_tester"), r
    assert "could not load" in r["crash_reason"]
    assert str(ws) not in r["crash_reason"]
    no_absolute_paths(r, ws)


def test_vitest_unhandled_error_is_red_from_the_text_output(tmp_path: Path) -> None:
    ws = js_workspace(
        tmp_path / "ws",
        "vitest",
        {
            "late.test.js": (
                "import { it, expect } from 'vitest'\n"
                "it('passes, then throws later', () => {\n"
                "  setTimeout(() => { throw new Error('late boom') }, 0)\n"
                "  expect(1).toBe(1)\n"
                "})\n"
                "it('waits', async () => { await new Promise((r) => setTimeout(r, 50)) })\n"
            )
        },
    )
    code, r = run_json(ws)
    assert code == 1 and r["outcome"] == "red", r  # the JSON report alone says success
    (f,) = r["failures"]
    assert "late boom" in f["message"] and f["hint"], f
    assert any("taken from the text output" in n for n in r["notes"]), r["notes"]
    no_absolute_paths(r, ws)


def test_jest_and_node_load_failures_carry_relative_files(tmp_path: Path) -> None:
    jest_ws = js_workspace(
        tmp_path / "jest",
        "jest",
        {
            "ok.test.js": "test('passes', () => { expect(1).toBe(1) })\n",
            "sub/load.test.js": "require('./missing-module')\ntest('x', () => {})\n",
        },
    )
    code, r = run_json(jest_ws)
    assert code == 3 and r["outcome"] == "broken", r
    assert [f["file"] for f in r["failures"]] == ["sub/load.test.js"], r["failures"]
    no_absolute_paths(r, jest_ws)
    node_ws = node_workspace(
        tmp_path / "node",
        {
            "ok.test.mjs": "import test from 'node:test'\ntest('passes', () => {})\n",
            "sub/load.test.mjs": "import './missing.mjs'\n",
        },
    )
    code, r = run_json(node_ws)
    assert code == 3 and r["outcome"] == "broken", r
    assert [f["file"] for f in r["failures"]] == ["sub/load.test.mjs"], r["failures"]
    no_absolute_paths(r, node_ws)


def test_node_failing_after_hook_is_found(tmp_path: Path) -> None:
    ws = node_workspace(
        tmp_path / "ws",
        {
            "hook.test.mjs": (
                "import { describe, it, after } from 'node:test'\n"
                "describe('store', () => {\n"
                "  after(() => { throw new Error('cleanup failed') })\n"
                "  it('saves', () => {})\n"
                "})\n"
            )
        },
    )
    code, r = run_json(ws)
    assert code == 1 and r["outcome"] == "red", r  # junit had no failure for it: broken
    (f,) = r["failures"]
    assert f["kind"] == "hook" and "store" in f["test"] and "cleanup failed" in f["message"], f
    assert (ws / ".greenloop" / "runs" / r["run_id"] / "report.tap").exists()


CONN = (
    "import socket\n\n"
    "def connect(port):\n"
    "    return socket.create_connection(('127.0.0.1', port), timeout=1)\n\n"
    "def test_talks_to_the_server():\n"
    "    connect(1)\n"
)


def test_pytest_connection_refused_points_at_the_workspace(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"tests/test_net.py": CONN})
    code, r = run_json(ws)
    assert code == 1 and r["outcome"] == "red", r
    (f,) = r["failures"]
    assert (f["file"], f["line"]) == ("tests/test_net.py", 4), f  # not socket.py
    run_dir = ws / ".greenloop" / "runs" / r["run_id"]
    assert (run_dir / "report.json").exists() and not (run_dir / "report.xml").exists()
    # the junit parser picks the same frame from pytest's own junit report
    xml = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={xml}"],
        cwd=ws, capture_output=True, check=False, timeout=60,
    )
    (j,) = parse_report("junit", str(xml), root=str(ws)).failures
    assert (j.file, j.line) == ("tests/test_net.py", 4), j


def test_pytest_report_plugin_counts_as_pytest_does(tmp_path: Path) -> None:
    ws = py_workspace(
        tmp_path / "ws",
        {
            "test_all.py": (
                "import pytest\n\n"
                "def test_ok():\n    pass\n\n"
                "def test_bad():\n    assert [1, 2] == [1, 3]\n\n"
                "@pytest.fixture\ndef res():\n    yield 1\n    raise RuntimeError('teardown boom')\n\n"
                "def test_teardown(res):\n    pass\n\n"
                "@pytest.mark.xfail\ndef test_xfail():\n    assert 0\n\n"
                "@pytest.mark.xfail(strict=True)\ndef test_strict_xpass():\n    pass\n\n"
                "@pytest.mark.xfail\ndef test_xpass():\n    pass\n\n"
                "@pytest.mark.skip\ndef test_skip():\n    pass\n"
            )
        },
    )
    code, r = run_json(ws)
    # pytest: 2 failed, 2 passed, 1 skipped, 1 xfailed, 1 xpassed, 1 error
    assert r["summary"] == {"total": 8, "passed": 3, "failed": 3, "skipped": 2}, r["summary"]
    kinds = {f["test"]: f["kind"] for f in r["failures"]}
    assert kinds == {
        "test_all.py::test_bad": "test",
        "test_all.py::test_teardown": "hook",
        "test_all.py::test_strict_xpass": "test",
    }
    bad = next(f for f in r["failures"] if f["test"].endswith("test_bad"))
    assert (bad["file"], bad["line"], bad["expected"], bad["got"]) == ("test_all.py", 7, "[1, 3]", "[1, 2]")
    # (the workspace's own path names the test: "…_plugin_coun0/ws" in a note is not about a plugin)
    assert not any("plugin" in n.replace(str(tmp_path), "") for n in r["notes"]), r["notes"]
    # without pytest's terminal reporter the plugin keeps the same tally itself
    code3, r3 = run_json(ws, "--target", "-p no:terminal")
    assert (code3, r3["summary"]) == (1, r["summary"]), r3
    assert sorted(f["test"] for f in r3["failures"]) == sorted(kinds)
    # the plugin blocked (as a user's `-p no:` would): pytest's junit report is the fallback
    code2, r2 = run_json(ws, "--target", "-p no:_greenloop_pytest_report")
    assert r2["summary"] == r["summary"] and code2 == code == 1, r2
    assert sorted(kinds) == sorted(f["test"] for f in r2["failures"])
    assert any("results come from the junit report" in n for n in r2["notes"]), r2["notes"]


def test_live_progress_counts_every_test(tmp_path: Path) -> None:
    body = "".join(f"def test_{i}():\n    assert {i} >= 0\n\n" for i in range(30))
    more = body.replace("test_", "test_m")
    ws = py_workspace(tmp_path / "py", {"test_many.py": body, "test_more.py": more})
    seen: list[Progress] = []
    result = api.test_run(str(ws), on_progress=seen.append, sandbox="full-access")
    assert result.outcome == "green" and seen, result  # pytest's default output: rows of dots
    assert (seen[-1].passed, seen[-1].failed) == (60, 0)
    vit = js_workspace(
        tmp_path / "vitest",
        "vitest",
        {
            f"f{n}.test.js": "import { it } from 'vitest'\n"
            + "".join(f"it('t{i}', () => {{}})\n" for i in range(5))
            for n in range(3)
        },
    )
    seen = []
    result = api.test_run(str(vit), on_progress=seen.append, sandbox="full-access")
    assert result.outcome == "green" and seen, result  # vitest's default reporter: per-file lines
    assert (seen[-1].passed, seen[-1].failed) == (15, 0)


def test_last_failed_follows_the_session(tmp_path: Path) -> None:
    ws = py_workspace(
        tmp_path / "ws",
        {
            "test_a.py": "def test_alpha():\n    assert False\n",
            "test_b.py": "def test_beta():\n    assert False\n",
        },
    )
    first = api.test_run(str(ws), target="test_a.py", session_id="s-a", sandbox="full-access")
    later = api.test_run(str(ws), target="test_b.py", session_id="s-b", sandbox="full-access")
    assert [f.test for f in first.failures] == ["test_a.py::test_alpha"]
    assert [f.test for f in later.failures] == ["test_b.py::test_beta"]
    mine = api.test_run(str(ws), last_failed=True, session_id="s-a", sandbox="full-access")
    assert [f.test for f in mine.failures] == ["test_a.py::test_alpha"], mine.notes
    assert any(first.run_id in n for n in mine.notes), mine.notes
    # no session (or one the store does not know): the workspace's latest run
    other = api.test_run(str(ws), last_failed=True, sandbox="full-access")
    assert [f.test for f in other.failures] == ["test_a.py::test_alpha"]  # `mine` is the latest
    fresh = api.test_run(str(ws), last_failed=True, session_id="s-new", sandbox="full-access")
    assert any(other.run_id in n for n in fresh.notes), fresh.notes
    # a brand-new session reruns the workspace's latest run, and the note says whose it was
    whose = [n for n in fresh.notes if n.startswith("last_failed: this session has no run yet")]
    assert len(whose) == 1 and other.run_id in whose[0] and "(no session," in whose[0], fresh.notes
    # the session's own run needs no such note
    assert not any("has no run yet" in n for n in mine.notes)
    # a session that has run now follows its own runs, even when another session ran later
    api.test_run(str(ws), target="test_b.py", session_id="s-b", sandbox="full-access")
    again = api.test_run(str(ws), last_failed=True, session_id="s-new", sandbox="full-access")
    assert any(fresh.run_id in n for n in again.notes) and not any("no run yet" in n for n in again.notes)


def test_the_closure_store_records_the_bridged_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from greenloop.closure import store

    seen: list[Any] = []
    real = store.record_result

    def spy(workspace: Any, result: Any, **kw: Any) -> Any:
        seen.append(result)
        return real(workspace, result, **kw)

    monkeypatch.setattr(store, "record_result", spy)
    ws = py_workspace(tmp_path / "ws", {"test_a.py": "def test_alpha():\n    assert 1 == 2\n"})
    result = api.test_run(str(ws), sandbox="full-access")
    (recorded,) = seen
    assert recorded.failures[0].bug_id and recorded == result  # bug ids were in before recording
    assert result.result_ref is not None
    stored = json.loads(Path(result.result_ref).read_text())
    assert stored["failures"][0]["bug_id"] == result.failures[0].bug_id
    with store.Store(ws) as st:
        last = st.latest_run(session_id=None)
    assert last is not None and last.run_id == result.run_id and last.fingerprint


def test_a_failing_bug_log_is_a_note_and_the_run_is_still_recorded(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"test_a.py": "def test_alpha():\n    assert 1 == 2\n"})
    (ws / ".greenloop" / "bugs.ndjson").mkdir(parents=True)  # the bug log cannot be written
    result = api.test_run(str(ws), sandbox="full-access")
    assert result.outcome == "red" and any("bug" in n for n in result.notes), result.notes
    from greenloop.closure import store

    with store.Store(ws) as st:
        last = st.latest_run(session_id=None)
    assert last is not None and last.run_id == result.run_id


@pytest.mark.parametrize("repo", ["git", "plain"])
def test_files_the_suite_writes_are_part_of_the_tree_the_run_leaves(tmp_path: Path, repo: str) -> None:
    # The fingerprint is started once the runner has exited (overlapping the parse): a file the
    # suite itself writes must not read as "changed since the last run" at the next check.
    writes = (
        "import pathlib\n"
        "def test_writes_a_snapshot():\n"
        "    pathlib.Path(__file__).with_name('snapshot.txt').write_text('fresh')\n"
    )
    ws = py_workspace(tmp_path / "ws", {"test_a.py": writes})
    if repo == "git":
        (ws / ".git").rmdir()
        git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
        subprocess.run([*git, "init", "-q"], cwd=ws, check=True)
        subprocess.run([*git, "add", "-A"], cwd=ws, check=True)
        subprocess.run([*git, "commit", "-qm", "init"], cwd=ws, check=True)
    result = api.test_run(str(ws), sandbox="full-access", session_id="s-fp")
    assert result.outcome == "green" and (ws / "snapshot.txt").read_text() == "fresh"
    check = api.test_closure_check(str(ws), "s-fp")
    assert check.satisfied and check.last_run is not None
    strategy = "git:" if repo == "git" else "walk:"
    assert check.last_run.fingerprint and check.last_run.fingerprint.startswith(strategy)
    assert not any("files changed" in n for n in check.notes), check.notes
    (ws / "test_a.py").write_text(writes + "\n# edited\n")
    stale = api.test_closure_check(str(ws), "s-fp")
    assert any("files changed since the last run" in n for n in stale.notes)
    assert not stale.satisfied and stale.holding == "stale"  # an edit after green is unverified (issue 31)


def test_old_runs_are_pruned_while_the_suite_runs_and_when_it_never_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api, "KEEP_RUNS", 3)
    ws = py_workspace(tmp_path / "ws", {"test_a.py": "def test_alpha():\n    pass\n"})
    ids = [api.test_run(str(ws), sandbox="full-access").run_id for _ in range(4)]
    assert api.list_runs(ws) == ids[-3:]  # the newest three, this run included
    # A runner that is not installed never starts: pruning still happens, after the result.
    js = tmp_path / "js"
    js.mkdir()
    (js / ".git").mkdir()
    (js / "package.json").write_text(json.dumps({"name": "js", "devDependencies": {"jest": "30.5.2"}}))
    (js / "a.test.js").write_text("test('a', () => {})\n")
    runs = [api.test_run(str(js), sandbox="full-access") for _ in range(4)]
    assert all(r.outcome == "broken" and "not installed" in (r.crash_reason or "") for r in runs)
    assert api.list_runs(js) == [r.run_id for r in runs[-3:]]
