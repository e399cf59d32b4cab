"""Probe: detection rules in order, the walk's limits, package managers, suites. Real files only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from greenloop.runner.probe import is_test_file, package_manager, probe, walk


def write(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def pkg(root: Path, rel: str = "package.json", **data: object) -> None:
    write(root, rel, json.dumps({"name": "w", "private": True, **data}))


def test_vitest_declared_wins_over_jest_and_script(tmp_path: Path) -> None:
    pkg(tmp_path, devDependencies={"vitest": "4", "jest": "30"}, scripts={"test": "jest"})
    write(tmp_path, "vitest.config.ts", "export default {}")
    write(tmp_path, "src/a.test.ts")
    d = probe(str(tmp_path))
    assert d.framework == "vitest"
    assert d.config_path == "vitest.config.ts"
    assert d.test_files == ("src/a.test.ts",)
    assert d.root == str(tmp_path.resolve())


def test_jest_declared_by_dependency_script_or_config_key(tmp_path: Path) -> None:
    for i, extra in enumerate(
        [
            {"devDependencies": {"jest": "30"}},
            {"scripts": {"test": "jest --ci"}},
            {"jest": {"testEnvironment": "node"}},
        ]
    ):
        ws = tmp_path / str(i)
        pkg(ws, **extra)  # type: ignore[arg-type]
        assert probe(str(ws)).framework == "jest", extra


def test_test_script_is_npm_test_but_npm_default_script_is_not(tmp_path: Path) -> None:
    pkg(tmp_path / "a", scripts={"test": "ava"})
    assert probe(str(tmp_path / "a")).framework == "npm-test"
    assert probe(str(tmp_path / "a")).command == ("npm", "test")
    pkg(tmp_path / "b", scripts={"test": 'echo "Error: no test specified" && exit 1'})
    d = probe(str(tmp_path / "b"))
    assert d.framework is None
    assert any("nothing to test" in n for n in d.notes)


@pytest.mark.parametrize(
    ("scripts", "framework"),
    [
        ({"test": "bun run test:functionality", "test:functionality": "bun test"}, "bun"),  # elysia
        ({"test": "npm run test:unit", "test:unit": "pnpm run unit", "unit": "mocha test/"}, "mocha"),
        ({"test": "yarn spec", "spec": "jest --ci"}, "jest"),
        ({"test": "npm run a", "a": "npm run test"}, "npm-test"),  # a loop ends where it began
        ({"test": "npm run missing"}, "npm-test"),
        ({"test": "npm run lint && bun test"}, "bun"),  # not a chain: read as written
    ],
)
def test_a_test_script_that_runs_another_script_is_followed_to_its_runner(
    tmp_path: Path, scripts: dict[str, str], framework: str
) -> None:
    pkg(tmp_path, scripts=scripts)
    assert probe(str(tmp_path)).framework == framework


@pytest.mark.parametrize(
    ("rel", "text", "config"),
    [
        ("pytest.ini", "[pytest]\n", "pytest.ini"),
        ("pyproject.toml", "[tool.pytest.ini_options]\naddopts='-q'\n", "pyproject.toml"),
        ("pyproject.toml", "[project]\ndependencies=['pytest>=8']\n", "pyproject.toml"),
        ("conftest.py", "", "conftest.py"),
        ("setup.cfg", "[tool:pytest]\n", "setup.cfg"),
        ("tox.ini", "[pytest]\n", "tox.ini"),
    ],
)
def test_pytest_markers(tmp_path: Path, rel: str, text: str, config: str) -> None:
    write(tmp_path, rel, text)
    d = probe(str(tmp_path))
    assert d.framework == "pytest"
    assert d.config_path == config
    assert d.command[-2:] == ("-m", "pytest")


def test_package_json_script_outranks_pytest_marker(tmp_path: Path) -> None:
    pkg(tmp_path, scripts={"test": "node run-tests.js"})
    write(tmp_path, "pytest.ini", "[pytest]\n")
    assert probe(str(tmp_path)).framework == "npm-test"


def test_only_python_test_files_answer_pytest_not_node_test(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_calc.py", "def test_x():\n    assert True\n")
    write(tmp_path, "tests/helpers.py")
    d = probe(str(tmp_path))
    assert d.framework == "pytest"
    assert d.test_files == ("tests/test_calc.py",)
    assert any("only Python test files" in n for n in d.notes)


def test_js_test_files_answer_node_test(tmp_path: Path) -> None:
    write(tmp_path, "test/math.test.mjs")
    write(tmp_path, "lib/util.js")
    d = probe(str(tmp_path), which=lambda n: f"/bin/{n}")
    assert d.framework == "node:test"
    assert d.command == ("/bin/node", "--test")  # the node run would start
    assert d.test_files == ("test/math.test.mjs",)


def test_empty_workspace_answers_none_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, "README.md", "hi")
    d = probe(str(tmp_path))
    assert d.framework is None
    assert d.command == ()
    assert any("nothing to test" in n for n in d.notes)


@pytest.mark.parametrize(
    ("lockfile", "manager", "install"),
    [
        ("package-lock.json", "npm", "npm install -D vitest"),
        ("pnpm-lock.yaml", "pnpm", "pnpm add -D vitest"),
        ("yarn.lock", "yarn", "yarn add -D vitest"),
        ("bun.lockb", "bun", "bun add -d vitest"),
    ],
)
def test_probe_shows_the_command_run_starts(
    tmp_path: Path, lockfile: str, manager: str, install: str
) -> None:
    # one source for both: the workspace's own node_modules/.bin runner, never `pnpm exec …`
    # (pnpm need not be installed for run to work); what is missing is a note
    (tmp_path / ".git").mkdir()
    pkg(tmp_path, devDependencies={"vitest": "4"})
    write(tmp_path, lockfile)
    nothing = probe(str(tmp_path), which=lambda n: None)
    assert nothing.package_manager == manager
    assert nothing.command == ("vitest", "run")
    assert any(n.startswith("greenloop run would not start: vitest is not installed") and install in n
               for n in nothing.notes), nothing.notes
    binary = write(tmp_path, "node_modules/.bin/vitest", "#!/bin/sh\n")
    binary.chmod(0o755)
    d = probe(str(tmp_path), which=lambda n: None)  # no package manager on PATH at all
    assert d.command == (str(binary), "run")
    assert not any("would not start" in n for n in d.notes)
    from greenloop.model import Detection
    from greenloop.runner.plan import RunOptions, plan

    planned = plan(Detection(**{**d._asdict(), "command": ()}), RunOptions(), report_dir=str(tmp_path / "r"),
                   default_timeout_ms=1000, which=lambda n: None)
    assert planned.argv[: len(d.command)] == d.command and planned.unavailable is None


def test_package_manager_field_and_parent_lockfile(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    write(tmp_path, "pnpm-lock.yaml")
    pkg(tmp_path, "packages/a/package.json", scripts={"test": "x"})
    assert package_manager(tmp_path / "packages" / "a") == "pnpm"
    assert package_manager(tmp_path, {"packageManager": "yarn@4.1.0"}) == "yarn"


def test_monorepo_lists_suites(tmp_path: Path) -> None:
    pkg(tmp_path, workspaces=["packages/*"])
    pkg(tmp_path, "packages/web/package.json", devDependencies={"vitest": "4"})
    pkg(tmp_path, "packages/api/package.json", devDependencies={"jest": "30"})
    write(tmp_path, "services/py/pytest.ini", "[pytest]\n")
    pkg(tmp_path, "packages/docs/package.json")  # no tests: not a suite
    d = probe(str(tmp_path))
    assert d.framework is None
    assert {(s.root, s.framework) for s in d.suites} == {
        ("packages/web", "vitest"),
        ("packages/api", "jest"),
        ("services/py", "pytest"),
    }
    assert any("3 test roots" in n for n in d.notes)


def test_single_nested_suite_answers_for_the_workspace(tmp_path: Path) -> None:
    pkg(tmp_path, "app/package.json", devDependencies={"jest": "30"})
    write(tmp_path, "app/src/a.test.js")
    d = probe(str(tmp_path))
    assert d.framework == "jest"
    assert d.root == str((tmp_path / "app").resolve())
    assert d.test_files == ("src/a.test.js",)


def test_walk_skips_node_modules_build_output_and_virtualenvs(tmp_path: Path) -> None:
    write(tmp_path, "node_modules/x/a.test.js")
    write(tmp_path, "dist/a.test.js")
    write(tmp_path, "build/test_b.py")
    write(tmp_path, "env/pyvenv.cfg")  # a virtualenv under any name
    write(tmp_path, "env/lib/test_c.py")
    write(tmp_path, ".venv/lib/test_d.py")
    write(tmp_path, "src/real.spec.js")
    w = walk(str(tmp_path))
    assert w.js_tests == ("src/real.spec.js",)
    assert w.py_tests == ()


def test_walk_never_follows_symlinked_folders(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside, "test_far.py")
    ws = tmp_path / "ws"
    write(ws, "test_near.py")
    os.symlink(outside, ws / "linked")
    os.symlink(ws, ws / "loop")  # a cycle must not hang the walk
    assert walk(str(ws)).py_tests == ("test_near.py",)


def test_walk_is_breadth_first_and_stops_at_its_budget(tmp_path: Path) -> None:
    deep = tmp_path
    for i in range(6):
        deep = deep / f"d{i}"
    write(deep, "test_deep.py")
    write(tmp_path, "test_top.py")
    for i in range(50):
        write(tmp_path, f"pad/file{i}.txt")
    w = walk(str(tmp_path), budget=40)
    assert w.truncated
    assert w.py_tests == ("test_top.py",)
    d = probe(str(tmp_path), budget=40)
    assert any("stopped after 40 entries" in n for n in d.notes)


@pytest.mark.parametrize(
    ("rel", "kind"),
    [
        ("a.test.js", "js"),
        ("src/a.spec.tsx", "js"),
        ("x/b-test.mjs", "js"),
        ("c_test.cjs", "js"),
        ("test/helpers.js", "js"),
        ("__tests__/thing.ts", "js"),
        ("types.d.ts", None),
        ("src/contest.js", None),
        ("test_a.py", "py"),
        ("pkg/a_test.py", "py"),
        ("pkg/testing.py", None),
    ],
)
def test_test_file_conventions(rel: str, kind: str | None) -> None:
    assert is_test_file(rel) == kind


def test_probe_writes_nothing(tmp_path: Path) -> None:
    write(tmp_path, "test_a.py")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    probe(str(tmp_path))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_broken_package_json_is_ignored_with_a_note(tmp_path: Path) -> None:
    write(tmp_path, "package.json", '{"devDependencies": {"vitest": "4"},}')
    write(tmp_path, "test_a.py")
    d = probe(str(tmp_path))
    assert d.framework == "pytest"
    assert any("package.json is not a valid JSON object" in n for n in d.notes)


def _no_walk(*_a: object, **_k: object) -> None:
    raise AssertionError("the workspace was walked")


def test_files_false_skips_the_walk_when_the_root_declares_a_runner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "pytest.ini", "[pytest]\n")
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n")
    full = probe(str(tmp_path))
    assert full.test_files == ("tests/test_a.py",)
    monkeypatch.setattr("greenloop.runner.probe.walk", _no_walk)
    quick = probe(str(tmp_path), files=False)
    assert (quick.framework, quick.root, quick.config_path, quick.package_manager) == (
        full.framework,
        full.root,
        full.config_path,
        full.package_manager,
    )
    assert quick.test_files == ()
    with pytest.raises(AssertionError, match="walked"):
        probe(str(tmp_path))  # the default still lists test files


@pytest.mark.parametrize(
    "layout",
    ["vitest-root", "npm-test-root", "pytest-only", "single-nested", "monorepo", "py-files-only", "bad-json"],
)
def test_files_false_plans_the_same_run(tmp_path: Path, layout: str) -> None:
    from greenloop.runner.plan import RunOptions, plan

    if layout == "vitest-root":
        pkg(tmp_path, devDependencies={"vitest": "4"})
        write(tmp_path, "pnpm-lock.yaml")
        write(tmp_path, "a.test.js")
    elif layout == "npm-test-root":
        pkg(tmp_path, scripts={"test": "node x.js"})
        pkg(tmp_path, "packages/web/package.json", devDependencies={"jest": "30"})
    elif layout == "pytest-only":
        write(tmp_path, "pyproject.toml", "[tool.pytest.ini_options]\n")
        write(tmp_path, "yarn.lock")
    elif layout == "single-nested":
        pkg(tmp_path, "app/package.json", devDependencies={"jest": "30"})
        write(tmp_path, "app/src/a.test.js")
    elif layout == "monorepo":
        pkg(tmp_path, "packages/web/package.json", devDependencies={"vitest": "4"})
        write(tmp_path, "services/py/pytest.ini", "[pytest]\n")
    elif layout == "py-files-only":
        write(tmp_path, "test_a.py")
    else:
        write(tmp_path, "package.json", "{,}")
        write(tmp_path, "conftest.py")

    def planned(files: bool) -> object:
        d = probe(str(tmp_path), files=files)
        try:
            r_dir = str(tmp_path / "r")
            return plan(d, RunOptions(), report_dir=r_dir, default_timeout_ms=1000, which=lambda _: None)
        except Exception as exc:  # nothing to test: the same refusal
            return repr(exc)

    assert planned(files=False) == planned(files=True)
