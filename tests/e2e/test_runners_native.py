"""go and cargo end to end: `greenloop run --json` on the real toolchains, each with a green
suite, a red suite of tricky failures (subtests, table tests, panics, unicode names, skipped
and ignored tests), a suite that does not build, and a hung test (with a child process) killed
at the timeout with no survivor. The suites are the fixture suites under tests/fixtures/go and
tests/fixtures/cargo; only the standard library, nothing fetched (GOPROXY=off, cargo offline).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from greenloop.schema import validate_run_result

from .helpers import cli, processes_under, write_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GO_ENV = {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CARGO_NET_OFFLINE": "true"}

needs_go = pytest.mark.skipif(
    shutil.which("go") is None, reason="go is not installed (apt-get install golang-go)"
)
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")


def _suite(framework: str, suite: str, dest: Path) -> Path:
    shutil.copytree(FIXTURES / framework / suite / "src", dest)
    (dest / ".git").mkdir()
    return dest


def _run(ws: Path, *extra: str, timeout: float = 240) -> tuple[int, dict[str, object], float]:
    done = cli("run", str(ws), "--json", *extra, env=GO_ENV, timeout=timeout)
    assert done.stdout.strip(), done.stderr
    result = done.json
    assert validate_run_result(result) == [], "result.json must follow the published schema"
    return done.code, result, done.seconds


def _by_test(r: dict[str, object]) -> dict[str, dict[str, object]]:
    return {str(f["test"]): f for f in r["failures"]}  # type: ignore[attr-defined]


# ---------------------------------------------------------------- go


@needs_go
def test_go_red_suite(tmp_path: Path) -> None:
    ws = _suite("go", "mixed", tmp_path / "ws")
    code, r, _ = _run(ws)
    assert (code, r["outcome"], r["framework"], r["next_action"]) == (1, "red", "go", "retry_coder"), r
    assert r["summary"] == {"total": 11, "passed": 4, "failed": 6, "skipped": 1}
    assert "-json" in str(r["command"])
    failures = _by_test(r)
    assert set(failures) == {
        "TestSub",
        "TestTable/one_minus_one",
        "TestTable/big_case",
        "TestGreet/ünïcode_名前",
        "TestMultiLine",
        "TestIndexPanics",
    }
    sub = failures["TestSub"]
    assert (sub["file"], sub["line"], sub["expected"], sub["got"]) == ("calc/calc_test.go", 17, "2", "8")
    assert sub["hint"]
    greet = failures["TestGreet/ünïcode_名前"]
    assert (greet["expected"], greet["got"]) == ('"hallo wörld"', '"hello wörld"')
    panic = failures["TestIndexPanics"]
    assert (panic["file"], panic["line"]) == ("crash/crash.go", 3)
    assert "index out of range" in str(panic["message"])
    assert "TestAdd" in r["passed_tests"]  # type: ignore[operator]
    assert r["skipped_tests"] == ["TestSkipped"]  # test2json's skip action, as failures are named
    # a rerun of the failures: -run per level, only the failing packages
    code, again, _ = _run(ws, "--last-failed")
    assert again["selection"] == "last_failed"
    assert "-run" in str(again["command"]) and "./calc" in str(again["command"])
    assert again["summary"] == {"total": 6, "passed": 0, "failed": 6, "skipped": 0}, again


@needs_go
def test_go_examples_fuzz_seeds_and_the_call_above_t_errorf(tmp_path: Path) -> None:
    """An Example whose output differs is placed at its func with got/want; a t.Errorf hint
    names the call on the line above it and where that function lives in the package."""
    ws = _suite("go", "examples", tmp_path / "ws")
    code, r, _ = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    assert r["summary"] == {"total": 5, "passed": 1, "failed": 4, "skipped": 0}
    failures = _by_test(r)
    example = failures["ExampleAdd"]
    assert (example["file"], example["line"], example["expected"], example["got"]) == (
        "calc/calc_test.go", 8, "3", "4"), example
    assert "Add(1, 2) returned 4" in str(example["hint"]) and "calc/calc.go:4" in str(example["hint"])
    add = failures["TestAdd"]
    assert "Add(1, 2) returned 4" in str(add["hint"]) and "calc/calc.go:4" in str(add["hint"]), add
    assert failures["FuzzAdd/seed#0"]["line"] == 36


@needs_go
def test_go_green_suite_and_target(tmp_path: Path) -> None:
    ws = _suite("go", "green", tmp_path / "ws")
    probed = cli("probe", str(ws), "--json").json
    assert (probed["framework"], probed["command"], probed["config_path"]) == (
        "go",
        ["go", "test", "./..."],
        "go.mod",
    )
    code, r, _ = _run(ws)
    assert (code, r["outcome"]) == (0, "green"), r
    assert r["summary"] == {"total": 5, "passed": 4, "failed": 0, "skipped": 1}
    assert (ws / ".greenloop" / "cache" / "go-build").is_dir(), "GOCACHE lives in the run's cache folder"
    code, r, _ = _run(ws, "--target", "./calc/...")
    assert (code, r["outcome"], r["selection"]) == (0, "green", "target"), r
    assert str(r["command"]).endswith("./calc/...")


@needs_go
def test_go_build_failure_is_broken_for_the_tester(tmp_path: Path) -> None:
    ws = _suite("go", "buildfail", tmp_path / "ws")
    code, r, _ = _run(ws)
    assert (code, r["outcome"], r["next_action"]) == (3, "broken", "retry_tester"), r
    (load,) = [f for f in r["failures"] if f["kind"] == "load"]  # type: ignore[attr-defined]
    assert load["test"] == "example.com/buildfail/bad"
    assert (load["file"], load["line"]) == ("bad/bad_test.go", 6)
    assert "undefined: undefinedThing" in load["message"]


@needs_go
def test_go_hung_test_is_a_timeout_with_no_process_left(tmp_path: Path) -> None:
    ws = write_files(
        tmp_path / "ws",
        {
            "go.mod": "module example.com/hang\n\ngo 1.19\n",
            "hang/hang_test.go": (
                'package hang\n\nimport (\n\t"os/exec"\n\t"testing"\n\t"time"\n)\n\n'
                "func TestQuick(t *testing.T) {}\n\n"
                "func TestHangs(t *testing.T) {\n"
                '\tif err := exec.Command("sleep", "600").Start(); err != nil {\n\t\tt.Fatal(err)\n\t}\n'
                "\ttime.Sleep(10 * time.Minute)\n}\n"
            ),
        },
    )
    (ws / ".git").mkdir()
    code, r, seconds = _run(ws, "--timeout-ms", "20000", timeout=90)
    assert (code, r["outcome"], r["timed_out"], r["crashed"]) == (3, "broken", True, True), r
    assert "timed out" in str(r["crash_reason"])
    assert seconds < 20 + 15
    assert processes_under(ws) == []
    # go's own -timeout (planned a little under greenloop's) fired first and named the test
    if any("own timeout" in n for n in r["notes"]):  # type: ignore[attr-defined]
        assert any("TestHangs" in str(f["message"]) for f in r["failures"]), r  # type: ignore[attr-defined]


# ---------------------------------------------------------------- cargo


@needs_cargo
def test_cargo_red_suite(tmp_path: Path) -> None:
    ws = _suite("cargo", "mixed", tmp_path / "ws")
    code, r, _ = _run(ws)
    assert (code, r["outcome"], r["framework"], r["next_action"]) == (1, "red", "cargo", "retry_coder"), r
    assert r["summary"] == {"total": 14, "passed": 3, "failed": 9, "skipped": 2}
    failures = _by_test(r)
    assert set(failures) == {
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
    sub = failures["tests::subtracts"]
    assert (sub["file"], sub["line"], sub["expected"], sub["got"]) == ("src/lib.rs", 26, "2", "8")
    assert failures["tests::grüße_名前"]["expected"] == '"hallo wörld"'
    assert failures["integration_fails"]["file"] == "tests/integration.rs"
    assert "index out of bounds" in str(failures["tests::explicit_panic"]["message"])
    assert sorted(r["skipped_tests"]) == ["tests::ignored", "tests::ignored_with_reason"]  # type: ignore[call-overload]
    assert (ws / "target").is_dir(), "CARGO_TARGET_DIR stays in the workspace"
    code, again, _ = _run(ws, "--last-failed")
    assert "--exact" in str(again["command"]) and again["selection"] == "last_failed"
    assert again["summary"] == {"total": 9, "passed": 0, "failed": 9, "skipped": 0}, again


@needs_cargo
def test_cargo_green_suite_and_package_target(tmp_path: Path) -> None:
    ws = _suite("cargo", "green", tmp_path / "ws")
    probed = cli("probe", str(ws), "--json").json
    assert probed["framework"] == "cargo" and probed["command"][:2] == [
        "cargo",
        "nextest" if shutil.which("cargo-nextest") else "test",
    ]
    code, r, _ = _run(ws)
    assert (code, r["outcome"]) == (0, "green"), r
    assert r["summary"] == {"total": 4, "passed": 3, "failed": 0, "skipped": 1}  # with the doc test
    code, r, _ = _run(ws, "--target", "green")
    assert (code, r["outcome"], r["selection"]) == (0, "green", "target"), r
    assert "-p green" in str(r["command"])


@needs_cargo
def test_cargo_compile_error_is_broken_for_the_tester(tmp_path: Path) -> None:
    ws = _suite("cargo", "buildfail", tmp_path / "ws")
    code, r, _ = _run(ws)
    assert (code, r["outcome"], r["next_action"]) == (3, "broken", "retry_tester"), r
    load = r["failures"][0]  # type: ignore[index]
    assert len(r["failures"]) == 1  # type: ignore[arg-type]
    assert (load["kind"], load["file"], load["line"]) == ("load", "src/lib.rs", 9)
    assert "undefined_thing" in load["message"]


@needs_cargo
def test_cargo_failures_without_a_place_or_a_plain_assertion(tmp_path: Path) -> None:
    """A test that returns Err has no stack (libtest prints `Error: …`): it is placed at its fn
    through its module path. #[should_panic] points at the test fn: the hint names the call in
    its body. An unwrap on None gets its own hint."""
    lib = (
        "pub fn div(a: i32, b: i32) -> i32 {\n    if b == 0 {\n        return 0;\n    }\n    a / b\n}\n\n"
        "#[cfg(test)]\nmod tests {\n"
        "    #[test]\n    #[should_panic(expected = \"divide by zero\")]\n"
        "    fn div_zero_panics() {\n        super::div(1, 0);\n    }\n\n"
        "    #[test]\n    fn returns_err() -> Result<(), String> {\n"
        "        Err(format!(\"bad value {}\", super::div(4, 2)))\n    }\n\n"
        "    #[test]\n    fn unwraps() {\n        let v: Option<i32> = None;\n        v.unwrap();\n    }\n}\n"
    )
    ws = write_files(tmp_path / "ws", {
        "Cargo.toml": '[package]\nname = "places"\nversion = "0.1.0"\nedition = "2021"\n',
        "src/lib.rs": lib,
    })
    (ws / ".git").mkdir()
    code, r, _ = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    failures = _by_test(r)
    err = failures["tests::returns_err"]
    assert (err["file"], err["line"]) == ("src/lib.rs", 17), err
    panics = failures["tests::div_zero_panics"]
    assert (panics["file"], panics["line"]) == ("src/lib.rs", 12), panics
    assert "`div(1, 0)`" in str(panics["hint"]) and "div (src/lib.rs:1)" in str(panics["hint"]), panics
    unwrap = failures["tests::unwraps"]
    assert (unwrap["file"], unwrap["line"]) == ("src/lib.rs", 24), unwrap
    assert "unwrap() on None" in str(unwrap["hint"]), unwrap


@needs_cargo
def test_cargo_hung_test_dies_at_its_timeout_with_no_process_left(tmp_path: Path) -> None:
    ws = write_files(
        tmp_path / "ws",
        {
            "Cargo.toml": '[package]\nname = "hang"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": (
                "#[cfg(test)]\nmod tests {\n    #[test]\n    fn quick() {}\n\n    #[test]\n    fn hangs() {\n"
                '        let _child = std::process::Command::new("sleep").arg("600").spawn().unwrap();\n'
                "        loop { std::thread::sleep(std::time::Duration::from_secs(1)); }\n    }\n}\n"
            ),
        },
    )
    (ws / ".git").mkdir()
    code, r, seconds = _run(ws, "--timeout-ms", "20000", timeout=90)
    assert (code, r["outcome"], r["timed_out"], r["crashed"]) == (3, "broken", True, True), r
    assert seconds < 20 + 15
    assert processes_under(ws) == []


# ---------------------------------------------------------------- workspaces, panics outside tests


@needs_go
def test_go_work_runs_every_module_and_an_init_panic_is_broken(tmp_path: Path) -> None:
    ws = write_files(
        tmp_path / "ws",
        {
            "go.work": "go 1.19\n\nuse (\n\t./api\n\t./lib\n)\n",
            "api/go.mod": "module example.com/api\n\ngo 1.19\n",
            "api/api_test.go": 'package api\n\nimport "testing"\n\nfunc TestAPI(t *testing.T) {}\n',
            "lib/go.mod": "module example.com/lib\n\ngo 1.19\n",
            "lib/lib_test.go": (
                'package lib\n\nimport "testing"\n\nfunc TestLib(t *testing.T) {\n'
                "\tif got, want := 1+1, 3; got != want {\n"
                '\t\tt.Errorf("got %d, want %d", got, want)\n\t}\n}\n'
            ),
        },
    )
    (ws / ".git").mkdir()
    code, r, _ = _run(ws)  # GOFLAGS=-mod=mod here: go.work refuses it, greenloop drops it
    assert (code, r["outcome"]) == (1, "red"), r
    assert any("go.work workspaces refuse" in n for n in r["notes"])  # type: ignore[attr-defined]
    assert "./api/..." in str(r["command"]) and "./lib/..." in str(r["command"])
    assert r["summary"] == {"total": 2, "passed": 1, "failed": 1, "skipped": 0}
    failures = _by_test(r)
    assert list(failures) == ["TestLib"]
    lib = failures["TestLib"]
    assert (lib["test"], lib["file"], lib["line"], lib["expected"], lib["got"]) == (
        "TestLib",
        "lib/lib_test.go",
        7,
        "3",
        "2",
    )
    # a panic in init(), outside any test: the package is a load failure, the run broken
    write_files(
        ws,
        {
            "lib/lib_test.go": (
                'package lib\n\nimport "testing"\n\n'
                'func init() {\n\tvar m map[string]int\n\tm["x"] = 1\n}\n\n'
                "func TestLib(t *testing.T) {}\n"
            )
        },
    )
    code, r, _ = _run(ws)
    assert (code, r["outcome"], r["next_action"]) == (3, "broken", "retry_tester"), r
    (load,) = [f for f in r["failures"] if f["kind"] == "load"]  # type: ignore[attr-defined]
    assert (load["test"], load["file"], load["line"]) == ("example.com/lib", "lib/lib_test.go", 7)
    assert "nil map" in load["message"]


@needs_cargo
def test_cargo_workspace_package_target_and_an_aborting_binary(tmp_path: Path) -> None:
    ws = write_files(
        tmp_path / "ws",
        {
            "Cargo.toml": '[workspace]\nmembers = ["crates/*"]\nresolver = "2"\n',
            "crates/one/Cargo.toml": '[package]\nname = "one"\nversion = "0.1.0"\nedition = "2021"\n',
            "crates/one/src/lib.rs": "#[cfg(test)]\nmod tests {\n    #[test]\n    fn ok() {}\n}\n",
            "crates/two/Cargo.toml": '[package]\nname = "two"\nversion = "0.1.0"\nedition = "2021"\n',
            "crates/two/src/lib.rs": (
                "#[cfg(test)]\nmod tests {\n    #[test]\n"
                "    fn aborts() {\n        std::process::abort();\n    }\n}\n"
            ),
        },
    )
    (ws / ".git").mkdir()
    code, r, _ = _run(ws, "--target", "one")
    assert (code, r["outcome"], r["selection"]) == (0, "green", "target"), r
    assert "-p one" in str(r["command"])
    code, r, _ = _run(ws)
    assert (code, r["outcome"], r["next_action"]) == (3, "broken", "retry_tester"), r
    (load,) = [f for f in r["failures"] if f["kind"] == "load"]  # type: ignore[attr-defined]
    assert "SIGABRT" in load["message"] or "signal: 6" in load["message"]
