"""`greenloop run` on real temporary workspaces of each runner: red, green, crash on import,
empty suite, a 2,000-test suite, and a hung suite killed at its timeout with no survivor.

Every case runs the real CLI as a subprocess with `--json` and checks the result and the exit
code; the files on disk (result.json, stdout.txt, the runner's report) are checked too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from greenloop.schema import validate_run_result

from .helpers import cli, js_workspace, node_workspace, processes_under, py_workspace

pytestmark = pytest.mark.e2e

Builder = Callable[[Path, str], Path]

# ---------------------------------------------------------------- the workspaces, per runner

VITEST = {
    "red": {
        "math.js": "export const add = (a, b) => a + b\n",
        "math.test.js": (
            "import { describe, it, expect } from 'vitest'\n"
            "import { add } from './math.js'\n"
            "describe('math', () => {\n"
            "  it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
            "  it('adds badly', () => { expect(add(2, 2)).toBe(5) })\n"
            "})\n"
        ),
    },
    "green": {
        "math.js": "export const add = (a, b) => a + b\n",
        "math.test.js": (
            "import { it, expect } from 'vitest'\nimport { add } from './math.js'\n"
            "it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
        ),
    },
    "crash": {
        "broken.js": "export const add = (a, b) => {\n",
        "math.test.js": (
            "import { it, expect } from 'vitest'\nimport { add } from './broken.js'\n"
            "it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
        ),
    },
    "empty": {"src/math.js": "export const add = (a, b) => a + b\n"},
    "hung": {
        "hang.test.js": (
            "import { it } from 'vitest'\n"
            "it('ok', () => {})\n"
            "it('hangs', () => new Promise(() => { setInterval(() => {}, 1000) }), 1_000_000)\n"
        ),
    },
}

JEST = {
    "red": {
        "math.js": "exports.add = (a, b) => a + b\n",
        "math.test.js": (
            "const { add } = require('./math')\n"
            "describe('math', () => {\n"
            "  test('adds', () => { expect(add(1, 2)).toBe(3) })\n"
            "  test('adds badly', () => {\n"
            "    expect(add(2, 2)).toBe(5)\n"
            "  })\n"
            "})\n"
        ),
    },
    "green": {
        "math.js": "exports.add = (a, b) => a + b\n",
        "math.test.js": (
            "const { add } = require('./math')\n"
            "test('adds', () => { expect(add(1, 2)).toBe(3) })\n"
        ),
    },
    "crash": {
        "broken.js": "exports.add = (a, b) => {\n",
        "math.test.js": (
            "const { add } = require('./broken')\n"
            "test('adds', () => { expect(add(1, 2)).toBe(3) })\n"
        ),
    },
    "empty": {"src/math.js": "exports.add = (a, b) => a + b\n"},
    "hung": {
        "hang.test.js": (
            "test('ok', () => {})\n"
            "test('hangs', () => new Promise(() => { setInterval(() => {}, 1000) }), 1000000)\n"
        ),
    },
}

PYTEST = {
    "red": {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": (
            "from calc import add\n"
            "\n"
            "def test_adds():\n"
            "    assert add(1, 2) == 3\n"
            "\n"
            "def test_adds_badly():\n"
            "    assert add(2, 2) == 5\n"
        ),
    },
    "green": {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": "from calc import add\n\ndef test_adds():\n    assert add(1, 2) == 3\n",
    },
    "crash": {
        "broken.py": "def add(a, b)\n    return a + b\n",
        "test_calc.py": "from broken import add\n\ndef test_adds():\n    assert add(1, 2) == 3\n",
    },
    "empty": {"test_nothing.py": "HELPER = 1\n"},
    "hung": {
        "test_hang.py": (
            "import signal, subprocess, time\n"
            "\n"
            "def test_ok():\n"
            "    pass\n"
            "\n"
            "def test_hangs():\n"
            "    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignores the polite word\n"
            "    subprocess.Popen(['sleep', '600'], start_new_session=True)  # escapes the group\n"
            "    time.sleep(600)\n"
        ),
    },
}

NODE = {
    "red": {
        "math.js": "exports.add = (a, b) => a + b\n",
        "math.test.js": (
            "const test = require('node:test')\n"
            "const assert = require('node:assert')\n"
            "const { add } = require('./math')\n"
            "test('adds', () => { assert.strictEqual(add(1, 2), 3) })\n"
            "test('adds badly', () => { assert.strictEqual(add(2, 2), 5) })\n"
        ),
    },
    "green": {
        "math.js": "exports.add = (a, b) => a + b\n",
        "math.test.js": (
            "const test = require('node:test')\nconst assert = require('node:assert')\n"
            "test('adds', () => { assert.strictEqual(1 + 2, 3) })\n"
        ),
    },
    "crash": {
        "broken.js": "exports.add = (a, b) => {\n",
        "math.test.js": (
            "const test = require('node:test')\nconst { add } = require('./broken')\ntest('adds', () => {})\n"
        ),
    },
    "empty": {"lib/math.js": "exports.add = (a, b) => a + b\n"},
    "hung": {
        "hang.test.js": (
            "const test = require('node:test')\n"
            "test('ok', () => {})\n"
            "test('hangs', () => new Promise(() => { setInterval(() => {}, 1000) }))\n"
        ),
    },
}

# "skips": a green suite with tests taken away (skip, todo, skipif, xfail, a skip at run time)
VITEST["skips"] = {
    "math.test.js": (
        "import { describe, it, expect } from 'vitest'\n"
        "describe('math', () => {\n"
        "  it('adds', () => { expect(1 + 2).toBe(3) })\n"
        "  it.skip('is skipped', () => { expect(1).toBe(2) })\n"
        "  it.todo('is todo')\n"
        "})\n"
    ),
}
JEST["skips"] = {"math.test.js": VITEST["skips"]["math.test.js"].split("\n", 1)[1]}
PYTEST["skips"] = {
    "test_calc.py": (
        "import pytest\n\n\n"
        "def test_adds():\n    assert 1 + 2 == 3\n\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_skipped():\n    assert False\n\n\n"
        "@pytest.mark.skipif(True, reason='not here')\ndef test_skipped_if():\n    assert False\n\n\n"
        "def test_skips_itself():\n    pytest.skip('no network')\n\n\n"
        "@pytest.mark.xfail(reason='known bug')\ndef test_xfail():\n    assert False\n\n\n"
        "@pytest.mark.xfail(reason='was broken')\ndef test_xpass():\n    assert True\n"
    ),
}
NODE["skips"] = {
    "math.test.js": (
        "const { describe, it, test } = require('node:test')\n"
        "const assert = require('node:assert')\n"
        "describe('math', () => {\n"
        "  it('adds', () => { assert.strictEqual(1 + 2, 3) })\n"
        "  it.skip('is skipped', () => { assert.fail() })\n"
        "  it.todo('is todo')\n"
        "})\n"
        "test('skips at run time', (t) => { t.skip('no network') })\n"
    ),
}
# the tests each "skips" suite takes away, named as the runner names its failures
SKIPPED = {
    "vitest": ["math > is skipped", "math > is todo"],
    "jest": ["math › is skipped", "math › is todo"],
    # (a non-strict xpass passed: no skip)
    "pytest": ["test_calc.py::test_skipped", "test_calc.py::test_skipped_if",
               "test_calc.py::test_skips_itself", "test_calc.py::test_xfail"],
    "node:test": ["math > is skipped", "math > is todo", "skips at run time"],
}

SOURCES = {"vitest": VITEST, "jest": JEST, "pytest": PYTEST, "node:test": NODE}
# where the failing assertion of each "red" workspace is: file and line
RED_AT = {
    "vitest": ("math.test.js", 5),
    "jest": ("math.test.js", 5),
    "pytest": ("test_calc.py", 7),
    "node:test": ("math.test.js", 5),
}


def build(framework: str, kind: str, root: Path) -> Path:
    files = SOURCES[framework][kind]
    if framework in ("vitest", "jest"):
        return js_workspace(root, framework, files)
    if framework == "pytest":
        return py_workspace(root, files)
    return node_workspace(root, files)


def run_json(ws: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", *extra)
    assert done.stdout.strip(), done.stderr
    result = done.json
    assert validate_run_result(result) == [], "result.json must follow the published schema"
    return done.code, result


FRAMEWORKS = ["vitest", "jest", "pytest", "node:test"]


# ---------------------------------------------------------------- the cases


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_red_suite(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "red", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"], r["ok"]) == (1, "red", False), r
    assert r["framework"] == framework
    assert r["summary"] == {"total": 2, "passed": 1, "failed": 1, "skipped": 0}
    assert r["next_action"] == "retry_coder"
    (failure,) = r["failures"]
    name = "test_adds_badly" if framework == "pytest" else "adds badly"
    assert name in failure["test"]
    file, line = RED_AT[framework]
    assert failure["file"] is not None and failure["file"].endswith(file), failure
    assert failure["line"] == line, failure
    assert (failure["expected"], failure["got"]) == ("5", "4"), failure
    assert failure["hint"], failure
    # the run is stored: result.json equal to what was printed, the full output, the report
    run_dir = ws / ".greenloop" / "runs" / str(r["run_id"])
    assert r["result_ref"] == str(run_dir / "result.json")
    assert json.loads((run_dir / "result.json").read_text()) == r
    assert (run_dir / "stdout.txt").exists() and (run_dir / "stderr.txt").exists()
    assert list(run_dir.glob("report.*")), "the machine report is kept beside the output"
    assert name in str(r["output_tail"])
    assert not any("text output" in n for n in r["notes"]), r["notes"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_green_suite(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "green", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"], r["ok"]) == (0, "green", True), r
    assert r["summary"] == {"total": 1, "passed": 1, "failed": 0, "skipped": 0}
    assert r["failures"] == [] and r["crashed"] is False and r["next_action"] is None


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_skipped_tests_are_named(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "skips", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"]) == (0, "green"), r
    assert sorted(r["skipped_tests"]) == SKIPPED[framework], r
    assert r["summary"]["skipped"] == len(SKIPPED[framework])
    passed = {"test_calc.py::test_adds", "test_calc.py::test_xpass"} if framework == "pytest" else \
        {"math › adds" if framework == "jest" else "math > adds"}
    assert set(r["passed_tests"]) == passed, r["passed_tests"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_crash_on_import_is_broken_for_the_tester(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "crash", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"], r["ok"], r["crashed"]) == (3, "broken", False, True), r
    assert r["next_action"] == "retry_tester"
    assert r["crash_reason"] and "load" in str(r["crash_reason"]), r["crash_reason"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_empty_suite_is_no_tests_ran(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "empty", tmp_path / "ws")
    code, r = run_json(ws, "--framework", framework)
    assert (code, r["outcome"], r["ok"]) == (3, "broken", False), r
    assert any("no tests ran" in n for n in r["notes"]), r
    assert r["summary"]["total"] == 0


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hung_suite_dies_at_its_timeout_with_no_process_left(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "hung", tmp_path / "ws")
    timeout_ms = 4000 if framework in ("vitest", "jest") else 2500
    done = cli("run", str(ws), "--json", "--timeout-ms", str(timeout_ms), timeout=60)
    r = done.json
    assert (done.code, r["outcome"], r["timed_out"], r["crashed"]) == (3, "broken", True, True), r
    assert "timed out" in str(r["crash_reason"])
    # the timeout plus the grace period plus start-up, not the 600 s the suite wanted
    assert done.seconds < timeout_ms / 1000 + 10
    assert processes_under(ws) == []


# ---------------------------------------------------------------- 2,000 tests per runner


def big_suite(framework: str, root: Path, files: int = 4, per_file: int = 500) -> Path:
    sources: dict[str, str] = {}
    for f in range(files):
        if framework == "pytest":
            body = "".join(f"def test_{f}_{i}():\n    assert {i} + 1 == {i + 1}\n\n" for i in range(per_file))
            sources[f"tests/test_big_{f}.py"] = body
        elif framework == "node:test":
            head = "const test = require('node:test')\nconst assert = require('node:assert')\n"
            body = "".join(
                f"test('t {f} {i}', () => assert.strictEqual({i} + 1, {i + 1}))\n" for i in range(per_file)
            )
            sources[f"test/big_{f}.test.js"] = head + body
        else:
            head = "import { it, expect } from 'vitest'\n" if framework == "vitest" else ""
            body = "".join(f"it('t {f} {i}', () => expect({i} + 1).toBe({i + 1}))\n" for i in range(per_file))
            sources[f"test/big_{f}.test.js"] = head + body
    if framework in ("vitest", "jest"):
        return js_workspace(root, framework, sources)
    if framework == "pytest":
        return py_workspace(root, sources)
    return node_workspace(root, sources)


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_thousand_tests(framework: str, tmp_path: Path) -> None:
    ws = big_suite(framework, tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"]) == (0, "green"), r
    assert r["summary"] == {"total": 2000, "passed": 2000, "failed": 0, "skipped": 0}
    assert len(str(r["output_tail"])) <= 3000


def test_vitest_file_without_tests_is_red_in_vitests_words(tmp_path: Path) -> None:
    ws = js_workspace(tmp_path / "ws", "vitest", {
        **VITEST["green"], "helpers.test.js": "export const answer = 42\n"})
    code, r = run_json(ws)
    assert (code, r["outcome"], r["next_action"]) == (1, "red", "retry_coder"), r
    (f,) = r["failures"]
    assert (f["test"], f["kind"]) == ("helpers.test.js", "test")
    assert "No test suite found in file helpers.test.js" in f["message"]
    assert "could not load" not in f["hint"] and "import" not in f["hint"]


def test_vitest_under_ci_names_its_refusal_of_only(tmp_path: Path) -> None:
    """Under CI vitest fails every `.only` test; the hint says why, not "check the values"."""
    ws = js_workspace(tmp_path / "ws", "vitest", {
        "math.test.js": (
            "import { it, expect } from 'vitest'\n"
            "it('adds', () => { expect(1 + 1).toBe(2) })\n"
            "it.only('multiplies', () => { expect(2 * 2).toBe(4) })\n"
        ),
    })  # fmt: skip
    red = cli("run", str(ws), "--json", env={"CI": "true"})
    assert red.code == 1, red.stderr
    (failure,) = red.json["failures"]
    assert failure["test"].endswith("multiplies") and failure["line"] == 3
    assert failure["hint"].startswith("vitest refused the .only at math.test.js:3 because CI is set")
    green = cli("run", str(ws), "--json", env={"CI": ""})
    assert green.code == 0 and green.json["outcome"] == "green", green.stdout


def test_pytest_internal_error_is_broken_with_pytest_s_own_reason(tmp_path: Path) -> None:
    # a conftest's unknown mark under `filterwarnings = error`: pytest writes its (empty) report,
    # prints INTERNALERROR> and exits 3; the reason is pytest's, not "check the test file names"
    ws = py_workspace(tmp_path / "ws", {
        "pytest.ini": "[pytest]\nfilterwarnings = error\n",
        "conftest.py": "import pytest\n\ndef pytest_collection_modifyitems(items):\n"
                       "    for item in items:\n        item.add_marker(pytest.mark.no_cover)\n",
        "test_a.py": "def test_a():\n    assert True\n",
    })
    code, r = run_json(ws)
    assert (code, r["outcome"], r["exit_code"]) == (3, "broken", 3), r
    reason = str(r["crash_reason"])
    assert "PytestUnknownMarkWarning: Unknown pytest.mark.no_cover" in reason, reason
    assert not any("test file names" in n for n in r["notes"]), r["notes"]
