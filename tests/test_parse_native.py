"""go and cargo parsers on captured fixtures (tests/fixtures/go, tests/fixtures/cargo), their
plans (argv, targets, last_failed) and probe rules. The fixtures are real runs of Go 1.19 and
stable cargo; regenerate them with `python scripts/capture_fixtures go cargo`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import greenloop.frameworks.cargo as cargo
import greenloop.frameworks.go as go
from greenloop.frameworks import parse_report, parse_text, progress_event
from greenloop.frameworks.go_plan import run_pattern
from greenloop.frameworks.go_workspace import workspace_env, workspace_patterns
from greenloop.model import Failure, ParseResult, Plan, RawRun
from greenloop.result import RunResult
from greenloop.runner.plan import RunOptions, plan
from greenloop.runner.probe import probe
from greenloop.runner.verdict import classify

FIXTURES = Path(__file__).parent / "fixtures"
WORK = "<work>"


def _text(framework: str, suite: str, variant: str) -> ParseResult:
    """Parse a capture as if it ran in the suite's own folder (go.mod names the module there)."""
    src = str(FIXTURES / framework / suite / "src")
    with (FIXTURES / framework / suite / f"{variant}.txt").open(encoding="utf-8") as fh:
        return parse_text(framework, (line.replace(WORK, src) for line in fh), root=src)


def _names(r: ParseResult) -> set[str]:
    return {f.test for f in r.failures}


def _verdict(parsed: ParseResult, code: int) -> tuple[str, str | None]:
    p = Plan(framework="go", argv=("go",), cwd=".", timeout_ms=1000)
    raw = RawRun(
        exit_code=code, timed_out=False, aborted=False, duration_ms=1, stdout_path="", stderr_path=""
    )
    v = classify(p, raw, parsed, report_ok=None)
    return v.outcome, v.next_action


GO_MIXED_FAILS = {
    "TestSub",
    "TestTable/one_minus_one",
    "TestTable/big_case",
    "TestGreet/ünïcode_名前",
    "TestMultiLine",
    "TestIndexPanics",
}


def test_go_events_and_verbose_text_agree() -> None:
    for suite in ("mixed", "green", "buildfail"):
        events = _text("go", suite, "json")
        verbose = _text("go", suite, "v")
        assert events.recognized and verbose.recognized
        assert events.summary == verbose.summary, suite
        assert _names(events) == _names(verbose), suite
    mixed = _text("go", "mixed", "json")
    assert mixed.summary.to_json() == {"total": 11, "passed": 4, "failed": 6, "skipped": 1}
    assert _names(mixed) == GO_MIXED_FAILS
    assert _verdict(mixed, 1) == ("red", "retry_coder")


def test_go_failure_details() -> None:
    for variant in ("json", "v", "plain"):
        by = {f.test: f for f in _text("go", "mixed", variant).failures}
        sub = by["TestSub"]
        assert (sub.file, sub.line, sub.message) == ("calc/calc_test.go", 17, "Sub(5, 3): got 8, want 2")
        assert (sub.expected, sub.got) == ("2", "8")
        greet = by["TestGreet/ünïcode_名前"]
        assert (greet.expected, greet.got) == ('"hallo wörld"', '"hello wörld"')
        assert by["TestMultiLine"].message == "first problem\nsecond line of it"
        panic = by["TestIndexPanics"]
        assert (panic.file, panic.line) == ("crash/crash.go", 3), variant
        assert panic.message.startswith("panic: runtime error: index out of range")


def test_plain_go_test_names_failures_only() -> None:
    plain = _text("go", "mixed", "plain")
    assert _names(plain) == GO_MIXED_FAILS
    assert plain.summary.passed == 0 and any("-v or -json" in n for n in plain.notes)


def test_go_build_failure_is_a_load_failure() -> None:
    for variant in ("json", "v", "plain"):
        r = _text("go", "buildfail", variant)
        (load,) = [f for f in r.failures if f.kind == "load"]
        assert load.test == "example.com/buildfail/bad"
        assert (load.file, load.line) == ("bad/bad_test.go", 6)
        assert "undefined: undefinedThing" in load.message
        assert r.load_error == "example.com/buildfail/bad"
        assert _verdict(r, 2) == ("broken", "retry_tester")


def test_go_build_events_of_newer_go() -> None:
    """Go 1.24+ reports build errors as build-output events and FailedBuild on the package."""
    path = "example.com/bf/bad [example.com/bf/bad.test]"
    lines = [
        json.dumps({"ImportPath": path, "Action": "build-output", "Output": "# example.com/bf/bad\n"}),
        json.dumps(
            {
                "ImportPath": path,
                "Action": "build-output",
                "Output": "bad/bad_test.go:6:14: undefined: undefinedThing\n",
            }
        ),
        json.dumps({"ImportPath": path, "Action": "build-fail"}),
        json.dumps({"Action": "start", "Package": "example.com/bf/bad"}),
        json.dumps(
            {
                "Action": "output",
                "Package": "example.com/bf/bad",
                "Output": "FAIL\texample.com/bf/bad [build failed]\n",
            }
        ),
        json.dumps({"Action": "fail", "Package": "example.com/bf/bad", "Elapsed": 0, "FailedBuild": path}),
    ]
    (load,) = go.parse_text(lines).failures
    assert (load.kind, load.test, load.file, load.line) == (
        "load",
        "example.com/bf/bad",
        "bad/bad_test.go",
        6,
    )


def test_go_own_timeout_is_a_timeout() -> None:
    lines = [
        json.dumps({"Action": "run", "Package": "p", "Test": "TestQuick"}),
        json.dumps({"Action": "pass", "Package": "p", "Test": "TestQuick"}),
        json.dumps({"Action": "run", "Package": "p", "Test": "TestHangs"}),
        json.dumps(
            {"Action": "output", "Package": "p", "Test": "TestHangs", "Output": "=== RUN   TestHangs\n"}
        ),
        json.dumps({"Action": "output", "Package": "p", "Output": "panic: test timed out after 2s\n"}),
        json.dumps({"Action": "output", "Package": "p", "Output": "FAIL\tp\t2.01s\n"}),
        json.dumps({"Action": "fail", "Package": "p", "Elapsed": 2.01}),
    ]
    r = go.parse_text(lines)
    assert r.timed_out and r.summary.passed == 1
    (hung,) = r.failures
    assert hung.kind == "load" and "TestHangs" in hung.message and "timed out" in hung.message


def test_go_command_refusal_is_a_load_failure_and_go_work_drops_mod_flags(tmp_path: Path) -> None:
    r = go.parse_text(
        [
            'go: -mod may only be set to readonly when in workspace mode, but it is set to "mod"',
            "\tRemove the -mod flag to use the default readonly value,",
        ]
    )
    (f,) = r.failures
    assert f.kind == "load" and "-mod may only be set" in f.message
    (tmp_path / "go.work").write_text("go 1.19\n\nuse ./a\n")
    assert workspace_env(str(tmp_path), {"GOFLAGS": "-mod=mod -v"})[0] == [("GOFLAGS", "-v")]
    assert workspace_env(str(tmp_path), {"GOFLAGS": "-v"}) == ([], [])
    assert workspace_patterns(str(tmp_path)) == ["./a/..."]


def test_go_progress_and_run_pattern() -> None:
    assert progress_event("go", '{"Action":"pass","Package":"p","Test":"TestA"}') == "pass"
    assert progress_event("go", '{"Action":"fail","Package":"p","Elapsed":1}') is None
    assert progress_event("go", "    --- SKIP: TestA/x (0.00s)") == "skip"
    pattern = run_pattern(["TestSub", "TestTable/big_case", "TestX/a.b(1)"])
    assert pattern == r"^(TestSub|TestTable|TestX)$/^(big_case|a\.b\(1\))$"


CARGO_MIXED_FAILS = {
    "tests::explicit_panic",
    "tests::grüße_名前",
    "tests::nested::deep_fail",
    "tests::plain_assert",
    "tests::should_panic_but_does_not",
    "tests::subtracts",
    "tests::table",
    "returns_err",
    "integration_fails",
}


def test_cargo_counts_equal_libtests_summary() -> None:
    for variant in ("plain", "backtrace"):
        r = _text("cargo", "mixed", variant)
        assert r.recognized
        assert r.summary.to_json() == {"total": 14, "passed": 3, "failed": 9, "skipped": 2}
        assert _names(r) == CARGO_MIXED_FAILS
        by = {f.test: f for f in r.failures}
        sub = by["tests::subtracts"]
        assert (sub.file, sub.line, sub.expected, sub.got) == ("src/lib.rs", 26, "2", "8")
        assert by["tests::table"].message == "assertion `left == right` failed: sub(1, 1)"
        assert (by["tests::grüße_名前"].expected, by["tests::grüße_名前"].got) == (
            '"hallo wörld"',
            '"hello wörld"',
        )
        assert by["tests::nested::deep_fail"].expected is None
        nopanic = by["tests::should_panic_but_does_not"]
        assert (nopanic.file, nopanic.line) == ("src/lib.rs", 54)
        assert by["returns_err"].message == 'Error: "it went wrong"'
        assert by["integration_fails"].file == "tests/integration.rs"
        assert _verdict(r, 101) == ("red", "retry_coder")
        assert r.skipped_tests == ("tests::ignored", "tests::ignored_with_reason")  # libtest's `ignored`
    green = _text("cargo", "green", "plain")
    assert green.summary.to_json() == {"total": 4, "passed": 3, "failed": 0, "skipped": 1}
    assert "src/lib.rs - documented (line 22)" in green.passed_tests


@pytest.mark.parametrize("variant", ["json", "v"])
def test_go_skipped_tests_are_named(variant: str) -> None:
    r = _text("go", "mixed", variant)
    assert r.skipped_tests == ("TestSkipped",)  # test2json's `skip` action, the text's `--- SKIP`
    assert len(r.skipped_tests) == r.summary.skipped


def test_cargo_compile_error_and_crashed_binary_are_load_failures() -> None:
    r = _text("cargo", "buildfail", "plain")
    (load,) = r.failures
    assert (load.kind, load.test, load.file, load.line) == ("load", "buildfail (lib test)", "src/lib.rs", 9)
    assert "cannot find value `undefined_thing`" in load.message
    assert _verdict(r, 101) == ("broken", "retry_tester")
    crashed = cargo.parse_text(
        [
            "     Running unittests src/lib.rs (target/debug/deps/x-1)",
            "",
            "running 2 tests",
            "test a ... ok",
            "error: test failed, to rerun pass `--lib`",
            "",
            "Caused by:",
            "  process didn't exit successfully: `target/debug/deps/x-1` (signal: 6, SIGABRT: abort)",
        ]
    )
    (died,) = crashed.failures
    assert died.kind == "load" and died.test == "unittests src/lib.rs" and "signal: 6" in died.message
    assert crashed.summary.passed == 1  # the test it reported before dying still counts


def test_nextest_junit_report(tmp_path: Path) -> None:
    report = tmp_path / "junit.xml"
    report.write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<testsuites name="nextest-run" tests="3" failures="1" errors="0">'
        '<testsuite name="mixed" tests="3" failures="1" time="0.1">'
        '<testcase name="tests::adds" classname="mixed" time="0.01"/>'
        '<testcase name="tests::later" classname="mixed"><skipped/></testcase>'
        '<testcase name="tests::subtracts" classname="mixed" time="0.01">'
        "<failure type=\"test failure\">thread 'tests::subtracts' panicked at src/lib.rs:26:9:\n"
        "assertion `left == right` failed\n  left: 8\n right: 2</failure>"
        "<system-out>some console noise\n</system-out></testcase></testsuite></testsuites>\n",
        encoding="utf-8",
    )
    r = parse_report("nextest-junit", str(report))
    assert r.recognized and r.summary.to_json() == {"total": 3, "passed": 1, "failed": 1, "skipped": 1}
    assert (r.passed_tests, r.skipped_tests) == (("tests::adds",), ("tests::later",))
    (f,) = r.failures
    assert (f.test, f.file, f.line, f.expected, f.got) == ("tests::subtracts", "src/lib.rs", 26, "2", "8")
    assert parse_report("nextest-junit", str(tmp_path / "missing.xml")).recognized is False


def test_old_rust_panic_format() -> None:
    """Rust before 1.73 (Debian's cargo): the message in quotes, the location after it."""
    r = cargo.parse_text(
        [
            "running 2 tests",
            "test tests::subtracts ... FAILED",
            "test tests::plain ... FAILED",
            "",
            "failures:",
            "",
            "---- tests::subtracts stdout ----",
            "thread 'tests::subtracts' panicked at 'assertion failed: `(left == right)`",
            "  left: `8`,",
            " right: `2`', src/lib.rs:26:9",
            "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace",
            "",
            "---- tests::plain stdout ----",
            "thread 'tests::plain' panicked at 'one plus one is 2', src/lib.rs:43:9",
            "",
            "",
            "failures:",
            "    tests::plain",
            "    tests::subtracts",
            "",
            "test result: FAILED. 0 passed; 2 failed; 0 ignored; 0 measured; 0 filtered out",
        ]
    )
    by = {f.test: f for f in r.failures}
    sub = by["tests::subtracts"]
    assert (sub.file, sub.line, sub.expected, sub.got) == ("src/lib.rs", 26, "2", "8")
    assert sub.message == "assertion failed: `(left == right)`"
    plain = by["tests::plain"]
    assert (plain.file, plain.line, plain.message) == ("src/lib.rs", 43, "one plus one is 2")


def test_nextest_human_output_is_the_fallback() -> None:
    r = cargo.parse_text(
        [
            "    Starting 3 tests across 1 binary (1 test skipped)",
            "        PASS [   0.004s] ( 1/12) mixed tests::adds",
            "        FAIL [   0.005s] mixed tests::subtracts",
            "",
            "--- STDOUT:              mixed tests::subtracts ---",
            "some console noise",
            "--- STDERR:              mixed tests::subtracts ---",
            "thread 'tests::subtracts' panicked at src/lib.rs:26:9:",
            "assertion `left == right` failed",
            "  left: 8",
            " right: 2",
            "",
            "     SIGABRT [   0.010s] mixed tests::aborts",
            "        SKIP [         ] (─────) mixed tests::later",
            "------------",
            "     Summary [   0.012s] 3 tests run: 1 passed, 2 failed, 1 skipped",
            "        FAIL [   0.005s] mixed tests::subtracts",
            "     SIGABRT [   0.010s] mixed tests::aborts",
            "error: test run failed",
        ]
    )
    assert r.recognized and r.summary.to_json() == {"total": 4, "passed": 1, "failed": 2, "skipped": 1}
    by = {f.test: f for f in r.failures}
    assert set(by) == {"tests::subtracts", "tests::aborts"}
    assert (by["tests::subtracts"].file, by["tests::subtracts"].expected) == ("src/lib.rs", "2")
    assert "SIGABRT" in by["tests::aborts"].message
    assert r.skipped_tests == ("tests::later",)
    assert r.passed_tests == ("tests::adds",)  # (nextest 0.9.100+ prints a counter before the name)
    assert progress_event("cargo", "test tests::adds ... ok") == "pass"
    assert progress_event("cargo", "        FAIL [   0.005s] mixed tests::subtracts") == "fail"
    assert progress_event("cargo", "test result: ok. 1 passed; 0 failed") is None


# ---------------------------------------------------------------- probe and plan


def _ws(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / ".git").mkdir(exist_ok=True)
    return tmp_path


def test_probe_rules_five_and_six(tmp_path: Path) -> None:
    gows = _ws(tmp_path / "g", {"go.mod": "module example.com/g\n"})
    d = probe(str(gows), which=lambda _: None)
    assert (d.framework, d.config_path, d.command) == ("go", "go.mod", ("go", "test", "./..."))
    work = _ws(
        tmp_path / "w",
        {
            "go.work": "go 1.19\n\nuse (\n\t./a\n\t./b // tools\n)\n",
            "a/go.mod": "module example.com/a\n",
            "b/go.mod": "module example.com/b\n",
        },
    )
    d = probe(str(work), which=lambda _: None)
    assert (d.framework, d.config_path, d.command) == ("go", "go.work", ("go", "test", "./a/...", "./b/..."))
    rs = _ws(tmp_path / "r", {"Cargo.toml": '[package]\nname = "r"\n'})
    assert probe(str(rs), which=lambda _: None).command == ("cargo", "test")
    assert probe(str(rs), which=lambda n: f"/bin/{n}").command == ("cargo", "nextest", "run")
    # earlier rules win: a pytest marker or a package.json test script before go.mod/Cargo.toml
    both = _ws(tmp_path / "b", {"go.mod": "module x\n", "pytest.ini": "[pytest]\n"})
    assert probe(str(both)).framework == "pytest"
    js = _ws(tmp_path / "j", {"Cargo.toml": "", "package.json": '{"scripts": {"test": "ava"}}'})
    assert probe(str(js)).framework == "npm-test"
    mono = _ws(
        tmp_path / "m",
        {
            "svc/go.mod": "module svc\n",
            "svc/testdata/x/go.mod": "module x\n",
            "vendor/y/go.mod": "module y\n",
        },
    )
    d = probe(str(mono))
    assert d.framework == "go" and d.root.endswith("/svc") and [s.root for s in d.suites] == ["svc"]


def _which(name: str) -> str | None:
    return {"go": "/usr/bin/go", "cargo": "/usr/bin/cargo"}.get(name)


def test_go_plan(tmp_path: Path) -> None:
    ws = _ws(tmp_path, {"go.mod": "module example.com/m\n", "calc/calc_test.go": "package calc\n"})
    det = probe(str(ws), files=False)
    p = plan(
        det,
        RunOptions(timeout_ms=60000),
        report_dir=str(tmp_path / "run"),
        default_timeout_ms=1,
        which=_which,
    )
    assert p.argv == ("/usr/bin/go", "test", "-json", "-timeout=55000ms", "./...")
    assert (p.report_format, Path(p.report_file or "").name) == ("go-json", "stdout.txt")
    p = plan(
        det, RunOptions(target="./calc/..."), report_dir=str(tmp_path), default_timeout_ms=1000, which=_which
    )
    assert p.argv[-1] == "./calc/..." and p.selection == "target"
    p = plan(
        det,
        RunOptions(target="TestSub TestTable/big_case ./calc"),
        report_dir=str(tmp_path),
        default_timeout_ms=1000,
        which=_which,
    )
    assert p.argv[-3:] == ("-run", "^(TestSub|TestTable)$/^(big_case)$", "./calc")
    previous = RunResult.from_json(
        {
            "run_id": "r1",
            "ok": False,
            "outcome": "red",
            "failures": [
                Failure(test="TestTable/big_case", file="calc/calc_test.go", line=3).to_json(),
                Failure(test="TestSub", file="calc/calc_test.go", line=9).to_json(),
            ],
        }
    )
    p = plan(
        det,
        RunOptions(last_failed=True),
        report_dir=str(tmp_path),
        default_timeout_ms=1000,
        previous=previous,
        which=_which,
    )
    assert p.argv[-3:] == ("-run", "^(TestTable|TestSub)$/^(big_case)$", "./calc")
    assert p.selection == "last_failed"
    missing = plan(det, RunOptions(), report_dir=str(tmp_path), default_timeout_ms=1000, which=lambda _: None)
    assert missing.unavailable and "golang-go" in missing.unavailable


def test_cargo_plan(tmp_path: Path) -> None:
    ws = _ws(
        tmp_path,
        {
            "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\n',
            "crates/one/Cargo.toml": '[package]\nname = "one"\n',
        },
    )
    det = probe(str(ws), files=False)
    assert det.framework == "cargo"
    p = plan(
        det,
        RunOptions(target="one tests::adds"),
        report_dir=str(tmp_path),
        default_timeout_ms=1,
        which=_which,
    )
    assert p.argv == ("/usr/bin/cargo", "test", "--no-fail-fast", "-p", "one", "--", "tests::adds")
    assert p.report_file is None and p.selection == "target"
    p = plan(
        det, RunOptions(target="tests/api.rs"), report_dir=str(tmp_path), default_timeout_ms=1, which=_which
    )
    assert p.argv[-2:] == ("--test", "api")
    previous = RunResult.from_json(
        {
            "run_id": "r1",
            "ok": False,
            "outcome": "red",
            "failures": [
                Failure(test="tests::subtracts").to_json(),
                Failure(test="one (lib test)", kind="load").to_json(),
            ],
        }
    )
    p = plan(
        det,
        RunOptions(last_failed=True),
        report_dir=str(tmp_path),
        default_timeout_ms=1,
        previous=previous,
        which=_which,
    )
    assert p.argv[-3:] == ("--", "--exact", "tests::subtracts")
    nextest = plan(
        det, RunOptions(), report_dir=str(tmp_path), default_timeout_ms=1, which=lambda n: f"/usr/bin/{n}"
    )
    assert nextest.argv[1:4] == ("nextest", "run", "--no-fail-fast")
    assert nextest.report_format == "nextest-junit"
    assert (nextest.report_file or "").endswith("target/nextest/default/junit.xml")


@pytest.mark.parametrize("name", ["GOCACHE", "GOMODCACHE", "CARGO_TARGET_DIR", "RUSTUP_TOOLCHAIN", "GOFLAGS"])
def test_toolchain_variables_pass_the_sandbox(name: str) -> None:
    from greenloop.system.env import ENV_ALLOW

    assert name in ENV_ALLOW
    assert "CARGO_REGISTRY_TOKEN" not in ENV_ALLOW


def test_go_and_cargo_caches_under_the_sandbox(tmp_path: Path) -> None:
    from greenloop.system import sandbox
    from greenloop.system.env import child_env

    base = {
        "PATH": "/usr/bin",
        "GOMODCACHE": "/root/go/pkg/mod",
        "CARGO_HOME": "/root/.cargo",
        "CARGO_REGISTRY_TOKEN": "secret",
        "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
    }
    writable = child_env(base, sandbox.resolve(tmp_path, explicit="workspace-write"))
    cache = os.path.join(str(tmp_path.resolve()), ".greenloop", "cache")
    assert writable["GOCACHE"] == os.path.join(cache, "go-build")
    assert "CARGO_TARGET_DIR" not in writable  # cargo builds into the workspace's target/
    assert (writable["GOMODCACHE"], writable["CARGO_HOME"]) == ("/root/go/pkg/mod", "/root/.cargo")
    assert "CARGO_REGISTRY_TOKEN" not in writable and "GOOGLE_APPLICATION_CREDENTIALS" not in writable
    read_only = child_env(base, sandbox.resolve(tmp_path, explicit="read-only"))
    assert read_only["GOCACHE"].startswith("/tmp/") and read_only["CARGO_TARGET_DIR"].startswith("/tmp/")


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("go") and shutil.which("cargo")), reason="go or cargo is not installed")
def test_capture_script_against_installed_toolchains(tmp_path: Path) -> None:
    """The installed go and cargo still print what the stored captures hold."""
    script = Path(__file__).parent.parent / "scripts" / "capture_fixtures"
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path), "--variants", "json,plain", "go", "cargo"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for framework, suite, variant in (
        ("go", "mixed", "json"),
        ("go", "buildfail", "json"),
        ("cargo", "mixed", "plain"),
    ):
        src = str(FIXTURES / framework / suite / "src")
        with (tmp_path / framework / suite / f"{variant}.txt").open(encoding="utf-8") as fh:
            fresh = parse_text(framework, (line.replace(WORK, src) for line in fh), root=src)
        stored = _text(framework, suite, variant)
        assert fresh.summary == stored.summary, (framework, suite)
        assert _names(fresh) == _names(stored), (framework, suite)


@pytest.mark.parametrize("suite", ["mixed", "green", "buildfail"])
def test_go_report_read_whole_agrees_with_line_by_line(suite: str, tmp_path: Path) -> None:
    """A report file read whole, with or without a text line among the events, gives what the
    line-by-line parse of the same lines gives."""
    src = str(FIXTURES / "go" / suite / "src")
    lines = (FIXTURES / "go" / suite / "json.txt").read_text(encoding="utf-8").replace(WORK, src).splitlines()
    events = [line for line in lines if line.startswith("{")]
    for kept in (events, [*events[:3], "some text a test printed", *events[3:]]):
        (tmp_path / "stdout.txt").write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        (tmp_path / "stderr.txt").write_text("", encoding="utf-8")
        whole = parse_report("go-json", str(tmp_path / "stdout.txt"), root=src)
        assert whole == parse_text("go", kept, root=src)
        assert whole.recognized and whole.summary.total > 0


@pytest.mark.parametrize("variant", ["json", "v"])
def test_go_examples_whose_output_differs_give_got_and_want(variant: str) -> None:
    """An Example fails with `got:` / `want:` blocks and no file:line: its file is the package's
    test file that declares it, its values the two blocks (several lines each)."""
    r = _text("go", "examples", variant)
    assert r.summary[:4] == (5, 1, 4, 0), r.summary
    by = {f.test: f for f in r.failures}
    assert set(by) == {"TestAdd", "FuzzAdd/seed#0", "ExampleAdd", "ExampleAdd_lines"}
    one = by["ExampleAdd"]
    assert (one.file, one.expected, one.got) == ("calc/calc_test.go", "3", "4"), one
    assert "output differs from its // Output: comment" in one.message
    lines = by["ExampleAdd_lines"]
    assert (lines.file, lines.expected, lines.got) == ("calc/calc_test.go", "0\ndone", "1\ndone"), lines
    add = by["TestAdd"]
    assert (add.file, add.line, add.expected, add.got) == ("calc/calc_test.go", 28, "3", "4"), add


def test_go_data_race_is_placed_at_the_racing_access_not_in_testing_go() -> None:
    """-race fails the test from testing.go ("race detected during execution of test"): the
    failure names both accesses and sits at the first access in the workspace."""
    r = _text("go", "race", "race")
    assert r.summary[:4] == (4, 1, 2, 1), r.summary
    by = {f.test: f for f in r.failures}
    race = by["TestRace"]
    assert (race.file, race.line) == ("r_test.go", 13), race
    assert race.message.startswith("data race: ") and "by goroutine" in race.message, race.message
    assert "(r_test.go:13)" in race.message
    sub = by["TestParallel/b"]
    assert (sub.file, sub.line, sub.expected, sub.got) == ("r_test.go", 24, '"a"', '"b"'), sub


@pytest.mark.parametrize("variant", ["json", "v", "plain"])
def test_go_subtests_whose_names_hold_a_slash_have_their_real_parent(variant: str) -> None:
    """`t.Run("with/empty/first", …)` under TestJoin is `TestJoin/with/empty/first`: its parent is
    TestJoin (not "TestJoin/with/empty"), so TestJoin is no leaf and gets no failure of its own;
    go reports two failing tests, and so does greenloop. The backspace that ends TestDigit's
    message stays out of its expected value."""
    r = _text("go", "slashes", variant)
    assert _names(r) == {"TestJoin/with/empty/first", "TestDigit"}
    if variant != "plain":  # plain `go test` names failures only
        assert r.summary.to_json() == {"total": 3, "passed": 1, "failed": 2, "skipped": 0}
    by = {f.test: f for f in r.failures}
    join = by["TestJoin/with/empty/first"]
    assert (join.file, join.line, join.expected, join.got) == ("names/names_test.go", 15, '"/b"', '""')
    digit = by["TestDigit"]
    assert (digit.expected, digit.got) == ("3", "4")


def test_cargo_test_that_catches_a_panic_fails_at_its_last_one() -> None:
    """scopeguard's shape: a panic caught by catch_unwind, then a failing assert_eq! below it.
    The failure is the assertion (src/lib.rs:16, left 1, right 0), not the caught panic."""
    r = _text("cargo", "caught", "plain")
    assert r.summary.to_json() == {"total": 2, "passed": 1, "failed": 1, "skipped": 0}
    (f,) = r.failures
    assert (f.test, f.file, f.line) == ("tests::catches_then_asserts", "src/lib.rs", 16)
    assert (f.expected, f.got) == ("0", "1") and "left == right" in f.message


def test_cargo_compile_error_in_the_library_is_one_load_failure() -> None:
    """cargo stops the lib and the lib test targets on one error and prints it once: one broken
    record at the error's place, and no test counted as run."""
    r = _text("cargo", "libfail", "plain")
    (f,) = r.failures
    assert (f.test, f.kind, f.file, f.line) == ("libfail (lib)", "load", "src/lib.rs", 3)
    assert r.summary.failed == 1 and r.summary.passed == 0
    assert _verdict(r, 101)[0] == "broken"


@pytest.mark.parametrize("variant", ["json", "v", "plain"])
def test_go_repanic_is_placed_at_the_original_panic_and_a_broken_dependency_is_named(variant: str) -> None:
    """A panic recovered and raised again is placed where it began (Index, calc/func.go:4), not
    at the deferred re-raise (calc_test.go:9), and the trace leads with the test's own call
    (calc_test.go:12). A package that does not build only because a package it imports does
    not names that package and its first compile error."""
    by = {f.test: f for f in _text("go", "panics", variant).failures}
    panic = by["TestRepanic"]
    assert (panic.file, panic.line) == ("calc/func.go", 4)
    frames = [ln.strip() for ln in panic.stack.splitlines() if ln.strip().startswith("calc/")]
    assert frames[0] == "calc/func.go:4" and frames[1].startswith("calc/calc_test.go:12")
    assert "raised again at:" in panic.stack
    use = by["example.com/panics/use"]
    assert (use.kind, use.file, use.line) == ("load", "dep/dep.go", 4)
    assert "a package it depends on does not (example.com/panics/dep): cannot use" in use.message


def test_rust_panic_hints_name_the_function_and_the_tests_call() -> None:
    """A unit test sits in the file of the code it tests: the backtrace's function names tell
    the test's frame (lib.rs:22, its call) from the code's (pick, lib.rs:8)."""
    from greenloop.hints.hint import apply

    src = str(FIXTURES / "cargo" / "rustpanics" / "src")
    r = _text("cargo", "rustpanics", "backtrace")
    by = {f.test: f for f in apply(r.failures, framework="cargo", root=src)}
    pick = by["tests::pick_out_of_range"]
    assert (pick.file, pick.line) == ("src/lib.rs", 8)
    assert pick.hint.startswith("pick (src/lib.rs:8) panics"), pick.hint
    assert "the test gives at src/lib.rs:22 (`pick(&[1], 3)`)" in pick.hint, pick.hint
    first = by["tests::first_of_empty"]
    assert "first (src/lib.rs:4)" in first.hint and "unwrap() on None" in first.hint, first.hint
