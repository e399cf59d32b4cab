"""A package.json test script's own arguments, kept when greenloop runs the runner itself (issue
30, item 1): jest's `--config`, vitest's `--project`-like `--config`/`--dir`, bun's `--preload`.
Each workspace is built so that the runner run bare gets a different answer than the script:
tests the script's config finds and the default does not, or a global only the preload sets.
Real runners from tests/runners."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from greenloop.schema import validate_run_result

from .helpers import RUNNERS, cli, js_workspace, write_files

pytestmark = pytest.mark.e2e


def _script(ws: Path, script: str) -> None:
    pkg = json.loads((ws / "package.json").read_text())
    pkg["scripts"] = {"test": script}
    (ws / "package.json").write_text(json.dumps(pkg))


def _run(ws: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", *extra, timeout=180)
    assert done.stdout.strip(), done.stderr
    assert validate_run_result(done.json) == []
    return done.code, done.json


def test_jest_keeps_the_scripts_config_and_flags(tmp_path: Path) -> None:
    """`jest --config jest.ci.config.js --ci`: the CI config's testMatch finds spec/*.check.js,
    which jest's default testMatch never would (run bare: no tests, not green)."""
    ws = js_workspace(tmp_path / "ws", "jest", {
        "jest.ci.config.js": "module.exports = { testMatch: ['**/spec/*.check.js'] }\n",
        "spec/sum.check.js": "test('adds', () => { expect(1 + 1).toBe(2) })\n"
                             "test('adds wrong', () => { expect(1 + 1).toBe(3) })\n",
        "spec/other.check.js": "test('other', () => { expect(true).toBe(true) })\n",
    })  # fmt: skip
    _script(ws, "jest --config jest.ci.config.js --ci --reporters=default --json")
    code, r = _run(ws)
    assert (code, r["framework"], r["outcome"]) == (1, "jest", "red"), r
    assert r["summary"] == {"total": 3, "passed": 2, "failed": 1, "skipped": 0}
    kept = "jest arguments are kept: --config jest.ci.config.js --ci"
    assert any(kept in n for n in r["notes"]), r["notes"]
    assert any("greenloop sets these itself" in n and "--json" in n for n in r["notes"]), r["notes"]
    code, one = _run(ws, "--target", "spec/other.check.js")  # a target narrows within the config
    assert (code, one["outcome"], one["summary"]["total"]) == (0, "green", 1), one


def test_vitest_keeps_the_scripts_config_and_drops_its_watch(tmp_path: Path) -> None:
    """`vitest --config vitest.unit.mjs --watch`: the unit config includes checks/*.unit.js,
    which vitest's default include never would; the watch is greenloop's to drop (`run`)."""
    ws = js_workspace(tmp_path / "ws", "vitest", {
        "vitest.unit.mjs": "export default { test: { include: ['checks/*.unit.js'] } }\n",
        "checks/a.unit.js": "import { test, expect } from 'vitest'\n"
                            "test('a', () => { expect(2 * 2).toBe(4) })\n"
                            "test('a wrong', () => { expect(2 * 2).toBe(5) })\n",
        "checks/b.unit.js": "import { test, expect } from 'vitest'\ntest('b', () => { expect(1).toBe(1) })\n",
    })  # fmt: skip
    _script(ws, "vitest --config vitest.unit.mjs --watch")
    # vite bundles a named config into node_modules/.vite-temp: here node_modules is the repo's
    # runners folder, outside the workspace the sandbox lets the tests write
    code, r = _run(ws, "--sandbox", "full-access")
    assert (code, r["framework"], r["outcome"]) == (1, "vitest", "red"), r
    assert r["summary"] == {"total": 3, "passed": 2, "failed": 1, "skipped": 0}
    assert any("vitest arguments are kept: --config vitest.unit.mjs" in n for n in r["notes"]), r["notes"]
    assert "--watch" not in r["command"].split()
    code, one = _run(ws, "--target", "checks/b.unit.js", "--sandbox", "full-access")
    assert (code, one["outcome"], one["summary"]["total"]) == (0, "green", 1), one


def test_bun_keeps_the_scripts_preload(tmp_path: Path) -> None:
    """`bun test --preload ./test/setup.js`: the preload sets a global every test reads (run
    bare, every test fails with a ReferenceError)."""
    if not (RUNNERS / ".bin" / "bun").exists():
        pytest.skip("bun is not installed in tests/runners (run `npm ci` there)")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / "node_modules").symlink_to(RUNNERS)
    (ws / "bun.lock").write_text('{"lockfileVersion": 1, "workspaces": {"": {"name": "ws"}}}\n')
    (ws / "package.json").write_text(json.dumps({"name": "ws", "private": True}))
    write_files(ws, {
        "test/setup.js": "globalThis.SCALE = 10\n",
        "test/scale.test.js": "import { test, expect } from 'bun:test'\n"
                              "test('scales', () => { expect(SCALE * 2).toBe(20) })\n"
                              "test('scales again', () => { expect(SCALE).toBe(10) })\n",
    })  # fmt: skip
    _script(ws, "bun test --preload ./test/setup.js --timeout 20000")
    code, r = _run(ws)
    assert (code, r["framework"], r["outcome"]) == (0, "bun", "green"), r
    assert r["summary"]["passed"] == 2
    assert any("bun arguments are kept: --preload ./test/setup.js --timeout 20000" in n for n in r["notes"])


def test_a_script_that_is_not_one_plain_command_says_so_for_jest_too(tmp_path: Path) -> None:
    ws = js_workspace(tmp_path / "ws", "jest", {"a.test.js": "test('a', () => { expect(1).toBe(1) })\n"})
    _script(ws, "node --experimental-vm-modules node_modules/.bin/jest --ci")
    code, r = _run(ws)
    assert (code, r["framework"], r["outcome"]) == (0, "jest", "green"), r
    said = [n for n in r["notes"] if "not one plain jest command" in n and "--framework npm-test" in n]
    assert said, r["notes"]
