"""Sharding in the plan: `I/N` parsed and checked, and each runner's own dialect. Pure: nothing runs."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from greenloop.errors import UsageError
from greenloop.model import Detection, ShardInfo
from greenloop.runner.plan import RunOptions, parse_shard, plan, script_runner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src/greenloop/frameworks/pytest_plugin"))


def _bin(root: Path, name: str) -> None:
    path = root / "node_modules" / ".bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _plan(
    root: Path, framework: str, shard: str, manager: str | None = None
) -> tuple[list[str], dict[str, str]]:
    det = Detection(framework=framework, root=str(root), package_manager=manager)
    p = plan(det, RunOptions(shard=parse_shard(shard)), report_dir=str(root / "r"), default_timeout_ms=1000,
             which=lambda name: f"/usr/bin/{name}", env={})
    assert p.selection == "shard" and p.shard == parse_shard(shard) and p.shard.target is None
    return list(p.argv), dict(p.env)


@pytest.mark.parametrize("text", ["1/1", "2/3", " 3 / 3 "])
def test_parse_shard_accepts_i_of_n(text: str) -> None:
    i, n = (int(x) for x in text.split("/"))
    assert parse_shard(text) == ShardInfo(i, n)


@pytest.mark.parametrize("text", ["3/2", "0/2", "x", "", "1/0", "-1/2", "1/2/3", "1.5/2", None, 3])
def test_parse_shard_refuses_naming_the_fix(text: object) -> None:
    with pytest.raises(UsageError, match=r"shard \(--shard\).*1 <= I <= N, e\.g\. --shard 1/3"):
        parse_shard(text)


def test_each_runner_gets_its_own_dialect(tmp_path: Path) -> None:
    for runner in ("vitest", "jest"):
        _bin(tmp_path, runner)
        argv, _ = _plan(tmp_path, runner, "2/4")
        assert "--shard=2/4" in argv and "--passWithNoTests" in argv
    argv, _ = _plan(tmp_path, "node:test", "2/4")
    assert "--test-shard=2/4" in argv
    argv, env = _plan(tmp_path, "pytest", "2/4")
    assert env["GREENLOOP_PYTEST_SHARD"] == "2/4" and not any(a.startswith("--shard") for a in argv)
    _bin(tmp_path, "bun")
    argv, _ = _plan(tmp_path, "bun", "2/4")
    assert "--shard=2/4" in argv


def test_a_shard_of_a_target_splits_the_target_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    det = Detection(framework="vitest", root=str(tmp_path))
    _bin(tmp_path, "vitest")
    p = plan(det, RunOptions(target="pkg", shard=parse_shard("1/2")), report_dir=str(tmp_path / "r"),
             default_timeout_ms=1000, which=lambda name: f"/usr/bin/{name}", env={})
    assert p.shard == ShardInfo(1, 2, target="pkg") and p.selection == "shard"
    assert p.argv[-3:] == ("--shard=1/2", "--passWithNoTests", "pkg")
    # npm passes what follows one `--` to the script: the shard joins the target there
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "jest"}}))
    det = Detection(framework="npm-test", root=str(tmp_path))
    p = plan(det, RunOptions(target="pkg", shard=parse_shard("1/2")), report_dir=str(tmp_path / "r"),
             default_timeout_ms=1000, which=lambda name: f"/usr/bin/{name}", env={})
    assert p.argv == ("npm", "test", "--", "pkg", "--shard=1/2")


@pytest.mark.parametrize(
    ("script", "runner"),
    [
        ("vitest run", "vitest"),
        ("jest --ci", "jest"),
        ("cross-env FOO=1 ./node_modules/.bin/jest", "jest"),
        ("node --test", "node:test"),
        ("node --experimental-vm-modules --test test/", "node:test"),
        ("mocha", None),
        ("vitest run && eslint .", None),
        ("tsc; jest", None),
        ("node test.js", None),
    ],
)
def test_script_runner(tmp_path: Path, script: str, runner: str | None) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": script}}))
    assert script_runner(str(tmp_path)) == runner


def test_npm_test_passes_the_shard_to_the_scripts_runner(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "vitest run"}}))
    argv, _ = _plan(tmp_path, "npm-test", "1/2")
    assert argv[-2:] == ["--", "--shard=1/2"]
    argv, _ = _plan(tmp_path, "npm-test", "1/2", manager="pnpm")
    assert argv[-1] == "--shard=1/2" and "--" not in argv
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "node --test"}}))
    argv, env = _plan(tmp_path, "npm-test", "1/2")
    assert env["NODE_OPTIONS"] == "--test-shard=1/2" and argv[-1] == "test"
    (tmp_path / "package.json").write_text(json.dumps({"scripts": {"test": "mocha"}}))
    with pytest.raises(UsageError, match="runner is not one greenloop can shard"):
        _plan(tmp_path, "npm-test", "1/2")


def test_pytest_plugin_hash_is_stable_and_covers_every_shard() -> None:
    from _greenloop_pytest_report import shard_of

    ids = [f"tests/test_m{i}.py::test_{j}" for i in range(20) for j in range(10)]
    for total in (1, 2, 3, 7):
        found = {shard_of(nodeid, total) for nodeid in ids}
        assert found == set(range(1, total + 1))
    # a known value: the same on every machine and every Python (CRC-32, not hash())
    assert shard_of("tests/test_a.py::test_x", 4) == shard_of("tests/test_a.py::test_x", 4)
    import zlib

    assert shard_of("tests/test_a.py::test_x", 4) == zlib.crc32(b"tests/test_a.py::test_x") % 4 + 1
