"""Every captured fixture: the text parse agrees with the runner's own report of the same run.

Counts exact, every failing test of the report found by name in the text, none invented,
load failures on both sides. Then exact expected/got and file:line for chosen failures.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop.frameworks import parse_report, parse_text
from greenloop.model import Failure, ParseResult, Summary

FIXTURES = Path(__file__).parent / "fixtures"
RUNNER_DIRS = ("vitest", "jest", "pytest", "node_test", "npm_test")
CAPTURES = [p for d in RUNNER_DIRS for p in sorted((FIXTURES / d).glob("*/*.meta.json"))]


def _meta(path: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return meta


def _text(meta_path: Path, root: str | None = None) -> ParseResult:
    meta = _meta(meta_path)
    txt = meta_path.with_name(meta_path.name.replace(".meta.json", ".txt"))
    with txt.open(encoding="utf-8", newline="") as fh:
        return parse_text(meta["framework"], fh, root=root)


def _report(meta_path: Path, root: str | None = None) -> ParseResult:
    meta = _meta(meta_path)
    assert meta["report"], f"{meta_path} has no report beside it"
    return parse_report(meta["report_format"], str(meta_path.with_name(meta["report"])), root=root)


# What a runner's report cannot show although the run failed on it (asserted, not hidden):
# vitest's JSON has no entry for an unhandled error. (node's junit reporter would drop a failing
# after-hook; node:test's fixtures are reported in TAP written to a file, as greenloop plans.)
def _blind(meta: dict[str, Any], f: Failure) -> bool:
    return f.test.startswith("unhandled error: ")


# suites whose runner stops before running a test (test_runner_error_is_the_crash_reason)
CRASHES = {"tsconfig"}


def _key(f: Failure) -> tuple[str, str]:
    # A file that failed to load is named after the file: compare by its base name, since
    # the text shows it relative and some reports absolute.
    if f.kind == "load":
        return ("load", Path(f.test).name)
    return (f.kind, f.test)


def _id(p: Path) -> str:
    return str(p.relative_to(FIXTURES)).replace(".meta.json", "")


def test_fixture_set_is_complete_and_small() -> None:
    frameworks = {p.parts[-3] for p in CAPTURES}
    assert frameworks == {"vitest", "jest", "pytest", "node_test", "npm_test"}
    variants = {(p.parts[-3], p.name.replace(".meta.json", "")) for p in CAPTURES}
    for needed in [("vitest", "plain"), ("vitest", "color"), ("vitest", "agent"), ("vitest", "github"),
                   ("jest", "plain"), ("jest", "color"), ("jest", "verbose"), ("pytest", "q"),
                   ("pytest", "v"), ("pytest", "rA"), ("pytest", "color"), ("pytest", "plugin"),
                   ("node_test", "tap"),
                   ("node_test", "spec"), ("node_test", "spec-color")]:
        assert needed in variants
    total = sum(f.stat().st_size for d in RUNNER_DIRS for f in (FIXTURES / d).rglob("*") if f.is_file())
    assert total < 2 * 1024 * 1024
    for p in CAPTURES:
        txt = p.with_name(p.name.replace(".meta.json", ".txt"))
        assert txt.stat().st_size < 32 * 1024, txt


@pytest.mark.parametrize("meta_path", CAPTURES, ids=_id)
def test_text_parse_matches_report(meta_path: Path) -> None:
    meta = _meta(meta_path)
    if meta["suite"] in CRASHES:  # the runner stopped before any test: no report to compare
        assert meta["report"] is None and meta["exit_code"] != 0
        assert not _text(meta_path).recognized
        return
    text = _text(meta_path, root=meta["cwd"])
    report = _report(meta_path, root=meta["cwd"])
    assert report.recognized, report.notes
    assert text.recognized, text.notes
    unhandled = [f for f in text.failures if _blind(meta, f)]
    n = len(unhandled)
    rs = report.summary
    assert text.summary == rs._replace(failed=rs.failed + n, total=rs.total + n)
    text_keys = sorted(_key(f) for f in text.failures if f not in unhandled)
    report_keys = sorted(_key(f) for f in report.failures)
    assert text_keys == report_keys  # every failure found by name, none invented
    assert (text.load_error is None) == (report.load_error is None)
    # the runner's exit code agrees with what was parsed (a failing suite hook of node:test is
    # a failure record that node's counts leave out)
    assert (meta["exit_code"] == 0) == (text.summary.failed == 0 and not text.failures)
    for f in text.failures:
        # hints are built elsewhere, but for vitest's "no test suite found" (its words, no rule's)
        assert f.hint == "" or f.message.endswith(f"No test suite found in file {f.test}")
        assert f.kind in ("test", "load", "hook", "cancelled")


@pytest.mark.parametrize("meta_path", CAPTURES, ids=_id)
def test_text_parse_without_root_is_the_same_count(meta_path: Path) -> None:
    assert _text(meta_path).summary == _text(meta_path, root=_meta(meta_path)["cwd"]).summary


def _find(res: ParseResult, name: str) -> Failure:
    matches = [f for f in res.failures if f.test == name]
    assert matches, f"{name!r} not in {[f.test for f in res.failures]}"
    return matches[0]


def _fx(framework: str, suite: str, variant: str) -> Path:
    return FIXTURES / framework / suite / f"{variant}.meta.json"


# (fixture, test name, file, line, expected, got) asserted exactly on text and report
EXACT = [
    (("vitest", "mixed", "plain"), "math > adds wrong", "math.test.js", 9, "4", "3"),
    (("vitest", "mixed", "plain"), "math > add(2, 2) = 5", "math.test.js", 22, "5", "4"),
    (("jest", "mixed", "plain"), "math › adds wrong", "math.test.js", 8, "4", "3"),
    (("jest", "mixed", "plain"), "ünïcödé 名前 [bracket] - dash > arrow", "math.test.js", 32, '"e"', '"é"'),
    (("pytest", "mixed", "plain"), "test_calc.py::test_adds_wrong", "test_calc.py", 11, "4", "3"),
    (("pytest", "mixed", "v"), "test_calc.py::test_param[2-2-5]", "test_calc.py", 34, "5", "4"),
    (("pytest", "mixed", "plugin"), "test_calc.py::test_adds_wrong", "test_calc.py", 11, "4", "3"),
    (("pytest", "mixed", "plugin"), "test_calc.py::test_param[2-2-5]", "test_calc.py", 34, "5", "4"),
    (("node_test", "mixed", "tap"), "math > adds wrong", "math.test.mjs", 10, "4", "3"),
    (("node_test", "mixed", "spec"), "parent with subtests > sub fails", "math.test.mjs", 26, "'b'", "'a'"),
]


@pytest.mark.parametrize(("fx", "name", "file", "line", "expected", "got"), EXACT,
                         ids=[f"{'/'.join(e[0])}:{e[1]}" for e in EXACT])
def test_expected_got_and_location_exact(
    fx: tuple[str, str, str], name: str, file: str, line: int, expected: str, got: str
) -> None:
    meta_path = _fx(*fx)
    root = _meta(meta_path)["cwd"]
    f = _find(_text(meta_path, root=root), name)
    assert (f.file, f.line, f.expected, f.got) == (file, line, expected, got)
    assert f.message
    assert f.stack and "node_modules" not in f.stack and "node:internal" not in f.stack
    r = _find(_report(meta_path, root=root), name)
    assert (r.file, r.line) == (file, line)
    assert r.expected is not None and r.got is not None


def test_report_assertion_objects_become_expected_and_got() -> None:
    r = _find(_report(_fx("jest", "mixed", "plain"), root="/tmp/greenloop-capture/jest-mixed"),
              "math › nested > deeper › compares objects")
    assert json.loads(r.expected or "") == {"id": 1, "name": "b", "tags": ["x", "y"]}
    assert json.loads(r.got or "") == {"id": 1, "name": "a", "tags": ["x"]}
    n = _find(_report(_fx("node_test", "mixed", "tap")), "math > nested > deeper > compares objects")
    assert "name: 'b'" in (n.expected or "") and "name: 'a'" in (n.got or "")


def test_text_diff_rebuilds_both_sides() -> None:
    f = _find(_text(_fx("vitest", "mixed", "plain")), "math > nested > deeper > compares objects")
    assert f.expected is not None and '"name": "b"' in f.expected and '"y"' in f.expected
    assert f.got is not None and '"name": "a"' in f.got and '"y"' not in f.got
    j = _find(_text(_fx("jest", "mixed", "plain")), "math › nested > deeper › compares objects")
    assert j.expected is not None and '"name": "b"' in j.expected
    assert j.got is not None and '"name": "a"' in j.got


def test_counting_rules_on_real_output() -> None:
    # vitest leaves load failures and the failed beforeAll out of "6 failed": both are added.
    v = _text(_fx("vitest", "mixed", "plain"))
    assert (v.summary.failed, v.summary.passed, v.summary.skipped) == (6 + 2 + 1, 3, 3 + 1)
    assert {f.kind for f in v.failures if f.test == "db suite"} == {"hook"}
    assert sorted(f.test for f in v.failures if f.kind == "load") == ["broken.test.js", "syntax.test.js"]
    # jest: "Test suite failed to run" is not in "8 failed": added as one failure per file.
    j = _text(_fx("jest", "mixed", "plain"))
    assert j.summary.failed == 8 + 2 and j.summary.skipped == 2  # skip + todo
    # pytest: as its closing line counts (xfail skipped, xpass passed, strict xpass failed,
    # a teardown error after a pass: one passed and one failed).
    p = _text(_fx("pytest", "mixed", "q"))
    assert (p.summary.failed, p.summary.passed, p.summary.skipped) == (8 + 3, 4 + 1, 1 + 1)
    assert _find(p, "test_calc.py::test_xpass_strict").kind == "test"
    assert _find(p, "test_calc.py::test_teardown_error").kind == "hook"
    assert _find(p, "test_calc.py::test_missing_fixture").message == "fixture 'no_such_fixture' not found"
    # node:test: as node counts (a test() whose subtest failed fails too; a test cancelled by
    # its suite's before-hook fails; todo and skip are skipped), each failure recorded once.
    n = _text(_fx("node_test", "mixed", "tap"))
    assert (n.summary.failed, n.summary.passed, n.summary.skipped) == (7 + 1, 2, 1 + 1)
    assert not any(f.test in ("math", "parent with subtests") for f in n.failures)
    assert _find(n, "db suite").kind == "hook"


def test_names_keep_unicode_brackets_arrows_and_dashes() -> None:
    for fx, name in [
        (("vitest", "mixed", "agent"), "ünïcödé 名前 [bracket] - dash > arrow"),
        (("vitest", "mixed", "github"), "ünïcödé 名前 [bracket] - dash > arrow"),
        (("jest", "mixed", "color"), "ünïcödé 名前 [bracket] - dash > arrow"),
        (("node_test", "mixed", "spec-color"), "ünïcödé 名前 [bracket] - dash > arrow"),
        (("pytest", "mixed", "rA"),
         "test_calc.py::test_param[\\xfcn\\xefc\\xf6d\\xe9 \\u540d\\u524d [x] - dash > arrow]"),
    ]:
        _find(_text(_fx(*fx)), name)


def test_load_failures_name_the_file_and_set_load_error() -> None:
    for fx, name, needle in [
        (("vitest", "loadfail", "plain"), "server.test.js", "invalid JS syntax"),
        (("jest", "loadfail", "plain"), "server.test.js", "unexpected token"),
        (("pytest", "loadfail", "q"), "test_server.py", "SyntaxError"),
        (("node_test", "loadfail", "spec"), "server.test.mjs", "SyntaxError"),
    ]:
        res = _text(_fx(*fx), root=_meta(_fx(*fx))["cwd"])
        assert [f.kind for f in res.failures] and all(f.kind == "load" for f in res.failures)
        assert any(Path(f.test).name == name for f in res.failures)
        assert res.load_error and needle.lower() in res.load_error.lower()


def test_github_annotations_alone_still_name_the_failures() -> None:
    lines = [ln for ln in (FIXTURES / "vitest/mixed/github.txt").read_text(encoding="utf-8").splitlines()
             if ln.startswith("::error")]
    res = parse_text("vitest", lines)
    names = {f.test for f in res.failures}
    assert "math > add(2, 2) = 5" in names  # %2C unescaped in the title
    assert "ünïcödé 名前 [bracket] - dash > arrow" in names
    f = _find(res, "math > adds wrong")
    assert (f.line, f.expected, f.got) == (9, "4", "3")
    assert not res.recognized  # no closing line: counts are only what was seen


def test_vitest_unhandled_error_fails_the_parse() -> None:
    for variant in ("plain", "agent"):
        res = _text(_fx("vitest", "unhandled", variant))
        assert res.summary.passed == 2 and res.summary.failed == 1
        (f,) = res.failures
        assert f.test == "unhandled error: Error: late failure after the test"
        assert (f.file, f.line) == ("late.test.js", 3)
    report = _report(_fx("vitest", "unhandled", "plain"))
    assert report.summary.failed == 0  # the report cannot see it: the exit code (1) must decide


def test_after_all_hooks_count_once_named_after_suite_or_file() -> None:
    cases = [("vitest", "afterall", "plain"), ("vitest", "afterall", "agent"), ("jest", "afterall", "plain")]
    for fx in cases:
        root = _meta(_fx(*fx))["cwd"]
        text, report = _text(_fx(*fx), root=root), _report(_fx(*fx), root=root)
        assert (text.summary.passed, text.summary.failed) == (2, 2)
        assert all(f.kind == "hook" for f in text.failures + report.failures)
        assert text.load_error is None and report.load_error is None  # not a load failure
        by_name = {f.test: f for f in text.failures}
        top = by_name["top.test.js"]
        assert (top.file, top.message.endswith("top-level teardown failed")) == ("top.test.js", True)
    vitest_names = {f.test for f in _text(_fx("vitest", "afterall", "plain")).failures}
    assert vitest_names == {"cleanup suite", "top.test.js"}


def test_node_tap_report_keeps_after_hooks() -> None:
    # The TAP reporter written to a file (report format "node-tap") sees the failing after
    # hook (node's junit reporter drops it). Node counts the suite's one test as passed.
    tap = _report(_fx("node_test", "afterall", "tap"))
    assert tap.recognized and (tap.summary.passed, tap.summary.failed) == (1, 0)
    assert [(f.kind, f.test) for f in tap.failures] == [("hook", "cleanup suite")]
    assert any("suite hook(s) failed (cleanup suite)" in n for n in tap.notes)
    assert not parse_report("node-tap", str(FIXTURES / "nope.txt")).recognized


_NODE_SUMMARY = re.compile(r"^(?:# |ℹ )(tests|pass|fail|cancelled|skipped|todo) (\d+)$")


def _node_own_counts(path: Path) -> dict[str, int]:
    """node's own closing lines of a captured run, read here with nothing from the parser."""
    counts: dict[str, int] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = _NODE_SUMMARY.match(re.sub(r"\x1b\[[0-9;]*m", "", line))
        if m:
            counts[m.group(1)] = counts.get(m.group(1), 0) + int(m.group(2))
    return counts


NODE_CAPTURES = [p for p in CAPTURES if _meta(p)["framework"] == "node:test"
                 or (p.parts[-3] == "npm_test" and p.name.startswith("node_test"))]


@pytest.mark.parametrize("meta_path", NODE_CAPTURES, ids=_id)
def test_node_counts_equal_nodes_own_summary(meta_path: Path) -> None:
    # total = tests, passed = pass, failed = fail + cancelled, skipped = skipped + todo, in
    # every reporter (the text printed, the TAP report of the same run).
    own = _node_own_counts(meta_path.with_name(meta_path.name.replace(".meta.json", ".txt")))
    assert own["tests"] == own["pass"] + own["fail"] + own["cancelled"] + own["skipped"] + own["todo"]
    expected = Summary(total=own["tests"], passed=own["pass"], failed=own["fail"] + own["cancelled"],
                       skipped=own["skipped"] + own["todo"])
    assert _text(meta_path).summary == expected
    assert _report(meta_path).summary == expected
    assert _node_own_counts(meta_path.with_name(_meta(meta_path)["report"]))["tests"] == own["tests"]


def test_node_tap_entries_count_like_node_without_its_summary() -> None:
    # A run cut short never prints the closing lines: counting TAP's entries by node's rule
    # (describe = suite; skip/todo whatever the result; cancelled = failed) gives the same.
    for suite in ("hooks", "mixed", "afterall", "loadfail", "green"):
        path = FIXTURES / "node_test" / suite / "tap.txt"
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not _NODE_SUMMARY.match(ln)]
        cut = parse_text("node:test", lines)
        assert not cut.recognized
        assert cut.summary == _text(_fx("node_test", suite, "tap")).summary, suite


def test_node_hooks_suite_records() -> None:
    # the hooks suite: 33 tests, 9 pass, 9 fail + 6 cancelled, 4 skipped + 5 todo
    for variant in ("tap", "spec", "spec-color"):
        res = _text(_fx("node_test", "hooks", variant))
        assert res.summary == Summary(total=33, passed=9, failed=15, skipped=9), variant
        kinds = {f.test: f.kind for f in res.failures}
        assert kinds["cart > with a database"] == "hook"  # before(): one record, its 4 tests cancelled
        # each cancelled test a record of its own (node counts them failed), at the hook's failure
        hook = _find(res, "cart > with a database")
        cancelled = [f for f in res.failures if f.test.startswith("cart > with a database > ")]
        assert sorted(f.test.rsplit(" > ", 1)[1] for f in cancelled) == [
            "commits", "reads a row", "rolls back", "writes a row"], variant
        for f in cancelled:
            assert (f.kind, f.file, f.line) == ("cancelled", hook.file, hook.line)
            assert f.message.startswith("cancelled: a hook of 'cart > with a database' failed (")
            assert "connect ECONNREFUSED 127.0.0.1:5432" in f.message
        assert kinds["orders > checkout > charges the card"] == "cancelled"
        # every test node counts cancelled (its `cancelled 6` line) has a record of its own
        assert sum(1 for f in res.failures if f.message.startswith("cancelled")) == 6
        assert kinds["cart > with a temp folder"] == "hook"  # after() once its tests passed
        assert kinds["cart > with a cache > second read"] == "hook"  # beforeEach
        assert kinds["orders > history > lists orders"] == "hook"  # afterEach
        assert kinds["unawaited subtest is cancelled > too late"] == "test"  # cancelled, no hook to blame
        assert not any("todo" in t for t in kinds)  # a failing todo is todo, not a failure
        assert "parent with subtests" not in kinds and "cart" not in kinds


def test_npm_test_sniffs_each_runner() -> None:
    for variant, runner in [("vitest", "vitest"), ("jest", "jest"), ("node_test", "node:test")]:
        res = _text(FIXTURES / "npm_test" / "mixed" / f"{variant}.meta.json")
        assert f"npm test output parsed as {runner}" in res.notes
        assert res.recognized


NODE_MODULES = Path(__file__).parent / "runners" / "node_modules"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_capture_script_against_installed_runners(tmp_path: Path) -> None:
    """Regenerate captures with the runners installed now: the parsers still agree with each
    report and with the committed fixtures' counts (catches a runner changing its format)."""
    frameworks = ["pytest", "node_test"] + (["vitest"] if (NODE_MODULES / "vitest").is_dir() else [])
    script = Path(__file__).parent.parent / "scripts" / "capture_fixtures"
    proc = subprocess.run([sys.executable, str(script), "--out", str(tmp_path), "--variants", "plain,tap",
                           *frameworks],
                          capture_output=True, text=True, timeout=230, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh = sorted(tmp_path.glob("*/*/*.meta.json"))
    assert len(fresh) >= 10
    for meta_path in fresh:
        meta = _meta(meta_path)
        text, report = _text(meta_path, root=meta["cwd"]), _report(meta_path, root=meta["cwd"])
        committed = FIXTURES / meta_path.relative_to(tmp_path)
        assert text.recognized and report.recognized, meta_path
        assert text.summary == _text(committed).summary, meta_path
        blind = sum(1 for f in text.failures if _blind(meta, f))
        assert text.summary.failed == report.summary.failed + blind, meta_path
        assert sorted(_key(f) for f in text.failures if not _blind(meta, f)) == \
            sorted(_key(f) for f in report.failures), meta_path


def test_vitest_values_come_whole_from_the_printed_diff() -> None:
    # vitest's JSON report has only chai's message, whose values are shortened ('…') or left
    # out (toThrow); the text output of the same run prints them whole, and run.py takes them
    # from there. A value longer than MAX_VALUE_CHARS is cut and says how much.
    from greenloop.runner.results import with_text_values

    fx = _fx("vitest", "values", "plain")
    root = _meta(fx)["cwd"]
    report, text = _report(fx, root=root), _text(fx, root=root)
    # chai shortens both sides to the same text: the report says nothing rather than that twice
    shortened = _find(report, "values > compares long strings")
    assert (shortened.expected, shortened.got) == (None, None)
    assert "'Unexpected end at index 7, expected }…'" in shortened.message
    assert _find(report, "values > throws the right error").got is None  # the blind spot
    merged = with_text_values(report, text)
    values = {f.test.removeprefix("values > "): (f.expected, f.got) for f in merged.failures}
    assert values["compares long strings"] == (
        '"Unexpected end at index 7, expected } after the last property of the object"',
        '"Unexpected end at index 7, expected } but the stream ended early here"',
    )
    assert values["throws the right error"] == (
        '"Unexpected token"', '"Expected \',\' or \'}\' after property value in JSON at position 7"')
    assert values["throws at all"] == ("null", "undefined")  # vitest's own `- Expected:` block
    exp, got = values["compares objects"]
    assert exp is not None and got is not None
    assert '"name": "cup"' in exp and '"name": "mug"' in got and '"b",' in got and '"b",' not in exp
    assert values["compares null"] == ("{ id: 3 }", "null")  # whole in the report: kept
    exp, got = values["compares a very long text"]
    assert exp is not None and got is not None
    assert exp.endswith('… [cut 1,406 chars]') and got.endswith('… [cut 1,406 chars]')
    assert len(exp) == 4000 + len("… [cut 1,406 chars]")
    assert [f.test for f in merged.failures] == [f.test for f in report.failures]
    assert merged.summary == report.summary


def test_node_tap_null_is_null() -> None:
    # TAP's YAML spells null `~`; the failure says null, as the spec reporter does
    root = _meta(_fx("node_test", "hooks", "tap"))["cwd"]
    tap = _find(_report(_fx("node_test", "hooks", "tap"), root=root), "null actual")
    spec = _find(_text(_fx("node_test", "hooks", "spec"), root=root), "null actual")
    assert tap.got == spec.got == "null"
    assert tap.expected == spec.expected == "{ id: 3 }"  # TAP's YAML mapping in node's own form


def test_pytest_syntax_error_has_file_and_line() -> None:
    # a test file that does not compile, and a test file importing a module that does not:
    # the failure points where Python says the error is, in every source
    for variant, fmt in (("plugin", "report"), ("plugin", "text"), ("plain", "report"), ("plain", "text")):
        fx = _fx("pytest", "syntax", variant)
        root = _meta(fx)["cwd"]
        res = _report(fx, root=root) if fmt == "report" else _text(fx, root=root)
        located = {f.test: (f.kind, f.file, f.line) for f in res.failures}
        assert located == {
            "test_broken_syntax.py": ("load", "test_broken_syntax.py", 2),
            "test_pricing.py": ("load", "app/pricing.py", 5),
        }, (variant, fmt)
        assert "SyntaxError" in _find(res, "test_pricing.py").message


def test_runner_error_is_the_crash_reason() -> None:
    # jest with a jest.config.ts and no ts-node stops before any test and writes no report;
    # its own words are the crash reason greenloop gives
    from greenloop.frameworks.common import runner_error

    fx = _fx("jest", "tsconfig", "plain")
    text = fx.with_name("plain.txt").read_text(encoding="utf-8").splitlines()
    said = runner_error(text)
    assert said is not None
    assert said.startswith("Error: Jest: Failed to parse the TypeScript config file ")
    assert "Error: Jest: 'ts-node' is required for the TypeScript configuration files" in said
    assert " at " not in said  # no stack frames
    head = _fx("jest", "mixed", "plain").with_name("plain.txt").read_text(encoding="utf-8").splitlines()[:3]
    assert runner_error(head) is None


def test_jest_values_are_whole_and_tothrow_labels_are_read() -> None:
    # jest prints toThrow's values as `Expected substring:` / `Received message:`; both its
    # report and its text carry the values whole (cut past MAX_VALUE_CHARS, saying so)
    fx = _fx("jest", "values", "plain")
    root = _meta(fx)["cwd"]
    for res in (_report(fx, root=root), _text(fx, root=root)):
        values = {f.test.removeprefix("values › "): (f.expected, f.got) for f in res.failures}
        assert values["throws the right error"] == (
            '"Unexpected token"', '"Expected \',\' or \'}\' after property value in JSON at position 7"')
        assert values["compares long strings"][1] == (
            '"Unexpected end at index 7, expected } but the stream ended early here"')
        exp, got = values["compares a very long text"]
        assert exp is not None and got is not None
        assert exp.endswith("… [cut 1,406 chars]") and got.endswith("… [cut 1,406 chars]")
        assert values["compares null"][1] == "null"


# The tests each mixed suite skips, marks xfail or leaves todo, named as that runner names its
# failures (the gate matches a test across runs by that name).
SKIPPED = {
    "vitest": {"math > nested > deeper > skipped one", "math > nested > deeper > todo one",
               "db suite > reads a row", "db suite > writes a row"},  # (its beforeAll threw)
    "jest": {"math › nested > deeper › skipped one", "math › nested > deeper › todo one"},
    "pytest": {"test_calc.py::test_skipped", "test_calc.py::test_xfail"},  # xpasses are no skips
    "node_test": {"math > nested > deeper > skipped one", "math > nested > deeper > todo one"},
}
# the text variants that name each skipped test (the others print only counts or marks)
TEXT_NAMES_SKIPS = {("vitest", "verbose"), ("jest", "verbose"), ("pytest", "v"), ("pytest", "color"),
                    ("node_test", "tap"), ("node_test", "spec"), ("node_test", "spec-color")}


@pytest.mark.parametrize("meta_path", [p for p in CAPTURES if p.parts[-2] == "mixed"
                                       and p.parts[-3] != "npm_test"], ids=_id)
def test_skipped_tests_are_named_like_failures(meta_path: Path) -> None:
    meta = _meta(meta_path)
    framework, variant = meta_path.parts[-3], meta["variant"]
    report = _report(meta_path, root=meta["cwd"])
    assert set(report.skipped_tests) == SKIPPED[framework]
    assert len(report.skipped_tests) == report.summary.skipped
    assert not set(report.skipped_tests) & set(report.passed_tests)
    assert not set(report.skipped_tests) & {f.test for f in report.failures}
    text = _text(meta_path, root=meta["cwd"])
    if (framework, variant) in TEXT_NAMES_SKIPS:
        assert set(text.skipped_tests) == SKIPPED[framework]
        assert sorted(text.passed_tests) == sorted(report.passed_tests)
    else:
        assert set(text.skipped_tests) <= SKIPPED[framework]
        if framework == "pytest" and variant == "rA":  # XFAIL lines name theirs, SKIPPED give a place
            assert text.skipped_tests == ("test_calc.py::test_xfail",)


@pytest.mark.parametrize("meta_path", sorted((FIXTURES / "npm_test" / "mixed").glob("*.meta.json")), ids=_id)
def test_npm_test_keeps_the_runners_names(meta_path: Path) -> None:
    meta = _meta(meta_path)
    text, report = _text(meta_path, root=meta["cwd"]), _report(meta_path, root=meta["cwd"])
    assert set(text.skipped_tests) <= set(report.skipped_tests)
    assert set(text.passed_tests) <= set(report.passed_tests)
    if meta["variant"] == "node_test":  # node's spec reporter names every test
        assert set(text.skipped_tests) == SKIPPED["node_test"]
        assert text.passed_tests


NODE_VALUES = {  # (expected, got) as node prints them: a string in its quotes, an object in one line
    "a string is quoted": ("'abc'", "'ab'"),
    "a string of digits is no number": ("1234567890", "'1234567890'"),
    "an empty string": ("'x'", "''"),
    "a string with a quote: it's": ("'it is'", '"it\'s"'),
    "two lines": ("'one\\nthree'", "'one\\ntwo'"),
    "an object and an array": ("{ id: 1, tags: [ 'a', 'b' ] }", "{ id: 1, tags: [ 'a' ] }"),
}


@pytest.mark.parametrize("variant", ["tap", "spec"])
def test_node_values_keep_their_quotes(variant: str) -> None:
    # TAP's YAML unquotes a string ('ab' reads ab, '1234567890' a number): the values are put
    # back in node's own form, so TAP, the TAP report and the spec reporter say the same
    meta = _fx("node_test", "values", variant)
    for res in (_text(meta), _report(meta)):
        got = {f.test: (f.expected, f.got) for f in res.failures}
        assert got == NODE_VALUES, variant


def test_pytest_values_are_whole_and_never_the_same_text_twice() -> None:
    # pytest's message shortens both tuples to `({'id': 42}, ...timezone.utc))`: the text says
    # nothing rather than the same text twice; greenloop's plugin reads the operands whole
    stamp = "datetime.datetime(2024, 1, 1, 0, 0, {}, tzinfo=datetime.timezone.utc))"
    for meta in (_fx("pytest", "values", "plain"), _fx("pytest", "values", "plugin")):
        for res in (_text(meta), _report(meta)):
            for f in res.failures:
                assert f.expected is None or f.expected != f.got, f
    report = _report(_fx("pytest", "values", "plugin"))
    whole = {f.test.split("::")[1]: (f.expected, f.got) for f in report.failures}
    assert whole["test_tuple_whose_shortened_reprs_are_the_same"] == (
        "({'id': 42}, " + stamp.format(8), "({'id': 42}, " + stamp.format(7))
    assert whole["test_long_text"] == (repr("word " * 60 + "and"), repr("word " * 60 + "end"))
    assert whole["test_long_list"] == (repr([*range(99), 100]), repr(list(range(100))))


@pytest.mark.parametrize(("framework", "line"), [("vitest", 11), ("jest", 10)])
def test_an_error_thrown_in_source_is_placed_at_the_test_with_its_origin(framework: str, line: int) -> None:
    # withProtocol reads `.length` of undefined in src/utils.js: the record's file:line is the
    # test's frame (where the runner's report and an editor put it), the throw site its origin
    from greenloop.runner.results import with_hints

    meta = _fx(framework, "thrown", "plain")
    root = _meta(meta)["cwd"]
    for res in (_text(meta, root=root), _report(meta, root=root)):
        (f,) = res.failures
        assert (f.file, f.line, f.origin) == ("test/utilities.test.js", line, "src/utils.js:9")
        assert f.to_json()["origin"] == "src/utils.js:9"
        (hinted,) = with_hints(res.failures, framework, "en", str(FIXTURES / framework / "thrown" / "src"))
        assert "src/utils.js:9" in hinted.hint  # the origin stays in the hint


def test_a_vitest_file_without_tests_is_no_load_failure() -> None:
    # vitest fails the run (exit 1) for a test file that loaded and declares no test: red, in
    # vitest's words, not broken with "could not load the code under test"
    from greenloop.model import Plan, RawRun
    from greenloop.runner.results import with_hints
    from greenloop.runner.verdict import classify

    meta = _fx("vitest", "notests", "plain")
    root = _meta(meta)["cwd"]
    assert _meta(meta)["exit_code"] == 1
    for res in (_text(meta, root=root), _report(meta, root=root)):
        assert res.summary == Summary(total=2, passed=1, failed=1) and res.load_error is None
        (f,) = with_hints(res.failures, "vitest", "en", str(FIXTURES / "vitest" / "notests" / "src"))
        assert (f.test, f.kind) == ("helpers.test.js", "test")
        assert f.message.endswith("No test suite found in file helpers.test.js")
        assert "could not load" not in f.hint and "import" not in f.hint
        assert "no test in helpers.test.js" in f.hint
        plan = Plan(framework="vitest", argv=("vitest",), cwd=root, timeout_ms=1000)
        raw = RawRun(exit_code=1, timed_out=False, aborted=False, duration_ms=1, stdout_path="",
                     stderr_path="")
        verdict = classify(plan, raw, res, report_ok=True)
        assert (verdict.outcome, verdict.next_action) == ("red", "retry_coder")
