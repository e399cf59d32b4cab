"""Plan: the per-framework command table, last_failed dialects, toolchains. Pure: nothing runs."""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import pytest

from greenloop.errors import UsageError
from greenloop.model import Detection, Failure, Plan
from greenloop.result import RunResult
from greenloop.runner.affected_cov import PLUGIN_NAME as COVERAGE_PLUGIN
from greenloop.runner.dialects import NODE_REPORTER, PROGRESS_REPORTERS
from greenloop.runner.dialects import PYTEST_PLUGIN_DIR as PLUGIN_DIR
from greenloop.runner.dialects import PYTEST_PLUGIN_NAME as PLUGIN_NAME
from greenloop.runner.last_failed import name_pattern
from greenloop.runner.plan import RunOptions, parse_shard, plan
from greenloop.runner.toolchain import python_runner
from greenloop.system.env import changes, without_reporter_switches


def det(root: Path, framework: str | None, manager: str | None = None) -> Detection:
    return Detection(framework=framework, root=str(root), package_manager=manager)


def fake_bin(root: Path, name: str) -> Path:
    path = root / "node_modules" / ".bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def previous(*failures: Failure) -> RunResult:
    return RunResult(
        run_id="run-prev",
        ok=not failures,
        outcome="red" if failures else "green",
        framework=None,
        command="x",
        exit_code=1 if failures else 0,
        failures=failures,
    )


def mk(root: Path, framework: str | None, **opts: object) -> Plan:
    prev = opts.pop("previous", None)
    return plan(
        det(root, framework, opts.pop("manager", None)),  # type: ignore[arg-type]
        RunOptions(**opts),  # type: ignore[arg-type]
        report_dir=str(root / ".greenloop" / "runs" / "r1"),
        default_timeout_ms=120_000,
        previous=prev,  # type: ignore[arg-type]
        env={},
        which=lambda name: f"/usr/bin/{name}",
        interpreter="/py/bin/python",
    )


def test_vitest_runs_its_own_binary_with_default_and_json_reporters(tmp_path: Path) -> None:
    binary = fake_bin(tmp_path, "vitest")
    p = mk(tmp_path, "vitest", target="src/a.test.ts  src/b.test.ts", timeout_ms=5000)
    report = str(tmp_path / ".greenloop" / "runs" / "r1" / "report.json")
    assert p.argv == (
        str(binary),
        "run",
        "--reporter=default",
        "--reporter=json",
        f"--reporter={PROGRESS_REPORTERS['vitest']}",  # live progress, one line per test
        f"--outputFile.json={report}",
        "src/a.test.ts",
        "src/b.test.ts",
    )
    assert (p.report_file, p.report_format, p.timeout_ms) == (report, "vitest-json", 5000)
    progress = str(tmp_path / ".greenloop" / "runs" / "r1" / "progress.ndjson")
    assert p.progress_file == progress and ("GREENLOOP_PROGRESS_FILE", progress) in p.env
    assert os.path.isfile(PROGRESS_REPORTERS["vitest"])
    assert p.unavailable is None and p.cwd == str(tmp_path)


def test_hoisted_binary_in_a_parent_is_found(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    binary = fake_bin(tmp_path, "jest")
    (tmp_path / "packages" / "a").mkdir(parents=True)
    p = mk(tmp_path / "packages" / "a", "jest")
    assert p.argv[:2] == (str(binary), "--reporters=default")
    assert p.argv[-2] == "--json" and p.argv[-1].startswith("--outputFile=")
    assert p.report_format == "jest-json"


@pytest.mark.parametrize(
    ("framework", "manager", "install"),
    [
        ("vitest", None, "npm install -D vitest"),
        ("jest", "pnpm", "pnpm add -D jest"),
        ("vitest", "yarn", "yarn add -D vitest"),
    ],
)
def test_runner_not_installed_is_unavailable_with_the_install_command(
    tmp_path: Path, framework: str, manager: str | None, install: str
) -> None:
    (tmp_path / ".git").mkdir()
    p = mk(tmp_path, framework, manager=manager)
    assert p.unavailable is not None and install in p.unavailable


def test_pytest_loads_greenloops_plugin_with_junit_as_fallback(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    p = mk(tmp_path, "pytest", target="tests/test_a.py::test_x")
    runs = tmp_path / ".greenloop" / "runs" / "r1"
    junit = str(runs / "report.xml")
    assert p.argv == (
        "/py/bin/python", "-m", "pytest", "-p", PLUGIN_NAME, f"--junitxml={junit}", "tests/test_a.py::test_x"
    )
    assert (p.report_file, p.report_format) == (str(runs / "report.json"), "pytest-json")
    assert (p.fallback_report_file, p.fallback_report_format) == (junit, "junit")
    env = dict(p.env)
    assert env["PYTHONPATH"] == PLUGIN_DIR  # a folder that holds only greenloop's pytest plugins
    assert sorted(set(os.listdir(PLUGIN_DIR)) - {"__pycache__"}) == [
        f"{COVERAGE_PLUGIN}.py", f"{PLUGIN_NAME}.py"]
    assert "GREENLOOP_COVMAP" not in env and COVERAGE_PLUGIN not in p.argv  # a target: no map
    assert env["GREENLOOP_PYTEST_REPORT"] == p.report_file and env["GREENLOOP_PYTEST_JUNIT"] == junit
    inherited = plan(
        det(tmp_path, "pytest"), RunOptions(), report_dir=str(runs), default_timeout_ms=1000,
        env={"PYTHONPATH": "/mine"}, interpreter="/py/bin/python",
    )
    assert dict(inherited.env)["PYTHONPATH"] == PLUGIN_DIR + os.pathsep + "/mine"


def test_pytest_prefers_the_workspace_virtualenv(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").write_text("")
    argv, _, unavailable = python_runner(str(tmp_path), {}, lambda n: None)
    assert argv == (str(tmp_path / ".venv" / "bin" / "python"), "-m", "pytest")
    assert unavailable is not None and "pytest is not installed in .venv" in unavailable
    (tmp_path / ".venv" / "lib" / "python3.11" / "site-packages" / "pytest").mkdir(parents=True)
    argv, notes, unavailable = python_runner(str(tmp_path), {}, lambda n: None)
    assert unavailable is None and "virtualenv .venv" in notes[0]


def test_pytest_active_virtualenv_then_uv_then_poetry(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    active = tmp_path / "elsewhere"
    (active / "bin").mkdir(parents=True)
    (active / "bin" / "python").write_text("")
    (active / "lib" / "python3.12" / "site-packages" / "pytest").mkdir(parents=True)
    argv, _, _ = python_runner(str(tmp_path), {"VIRTUAL_ENV": str(active)}, lambda n: None)
    assert argv[0] == str(active / "bin" / "python")
    (tmp_path / "uv.lock").write_text("")
    argv, _, _ = python_runner(str(tmp_path), {}, lambda n: "/bin/uv" if n == "uv" else None)
    assert argv == ("uv", "run", "pytest")
    (tmp_path / "uv.lock").unlink()
    (tmp_path / "poetry.lock").write_text("")
    argv, _, _ = python_runner(str(tmp_path), {}, lambda n: "/bin/poetry" if n == "poetry" else None)
    assert argv == ("poetry", "run", "pytest")
    argv, notes, _ = python_runner(str(tmp_path), {}, lambda n: None)
    assert argv[1:] == ("-m", "pytest") and "poetry is not on PATH" in notes[0]


def test_node_test_writes_spec_to_stdout_and_tap_to_the_run_folder(tmp_path: Path) -> None:
    p = mk(tmp_path, "node:test")
    report = str(tmp_path / ".greenloop" / "runs" / "r1" / "report.tap")
    assert p.argv == (
        "/usr/bin/node",
        "--test",
        "--test-reporter=spec",
        "--test-reporter-destination=stdout",
        # node's TAP (junit drops a failing after() hook; TAP keeps it) through greenloop's
        # reporter, which also records each test as it starts and completes
        f"--test-reporter={NODE_REPORTER}",
        f"--test-reporter-destination={report}",
        f"--test-reporter={PROGRESS_REPORTERS['node:test']}",  # live progress, one line per test
        f"--test-reporter-destination={p.progress_file}",
    )
    stream = str(tmp_path / ".greenloop" / "runs" / "r1" / "stream.ndjson")
    assert p.stream_file == stream and ("GREENLOOP_NODE_STREAM", stream) in p.env
    assert (p.report_file, p.report_format) == (report, "node-tap")
    assert p.progress_file and p.progress_file.endswith("progress.ndjson")


def test_jest_and_pytest_stream_progress_per_test_to_the_run_folder(tmp_path: Path) -> None:
    fake_bin(tmp_path, "jest")
    jest = mk(tmp_path, "jest")
    assert jest.argv[1:3] == ("--reporters=default", f"--reporters={PROGRESS_REPORTERS['jest']}")
    assert os.path.isfile(PROGRESS_REPORTERS["jest"])
    py = mk(tmp_path, "pytest")
    for p in (jest, py):
        assert p.progress_file and ("GREENLOOP_PROGRESS_FILE", p.progress_file) in p.env
    assert mk(tmp_path, "npm-test").progress_file is None
    assert mk(tmp_path, "pytest", command="make test").progress_file is None


def test_npm_test_has_no_machine_report_and_passes_targets_after_dashes(tmp_path: Path) -> None:
    p = mk(tmp_path, "npm-test", target="a b")
    assert p.argv == ("npm", "test", "--", "a", "b")
    assert p.report_file is None and any("parsed as text" in n for n in p.notes)
    assert mk(tmp_path, "npm-test", manager="yarn").argv == ("yarn", "test")


def test_verbatim_command_ignores_target_and_last_failed_with_notes(tmp_path: Path) -> None:
    p = mk(tmp_path, "pytest", command="make test | tee log", target="x", last_failed=True)
    assert p.argv == ("make test | tee log",) and p.shell
    assert p.command_text == "make test | tee log"
    assert len(p.notes) == 2


def test_nothing_to_test_and_unknown_framework_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nothing to test"):
        mk(tmp_path, None)
    with pytest.raises(UsageError, match="unknown framework 'ava'"):
        mk(tmp_path, "ava")


def test_last_failed_vitest_and_jest_use_t_with_the_failing_files(tmp_path: Path) -> None:
    fake_bin(tmp_path, "vitest")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.test.ts").write_text("")
    prev = previous(
        Failure(test="math > adds [x] > y", file="src/a.test.ts", line=3),
        Failure(test="top", file=str(tmp_path / "src" / "a.test.ts")),
    )
    p = mk(tmp_path, "vitest", last_failed=True, previous=prev)
    i = p.argv.index("-t")
    pattern = p.argv[i + 1]
    assert p.argv[i + 2 :] == ("src/a.test.ts",)
    assert re.search(pattern, "math adds [x] > y") and re.search(pattern, "math > adds [x] > y")
    assert re.search(pattern, "top") and not re.search(pattern, "top two")
    assert any("reran 2 failure(s) of run-prev" in n for n in p.notes)


def test_last_failed_pytest_uses_node_ids_and_node_test_a_name_pattern(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    (tmp_path / "tests" / "test_broken.py").write_text("")
    prev = previous(
        Failure(test="tests/test_a.py::TestX::test_one[1-2]", file="tests/test_a.py"),
        Failure(test="tests/test_a.py::test_two[a b]", file="src/helper.py"),
        Failure(test="tests/test_broken.py", file="tests/test_broken.py", kind="load"),
        Failure(test="tests/test_gone.py", file="tests/test_gone.py", kind="load"),
    )
    p = mk(tmp_path, "pytest", last_failed=True, previous=prev)
    # exactly the failures (a passing test_one elsewhere does not run) and the file that failed to load
    assert p.argv[-3:] == ("tests/test_a.py::TestX::test_one[1-2]", "tests/test_a.py::test_two[a b]",
                           "tests/test_broken.py")
    assert "-k" not in p.argv
    # a name that is not a node id from the run's folder (pytest's rootdir is elsewhere): -k
    moved = previous(Failure(test="pkg/tests/test_a.py::test_one", file="tests/test_a.py"))
    p = mk(tmp_path, "pytest", last_failed=True, previous=moved)
    assert p.argv[-3:] == ("-k", "test_one", "tests/test_a.py")
    p = mk(tmp_path, "node:test", last_failed=True, previous=previous(Failure(test="suite > leaf name")))
    flag = [a for a in p.argv if a.startswith("--test-name-pattern=")]
    assert flag and re.search(flag[0].split("=", 1)[1], "leaf name")


def test_last_failed_without_previous_failures_runs_the_full_suite_with_a_note(tmp_path: Path) -> None:
    full = mk(tmp_path, "node:test").argv
    p = mk(tmp_path, "node:test", last_failed=True, previous=None)
    assert p.argv == full and any("no previous run" in n for n in p.notes)
    p = mk(tmp_path, "node:test", last_failed=True, previous=previous())
    assert p.argv == full and any("had no failures" in n for n in p.notes)
    p = mk(tmp_path, "npm-test", last_failed=True, previous=previous(Failure(test="x")))
    assert p.argv == ("npm", "test") and any("cannot filter" in n for n in p.notes)


def test_name_pattern_escapes_regex_characters() -> None:
    pat = name_pattern(["a (b) * c? > d.e"])
    assert re.search(pat, "a (b) * c? d.e")
    assert not re.search(pat, "a (b) * c? dXe")


def test_child_env_drops_agent_markers_and_leaves_colour_and_ci_alone() -> None:
    base = {
        "PATH": "/bin",
        "CLAUDECODE": "1",
        "AI_AGENT": "x",
        "CURSOR_AGENT": "1",
        "GITHUB_ACTIONS": "true",
        "FORCE_COLOR": "3",
        "NO_COLOR": "1",
        "CI": "true",
        "PYTEST_CURRENT_TEST": "t",
        "HOME": "/h",
        "KEEP": "me",
    }
    env = without_reporter_switches(base, add=[("EXTRA", "1")], drop=["KEEP"])
    expected = {"PATH": "/bin", "HOME": "/h", "FORCE_COLOR": "3", "NO_COLOR": "1", "CI": "true", "EXTRA": "1"}
    assert env == expected
    assert base["CLAUDECODE"] == "1"  # the caller's mapping is untouched
    note = changes(base, env)
    assert note is not None
    assert "removed AI_AGENT, CLAUDECODE, CURSOR_AGENT, GITHUB_ACTIONS, KEEP, PYTEST_CURRENT_TEST;" in note
    assert "set EXTRA=1 " in note and "src/greenloop" not in note and "docs/" not in note
    plain = {"PATH": "/bin", "PYTHONUNBUFFERED": "1", "GREENLOOP_PYTEST_REPORT": "/r"}
    assert changes({"PATH": "/bin", "PYTHONUNBUFFERED": "1"}, plain) is None  # greenloop's own: no note
    grown = changes({"PYTHONPATH": "/a"}, {"PYTHONPATH": "/plugin:/a"})
    assert grown is not None and "PYTHONPATH (prefixed)" in grown


def test_default_interpreter_is_this_one(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    argv, _, unavailable = python_runner(str(tmp_path), {}, lambda n: None)
    assert argv == (sys.executable, "-m", "pytest") and unavailable is None
    assert os.path.isabs(argv[0])


def test_a_target_that_is_not_a_path_gets_a_note(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("")
    p = mk(tmp_path, "pytest", target="tests/test_a.py::test_x adds")
    assert p.argv[-2:] == ("tests/test_a.py::test_x", "adds")
    assert [n for n in p.notes if "target" in n] == [
        "target 'adds' is not a path in the workspace; pytest needs a path or a node id such as "
        "tests/test_a.py::test_name"
    ]


def test_jest_selection_never_follows_the_reporters_list(tmp_path: Path) -> None:
    """jest's --reporters takes every word up to the next option: a target, or a last_failed
    rerun of files that failed to load (no names, so no -t before them), right after it was
    read as a reporter module ("Could not resolve a module for a custom reporter")."""
    fake_bin(tmp_path, "jest")
    (tmp_path / "tricky").mkdir()
    (tmp_path / "tricky" / "a.test.js").write_text("")
    load = Failure(test="tricky/a.test.js", file="tricky/a.test.js", kind="load")
    for p in (mk(tmp_path, "jest", target="tricky/"),
              mk(tmp_path, "jest", last_failed=True, previous=previous(load)),
              mk(tmp_path, "jest", target="tricky/", shard=parse_shard("1/2"))):
        last_reporter = max(i for i, a in enumerate(p.argv) if a.startswith("--reporters"))
        assert p.argv[last_reporter + 1] == "--json", p.argv
        assert p.argv[-1].startswith("tricky/"), p.argv


def test_unittest_folder_target_is_discovered(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "plain").mkdir()
    assert mk(tmp_path, "unittest", target="pkg/").argv[-5:] == ("discover", "-s", "pkg", "-t", ".")
    assert mk(tmp_path, "unittest", target="plain").argv[-3:] == ("discover", "-s", "plain")
    assert mk(tmp_path, "unittest", target="pkg.test_a").argv[-1] == "pkg.test_a"


def test_a_whole_pytest_run_records_the_coverage_map_where_the_venv_has_coverage(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    site = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    (site / "pytest").mkdir(parents=True)
    (tmp_path / ".venv" / "bin").mkdir()
    (tmp_path / ".venv" / "bin" / "python").touch(mode=0o755)
    (tmp_path / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")

    def planned(**kw: object) -> Plan:
        options = RunOptions("pytest", coverage_map=True, **kw)  # type: ignore[arg-type]
        return plan(det(tmp_path, "pytest"), options, report_dir=str(tmp_path / "r"), default_timeout_ms=1000,
                    env={})

    assert COVERAGE_PLUGIN not in planned().argv  # no coverage.py in the venv
    (site / "coverage").mkdir()
    whole = planned()
    assert whole.argv[-2:] == ("-p", COVERAGE_PLUGIN)
    assert dict(whole.env)["GREENLOOP_COVMAP"] == str(tmp_path / "r" / "covmap")
    for narrowed in (planned(target="tests/test_a.py"), planned(last_failed=True),
                     plan(det(tmp_path, "pytest"), RunOptions("pytest"), report_dir=str(tmp_path / "r"),
                          default_timeout_ms=1000, env={})):  # the config's coverage_map off
        assert COVERAGE_PLUGIN not in narrowed.argv and "GREENLOOP_COVMAP" not in dict(narrowed.env)
