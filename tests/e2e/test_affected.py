"""`--affected` on every mapped runner, in a real git repository with real runners: a change to
one module selects its tests and not the others; a new test file is included; an owed test is
always included; a lockfile or config change runs the whole suite with a note naming it; and
with nothing changed nothing runs, which is not green.

Each workspace holds two modules, `a` and `b`, and two test files, one importing each (tests
`alpha` and `beta`), committed; the cases then change the working tree and look at exactly the
tests the run ran (passed_tests) and at result.json's `affected` record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from greenloop import api
from greenloop.closure.run_evidence import evidence_of
from greenloop.result import RunResult
from greenloop.schema import validate_run_result

from .helpers import RUNNERS, cli, write_files

pytestmark = pytest.mark.e2e


class Family(NamedTuple):
    files: dict[str, str]
    mod_a: str  # the module test `alpha` imports
    mod_b: str  # the module test `beta` imports
    new_test: tuple[str, str]  # (path, text) of a new test file, test `gamma`, importing nothing
    config: str  # a file greenloop cannot map (it is in `files`)
    pkg: dict[str, object] | None = None  # package.json, for the JS runners
    new_test_runs: frozenset[str] = frozenset({"gamma"})  # what the new test file's run runs


def _py(unittest: bool) -> Family:
    def test_file(name: str, imp: str, call: str) -> str:
        if unittest:
            return (f"import unittest\n{imp}\n\n\nclass T(unittest.TestCase):\n"
                    f"    def test_{name}(self):\n        self.assertEqual({call}, 1)\n")
        return f"{imp}\n\n\ndef test_{name}():\n    assert {call} == 1\n"

    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "def a():\n    return 1\n",
        "pkg/b.py": "from pkg.util import one\n\n\ndef b():\n    return one()\n",
        "pkg/util.py": "def one():\n    return 1\n",
        "tests/__init__.py": "",
        "tests/test_a.py": test_file("alpha", "from pkg.a import a", "a()"),
        "tests/test_b.py": test_file("beta", "from pkg import b", "b.b()"),
        "setup.cfg": "[metadata]\nname = ws\n",
    }
    if not unittest:
        files["pytest.ini"] = "[pytest]\n"
        files["tests/sub/__init__.py"] = ""
        files["tests/sub/conftest.py"] = "import pytest\n"
        files["tests/sub/test_s.py"] = "def test_sub():\n    assert True\n"
    return Family(files, "pkg/a.py", "pkg/util.py", ("tests/test_new.py", test_file("gamma", "", "1")),
                  "setup.cfg")


_JS_HEAD = {
    "vitest": "import { test, expect } from 'vitest'\n",
    "jest": "",
    "node:test": "const test = require('node:test')\nconst assert = require('node:assert')\n",
    "mocha": "const assert = require('node:assert')\nconst test = it\n",
    "bun": "import { test, expect } from 'bun:test'\n",
}
_JS_PKG: dict[str, dict[str, object] | None] = {
    "vitest": {"type": "module", "devDependencies": {"vitest": "4.1.12"}},
    "jest": {"devDependencies": {"jest": "30.5.2"}},
    "node:test": None,
    "mocha": {"devDependencies": {"mocha": "12.0.3"}},
    "bun": {"scripts": {"test": "bun test"}},
}
_JS_CONFIG = {"vitest": "package-lock.json", "jest": "package-lock.json", "node:test": "package.json",
              "mocha": ".mocharc.json", "bun": "bun.lock"}


def _js(runner: str) -> Family:
    esm = runner in ("vitest", "bun")
    ext, spec_ext = ("ts", "") if runner == "bun" else ("js", ".js")
    tests = "test/" if runner == "mocha" else ""
    up = "../" if tests else "./"

    def export(name: str, body: str) -> str:
        return (f"export function {name}() {{ {body} }}\n" if esm
                else f"function {name}() {{ {body} }}\nmodule.exports = {{ {name} }}\n")

    def imp(name: str, path: str) -> str:
        return (f"import {{ {name} }} from '{path}{spec_ext}'\n" if esm
                else f"const {{ {name} }} = require('{path}{spec_ext}')\n")

    def test_file(name: str, head: str, call: str) -> str:
        check = (f"expect({call}).toBe(1)" if runner in ("vitest", "jest", "bun")
                 else f"assert.strictEqual({call}, 1)")
        return f"{_JS_HEAD[runner]}{head}test('{name}', () => {{ {check} }})\n"

    suffix = "spec" if runner == "mocha" else "test"
    files = {
        f"src/a.{ext}": export("a", "return 1"),
        f"src/util.{ext}": export("one", "return 1"),
        f"src/b.{ext}": imp("one", "./util") + export("b", "return one()"),
        f"{tests}a.{suffix}.{ext}": test_file("alpha", imp("a", f"{up}src/a"), "a()"),
        f"{tests}b.{suffix}.{ext}": test_file("beta", imp("b", f"{up}src/b"), "b()"),
        ".mocharc.json": '{"recursive": true}\n',
        "package-lock.json": "{}\n",
        "bun.lock": '{"lockfileVersion": 1, "workspaces": {"": {"name": "ws"}}}\n',
    }
    if runner == "node:test":
        files["package.json"] = '{"name": "ws", "private": true}\n'
    new_test = (f"{tests}c.{suffix}.{ext}", test_file("gamma", "", "1"))
    return Family(files, f"src/a.{ext}", f"src/util.{ext}", new_test, _JS_CONFIG[runner], _JS_PKG[runner])


def _go() -> Family:
    if shutil.which("go") is None:
        pytest.skip("go is not installed (apt-get install golang-go)")

    def test_file(pkg: str, name: str, imp: str, call: str) -> str:
        head = f'package {pkg}\n\nimport (\n\t"testing"\n{imp})\n\n'
        return head + f'func Test_{name}(t *testing.T) {{\n\tif {call} != 1 {{\n\t\tt.Fatal("no")\n\t}}\n}}\n'

    files = {
        "go.mod": "module example.com/ws\n\ngo 1.19\n",
        "a/a.go": "package a\n\nfunc A() int { return 1 }\n",
        "util/util.go": "package util\n\nfunc One() int { return 1 }\n",
        "b/b.go": 'package b\n\nimport "example.com/ws/util"\n\nfunc B() int { return util.One() }\n',
        "a/a_test.go": test_file("a", "alpha", "", "A()"),
        "b/b_test.go": test_file("b", "beta", "", "B()"),
    }
    new_test = ("c/c_test.go", test_file("c", "gamma", "", "1"))
    return Family(files, "a/a.go", "util/util.go", new_test, "go.mod")


def _cargo() -> Family:
    """A cargo workspace: crate `a` (test alpha), `util`, `b` on util (test beta, in b's
    tests/), and `tool`, which no test reaches. Selection is by crate: a new test file in
    crate a runs a's tests with it."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")

    def manifest(name: str, deps: str = "") -> str:
        return f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n{deps}'

    def test_file(crate: str, name: str, call: str) -> str:
        return f"#[test]\nfn {name}() {{\n    assert_eq!({crate}::{call}, 1);\n}}\n"

    files = {
        "Cargo.toml": '[workspace]\nmembers = ["a", "b", "util", "tool"]\nresolver = "2"\n',
        "a/Cargo.toml": manifest("a"),
        "a/src/lib.rs": "pub fn a() -> i32 {\n    1\n}\n",
        "a/tests/alpha.rs": test_file("a", "alpha", "a()"),
        "util/Cargo.toml": manifest("util"),
        "util/src/lib.rs": "pub fn one() -> i32 {\n    1\n}\n",
        "b/Cargo.toml": manifest("b", 'util = { path = "../util" }\n'),
        "b/src/lib.rs": "pub fn b() -> i32 {\n    util::one()\n}\n",
        "b/tests/beta.rs": test_file("b", "beta", "b()"),
        "tool/Cargo.toml": manifest("tool"),
        "tool/src/lib.rs": "pub fn tool() -> i32 {\n    7\n}\n",
    }
    new_test = ("a/tests/gamma.rs", "#[test]\nfn gamma() {\n    assert_eq!(1, 1);\n}\n")
    return Family(files, "a/src/lib.rs", "util/src/lib.rs", new_test, "Cargo.toml",
                  new_test_runs=frozenset({"alpha", "gamma"}))


FAMILIES: dict[str, Callable[[], Family]] = {
    "pytest": lambda: _py(unittest=False),
    "unittest": lambda: _py(unittest=True),
    "vitest": lambda: _js("vitest"),
    "jest": lambda: _js("jest"),
    "node:test": lambda: _js("node:test"),
    "mocha": lambda: _js("mocha"),
    "bun": lambda: _js("bun"),
    "go": _go,
    "cargo": _cargo,
}
_BINARY = {"vitest": "vitest", "jest": "jest", "mocha": "mocha", "bun": "bun"}


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


GO_ENV = {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"}


@pytest.fixture(autouse=True)
def _offline_go(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GO_ENV.items():
        monkeypatch.setenv(key, value)


def _workspace(tmp_path: Path, runner: str) -> tuple[Path, Family]:
    fam = FAMILIES[runner]()
    root = tmp_path / "ws"
    root.mkdir()
    if fam.pkg is not None:
        if runner in _BINARY and not (RUNNERS / ".bin" / _BINARY[runner]).exists():
            pytest.skip(f"{runner} is not installed in tests/runners (run `npm ci` there)")
        os.symlink(RUNNERS, root / "node_modules")
        (root / "package.json").write_text(json.dumps({"name": "ws", "private": True, **fam.pkg}))
    write_files(root, fam.files)
    if runner == "cargo":  # a project commits its lockfile; cargo would write one at the first run
        subprocess.run(["cargo", "generate-lockfile", "--offline"], cwd=root, check=True, capture_output=True)
    (root / ".gitignore").write_text("node_modules\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "suite")
    return root, fam


def _run(root: Path, runner: str, session_id: str = "s-aff") -> RunResult:
    result = api.test_run(root, framework=runner, affected=True, session_id=session_id)
    data = json.loads(Path(result.result_ref or "").read_text())
    assert validate_run_result(data) == [], validate_run_result(data)
    return result


def _ran(result: RunResult) -> set[str]:
    """Which of the suite's tests (alpha, beta, gamma, sub) the run passed."""
    return {name for name in ("alpha", "beta", "gamma", "sub") if any(name in t for t in result.passed_tests)}


def _edit(root: Path, rel: str) -> None:
    path = root / rel
    mark = "# edited" if rel.endswith(".py") else "// edited"
    path.write_text(f"{path.read_text()}\n{mark}\n")


RUNNER_IDS = list(FAMILIES)


@pytest.mark.parametrize("runner", RUNNER_IDS)
def test_a_change_selects_its_tests_and_not_the_others(tmp_path: Path, runner: str) -> None:
    root, fam = _workspace(tmp_path, runner)
    _edit(root, fam.mod_b)  # b's own dependency: beta reaches it through b
    result = _run(root, runner)
    assert result.ok and result.selection == "affected", result.notes
    assert _ran(result) == {"beta"}, result.passed_tests
    assert not evidence_of(result, None).whole_suite  # the gate: a narrowed run, never the whole suite
    assert result.affected is not None and result.affected.fallback is None
    assert result.affected.changed == (fam.mod_b,)
    _edit(root, fam.mod_a)
    assert _ran(_run(root, runner)) == {"alpha", "beta"}


@pytest.mark.parametrize("runner", RUNNER_IDS)
def test_a_new_test_file_is_included(tmp_path: Path, runner: str) -> None:
    root, fam = _workspace(tmp_path, runner)
    write_files(root, dict([fam.new_test]))  # untracked
    result = _run(root, runner)
    assert _ran(result) == fam.new_test_runs, (result.passed_tests, result.notes)
    assert result.selection == "affected"


@pytest.mark.parametrize("runner", RUNNER_IDS)
def test_a_config_change_runs_the_whole_suite_and_says_which_file(tmp_path: Path, runner: str) -> None:
    root, fam = _workspace(tmp_path, runner)
    _edit(root, fam.mod_a)
    (root / fam.config).write_text((root / fam.config).read_text() + "\n")
    result = _run(root, runner)
    whole = {"alpha", "beta", "sub"} if runner == "pytest" else {"alpha", "beta"}
    assert result.ok and _ran(result) == whole, result.passed_tests
    assert result.selection is None  # it ran the whole suite: whole-suite evidence for the gate
    assert evidence_of(result, None).whole_suite
    assert result.affected is not None and fam.config in (result.affected.fallback or "")
    assert any("whole suite" in n and fam.config in n for n in result.notes), result.notes
    (root / fam.config).unlink()  # a deleted file cannot be mapped either
    deleted = _run(root, runner)
    assert deleted.affected is not None and "deleted" in (deleted.affected.fallback or "")


@pytest.mark.parametrize("runner", RUNNER_IDS)
def test_an_owed_test_is_always_included(tmp_path: Path, runner: str) -> None:
    root, fam = _workspace(tmp_path, runner)
    mod_b = root / fam.mod_b
    good = mod_b.read_text()
    mod_b.write_text(good.replace("1", "2"))
    red = api.test_run(root, framework=runner, session_id="s-owed")  # the whole suite: beta fails
    assert red.outcome == "red" and any("beta" in f.test for f in red.failures)
    mod_b.write_text(good)  # fixed back to HEAD: nothing changed, but beta is still owed
    result = _run(root, runner, session_id="s-owed")
    assert result.ok and _ran(result) == {"beta"}, (result.passed_tests, result.notes)
    assert result.affected is not None and any("beta" in t for t in result.affected.owed)
    _edit(root, fam.mod_a)
    assert _ran(_run(root, runner, session_id="s-owed")) >= {"alpha"}


@pytest.mark.parametrize("runner", RUNNER_IDS)
def test_nothing_changed_runs_nothing_and_is_not_green(tmp_path: Path, runner: str) -> None:
    root, _fam = _workspace(tmp_path, runner)
    result = _run(root, runner)
    assert not result.ok and result.outcome != "green" and result.summary.total == 0
    assert result.selection == "affected"
    assert "nothing to run" in (result.crash_reason or ""), result.crash_reason
    assert result.exit_code is None  # nothing was started


@pytest.mark.parametrize("runner", RUNNER_IDS)
def test_a_module_no_test_reaches_runs_nothing_and_is_not_green(tmp_path: Path, runner: str) -> None:
    root, fam = _workspace(tmp_path, runner)
    unused = fam.mod_a.replace("/a.", "/unused.")
    text = (root / fam.mod_a).read_text()
    if runner == "go":  # a file of package a is package a: a new package nothing imports
        unused, text = "unused/unused.go", "package unused\n"
    if runner == "cargo":  # a file of crate a is crate a: the crate no test reaches
        unused, text = "tool/src/lib.rs", "pub fn tool() -> i32 {\n    8\n}\n"
    write_files(root, {unused: text})
    result = _run(root, runner)
    if runner == "cargo":  # `cargo test -p tool` ran, and found no test: not green either
        assert result.affected is not None and result.affected.tests == ("tool",), result.affected
        assert not result.ok and result.summary.total == 0, (result.outcome, result.notes)
        return
    assert not result.ok and result.summary.total == 0 and result.selection == "affected"
    assert "not a green run" in (result.crash_reason or ""), (result.crash_reason, result.notes)
    assert result.next_action is None  # nothing is broken: there is nothing to retry


def test_a_conftest_change_selects_its_folder(tmp_path: Path) -> None:
    root, _fam = _workspace(tmp_path, "pytest")
    _edit(root, "tests/sub/conftest.py")
    result = _run(root, "pytest")
    assert _ran(result) == {"sub"} and result.affected is not None
    assert result.affected.tests == ("tests/sub/test_s.py",)


def test_the_cli_refuses_affected_with_another_selection(tmp_path: Path) -> None:
    root, _fam = _workspace(tmp_path, "pytest")
    for extra in (["--last-failed"], ["--target", "tests"], ["--shard", "1/2"]):
        done = cli("run", str(root), "--affected", *extra)
        assert done.code == 2 and "affected chooses the tests itself" in done.stderr, done.stderr
    done = cli("run", str(root), "--affected", "--json")
    assert done.code != 0 and done.json["selection"] == "affected"  # nothing changed: not green


def test_a_module_named_at_run_time_runs_the_whole_suite(tmp_path: Path) -> None:
    root, _fam = _workspace(tmp_path, "node:test")
    test_a = root / "a.test.js"
    test_a.write_text(test_a.read_text() + "const name = './src/b.js'\nrequire(name)\n")
    result = _run(root, "node:test")
    assert result.selection is None and _ran(result) == {"alpha", "beta"}, result.passed_tests
    assert result.affected is not None and "a.test.js" in (result.affected.fallback or "")


def test_changes_count_from_the_sessions_last_green_whole_suite_run(tmp_path: Path) -> None:
    root, fam = _workspace(tmp_path, "pytest")
    _edit(root, fam.mod_a)
    first = _run(root, "pytest", session_id="s-base")  # no green whole-suite run yet: since HEAD
    assert first.affected is not None and first.affected.since == "HEAD" and _ran(first) == {"alpha"}
    whole = api.test_run(root, framework="pytest", session_id="s-base")
    assert whole.ok and whole.selection is None
    same = _run(root, "pytest", session_id="s-base")  # a.py still differs from HEAD, not from that run
    assert same.affected is not None and same.affected.since == whole.run_id
    assert same.summary.total == 0 and not same.ok, same.notes
    _edit(root, fam.mod_b)
    after = _run(root, "pytest", session_id="s-base")
    assert after.affected is not None and after.affected.changed == (fam.mod_b,)
    assert _ran(after) == {"beta"}, after.passed_tests
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "edits")  # committed since: the commit's files count
    committed = _run(root, "pytest", session_id="s-base")
    assert committed.affected is not None and fam.mod_b in committed.affected.changed
    other = _run(root, "pytest", session_id="s-other")  # another session: its own baseline (HEAD)
    assert other.affected is not None and other.affected.since == "HEAD" and other.summary.total == 0


def test_the_config_makes_an_agents_run_that_chooses_nothing_an_affected_run(tmp_path: Path) -> None:
    root, fam = _workspace(tmp_path, "pytest")
    (root / "greenloop.toml").write_text("affected = true\n")
    _git(root, "add", "greenloop.toml")
    _git(root, "commit", "-q", "-m", "config")
    _edit(root, fam.mod_a)
    inner = api.test_run(root, framework="pytest", affected=None, session_id="s-cfg")  # what MCP passes
    assert inner.selection == "affected" and _ran(inner) == {"alpha"}, inner.notes
    assert any("affected = true" in n for n in inner.notes)
    chosen = api.test_run(root, framework="pytest", affected=None, target="tests/test_b.py",
                          session_id="s-cfg")
    assert chosen.selection == "target" and _ran(chosen) == {"beta"}
    whole = api.test_run(root, framework="pytest", affected=False, session_id="s-cfg")  # asked for the suite
    assert whole.selection is None and _ran(whole) == {"alpha", "beta", "sub"}
    cli_run = cli("run", str(root), "--framework", "pytest", "--json")  # a CLI run is the whole suite
    assert cli_run.json["selection"] is None
