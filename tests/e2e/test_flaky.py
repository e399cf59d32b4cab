"""Flaky tests on real runners: `--rerun-failures K` reruns the failing tests in the runner's
own dialect; a test that fails, then passes is `flaky` (its failure record, summary.flaky),
keeps the run red (config flaky = "fail") or, with flaky = "warn" and no other failure, leaves
it green with a note; it is one bug of category flaky, the same bug across runs. `greenloop
flaky` finds it in the history too.

The flaky test counts its calls in a file outside the workspace (a file inside it would change
the working-tree fingerprint between runs): it fails on every odd call.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from greenloop import api
from greenloop.bugs.log import BugLog, bug_log_path
from greenloop.result import RunResult
from greenloop.schema import validate_run_result

from .helpers import cli, js_workspace, node_workspace, py_workspace

pytestmark = pytest.mark.e2e


def _pytest(root: Path, counter: Path) -> Path:
    return py_workspace(root, {"tests/test_shop.py": (
        "import os\n\n"
        f"COUNTER = {str(counter)!r}\n\n"
        "def test_flaky():\n"
        "    n = int(open(COUNTER).read()) if os.path.exists(COUNTER) else 0\n"
        "    open(COUNTER, 'w').write(str(n + 1))\n"
        "    assert n % 2 == 1\n\n"
        "def test_steady():\n    pass\n\n"
        "def test_broken():\n    assert 1 == 2\n"
    )})


def _js_body(counter: Path, fs: str, head: str) -> str:
    return (
        f"{head}{fs}\n"
        f"const COUNTER = {str(counter)!r}\n"
        "test('flaky one', () => {\n"
        "  const n = fs.existsSync(COUNTER) ? Number(fs.readFileSync(COUNTER, 'utf8')) : 0\n"
        "  fs.writeFileSync(COUNTER, String(n + 1))\n"
        "  expect(n % 2).toBe(1)\n"
        "})\n"
        "test('steady one', () => {})\n"
        "test('broken one', () => { expect(1).toBe(2) })\n"
    )


def _vitest(root: Path, counter: Path) -> Path:
    body = _js_body(counter, "import fs from 'node:fs'", "import { test, expect } from 'vitest'\n")
    return js_workspace(root, "vitest", {"shop.test.js": body})


def _jest(root: Path, counter: Path) -> Path:
    return js_workspace(root, "jest", {"shop.test.js": _js_body(counter, "const fs = require('fs')", "")})


def _node(root: Path, counter: Path) -> Path:
    body = _js_body(counter, "const fs = require('node:fs')",
                    "const test = require('node:test')\nconst assert = require('node:assert')\n"
                    "const expect = (v) => ({ toBe: (w) => assert.strictEqual(v, w) })\n")
    return node_workspace(root, {"test/shop.test.js": body})


BUILDERS: dict[str, Callable[[Path, Path], Path]] = {
    "pytest": _pytest, "vitest": _vitest, "jest": _jest, "node:test": _node,
}
FLAKY = {"pytest": "tests/test_shop.py::test_flaky"}
BROKEN = {"pytest": "tests/test_shop.py::test_broken"}


def _names(framework: str, result: RunResult) -> tuple[str, str]:
    flaky = FLAKY.get(framework) or next(f.test for f in result.failures if "flaky one" in f.test)
    broken = BROKEN.get(framework) or next(f.test for f in result.failures if "broken one" in f.test)
    return flaky, broken


@pytest.mark.parametrize("framework", list(BUILDERS))
def test_rerun_marks_a_test_that_fails_then_passes_flaky(tmp_path: Path, framework: str) -> None:
    counter = tmp_path / "counter"
    ws = BUILDERS[framework](tmp_path / "ws", counter)
    r = api.test_run(ws, session_id="s", sandbox="full-access", rerun_failures=2)
    assert r.framework == framework
    flaky, broken = _names(framework, r)
    by_name = {f.test: f for f in r.failures}
    assert by_name[flaky].flaky and not by_name[broken].flaky, r.failures
    assert r.summary.flaky == 1 and r.summary.failed == 1 and r.summary.passed == 1, r.summary
    assert r.outcome == "red" and not r.ok  # a hard failure remains
    assert counter.read_text() == "2"  # the flaky test ran twice: first run and rerun 1
    assert any("rerun 2 of 2" in n for n in r.notes)  # the broken one was rerun twice
    assert any("flaky: 1 test(s) failed, then passed" in n for n in r.notes)
    data = r.to_json()
    assert validate_run_result(data) == [] and data["summary"]["flaky"] == 1
    assert RunResult.from_json(data).to_json() == data
    # one bug of category flaky for the flaky test, an ordinary one for the broken test
    log = BugLog(bug_log_path(ws))
    assert log.get(str(by_name[flaky].bug_id)).category == "flaky"
    assert log.get(str(by_name[broken].bug_id)).category != "flaky"
    assert (ws / ".greenloop" / "runs" / r.run_id / "rerun-1" / "stdout.txt").exists()


def test_flaky_policy_fail_keeps_red_and_warn_makes_green(tmp_path: Path) -> None:
    counter = tmp_path / "counter"
    ws = _pytest(tmp_path / "ws", counter)
    test_file = ws / "tests" / "test_shop.py"
    test_file.write_text(test_file.read_text().replace("def test_broken", "def _not_a_test"))

    red = api.test_run(ws, session_id="s", sandbox="full-access", rerun_failures=1)
    assert red.outcome == "red" and not red.ok and red.next_action == "retry_coder"
    assert red.summary.failed == 0 and red.summary.flaky == 1
    assert any('flaky = "fail"' in n for n in red.notes)
    assert not api.test_closure_check(ws, "s").satisfied

    (ws / "greenloop.toml").write_text('flaky = "warn"\n')
    green = api.test_run(ws, session_id="s", sandbox="full-access", rerun_failures=1)
    assert green.outcome == "green" and green.ok and green.exit_code == 0, green
    assert green.failures[0].flaky and any('flaky = "warn"' in n for n in green.notes)
    assert api.test_closure_check(ws, "s").satisfied
    # the same bug across runs: the flaky bug is reused, never closed by a pass
    assert green.failures[0].bug_id == red.failures[0].bug_id
    plain = api.test_run(ws, session_id="s", sandbox="full-access")  # counter odd: fails, no rerun
    again = api.test_run(ws, session_id="s", sandbox="full-access")  # passes
    assert plain.outcome == "red" and again.outcome == "green"
    log = BugLog(bug_log_path(ws))
    bug = log.get(str(red.failures[0].bug_id))
    assert bug.category == "flaky" and bug.status == "open"
    assert len([b for b in log.fold().bugs if b.test_name == "tests/test_shop.py::test_flaky"]) == 1

    # the history: failed in one run, passed in another, on the same working tree
    report = cli("flaky", str(ws), "--json")
    assert report.code == 0
    found = {t["test"]: t for t in report.json["flaky"]}
    entry = found["tests/test_shop.py::test_flaky"]
    assert set(entry["evidence"]) == {"rerun", "history"}
    assert plain.run_id in entry["failed_in"] and again.run_id in entry["passed_in"]
    text = cli("flaky", str(ws))
    assert text.code == 0 and "FLAKY tests/test_shop.py::test_flaky" in text.stdout


def test_bad_rerun_failures_and_flaky_config_exit_2(tmp_path: Path) -> None:
    ws = _pytest(tmp_path / "ws", tmp_path / "counter")
    r = cli("run", str(ws), "--rerun-failures", "-1")
    assert r.code == 2 and "--rerun-failures" in r.stderr and "e.g." in r.stderr
    (ws / "greenloop.toml").write_text('flaky = "sometimes"\n')
    r = cli("run", str(ws))
    assert r.code == 2 and "'flaky' must be one of fail, warn" in r.stderr
    assert not (ws / ".greenloop" / "runs").exists()
