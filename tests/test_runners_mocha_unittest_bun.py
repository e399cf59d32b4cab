"""mocha, unittest and bun: captured fixtures (text parse against the run's own report),
exact failures, live progress, the probe rules and the planned argv of each.

The fixtures come from `python scripts/capture_fixtures mocha unittest bun` (real runs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from greenloop.frameworks import parse_report, parse_text, progress_counts, progress_event
from greenloop.model import Detection, Failure, ParseResult
from greenloop.result import RunResult
from greenloop.runner.dialects import UNITTEST_RUNNER_DIR
from greenloop.runner.plan import RunOptions, plan
from greenloop.runner.probe import probe

FIXTURES = Path(__file__).parent / "fixtures"
CAPTURES = [p for d in ("mocha", "unittest", "bun") for p in sorted((FIXTURES / d).glob("*/*.meta.json"))]


def _meta(path: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return meta


def _text(meta_path: Path, root: str | None = None) -> ParseResult:
    meta = _meta(meta_path)
    with meta_path.with_name(meta_path.name.replace(".meta.json", ".txt")).open(encoding="utf-8") as fh:
        return parse_text(meta["framework"], fh, root=root)


def _report(meta_path: Path, root: str | None = None) -> ParseResult:
    meta = _meta(meta_path)
    return parse_report(meta["report_format"], str(meta_path.with_name(meta["report"])), root=root)


def _id(p: Path) -> str:
    return str(p.relative_to(FIXTURES)).replace(".meta.json", "")


def test_fixtures_cover_each_runner_and_suite() -> None:
    got = {(p.parts[-3], p.parts[-2], p.name.replace(".meta.json", "")) for p in CAPTURES}
    for fw in ("mocha", "unittest", "bun"):
        for suite in ("mixed", "green", "loadfail"):
            assert (fw, suite, "plain") in got
    assert {("mocha", "mixed", "color"), ("unittest", "mixed", "v"), ("bun", "mixed", "color")} <= got


@pytest.mark.parametrize("meta_path", CAPTURES, ids=_id)
def test_text_parse_matches_the_report(meta_path: Path) -> None:
    meta = _meta(meta_path)
    text = _text(meta_path, root=meta["cwd"])
    assert text.recognized, text.notes
    assert (meta["exit_code"] == 0) == (text.summary.failed == 0)
    if not meta.get("report"):
        # mocha stops before its reporter starts, bun writes no JUnit file: only files that
        # cannot load ran, and the text says so
        assert meta["suite"] == "loadfail"
        assert text.load_error and all(f.kind == "load" for f in text.failures), text.failures
        return
    report = _report(meta_path, root=meta["cwd"])
    assert report.recognized, report.notes
    # bun's JUnit report leaves out an error outside any test (a file that cannot load)
    blind = [f for f in text.failures if meta["framework"] == "bun" and f.kind == "load"]
    rs = report.summary
    assert text.summary == rs._replace(failed=rs.failed + len(blind), total=rs.total + len(blind))
    assert sorted((f.kind, f.test) for f in text.failures if f not in blind) == sorted(
        (f.kind, f.test) for f in report.failures
    )
    if meta["framework"] != "unittest" or meta["variant"] == "v":  # the dots row names no test
        assert sorted(text.passed_tests) == sorted(report.passed_tests)
    if meta["framework"] == "unittest":
        assert (text.load_error is None) == (report.load_error is None)


def _find(res: ParseResult, name: str) -> Failure:
    matches = [f for f in res.failures if f.test == name]
    assert matches, f"{name!r} not in {[f.test for f in res.failures]}"
    return matches[0]


# (fixture, test name, kind, file, line, expected, got) on the text and on the report
EXACT = [
    ("mocha/mixed/plain", "math > adds wrong", "test", "test/math.spec.js", 10, "4", "3"),
    ("mocha/mixed/plain", "chai > compares numbers", "test", "test/chai.spec.mjs", 5, "5", "4"),
    ("mocha/mixed/color", "math > nested ünïcode ✓ > throws a TypeError", "test", "test/math.spec.js", 20,
     None, None),
    ("mocha/mixed/plain", 'database > "before all" hook for "reads"', "hook", "test/math.spec.js", 36,
     None, None),
    ("unittest/mixed/plain", "test_calc.TestCalc.test_adds_wrong", "test", "test_calc.py", 11, "4", "3"),
    # assertEqual("héllo wörld", "héllo world"): two literals, so neither is the expected value
    ("unittest/mixed/v", "test_calc.TestCalc.test_text", "test", "test_calc.py", 17, None, None),
    ("unittest/mixed/plain", "test_calc.TestCalc.test_subtests (n=2)", "test", "test_calc.py", 33,
     None, None),
    ("unittest/mixed/v", "setUpClass (test_calc.TestDatabase)", "hook", "test_calc.py", 42, None, None),
    ("unittest/mixed/plain", "test_broken", "load", "test_broken.py", 3, None, None),
    ("bun/mixed/plain", "math > adds wrong", "test", "math.test.ts", 10, "4", "3"),
    ("bun/mixed/color", "math > nested ünïcode ✓ > throws a TypeError", "test", "math.test.ts", 19,
     None, None),
    ("bun/mixed/plain", "database > (unnamed)", "hook", "math.test.ts", 35, None, None),
]


@pytest.mark.parametrize(("fx", "name", "kind", "file", "line", "exp", "got"), EXACT)
def test_exact_failures(fx: str, name: str, kind: str, file: str, line: int, exp: str | None,
                        got: str | None) -> None:
    meta_path = FIXTURES / f"{fx}.meta.json"
    root = _meta(meta_path)["cwd"]
    for res in (_text(meta_path, root), _report(meta_path, root)):
        f = _find(res, name)
        assert (f.kind, f.file, f.line, f.expected, f.got) == (kind, file, line, exp, got), f
        assert f.message, f


def test_deep_diffs_give_both_sides() -> None:
    for fx, name, exp_has, got_has in [
        ("mocha/mixed/plain", "chai > compares objects", '"b": [', "2"),
        ("mocha/mixed/plain", "math > nested ünïcode ✓ > builds a user", '"admin"', '"reader"'),
        ("bun/mixed/plain", "math > nested ünïcode ✓ > builds a user", '"admin"', '"reader"'),
        ("unittest/mixed/plain", "test_calc.TestCalc.test_user", "'admin'", "'reader'"),
    ]:
        meta_path = FIXTURES / f"{fx}.meta.json"
        for res in (_text(meta_path), _report(meta_path)):
            f = _find(res, name)
            assert f.expected and exp_has in f.expected, f
            assert f.got and got_has in f.got and f.got != f.expected, f


def test_bun_says_why_on_the_line_after_the_result_and_the_report_gets_those_words() -> None:
    """bun explains a timeout and a .failing test that passed only in its text, on the line
    after `(fail) name`; its JUnit report says `TimeoutError: ` and nothing. The words belong to
    that test (not to the next one's error block), and fill the report's silent failures."""
    from greenloop.frameworks.bun import with_text_errors

    meta_path = FIXTURES / "bun/notes/plain.meta.json"
    root = _meta(meta_path)["cwd"]
    text, report = _text(meta_path, root), _report(meta_path, root)
    said = {f.test: f.message for f in text.failures}
    assert said["notes > waits too long"] == "this test timed out after 50ms."
    assert said["notes > known bug"].startswith("this test is marked as failing but it passed")
    assert said["notes > reads from null"].startswith("TypeError: null is not an object")
    assert {f.test: f.message for f in report.failures}["notes > known bug"] == ""
    merged = {f.test: f for f in with_text_errors(report, text).failures}
    assert merged["notes > waits too long"].message == "this test timed out after 50ms."
    assert merged["notes > known bug"].message.startswith("this test is marked as failing")
    assert merged["notes > reads from null"].line == 17  # the report's own fields stay


def test_counts_are_the_runners_closing_lines() -> None:
    # mocha: "3 passing / 2 pending / 6 failing"; bun: "2 pass / 1 skip / 1 todo / 5 fail";
    # unittest: "Ran 10 tests", "FAILED (failures=4, errors=3, skipped=1, expected failures=1)"
    assert _text(FIXTURES / "mocha/mixed/plain.meta.json").summary[:4] == (11, 3, 6, 2)
    assert _text(FIXTURES / "bun/mixed/plain.meta.json").summary[:4] == (9, 2, 5, 2)
    txt = (FIXTURES / "unittest/mixed/plain.txt").read_text(encoding="utf-8")
    assert "Ran 10 tests" in txt and "FAILED (failures=4, errors=3, skipped=1, expected failures=1)" in txt
    assert _text(FIXTURES / "unittest/mixed/plain.meta.json").summary[:4] == (11, 2, 7, 2)


# unittest's rows of dots and -v lines share their line with whatever a test prints (the
# mixed suite prints), so live progress is exact on the green suite only
@pytest.mark.parametrize(("fx", "framework"), [("mocha/mixed/plain", "mocha"), ("bun/mixed/plain", "bun"),
                                               ("bun/mixed/color", "bun"), ("mocha/mixed/color", "mocha"),
                                               ("unittest/green/v", "unittest"),
                                               ("unittest/green/plain", "unittest")])
def test_live_progress_counts_each_finished_test(fx: str, framework: str) -> None:
    lines = (FIXTURES / f"{fx}.txt").read_text(encoding="utf-8").splitlines()
    seen = {"pass": 0, "fail": 0, "skip": 0}
    for line in lines:
        for ev, n in (progress_counts(framework, line) or {}).items():
            seen[ev] += n
    summary = _text(FIXTURES / f"{fx}.meta.json").summary
    assert seen["pass"] == summary.passed and seen["skip"] == summary.skipped
    assert seen["fail"] <= summary.failed  # errors outside tests have no result line
    assert (seen["fail"] > 0) == (summary.failed > 0)
    assert progress_event(framework, "nothing to see") is None


def test_a_report_that_is_missing_or_foreign_is_not_recognized(tmp_path: Path) -> None:
    for fmt in ("mocha-json", "unittest-json", "bun-junit"):
        missing = parse_report(fmt, str(tmp_path / "none"))
        assert not missing.recognized and "missing" in missing.notes[0]
        bad = tmp_path / f"bad-{fmt}"
        bad.write_text('{"x": 1}' if fmt != "bun-junit" else "<html/>")
        assert not parse_report(fmt, str(bad)).recognized


def test_text_parsers_are_total_on_garbage() -> None:
    for fw in ("mocha", "unittest", "bun"):
        res = parse_text(fw, ["\x00\xff", "=" * 70, "FAIL: ", "-" * 70, "  1) ", "(fail) ", "Ran x"])
        assert not res.recognized and res.notes


# ------------------------------------------------------------------ probe


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    (root / ".git").mkdir(exist_ok=True)
    return root


UNITTEST_FILE = "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"
BUN_FILE = "import { it } from 'bun:test'\nit('a', () => {})\n"


@pytest.mark.parametrize(("files", "framework", "config"), [
    ({"package.json": '{"devDependencies": {"mocha": "12"}}'}, "mocha", "package.json"),
    ({"package.json": "{}", ".mocharc.yml": "spec: test/**/*.js\n"}, "mocha", ".mocharc.yml"),
    ({"package.json": '{"scripts": {"test": "mocha --recursive"}}'}, "mocha", "package.json"),
    ({"package.json": '{"devDependencies": {"mocha": "12", "vitest": "4"}}'}, "vitest", "package.json"),
    ({"package.json": '{"devDependencies": {"mocha": "12", "jest": "30"}}'}, "jest", "package.json"),
    ({"package.json": '{"scripts": {"test": "bun test"}}'}, "bun", "package.json"),
    ({"package.json": '{"scripts": {"test": "tsc && bun test --coverage"}}'}, "bun", "package.json"),
    ({"package.json": '{"scripts": {"test": "bun run build"}}'}, "npm-test", "package.json"),
    ({"package.json": "{}", "bun.lock": "{}", "a.test.ts": BUN_FILE}, "bun", None),
    ({"package.json": "{}", "bun.lockb": "x", "a.test.ts": "import test from 'node:test'\n"}, "node:test",
     None),
    ({"package.json": "{}", "a.test.ts": BUN_FILE}, "node:test", None),  # no bun lockfile
    ({"test_a.py": UNITTEST_FILE, "tests/__init__.py": "", "tests/test_b.py": UNITTEST_FILE}, "unittest",
     None),
    ({"tests/test_b.py": UNITTEST_FILE}, "pytest", None),  # not a package: unittest would not find it
    ({"test_a.py": UNITTEST_FILE, "test_b.py": "def test_b():\n    assert 1\n"}, "pytest", None),
    ({"test_a.py": UNITTEST_FILE + "import pytest\n"}, "pytest", None),
    ({"test_a.py": UNITTEST_FILE + "    @pytest.mark.slow\n    def test_b(self):\n        pass\n"}, "pytest",
     None),
    # the word alone is no import: still unittest, still node:test
    ({"test_a.py": "# ported from pytest\n" + UNITTEST_FILE, "test_b.py": UNITTEST_FILE}, "unittest", None),
    ({"package.json": "{}", "bun.lock": "{}", "a.test.ts": "// not bun:test\nimport test from 'node:test'\n"},
     "node:test", None),
    ({"test_a.py": UNITTEST_FILE, "conftest.py": ""}, "pytest", "conftest.py"),
    ({"test_a.py": UNITTEST_FILE, "pyproject.toml": "[tool.pytest.ini_options]\n"}, "pytest",
     "pyproject.toml"),
    ({"a_test.py": UNITTEST_FILE}, "pytest", None),  # unittest discovers test*.py only
])
def test_probe_rules(tmp_path: Path, files: dict[str, str], framework: str, config: str | None) -> None:
    d = probe(str(_write(tmp_path / "ws", files)))
    assert (d.framework, d.config_path) == (framework, config), d.notes
    assert d.command, d


def test_probe_names_each_new_runners_command(tmp_path: Path) -> None:
    # the command `greenloop run` starts (toolchain.runner_command); what is missing is a note
    mocha = probe(str(_write(tmp_path / "m", {"package.json": '{"devDependencies": {"mocha": "12"}}'})))
    assert mocha.command == ("mocha",)
    assert any("would not start" in n and "npm install -D mocha" in n for n in mocha.notes)
    (tmp_path / "m" / "node_modules" / ".bin").mkdir(parents=True)
    (tmp_path / "m" / "node_modules" / ".bin" / "mocha").write_text("")
    os.chmod(tmp_path / "m" / "node_modules" / ".bin" / "mocha", 0o755)
    assert probe(str(tmp_path / "m")).command == (str(tmp_path / "m" / "node_modules" / ".bin" / "mocha"),)
    bun_files = {"package.json": '{"scripts": {"test": "bun test"}}', "bun.lock": ""}
    bun = probe(str(_write(tmp_path / "b", bun_files)))
    assert bun.command[-1] == "test" and bun.command[0].endswith("bun") and bun.package_manager == "bun"
    unit = probe(str(_write(tmp_path / "u", {"test_a.py": UNITTEST_FILE})))
    assert unit.command[-2:] == ("-m", "unittest") and unit.test_files == ("test_a.py",)
    assert any("unittest.TestCase" in n for n in unit.notes)


# ------------------------------------------------------------------ plan


def _plan(framework: str, root: Path, previous: RunResult | None = None, **opts: Any) -> Any:
    det = Detection(framework=framework, root=str(root))
    return plan(det, RunOptions(**opts), report_dir=str(root / "run"), default_timeout_ms=1000,
                previous=previous, env={}, which=lambda name: f"/usr/bin/{name}")


def _previous(*failures: Failure) -> RunResult:
    return RunResult(run_id="run-1", ok=False, outcome="red", framework=None, command="", exit_code=1,
                     failures=failures)


def test_plan_mocha(tmp_path: Path) -> None:
    ws = _write(tmp_path / "ws", {"test/a.spec.js": "", "node_modules/.bin/mocha": ""})
    os.chmod(ws / "node_modules/.bin/mocha", 0o755)
    p = _plan("mocha", ws)
    assert p.argv[0].endswith("node_modules/.bin/mocha") and p.unavailable is None
    assert p.argv[1] == "--reporter" and p.argv[2].endswith("greenloop-mocha-reporter.cjs")
    assert p.argv[3:] == ("--reporter-option", f"output={ws}/run/report.json")
    assert p.report_format == "mocha-json"
    assert dict(p.env)["GREENLOOP_MOCHA_REPORT"] == f"{ws}/run/report.json"
    comma = _write(tmp_path / "a,b", {"node_modules/.bin/mocha": ""})
    os.chmod(comma / "node_modules/.bin/mocha", 0o755)
    assert "--reporter-option" not in _plan("mocha", comma).argv  # mocha would cut the path at the comma
    prev = _previous(Failure(test="math > adds (1+1)", file="test/a.spec.js"),
                     Failure(test='db > "before all" hook for "reads"', kind="hook"))
    lf = _plan("mocha", ws, prev, last_failed=True)
    assert lf.argv[-2:] == ("--grep", r"^(?:math adds \(1\+1\)$|db )")
    assert lf.selection == "last_failed"
    missing = _plan("mocha", tmp_path)
    assert missing.unavailable and "npm install -D mocha" in missing.unavailable


def test_plan_bun(tmp_path: Path) -> None:
    ws = _write(tmp_path / "ws", {"a.test.ts": ""})
    p = _plan("bun", ws, target="a.test.ts")
    assert p.argv == ("/usr/bin/bun", "test", "--reporter=junit", f"--reporter-outfile={ws}/run/report.xml",
                      "./a.test.ts")
    assert p.report_format == "bun-junit" and any("PATH" in n for n in p.notes)
    prev = _previous(Failure(test="math > adds", file="a.test.ts"))
    lf = _plan("bun", ws, prev, last_failed=True)
    assert lf.argv[-2:] == ("-t", "^(?:math(?: > | › | )adds$)")
    hook = _plan("bun", ws, _previous(Failure(test="db > (unnamed)", file="a.test.ts", kind="hook")),
                 last_failed=True)
    assert hook.argv[-2:] == ("-t", "^(?:db(?: > | › | ))")  # the tests under the hook
    top = _plan("bun", ws, _previous(Failure(test="(unnamed)", file="a.test.ts", kind="hook")),
                last_failed=True)
    assert "-t" not in top.argv and top.selection is None  # a top-level hook: the whole suite
    assert any("ran the full suite" in n for n in top.notes)
    none = plan(Detection(framework="bun", root=str(ws)), RunOptions(), report_dir=str(ws),
                default_timeout_ms=1, env={}, which=lambda name: None)
    assert none.unavailable and "bun" in none.unavailable


def test_plan_unittest(tmp_path: Path) -> None:
    ws = _write(tmp_path / "ws", {"test_a.py": UNITTEST_FILE})
    p = _plan("unittest", ws, target="test_a.T")
    assert p.argv[1:] == ("-m", "_greenloop_unittest", "test_a.T")
    env = dict(p.env)
    assert env["PYTHONPATH"] == UNITTEST_RUNNER_DIR
    assert env["GREENLOOP_UNITTEST_REPORT"].endswith("report.json")
    assert not any("not a path" in n for n in p.notes)  # a dotted id is a target unittest takes
    prev = _previous(Failure(test="test_a.T.test_x"), Failure(test="test_a.T.test_y (n=2)"),
                     Failure(test="setUpClass (test_b.U)", kind="hook"), Failure(test="test_c", kind="load"))
    lf = _plan("unittest", ws, prev, last_failed=True)
    assert lf.argv[3:] == ("test_a.T.test_x", "test_a.T.test_y", "test_b.U", "test_c")
    venv = _write(tmp_path / "v", {".venv/bin/python": "", ".venv/pyvenv.cfg": "home = /usr\n"})
    vp = _plan("unittest", venv)
    assert vp.argv[0] == str(venv / ".venv/bin/python") and vp.unavailable is None  # pytest not needed


def test_bun_cache_goes_where_the_sandbox_mode_can_write(tmp_path: Path) -> None:
    from greenloop.system import sandbox
    from greenloop.system.env import child_env

    writable = child_env({"PATH": "/usr/bin"}, sandbox.resolve(tmp_path, explicit="workspace-write"))
    assert writable["BUN_INSTALL_CACHE_DIR"] == os.path.join(str(tmp_path), ".greenloop", "cache", "bun")
    read_only = child_env({"PATH": "/usr/bin"}, sandbox.resolve(tmp_path, explicit="read-only"))
    assert read_only["BUN_INSTALL_CACHE_DIR"].startswith("/tmp/")


@pytest.mark.parametrize(("first", "runner"), [("> mocha", "mocha"), ("$ bun test", "bun"),
                                               ("> python -m unittest -v", "unittest"),
                                               ("bun test v1.4.5 (a7733435c)", "bun")])
def test_npm_test_output_is_sniffed_as_the_new_runners(first: str, runner: str) -> None:
    from greenloop.frameworks.npm_test import sniff

    assert sniff(first) == runner


@pytest.mark.parametrize("fx", ["mocha/mixed/plain", "bun/mixed/plain", "unittest/mixed/v"])
def test_npm_test_parses_the_new_runners_output_without_a_script_line(fx: str) -> None:
    direct = _text(FIXTURES / f"{fx}.meta.json")
    with (FIXTURES / f"{fx}.txt").open(encoding="utf-8") as fh:
        via_npm = parse_text("npm-test", fh)
    assert via_npm.summary == direct.summary and via_npm.recognized


def test_the_stream_names_the_tests_still_running(tmp_path: Path) -> None:
    from greenloop.frameworks.stream import running_tests

    record = tmp_path / "stream.ndjson"
    record.write_text(
        '{"start": "a > ok", "file": "' + str(tmp_path) + '/test/a.js"}\n'
        '{"end": "a > ok"}\n'
        '{"start": "t.T.test_x", "file": "t.py", "line": 7}\n'
        '{"start": "a > hangs", "fi'  # torn by the kill
    )
    assert running_tests(str(record), str(tmp_path)) == [("t.T.test_x", "t.py", 7)]
    assert running_tests(str(tmp_path / "missing")) == []
    serial = tmp_path / "serial.ndjson"
    serial.write_text('{"start": "a > one", "serial": true}\n'
                      '{"start": "a > two", "file": "a.js", "serial": true}\n')
    assert running_tests(str(serial)) == [("a > two", "a.js", None)]
    with serial.open("a") as fh:
        fh.write('{"done": true}\n')  # the run ended: nothing was running
    assert running_tests(str(serial)) == []


# The tests each mixed suite skips (mocha: pending; unittest: skipped and expected failures;
# bun: skip and todo), named as that runner names its failures.
SKIPPED = {
    "mocha": {"math > nested ünïcode ✓ > is skipped", "math > nested ünïcode ✓ > is pending"},
    "unittest": {"test_calc.TestCalc.test_skipped", "test_calc.TestCalc.test_known_bug"},
    "bun": {"math > nested ünïcode ✓ > is skipped", "math > nested ünïcode ✓ > is todo"},
}


@pytest.mark.parametrize("meta_path", [p for p in CAPTURES if p.parts[-2] == "mixed"], ids=_id)
def test_skipped_tests_are_named_like_failures(meta_path: Path) -> None:
    meta = _meta(meta_path)
    framework = meta["framework"]
    report = _report(meta_path, root=meta["cwd"])
    assert set(report.skipped_tests) == SKIPPED[framework]
    assert len(report.skipped_tests) == report.summary.skipped
    text = _text(meta_path, root=meta["cwd"])
    if framework != "unittest" or meta["variant"] == "v":  # the dots row names no test
        assert sorted(text.skipped_tests) == sorted(report.skipped_tests)
    else:
        assert text.skipped_tests == ()


def test_bun_files_that_fail_on_a_module_bun_reported_once_get_its_error() -> None:
    """issue 30, item 3: bun prints a module's load error for the first test file that imports
    it and an empty block for every later one (elysia: 127 of 128 with no message). Each later
    file gets the earlier error, said to be bun's report of another file; the run is broken."""
    meta = FIXTURES / "bun/sharedload/plain.meta.json"
    from greenloop.frameworks.bun import with_text_errors

    text = _text(meta)
    merged = with_text_errors(_report(meta), text)
    for res in (text, merged):
        loads = {f.test: f.message for f in res.failures if f.kind == "load"}
        assert sorted(loads) == ["test/cart.test.ts", "test/orders.test.ts", "test/users.test.ts"], loads
        first = loads.pop("test/cart.test.ts")
        assert first.startswith("Cannot find package 'not-installed-pkg'") and "bun printed" not in first
        for message in loads.values():
            head, said = message.split("\n", 1)
            assert head == first.splitlines()[0] and "here test/cart.test.ts" in said, message
        assert res.load_error and "failed to load" not in res.load_error, res.load_error
