"""`greenloop run` on real mocha, unittest and bun workspaces: a green suite, a red suite of
tricky failures (nested describes, a failing before-all hook, unicode names, skipped and
pending tests), a suite that cannot import its code, a `--last-failed` rerun, a read-only
sandbox, the closure gate holding on red and letting go on green, 2,000 tests counted
exactly, and a hung suite killed at its timeout with no process left.

Each case runs the real CLI as a subprocess with `--json`, on the real toolchain (mocha and
bun from tests/runners/node_modules, unittest from this interpreter).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from greenloop.schema import validate_run_result

from .helpers import RUNNERS, cli, processes_under, write_files

pytestmark = pytest.mark.e2e

MOCHA = {
    "green": {
        "math.js": "exports.add = (a, b) => a + b\n",
        "test/math.spec.js": (
            "const assert = require('node:assert')\nconst { add } = require('../math')\n"
            "describe('math', () => { it('adds', () => { assert.strictEqual(add(1, 2), 3) }) })\n"
        ),
    },
    "red": {
        "math.js": "exports.add = (a, b) => a + b\n",
        "test/math.spec.js": (
            "const assert = require('node:assert')\n"
            "const { add } = require('../math')\n"
            "describe('math', () => {\n"
            "  it('adds', () => { assert.strictEqual(add(1, 2), 3) })\n"
            "  describe('ünïcode ✓', () => {\n"
            "    it('adds badly', () => { assert.strictEqual(add(2, 2), 5) })\n"
            "    it.skip('is skipped', () => {})\n"
            "    it('is pending')\n"
            "  })\n"
            "})\n"
            "describe('db', () => {\n"
            "  before(() => { throw new Error('no database') })\n"
            "  it('reads', () => {})\n"
            "})\n"
        ),
    },
    "crash": {
        "broken.js": "exports.add = (a, b) => {\n",
        "test/math.spec.js": "const { add } = require('../broken')\nit('adds', () => {})\n",
    },
    "hung": {
        "test/hang.spec.js": (
            "it('ok', () => {})\n"
            "it('hangs', function () {\n"
            "  this.timeout(0)\n"
            "  return new Promise(() => { setInterval(() => {}, 1000) })\n"
            "})\n"
        ),
    },
}

UNITTEST = {
    "green": {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": (
            "import unittest\nfrom calc import add\n\n\nclass TestCalc(unittest.TestCase):\n"
            "    def test_adds(self):\n        self.assertEqual(add(1, 2), 3)\n"
        ),
    },
    "red": {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "test_calc.py": (
            "import unittest\n"
            "from calc import add\n"
            "\n"
            "\n"
            "class TestCalc(unittest.TestCase):\n"
            "    def test_adds(self):\n"
            "        self.assertEqual(add(1, 2), 3)\n"
            "\n"
            "    def test_ünï_adds_badly(self):\n"
            "        self.assertEqual(add(2, 2), 5)\n"
            "\n"
            "    @unittest.skip('later')\n"
            "    def test_skipped(self):\n"
            "        pass\n"
            "\n"
            "\n"
            "class TestDb(unittest.TestCase):\n"
            "    @classmethod\n"
            "    def setUpClass(cls):\n"
            "        raise ConnectionError('no database')\n"
            "\n"
            "    def test_reads(self):\n"
            "        pass\n"
        ),
    },
    "crash": {
        "broken.py": "def add(a, b)\n    return a + b\n",
        "test_calc.py": (
            "import unittest\nfrom broken import add\n\n\nclass TestCalc(unittest.TestCase):\n"
            "    def test_adds(self):\n        self.assertEqual(add(1, 2), 3)\n"
        ),
    },
    "hung": {
        "test_hang.py": (
            "import signal\nimport subprocess\nimport time\nimport unittest\n\n\n"
            "class TestHang(unittest.TestCase):\n"
            "    def test_ok(self):\n        pass\n\n"
            "    def test_hangs(self):\n"
            "        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ignores the polite word\n"
            "        subprocess.Popen(['sleep', '600'], start_new_session=True)  # escapes the group\n"
            "        time.sleep(600)\n"
        ),
    },
}

BUN = {
    "green": {
        "math.ts": "export const add = (a: number, b: number) => a + b\n",
        "math.test.ts": (
            "import { it, expect } from 'bun:test'\nimport { add } from './math'\n"
            "it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
        ),
    },
    "red": {
        "math.ts": "export const add = (a: number, b: number) => a + b\n",
        "math.test.ts": (
            "import { describe, it, expect, beforeAll } from 'bun:test'\n"
            "import { add } from './math'\n"
            "describe('math', () => {\n"
            "  it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
            "  describe('ünïcode ✓', () => {\n"
            "    it('adds badly', () => { expect(add(2, 2)).toBe(5) })\n"
            "    it.skip('is skipped', () => {})\n"
            "    it.todo('is todo')\n"
            "  })\n"
            "})\n"
            "describe('db', () => {\n"
            "  beforeAll(() => { throw new Error('no database') })\n"
            "  it('reads', () => {})\n"
            "})\n"
        ),
    },
    "crash": {
        "broken.ts": "export const add = (a: number, b: number) => {\n",
        "math.test.ts": (
            "import { it, expect } from 'bun:test'\nimport { add } from './broken'\n"
            "it('adds', () => { expect(add(1, 2)).toBe(3) })\n"
        ),
    },
    "hung": {
        "hang.test.ts": (
            "import { it } from 'bun:test'\n"
            "it('ok', () => {})\n"
            "it('hangs', () => new Promise(() => { setInterval(() => {}, 1000) }), 1_000_000)\n"
        ),
    },
}

SOURCES = {"mocha": MOCHA, "unittest": UNITTEST, "bun": BUN}
FRAMEWORKS = list(SOURCES)

# the red suite: summary, then (name, kind, file, line, expected, got) of each failure
RED: dict[str, tuple[dict[str, int], list[tuple[str, str, str, int, str | None, str | None]]]] = {
    "mocha": (
        {"total": 5, "passed": 1, "failed": 2, "skipped": 2},
        [("math > ünïcode ✓ > adds badly", "test", "test/math.spec.js", 6, "5", "4"),
         ('db > "before all" hook for "reads"', "hook", "test/math.spec.js", 12, None, None)],
    ),
    "unittest": (
        {"total": 4, "passed": 1, "failed": 2, "skipped": 1},  # FAILED (failures=1, errors=1, skipped=1)
        [("test_calc.TestCalc.test_ünï_adds_badly", "test", "test_calc.py", 10, "5", "4"),
         ("setUpClass (test_calc.TestDb)", "hook", "test_calc.py", 20, None, None)],
    ),
    "bun": (
        {"total": 5, "passed": 1, "failed": 2, "skipped": 2},
        [("math > ünïcode ✓ > adds badly", "test", "math.test.ts", 6, "5", "4"),
         ("db > (unnamed)", "hook", "math.test.ts", 12, None, None)],
    ),
}

# the red suite's skipped tests (mocha's pending, unittest's skip, bun's skip and todo), named
# as the runner names its failures
SKIPPED = {
    "mocha": ["math > ünïcode ✓ > is pending", "math > ünïcode ✓ > is skipped"],
    "unittest": ["test_calc.TestCalc.test_skipped"],
    "bun": ["math > ünïcode ✓ > is skipped", "math > ünïcode ✓ > is todo"],
}


def build(framework: str, kind: str, root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir()  # stop upward searches (lockfiles, hoisted binaries) at the workspace
    if framework in ("mocha", "bun"):
        if not (RUNNERS / ".bin" / framework).exists():
            pytest.skip(f"{framework} is not installed in tests/runners (run `npm ci` there)")
        os.symlink(RUNNERS, root / "node_modules")
        pkg: dict[str, Any] = {"name": "ws", "private": True}
        if framework == "mocha":
            pkg["devDependencies"] = {"mocha": "12.0.3"}
        else:
            pkg["scripts"] = {"test": "bun test"}
            (root / "bun.lock").write_text('{"lockfileVersion": 1, "workspaces": {"": {"name": "ws"}}}\n')
        (root / "package.json").write_text(json.dumps(pkg))
    return write_files(root, SOURCES[framework][kind])


def run_json(ws: Path, *extra: str, timeout: float = 120) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", *extra, timeout=timeout)
    assert done.stdout.strip(), done.stderr
    result = done.json
    assert validate_run_result(result) == [], "result.json must follow the published schema"
    return done.code, result


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_probe_names_the_runner(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "green", tmp_path / "ws")
    done = cli("probe", str(ws), "--json")
    d = done.json
    assert d["framework"] == framework, d
    ends = {"mocha": ("/node_modules/.bin/mocha",), "bun": ("/node_modules/.bin/bun", "test"),
            "unittest": ("", "-m", "unittest")}[framework]  # (the interpreter: python, python3 …)
    assert d["command"][0].endswith(ends[0]) and tuple(d["command"][1:]) == ends[1:], d


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_green_suite(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "green", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"], r["ok"], r["framework"]) == (0, "green", True, framework), r
    assert r["summary"] == {"total": 1, "passed": 1, "failed": 0, "skipped": 0}
    assert r["failures"] == [] and r["next_action"] is None
    assert not any("text output" in n for n in r["notes"]), r["notes"]  # the machine report was read


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_red_suite_of_tricky_failures(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "red", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"], r["ok"], r["next_action"]) == (1, "red", False, "retry_coder"), r
    summary, failures = RED[framework]
    assert r["summary"] == summary
    assert sorted(r["skipped_tests"]) == SKIPPED[framework], r["skipped_tests"]
    got = [(f["test"], f["kind"], f["file"], f["line"], f["expected"], f["got"]) for f in r["failures"]]
    assert sorted(got) == sorted(failures), r["failures"]
    for f in r["failures"]:
        assert f["message"] and f["hint"], f
    assert any("no database" in f["message"] for f in r["failures"])
    run_dir = ws / ".greenloop" / "runs" / str(r["run_id"])
    assert list(run_dir.glob("report.*")), "the machine report is kept beside the output"
    assert not any("text output" in n for n in r["notes"]), r["notes"]

    # --last-failed reruns just those: the failing test and the tests under the failing hook
    code2, again = run_json(ws, "--last-failed")
    assert (code2, again["outcome"], again["selection"]) == (1, "red", "last_failed"), again
    assert sorted(f["test"] for f in again["failures"]) == sorted(f[0] for f in failures)
    assert again["summary"]["passed"] == 0, again["summary"]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_crash_on_import_is_broken_for_the_tester(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "crash", tmp_path / "ws")
    code, r = run_json(ws)
    assert (code, r["outcome"], r["ok"], r["crashed"]) == (3, "broken", False, True), r
    assert r["next_action"] == "retry_tester"
    assert r["crash_reason"] and "load" in str(r["crash_reason"]), r["crash_reason"]
    (load,) = [f for f in r["failures"] if f["kind"] == "load"]
    assert load["file"] and "broken" in load["file"] + load["message"], load


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_read_only_sandbox_runs_and_leaves_the_workspace_alone(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "green", tmp_path / "ws")
    before = sorted(p.name for p in ws.iterdir())
    code, r = run_json(ws, "--sandbox", "read-only")
    assert (code, r["outcome"]) == (0, "green"), r
    assert r["sandbox"]["mode"] == "read-only"
    own = {".greenloop", "timeline.ndjson", "bugs.ndjson"}  # greenloop's records, not the runner's
    assert sorted(p.name for p in ws.iterdir() if p.name not in own) == before  # no __pycache__ either


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_hung_suite_dies_at_its_timeout_with_no_process_left(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "hung", tmp_path / "ws")
    timeout_ms = 3000
    done = cli("run", str(ws), "--json", "--timeout-ms", str(timeout_ms), timeout=60)
    r = done.json
    assert (done.code, r["outcome"], r["timed_out"], r["crashed"]) == (3, "broken", True, True), r
    assert "timed out" in str(r["crash_reason"])
    assert done.seconds < timeout_ms / 1000 + 10
    assert processes_under(ws) == []
    if framework != "bun":  # greenloop's mocha reporter and unittest runner record what runs
        (hung,) = [f for f in r["failures"] if f["kind"] == "timeout"]
        name = {"mocha": "hangs", "unittest": "test_hang.TestHang.test_hangs"}[framework]
        assert hung["test"] == name and hung["file"], hung
        # mocha ran `ok` first; unittest runs methods in name order, so test_hangs came first
        assert r["summary"]["passed"] == {"mocha": 1, "unittest": 0}[framework], r["summary"]


def _big(framework: str, root: Path) -> Path:
    """2,000 passing tests in 4 files of 500, as each runner finds them."""
    ws = build(framework, "green", root)
    for f in range(4):
        if framework == "mocha":
            body = "".join(f"  it('t {f} {i}', () => {{}})\n" for i in range(500))
            (ws / "test" / f"big_{f}.spec.js").write_text(f"describe('big {f}', () => {{\n{body}}})\n")
        elif framework == "bun":
            body = "".join(f"it('t {f} {i}', () => expect({i}).toBe({i}))\n" for i in range(500))
            (ws / f"big_{f}.test.ts").write_text("import { it, expect } from 'bun:test'\n" + body)
        else:
            body = "".join(f"    def test_{i}(self):\n        self.assertTrue(True)\n\n" for i in range(500))
            head = f"import unittest\n\n\nclass Big{f}(unittest.TestCase):\n"
            (ws / f"test_big_{f}.py").write_text(head + body)
    return ws


@pytest.mark.slow
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_thousand_tests(framework: str, tmp_path: Path) -> None:
    code, r = run_json(_big(framework, tmp_path / "ws"))
    assert (code, r["outcome"]) == (0, "green"), r
    assert r["summary"] == {"total": 2001, "passed": 2001, "failed": 0, "skipped": 0}
    assert len(r["passed_tests"]) == 2001 and len(str(r["output_tail"])) <= 3000


def test_framework_flag_picks_a_new_runner_over_detection(tmp_path: Path) -> None:
    ws = build("unittest", "green", tmp_path / "ws")
    (ws / "pytest.ini").write_text("[pytest]\n")  # detection says pytest
    assert cli("probe", str(ws), "--json").json["framework"] == "pytest"
    code, r = run_json(ws, "--framework", "unittest")
    assert (code, r["outcome"], r["framework"]) == (0, "green", "unittest"), r
    assert "_greenloop_unittest" in r["command"]
    bad = cli("run", str(ws), "--framework", "nose")
    assert bad.code == 2 and "mocha, unittest, bun" in bad.stderr


def fixed(files: dict[str, str]) -> dict[str, str]:
    """The red suite fixed as an honest agent would: the wrong expectation and the failing
    hook corrected, every test still there (a fix that deleted them would stay owed)."""
    swaps = (
        ("add(2, 2), 5)", "add(2, 2), 4)"),
        ("toBe(5)", "toBe(4)"),
        ("throw new Error('no database')", ""),
        ("raise ConnectionError('no database')", "pass"),
    )
    out = {}
    for name, text in files.items():
        for old, new in swaps:
            text = text.replace(old, new)
        out[name] = text
    return out


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_closure_gate_holds_on_red_and_lets_go_on_green(framework: str, tmp_path: Path) -> None:
    ws = build(framework, "red", tmp_path / "ws")
    session = f"gate-{framework}"
    assert cli("run", str(ws), "--session", session, "--json").code == 1
    held = cli("check", str(ws), "--session", session, "--json")
    assert held.code == 1 and held.json["satisfied"] is False, held.stdout
    write_files(ws, fixed(SOURCES[framework]["red"]))  # the fix: every test kept, now passing
    code, r = run_json(ws, "--session", session)
    assert (code, r["outcome"]) == (0, "green"), r
    freed = cli("check", str(ws), "--session", session, "--json")
    assert freed.code == 0 and freed.json["satisfied"] is True, freed.stdout


# Failures these runners report with no line (nothing in the stack points into the test):
# each is placed at its test's declaration, with the hint for what it is.
UNPLACED = {
    "mocha": (
        {"test/slow.spec.js": (
            "describe('slow', () => {\n"
            "  it('waits', function (done) {\n"
            "    this.timeout(50)\n"
            "    setTimeout(done, 2000)\n"
            "  })\n"
            "})\n"
        )},
        "slow > waits", "test/slow.spec.js", 2, "never finished",
    ),
    "unittest": (
        {"test_fixed.py": (
            "import unittest\n\n\nclass TestFixed(unittest.TestCase):\n"
            "    @unittest.expectedFailure\n"
            "    def test_was_broken(self):\n"
            "        self.assertEqual(1 + 1, 2)\n"
        )},
        "test_fixed.TestFixed.test_was_broken", "test_fixed.py", 6, "remove the expectedFailure",
    ),
}


@pytest.mark.parametrize("framework", list(UNPLACED))
def test_a_failure_the_runner_places_nowhere_is_placed_at_its_test(framework: str, tmp_path: Path) -> None:
    files, test, file, line, says = UNPLACED[framework]
    ws = build(framework, "green", tmp_path / "ws")
    write_files(ws, files)
    code, r = run_json(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    [f] = [f for f in r["failures"] if f["test"] == test]
    assert (f["file"], f["line"]) == (file, line), f
    assert says in f["hint"] and f"{file}:{line}" in f["hint"], f["hint"]


def test_unittest_assert_equal_roles_follow_the_call(tmp_path: Path) -> None:
    """unittest's assertEqual(first, second) carries no roles: the literal (or the argument named
    expected) is the expected value on whichever side it stands; with no sign, neither is, and
    the hint says "first" and "second"."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    write_files(ws, {
        "calc.py": "def add(a, b):\n    return a + b + 1\n",
        "test_calc.py": (
            "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
            "    def test_literal_first(self):\n        self.assertEqual(5, add(2, 3))\n\n"
            "    def test_literal_second(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
            "    def test_named_first(self):\n        expected, actual = 5, add(2, 3)\n"
            "        self.assertEqual(expected, actual)\n\n"
            "    def test_named_got_first(self):\n        result, want = add(2, 3), 5\n"
            "        self.assertEqual(result, want)\n\n"
            "    def test_no_sign(self):\n        a, b = 6, 5\n        self.assertEqual(b, a)\n"
        ),
    })  # fmt: skip
    code, r = run_json(ws)
    assert code == 1 and r["framework"] == "unittest"
    by = {f["test"].rsplit(".", 1)[-1]: (f["expected"], f["got"]) for f in r["failures"]}
    assert by == {
        "test_literal_first": ("5", "6"),
        "test_literal_second": ("5", "6"),
        "test_named_first": ("5", "6"),
        "test_named_got_first": ("5", "6"),
        "test_no_sign": (None, None),  # assertEqual(b, a): nothing says which is expected
    }
    no_sign = next(f for f in r["failures"] if f["test"].endswith("test_no_sign"))
    assert "got 5 from its first argument, `b`, and 6 from its second, `a`" in no_sign["hint"], no_sign
    literal_first = next(f for f in r["failures"] if f["test"].endswith("test_literal_first"))
    assert "returned 6" in literal_first["hint"] and "expects 5" in literal_first["hint"]


def test_bun_reached_through_another_script_is_run_and_read_as_bun(tmp_path: Path) -> None:
    """`"test": "bun run test:functionality"` (elysia's layout) is bun, with bun's own report:
    the same records and counts as the direct script, none twice."""
    ws = build("bun", "red", tmp_path / "ws")
    pkg = json.loads((ws / "package.json").read_text())
    pkg["scripts"] = {"test": "bun run test:functionality", "test:functionality": "bun test"}
    (ws / "package.json").write_text(json.dumps(pkg))
    code, r = run_json(ws)
    assert (code, r["framework"], r["outcome"]) == (1, "bun", "red"), r
    summary, failures = RED["bun"]
    assert r["summary"] == summary
    got = [(f["test"], f["kind"], f["file"], f["line"], f["expected"], f["got"]) for f in r["failures"]]
    assert sorted(got) == sorted(failures), r["failures"]


EXPRESS_LIKE = {
    "test/support/env.js": "process.env.APP_MODE = 'test'\n",
    "test/app.js": (
        "const assert = require('assert')\n"
        "describe('app', () => {\n"
        "  it('runs in test mode', () => assert.strictEqual(process.env.APP_MODE, 'test'))\n})\n"
    ),
    "test/acceptance/routes.js": (
        "const assert = require('assert')\n"
        "describe('routes', () => {\n  it('one', () => assert.ok(true))\n"
        "  it('two', () => assert.strictEqual(1 + 1, 3))\n})\n"
    ),
}


def test_mocha_keeps_the_test_scripts_own_arguments(tmp_path: Path) -> None:
    """express's script `mocha --require test/support/env --reporter spec --check-leaks test/
    test/acceptance/`: its requires, flags and spec folders are kept and only its reporter is
    replaced (run bare, test/acceptance never ran and test/app.js missed its env)."""
    ws = build("mocha", "green", tmp_path / "ws")
    for rel in SOURCES["mocha"]["green"]:
        (ws / rel).unlink()
    write_files(ws, EXPRESS_LIKE)
    pkg = json.loads((ws / "package.json").read_text())
    script = "mocha --require test/support/env --reporter spec --check-leaks test/ test/acceptance/"
    pkg["scripts"] = {"test": script}
    (ws / "package.json").write_text(json.dumps(pkg))
    code, r = run_json(ws)
    assert (code, r["framework"], r["outcome"]) == (1, "mocha", "red"), r
    assert r["summary"] == {"total": 3, "passed": 2, "failed": 1, "skipped": 0}
    assert [f["test"] for f in r["failures"]] == ["routes > two"]
    assert any("mocha arguments are kept: --require test/support/env --check-leaks" in n for n in r["notes"])
    assert "spec" not in r["command"].split("--reporter", 1)[0].split()  # the script's reporter is gone

    # a target replaces the script's spec folders and keeps the rest
    code, one = run_json(ws, "--target", "test/app.js")
    assert (code, one["outcome"], one["summary"]["total"]) == (0, "green", 1), one
    replaced = "replaces the test script's test files and filters: test/ test/acceptance/"
    assert any(replaced in n for n in one["notes"]), one["notes"]


def test_mocha_script_that_is_not_one_plain_command_says_so(tmp_path: Path) -> None:
    ws = build("mocha", "green", tmp_path / "ws")
    pkg = json.loads((ws / "package.json").read_text())
    pkg["scripts"] = {"test": "mocha --check-leaks test/ && echo done"}
    (ws / "package.json").write_text(json.dumps(pkg))
    code, r = run_json(ws)
    assert (code, r["framework"]) == (0, "mocha"), r
    said = [n for n in r["notes"] if "not one plain mocha command" in n and "--framework npm-test" in n]
    assert said, r["notes"]


def test_mocha_with_supertest_reads_the_sides_from_supertests_words(tmp_path: Path) -> None:
    """supertest's error object has no sides for a header and `{}` for a text body; its message
    has both, and they are taken as it says them."""
    ws = build("mocha", "green", tmp_path / "ws")
    for rel in SOURCES["mocha"]["green"]:
        (ws / rel).unlink()
    write_files(ws, {"test/app.js": (
        "const request = require('supertest')\nconst express = require('express')\n"
        "const app = express()\n"
        "app.get('/', (req, res) => { res.set('Link', 'B'); res.status(404).send('nope') })\n"
        "describe('app', () => {\n"
        "  it('sets Link', () => request(app).get('/').expect('Link', 'A'))\n"
        "  it('is ok', () => request(app).get('/').expect(200))\n"
        "  it('says hi', () => request(app).get('/').expect('hi'))\n"
        "})\n"
    )})  # fmt: skip
    code, r = run_json(ws)
    assert (code, r["summary"]["failed"]) == (1, 3), r
    sides = {f["test"]: (f["line"], f["expected"], f["got"]) for f in r["failures"]}
    assert sides == {
        "app > sets Link": (6, '"A"', '"B"'),
        "app > is ok": (7, '200 "OK"', '404 "Not Found"'),
        "app > says hi": (8, "'hi'", "'nope'"),
    }


DOCTESTED = (
    "def add(a, b):\n"
    '    """\n    >>> add(2, 3)\n    5\n    >>> div(1, 0)\n    0\n    """\n'
    "    return a + b + 1\n\n\n"
    "def div(a, b):\n"
    '    """\n    >>> div(4, 2)\n    2.0\n    """\n'
    "    return a / b\n"
)
DOCTEST_SUITE = (
    "import doctest\nimport unittest\n\nimport calc\n\n\n"
    "def load_tests(loader, tests, ignore):\n"
    "    tests.addTests(doctest.DocTestSuite(calc))\n    return tests\n"
)


def test_unittest_doctests_have_their_examples_place_and_values(tmp_path: Path) -> None:
    """A failing doctest (through unittest's DocTestSuite) is placed at its first failing
    example, with doctest's Expected and Got as expected/got; a raising example's hint points
    at the code that raised, never at doctest's `<doctest …>` pseudo-file."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    write_files(ws, {"calc.py": DOCTESTED, "test_docs.py": DOCTEST_SUITE})
    code, r = run_json(ws, "--framework", "unittest")
    assert (code, r["summary"]["failed"]) == (1, 1), r
    (f,) = r["failures"]
    assert (f["test"], f["file"], f["line"], f["expected"], f["got"]) == ("calc.add", "calc.py", 3, "5", "6")
    assert "calc.py:3" in f["hint"] and "<doctest" not in f["hint"], f["hint"]

    (ws / "calc.py").write_text(DOCTESTED.replace("a + b + 1", "a + b"))
    code, r = run_json(ws, "--framework", "unittest")
    (f,) = r["failures"]
    assert (f["file"], f["line"], f["expected"], f["got"]) == ("calc.py", 5, None, None)
    assert "calc.py:16" in f["hint"] and "<doctest" not in f["hint"], f["hint"]
