"""`greenloop run` reports what the runner itself saw: node:test's own counts, the same
result as a bare run of the suite, and what a run killed at its deadline had seen."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, cli, js_workspace, node_workspace, py_workspace

pytestmark = pytest.mark.e2e

FIXTURES = REPO / "tests" / "fixtures"


def _run(ws: Path, *args: str, timeout: float = 120) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", *args, timeout=timeout)
    return done.code, done.json


def _node_summary(text: str) -> dict[str, int]:
    found = re.findall(r"^(?:# |ℹ )(tests|pass|fail|cancelled|skipped|todo) (\d+)$", text, re.M)
    return {k: int(v) for k, v in found}


def test_node_counts_are_nodes_own(tmp_path: Path) -> None:
    # the hooks fixture suite: failing before/after/beforeEach/afterEach hooks, todo tests that
    # pass and fail, skips, cancelled tests; greenloop's summary is node's closing lines
    ws = node_workspace(tmp_path / "ws", {})
    for src in (FIXTURES / "node_test" / "hooks" / "src").iterdir():
        shutil.copy(src, ws / src.name)
    code, r = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    run_dir = ws / ".greenloop" / "runs" / r["run_id"]
    own = _node_summary((run_dir / "stdout.txt").read_text(encoding="utf-8"))
    assert own["tests"] == 33, own
    assert r["summary"] == {
        "total": own["tests"],
        "passed": own["pass"],
        "failed": own["fail"] + own["cancelled"],
        "skipped": own["skipped"] + own["todo"],
    }
    kinds = {f["test"]: f["kind"] for f in r["failures"]}
    assert kinds["cart > with a database"] == "hook"
    # each test its before() cancelled (node counts it failed) has a record of its own
    under = "cart > with a database > "
    cancelled = [t for t, k in kinds.items() if k == "cancelled" and t.startswith(under)]
    assert sorted(cancelled) == [
        "cart > with a database > reads a row", "cart > with a database > transactions > commits",
        "cart > with a database > transactions > rolls back", "cart > with a database > writes a row"]


# ---------------------------------------------------------------- the environment a test sees

# a suite that asserts on the colour and CI variables of the shell it runs in, as
# commander.js's help tests do with NO_COLOR; `expected-env.json` is that shell's values
COLOUR_VARS = ("NO_COLOR", "FORCE_COLOR", "CI", "PY_COLORS")
NODE_COLOUR = (
    "const test = require('node:test')\n"
    "const assert = require('node:assert')\n"
    "const fs = require('node:fs')\n"
    "const expected = JSON.parse(fs.readFileSync(__dirname + '/../expected-env.json', 'utf8'))\n"
    "for (const name of Object.keys(expected)) {\n"
    "  test(`sees ${name} as the shell has it`, () => {\n"
    "    assert.strictEqual(process.env[name] ?? null, expected[name])\n"
    "  })\n"
    "}\n"
    "test('help is coloured exactly when colour is allowed', () => {\n"
    "  const coloured = !('NO_COLOR' in process.env)\n"
    "  assert.strictEqual(coloured, expected.NO_COLOR === null)\n"
    "})\n"
)
PY_COLOUR = (
    "import json, os, pathlib\n"
    "EXPECTED = json.loads((pathlib.Path(__file__).parent / 'expected-env.json').read_text())\n"
    "def test_sees_the_shells_colour_and_ci_variables():\n"
    "    assert {k: os.environ.get(k) for k in EXPECTED} == EXPECTED\n"
)


def _shell_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in COLOUR_VARS and k != "GREENLOOP_SESSION"}
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


@pytest.mark.parametrize(("framework", "shell", "sandbox"), [
    ("node:test", {}, "workspace-write"),
    ("node:test", {"NO_COLOR": "1"}, "workspace-write"),
    ("node:test", {"FORCE_COLOR": "1", "CI": "true"}, "full-access"),
    ("pytest", {}, "workspace-write"),
    ("pytest", {"NO_COLOR": "1", "PY_COLORS": "1"}, "full-access"),
], ids=["node-plain", "node-NO_COLOR", "node-FORCE_COLOR+CI", "pytest-plain", "pytest-NO_COLOR+PY_COLORS"])
def test_a_suite_reading_colour_env_is_green_exactly_when_green_bare(
    framework: str, shell: dict[str, str], sandbox: str, tmp_path: Path
) -> None:
    expected = {k: shell.get(k) for k in COLOUR_VARS}
    files = {"expected-env.json": json.dumps(expected)}
    if framework == "node:test":
        ws = node_workspace(tmp_path / "ws", {**files, "test/colour.test.js": NODE_COLOUR})
        bare_argv = ["node", "--test"]
    else:
        ws = py_workspace(tmp_path / "ws", {**files, "test_colour.py": PY_COLOUR})
        bare_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = _shell_env(shell)
    bare = subprocess.run(bare_argv, cwd=ws, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    assert bare.returncode == 0, bare.stdout + bare.stderr  # the suite is green in that shell
    done = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", sandbox],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    r = json.loads(done.stdout)
    assert (done.returncode, r["outcome"]) == (0, "green"), r
    assert not any(k in n for n in r["notes"] for k in ("NO_COLOR", "FORCE_COLOR", " CI")), r["notes"]


# ---------------------------------------------------------------- expected and got, whole


def test_vitest_expected_and_got_are_whole(tmp_path: Path) -> None:
    src = (FIXTURES / "vitest" / "values" / "src" / "values.test.js").read_text(encoding="utf-8")
    ws = js_workspace(tmp_path / "ws", "vitest", {"values.test.js": src})
    code, r = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    values = {f["test"].removeprefix("values > "): (f["expected"], f["got"]) for f in r["failures"]}
    long_got = '"Unexpected end at index 7, expected } but the stream ended early here"'
    assert values["compares long strings"][1] == long_got
    assert values["throws the right error"] == (
        '"Unexpected token"', '"Expected \',\' or \'}\' after property value in JSON at position 7"')
    assert values["compares a very long text"][0].endswith("… [cut 1,406 chars]")
    assert not any("…'" in (e or "") + (g or "") for e, g in values.values())  # nothing left shortened


# ---------------------------------------------------------------- a run stopped at its deadline

PY_HANGS = "".join(
    [f"def test_ok_{i}():\n    assert True\n\n" for i in range(40)]
    + [f"def test_bad_{i}():\n    assert {i} == {i} + 1\n\n" for i in range(3)]
    + ["def test_hangs_forever():\n    import time\n    time.sleep(600)\n\n",
       "def test_never_reached():\n    assert True\n"]
)
NODE_HANGS = (
    "const { describe, it } = require('node:test')\n"
    "const assert = require('node:assert')\n"
    "describe('fast', () => {\n"
    "  for (let i = 0; i < 40; i++) it(`ok ${i}`, () => assert.ok(true))\n"
    "  it('bad one', () => assert.strictEqual(1, 2))\n"
    "  it('bad two', () => assert.strictEqual('a', 'b'))\n"
    "})\n"
    "describe('slow', () => {\n"
    "  it('hangs forever', () => new Promise(() => { setInterval(() => {}, 1000) }))\n"
    "  it('never reached', () => {})\n"
    "})\n"
)


def _stopped(ws: Path, timeout_ms: int) -> dict[str, Any]:
    done = cli("run", str(ws), "--json", "--timeout-ms", str(timeout_ms), timeout=120)
    r = done.json
    assert (done.code, r["outcome"], r["timed_out"]) == (3, "broken", True), r
    return r


def test_pytest_timeout_keeps_what_it_saw_and_names_the_test(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"tests/test_a.py": PY_HANGS})
    r = _stopped(ws, 15000)
    assert r["summary"] == {"total": 44, "passed": 40, "failed": 4, "skipped": 0}, r
    kinds = {f["test"]: f for f in r["failures"]}
    hung = kinds["tests/test_a.py::test_hangs_forever"]
    lines = PY_HANGS.splitlines()
    at = lines.index("def test_hangs_forever():") + 1
    assert (hung["kind"], hung["file"], hung["line"]) == ("timeout", "tests/test_a.py", at)
    assert "still running when the run timed out after 15000 ms" in hung["message"]
    bad = kinds["tests/test_a.py::test_bad_1"]
    at = lines.index("def test_bad_1():") + 2  # the assert line
    # the comparison's operands, as greenloop's plugin read them
    assert (bad["kind"], bad["line"], bad["expected"], bad["got"]) == ("test", at, "2", "1")
    assert "while tests/test_a.py::test_hangs_forever was running" in str(r["crash_reason"])
    assert any("3 test(s) had failed before the timeout" in n for n in r["notes"]), r["notes"]


def test_node_timeout_keeps_what_it_saw_and_names_the_test(tmp_path: Path) -> None:
    ws = node_workspace(tmp_path / "ws", {"test/a.test.js": NODE_HANGS})
    r = _stopped(ws, 8000)
    assert r["summary"] == {"total": 43, "passed": 40, "failed": 3, "skipped": 0}, r
    kinds = {f["test"]: f for f in r["failures"]}
    hung = kinds["slow > hangs forever"]
    assert (hung["kind"], hung["file"], hung["line"]) == ("timeout", "test/a.test.js", 9)
    bad = kinds["fast > bad two"]
    assert (bad["expected"], bad["got"]) == ("'b'", "'a'")  # as node prints them
    assert "while slow > hangs forever was running" in str(r["crash_reason"])
    assert any("cut short" in n for n in r["notes"]), r["notes"]


@pytest.mark.parametrize("runner", ["vitest", "jest"])
def test_js_runner_timeout_keeps_what_its_output_showed(runner: str, tmp_path: Path) -> None:
    # vitest and jest print a file's results once the file is done, and neither names the
    # test that is running: the finished file's counts and failures are kept, and a note says
    # that the running test is unknown
    head = "import { describe, it, expect } from 'vitest'\n" if runner == "vitest" else ""
    files = {
        "a.test.js": head + "describe('a', () => {\n"
        + "".join(f"  it('ok {i}', () => expect(1).toBe(1))\n" for i in range(10))
        + "  it('bad', () => expect(1).toBe(2))\n})\n",
        "b.test.js": head + "describe('b', () => {\n"
        "  it('hangs', () => new Promise(() => { setInterval(() => {}, 1000) }), 1_000_000)\n})\n",
    }
    ws = js_workspace(tmp_path / "ws", runner, files)
    r = _stopped(ws, 15000)
    bad = [f for f in r["failures"] if f["test"].endswith("bad")]
    assert len(bad) == 1 and bad[0]["file"] == "a.test.js", r["failures"]
    if runner == "vitest":  # its tree lists every test of a finished file
        assert r["summary"] == {"total": 11, "passed": 10, "failed": 1, "skipped": 0}, r
    else:  # jest prints only the failures of a finished file
        assert r["summary"]["failed"] == 1 and (bad[0]["expected"], bad[0]["got"]) == ("2", "1"), r
    assert any(f"({runner} does not say which test was running)" in n for n in r["notes"]), r["notes"]


# ---------------------------------------------------------------- small ones


def test_jest_crash_reason_is_jests_own_message(tmp_path: Path) -> None:
    src = FIXTURES / "jest" / "tsconfig" / "src"
    files = {p.name: p.read_text(encoding="utf-8") for p in src.iterdir()}
    ws = js_workspace(tmp_path / "ws", "jest", files)
    code, r = _run(ws)
    assert (code, r["outcome"], r["crashed"]) == (3, "broken", True), r
    reason = str(r["crash_reason"])
    assert reason.startswith("the runner stopped before running the tests: Error: Jest: Failed to parse")
    assert "'ts-node' is required" in reason and "jest.config.ts" in reason
    assert str(ws) not in reason  # paths relative to the workspace


def test_pytest_timeout_counts_the_wrapped_lines_of_dots(tmp_path: Path) -> None:
    # 149 tests fill more than one line of dots; pytest's second line carries no file name,
    # and a run killed by greenloop's deadline counts its dots too
    body = "".join(f"def test_ok_{i}():\n    assert True\n\n" for i in range(149))
    body += "def test_hangs_forever():\n    import time\n    time.sleep(600)\n"
    ws = py_workspace(tmp_path / "ws", {"tests/test_many.py": body})
    r = _stopped(ws, 8000)
    out = (ws / ".greenloop" / "runs" / r["run_id"] / "stdout.txt").read_text(encoding="utf-8")
    assert sum(1 for line in out.splitlines() if line.startswith(".")) >= 1, out  # a wrapped line
    assert r["summary"] == {"total": 150, "passed": 149, "failed": 1, "skipped": 0}, r
    assert [f["kind"] for f in r["failures"]] == ["timeout"]
