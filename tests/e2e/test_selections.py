"""Narrowed runs on every real runner: a target (one folder of the suite), `--last-failed` after
a red run, and `--shard I/N` of that target. Each workspace holds the same suite: `tricky/` with
three test files (four tests, `b1` fails) and `other/` with one file (two tests), six tests in
all; each case checks the counts of exactly the tests it selected, so a runner that reads the
selection as something else (jest took a target after `--reporters` for a reporter module) or
runs the whole suite instead is caught.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from greenloop import api
from greenloop.errors import UsageError
from greenloop.result import RunResult
from greenloop.schema import validate_run_result

from .helpers import RUNNERS, write_files

pytestmark = pytest.mark.e2e

GO_ENV = {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CARGO_NET_OFFLINE": "true"}

# (file stem, [(test, passes)]) of the suite; tricky/ has three files so a shard of it splits
TRICKY = [("t1", [("a1", True), ("b1", False)]), ("t2", [("a2", True)]), ("t3", [("a3", True)])]
OTHER = [("o1", [("o1a", True), ("o1b", True)])]
WHOLE, IN_TRICKY = 6, 4


def _js_files(ext: str, head: str, fail: str, folder: str = "") -> dict[str, str]:
    files: dict[str, str] = {}
    for group, suite in (("tricky", TRICKY), ("other", OTHER)):
        for stem, tests in suite:
            body = "".join(f"test('{name}', () => {{ {'' if ok else fail} }})\n" for name, ok in tests)
            files[f"{folder}{group}/{stem}.{ext}"] = head + body
    return files


def _js_root(root: Path, pkg: dict[str, object], binary: str) -> Path:
    if not (RUNNERS / ".bin" / binary).exists():
        pytest.skip(f"{binary} is not installed in tests/runners (run `npm ci` there)")
    root.mkdir(parents=True)
    (root / ".git").mkdir()  # stop upward searches (lockfiles, hoisted binaries) at the workspace
    os.symlink(RUNNERS, root / "node_modules")
    (root / "package.json").write_text(json.dumps({"name": "ws", "private": True, **pkg}))
    return root


def _vitest(root: Path) -> Path:
    ws = _js_root(root, {"type": "module", "devDependencies": {"vitest": "4.1.12"}}, "vitest")
    head = "import { test, expect } from 'vitest'\n"
    return write_files(ws, _js_files("test.js", head, "expect(1).toBe(2)"))


def _jest(root: Path) -> Path:
    ws = _js_root(root, {"devDependencies": {"jest": "30.5.2"}}, "jest")
    return write_files(ws, _js_files("test.js", "", "expect(1).toBe(2)"))


def _node(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    head = "const test = require('node:test')\nconst assert = require('node:assert')\n"
    return write_files(root, _js_files("test.js", head, "assert.strictEqual(1, 2)"))


def _mocha(root: Path) -> Path:
    ws = _js_root(root, {"devDependencies": {"mocha": "12.0.3"}}, "mocha")
    (ws / ".mocharc.json").write_text('{"recursive": true}\n')
    head = "const assert = require('node:assert')\nconst test = it\n"
    return write_files(ws, _js_files("spec.js", head, "assert.strictEqual(1, 2)", folder="test/"))


def _bun(root: Path) -> Path:
    ws = _js_root(root, {"scripts": {"test": "bun test"}}, "bun")
    (ws / "bun.lock").write_text('{"lockfileVersion": 1, "workspaces": {"": {"name": "ws"}}}\n')
    head = "import { test, expect } from 'bun:test'\n"
    return write_files(ws, _js_files("test.ts", head, "expect(1).toBe(2)"))


def _py_files(unittest: bool) -> dict[str, str]:
    files: dict[str, str] = {}
    for group, suite in (("tricky", TRICKY), ("other", OTHER)):
        if unittest:
            files[f"{group}/__init__.py"] = ""
        for stem, tests in suite:
            if unittest:
                body = "import unittest\n\n\nclass T(unittest.TestCase):\n" + "".join(
                    f"    def test_{name}(self):\n        self.assertEqual(1, {1 if ok else 2})\n\n"
                    for name, ok in tests)
            else:
                body = "".join(f"def test_{name}():\n    assert 1 == {1 if ok else 2}\n\n"
                               for name, ok in tests)
            files[f"{group}/test_{stem}.py"] = body
    return files


def _pytest(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    return write_files(root, _py_files(unittest=False))


def _unittest(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    return write_files(root, _py_files(unittest=True))


def _go(root: Path) -> Path:
    if shutil.which("go") is None:
        pytest.skip("go is not installed (apt-get install golang-go)")
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    files = {"go.mod": "module example.com/ws\n\ngo 1.21\n"}
    for group, suite in (("tricky", TRICKY), ("other", OTHER)):
        for stem, tests in suite:
            fail = ' t.Fatal("1 != 2") '
            body = f"package {group}\n\nimport \"testing\"\n\n" + "".join(
                f"func Test{name.upper()}(t *testing.T) {{{'' if ok else fail}}}\n\n" for name, ok in tests)
            files[f"{group}/{stem}_test.go"] = body
    return write_files(root, files)


def _cargo(root: Path) -> Path:
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    files = {"Cargo.toml": '[package]\nname = "ws"\nversion = "0.1.0"\nedition = "2021"\n',
             "src/lib.rs": "pub fn one() -> i32 { 1 }\n"}
    for group, suite in (("tricky", TRICKY), ("other", OTHER)):
        body = "".join(f"#[test]\nfn {name}() {{ assert_eq!(ws::one(), {1 if ok else 2}); }}\n\n"
                       for _, tests in suite for name, ok in tests)
        files[f"tests/{group}.rs"] = body
    return write_files(root, files)


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "vitest": _vitest, "jest": _jest, "node:test": _node, "mocha": _mocha, "bun": _bun,
    "pytest": _pytest, "unittest": _unittest, "go": _go, "cargo": _cargo,
}
# the target that selects tricky/ in each runner's own terms
TARGETS = {"mocha": "test/tricky", "go": "./tricky/...", "cargo": "tests/tricky.rs"}
SHARDED = ("vitest", "jest", "node:test", "pytest", "bun")  # the runners with a shard of their own


def _run(ws: Path, framework: str, **kw: object) -> RunResult:
    r = api.test_run(ws, framework=framework, session_id="s", sandbox="full-access", **kw)  # type: ignore[arg-type]
    assert validate_run_result(r.to_json()) == []
    return r


def _leaves(names: tuple[str, ...] | list[str]) -> set[str]:
    """Test names without their file or package: `tricky/t1.test.js > a1` -> `a1`, `TestA1` -> `a1`."""
    out = set()
    for n in names:
        leaf = n.replace("::", ".").replace(" > ", ".").replace("/", ".").rsplit(".", 1)[-1]
        out.add(leaf.removeprefix("test_").removeprefix("Test").lower())
    return out


@pytest.fixture(autouse=True)
def _go_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in GO_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.mark.parametrize("framework", list(BUILDERS))
def test_target_runs_exactly_the_folder(tmp_path: Path, framework: str) -> None:
    ws = BUILDERS[framework](tmp_path / "ws")
    r = _run(ws, framework, target=TARGETS.get(framework, "tricky/"))
    assert r.framework == framework and r.outcome == "red", (r.outcome, r.crash_reason, r.command,
                                                             r.output_tail)
    assert (r.summary.total, r.summary.passed, r.summary.failed) == (IN_TRICKY, 3, 1), (r.summary, r.command)
    assert r.selection == "target"
    assert _leaves([f.test for f in r.failures]) == {"b1"}
    if r.passed_tests:  # npm-style text output names none; every runner here does
        assert _leaves(r.passed_tests) == {"a1", "a2", "a3"}


@pytest.mark.parametrize("framework", list(BUILDERS))
def test_last_failed_reruns_exactly_the_failure(tmp_path: Path, framework: str) -> None:
    ws = BUILDERS[framework](tmp_path / "ws")
    whole = _run(ws, framework)
    assert (whole.summary.total, whole.summary.failed) == (WHOLE, 1), (whole.summary, whole.command)
    again = _run(ws, framework, last_failed=True)
    assert again.outcome == "red" and again.selection == "last_failed", (again.outcome, again.crash_reason,
                                                                          again.command, again.output_tail)
    # only b1 ran: the tests a runner filtered out of a loaded file may count as skipped
    ran = again.summary.total - again.summary.skipped
    assert (ran, again.summary.passed, again.summary.failed) == (1, 0, 1), (again.summary, again.command)
    assert _leaves([f.test for f in again.failures]) == {"b1"} and not again.passed_tests


@pytest.mark.parametrize("framework", list(BUILDERS))
def test_shard_of_a_target_splits_only_the_folder(tmp_path: Path, framework: str) -> None:
    ws = BUILDERS[framework](tmp_path / "ws")
    target = TARGETS.get(framework, "tricky/")
    if framework not in SHARDED:
        with pytest.raises(UsageError, match=f"does not split {framework}"):
            _run(ws, framework, target=target, shard="1/2")
        return
    shards = [_run(ws, framework, target=target, shard=f"{i}/2") for i in (1, 2)]
    for s in shards:
        assert s.outcome in ("green", "red"), (s.outcome, s.crash_reason, s.command)
        assert s.selection == "shard"
        assert s.shard is not None and s.shard.target == target
    assert sum(s.summary.total for s in shards) == IN_TRICKY, [(s.summary, s.command) for s in shards]
    assert sum(s.summary.failed for s in shards) == 1
    passed = [t for s in shards for t in s.passed_tests]
    assert len(passed) == len(set(passed)) and _leaves(passed) == {"a1", "a2", "a3"}
    assert all(s.summary.total for s in shards), "each shard of three files holds a test"

    merged = api.merge_results([str(s.result_ref) for s in shards], workspace=ws, session_id="m")
    assert merged.outcome == "red" and merged.summary.total == IN_TRICKY
    # the merge covers the folder, not the suite: a narrowed run, named
    assert merged.selection == "target", merged.selection
    assert any(f"target {target}" in n for n in merged.notes), merged.notes


def test_jest_last_failed_after_a_file_that_failed_to_load(tmp_path: Path) -> None:
    """The failures carry no test names, so the rerun is the failing file alone: it came right
    after jest's --reporters list and was read as a reporter module."""
    ws = _jest(tmp_path / "ws")
    (ws / "tricky" / "t1.test.js").write_text("test('a1', () => {})\n")
    (ws / "tricky" / "t2.test.js").write_text("require('./missing-module')\ntest('a2', () => {})\n")
    whole = _run(ws, "jest")
    assert [f.kind for f in whole.failures] == ["load"], whole.failures
    again = _run(ws, "jest", last_failed=True)
    assert again.selection == "last_failed", again.crash_reason
    assert "reporter" not in (again.crash_reason or ""), again.crash_reason
    assert again.command.endswith("tricky/t2.test.js")
    assert [f.kind for f in again.failures] == ["load"] and again.summary.passed == 0
