"""`greenloop run` reports what the runner itself saw: node:test's own counts, the same
result as a bare run of the suite, and what a run killed at its deadline had seen."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, cli, js_workspace, node_workspace, py_workspace

pytestmark = pytest.mark.e2e

FIXTURES = REPO / "tests" / "fixtures"


def _run(ws: Path, *args: str, timeout: float = 120) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", *args, timeout=timeout)
    return done.code, done.json


def _node_summary(text: str) -> dict[str, int]:
    found = re.findall(r"^(?:# |ℹ )(tests|pass|fail|cancelled|skipped|todo) (\d+)$", text, re.M)
    return {k: int(v) for k, v in found}


def test_node_counts_are_nodes_own(tmp_path: Path) -> None:
    # the hooks fixture suite: failing before/after/beforeEach/afterEach hooks, todo tests that
    # pass and fail, skips, cancelled tests; greenloop's summary is node's closing lines
    ws = node_workspace(tmp_path / "ws", {})
    for src in (FIXTURES / "node_test" / "hooks" / "src").iterdir():
        shutil.copy(src, ws / src.name)
    code, r = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    run_dir = ws / ".greenloop" / "runs" / r["run_id"]
    own = _node_summary((run_dir / "stdout.txt").read_text(encoding="utf-8"))
    assert own["tests"] == 33, own
    assert r["summary"] == {
        "total": own["tests"],
        "passed": own["pass"],
        "failed": own["fail"] + own["cancelled"],
        "skipped": own["skipped"] + own["todo"],
    }
    kinds = {f["test"]: f["kind"] for f in r["failures"]}
    assert kinds["cart > with a database"] == "hook"
    assert not any(t.startswith("cart > with a database > ") for t in kinds)


# ---------------------------------------------------------------- the environment a test sees

# a suite that asserts on the colour and CI variables of the shell it runs in, as
# commander.js's help tests do with NO_COLOR; `expected-env.json` is that shell's values
COLOUR_VARS = ("NO_COLOR", "FORCE_COLOR", "CI", "PY_COLORS")
NODE_COLOUR = (
    "const test = require('node:test')\n"
    "const assert = require('node:assert')\n"
    "const fs = require('node:fs')\n"
    "const expected = JSON.parse(fs.readFileSync(__dirname + '/../expected-env.json', 'utf8'))\n"
    "for (const name of Object.keys(expected)) {\n"
    "  test(`sees ${name} as the shell has it`, () => {\n"
    "    assert.strictEqual(process.env[name] ?? null, expected[name])\n"
    "  })\n"
    "}\n"
    "test('help is coloured exactly when colour is allowed', () => {\n"
    "  const coloured = !('NO_COLOR' in process.env)\n"
    "  assert.strictEqual(coloured, expected.NO_COLOR === null)\n"
    "})\n"
)
PY_COLOUR = (
    "import json, os, pathlib\n"
    "EXPECTED = json.loads((pathlib.Path(__file__).parent / 'expected-env.json').read_text())\n"
    "def test_sees_the_shells_colour_and_ci_variables():\n"
    "    assert {k: os.environ.get(k) for k in EXPECTED} == EXPECTED\n"
)


def _shell_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in COLOUR_VARS and k != "GREENLOOP_SESSION"}
    env["PYTHONPATH"] = str(REPO / "src")
    env.update(extra)
    return env


@pytest.mark.parametrize(("framework", "shell", "sandbox"), [
    ("node:test", {}, "workspace-write"),
    ("node:test", {"NO_COLOR": "1"}, "workspace-write"),
    ("node:test", {"FORCE_COLOR": "1", "CI": "true"}, "full-access"),
    ("pytest", {}, "workspace-write"),
    ("pytest", {"NO_COLOR": "1", "PY_COLORS": "1"}, "full-access"),
], ids=["node-plain", "node-NO_COLOR", "node-FORCE_COLOR+CI", "pytest-plain", "pytest-NO_COLOR+PY_COLORS"])
def test_a_suite_reading_colour_env_is_green_exactly_when_green_bare(
    framework: str, shell: dict[str, str], sandbox: str, tmp_path: Path
) -> None:
    expected = {k: shell.get(k) for k in COLOUR_VARS}
    files = {"expected-env.json": json.dumps(expected)}
    if framework == "node:test":
        ws = node_workspace(tmp_path / "ws", {**files, "test/colour.test.js": NODE_COLOUR})
        bare_argv = ["node", "--test"]
    else:
        ws = py_workspace(tmp_path / "ws", {**files, "test_colour.py": PY_COLOUR})
        bare_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    env = _shell_env(shell)
    bare = subprocess.run(bare_argv, cwd=ws, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    assert bare.returncode == 0, bare.stdout + bare.stderr  # the suite is green in that shell
    done = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", sandbox],
                          cwd=ws, env=env, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)
    r = json.loads(done.stdout)
    assert (done.returncode, r["outcome"]) == (0, "green"), r
    assert not any(k in n for n in r["notes"] for k in ("NO_COLOR", "FORCE_COLOR", " CI")), r["notes"]


# ---------------------------------------------------------------- expected and got, whole


def test_vitest_expected_and_got_are_whole(tmp_path: Path) -> None:
    src = (FIXTURES / "vitest" / "values" / "src" / "values.test.js").read_text(encoding="utf-8")
    ws = js_workspace(tmp_path / "ws", "vitest", {"values.test.js": src})
    code, r = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    values = {f["test"].removeprefix("values > "): (f["expected"], f["got"]) for f in r["failures"]}
    long_got = '"Unexpected end at index 7, expected } but the stream ended early here"'
    assert values["compares long strings"][1] == long_got
    assert values["throws the right error"] == (
        '"Unexpected token"', '"Expected \',\' or \'}\' after property value in JSON at position 7"')
    assert values["compares a very long text"][0].endswith("… [cut 1,406 chars]")
    assert not any("…'" in (e or "") + (g or "") for e, g in values.values())  # nothing left shortened
