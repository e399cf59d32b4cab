"""vitest, jest and node:test running files in parallel workers, through greenloop's real CLI.

One suite per runner, built so that counts are easy to get wrong in parallel: five files over
two workers (vitest's and jest's `maxWorkers: 2`, node's `--test-concurrency=2`: their
defaults would use one worker on a two-core machine), failures in several files, the same test
name in three files, skipped and todo tests, and a test that kills its own worker process
(SIGKILL) after a test of its file has passed. greenloop's counts must be the runner's own
summary lines, every failure must be listed once (the killed file as one failure of kind
"test", not a file that could not load), and the live progress file must hold one line per
test. A node:test run stopped at its deadline names the test each file was running.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from greenloop.schema import validate_run_result

from .helpers import cli, js_workspace, node_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# which worker ran each file: every file appends its process id here when it loads
PIDS = (
    "require('node:fs').appendFileSync(require('node:path').join(__dirname, 'pids.txt'), "
    "process.pid + '\\n')\n"
)
PIDS_ESM = (
    "import { appendFileSync } from 'node:fs'\n"
    "appendFileSync(new URL('./pids.txt', import.meta.url), process.pid + '\\n')\n"
)
KILL = "process.kill(process.pid, 'SIGKILL'); await new Promise((r) => setTimeout(r, 5000))"


# the suite's test bodies in vitest's and jest's words; node:test's through NODE_WORDS. The
# file names are this module's own: vitest orders files by its results cache, which every
# workspace shares through the linked node_modules and keys by the file's relative path
BODIES = {
    "alpha.test.js": (
        "it('same name', () => { expect(2 + 2).toBe(5) })\n"
        "it('ok a', () => {})\n"
        "it.skip('skipped a', () => {})\n"
    ),
    "beta.test.js": (
        "it('same name', () => { expect({ x: 1 }).toEqual({ x: 3 }) })\n"
        "it('ok b', () => {})\n"
        "it.todo('todo b')\n"
    ),
    "gamma.test.js": (
        "describe('group', () => {\n"
        "  it('same name', () => {})\n"
        "  it('fails c', () => { throw new Error('boom c') })\n"
        "})\n"
    ),
    "delta.test.js": "".join(f"it('bulk {i}', () => {{}})\n" for i in range(6)),
    "killed.test.js": (
        "it('ok before crash', () => {})\n"
        f"it('kills its worker', async () => {{ {KILL} }})\n"
        "it('after crash', () => {})\n"
    ),
}
NODE_WORDS = (
    ("expect(2 + 2).toBe(5)", "assert.strictEqual(2 + 2, 5)"),
    ("expect({ x: 1 }).toEqual({ x: 3 })", "assert.deepStrictEqual({ x: 1 }, { x: 3 })"),
    ("it.skip('skipped a', ", "it('skipped a', { skip: true }, "),
    ("it.todo('todo b')", "it('todo b', { todo: true })"),
)


def _vitest_files() -> dict[str, str]:
    head = "import { describe, it, expect } from 'vitest'\n" + PIDS_ESM
    return {name: head + body for name, body in BODIES.items()}


def _jest_files() -> dict[str, str]:
    return {name: PIDS + body.replace("it.todo(", "test.todo(") for name, body in BODIES.items()}


def _node_files() -> dict[str, str]:
    head = "const { describe, it } = require('node:test')\nconst assert = require('node:assert')\n" + PIDS
    files = {}
    for name, body in BODIES.items():
        for vitest_words, node_words in NODE_WORDS:
            body = body.replace(vitest_words, node_words)
        files[f"test/{name}"] = head + body
    return files


def _run(ws: Path, *extra: str) -> tuple[dict[str, Any], Path, str]:
    r = cli("run", str(ws), "--json", "--sandbox", "full-access", *extra, timeout=180)
    data = r.json
    validate_run_result(data)
    run_dir = ws / ".greenloop" / "runs" / data["run_id"]
    text = "\n".join(
        re.sub(r"\x1b\[[0-9;]*m", "", (run_dir / name).read_text()) for name in ("stdout.txt", "stderr.txt")
    )
    return data, run_dir, text


def _progress(run_dir: Path) -> list[dict[str, Any]]:
    """The per-test lines of progress.ndjson (the lines a resume reads, `files` and `file_done`,
    are left out)."""
    lines = [json.loads(line) for line in (run_dir / "progress.ndjson").read_text().splitlines()]
    return [p for p in lines if "files" not in p and "file_done" not in p]


def _tally(progress: list[dict[str, Any]]) -> dict[str, int]:
    assert all("count" not in p and p.get("test") for p in progress), progress  # one line a test
    return {s: sum(1 for p in progress if p["status"] == s) for s in ("pass", "fail", "skip")}


def _failures(data: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    return sorted((f["test"], f["file"], f["kind"]) for f in data["failures"])


def _workers(ws: Path) -> int:
    return len(set((ws / "pids.txt").read_text().split()))


def _check_red_run(data: dict[str, Any], own: dict[str, int], not_counted: int, describe_sep: str) -> None:
    """The vitest and jest suite's result: the runner's own counts, plus the failures the
    runner counts outside its tests line (vitest's error, jest's file that did not run), and
    each failure once, with the killed file a failing test file, not a load failure."""
    s = data["summary"]
    assert s["passed"] == own["passed"] == 9
    assert s["failed"] == own["failed"] + not_counted == 4
    assert s["skipped"] == own.get("skipped", 0) + own.get("todo", 0) == 2
    assert _failures(data) == [
        (f"group {describe_sep} fails c", "gamma.test.js", "test"),
        ("killed.test.js", "killed.test.js", "test"),
        ("same name", "alpha.test.js", "test"),
        ("same name", "beta.test.js", "test"),
    ]
    a = next(f for f in data["failures"] if f["file"] == "alpha.test.js")
    assert (a["expected"], a["got"]) == ("5", "4")
    assert data.get("load_error") is None and data["next_action"] == "retry_coder"


def test_vitest_workers(tmp_path: Path) -> None:
    config = "export default { test: { maxWorkers: 2, minWorkers: 1 } }\n"
    ws = js_workspace(tmp_path / "ws", "vitest", _vitest_files(), config=config)
    data, run_dir, text = _run(ws)
    assert data["outcome"] == "red"
    assert _workers(ws) >= 2
    tests = re.search(r"Tests\s+(.*)\((\d+)\)", text)
    assert tests is not None
    own = {w: int(n) for n, w in re.findall(r"(\d+) (failed|passed|skipped|todo)", tests.group(1))}
    errors = re.search(r"Errors\s+(\d+) errors?", text)
    own_errors = int(errors.group(1)) if errors else 0
    assert own_errors == 1  # vitest's "Worker exited unexpectedly"
    _check_red_run(data, own, own_errors, ">")
    s = data["summary"]
    by_file = {f["file"]: f for f in data["failures"]}
    alpha = by_file["alpha.test.js"]
    assert alpha["line"] == 4 and "alpha.test.js:4" in alpha["stack"]
    assert "never reported" in by_file["killed.test.js"]["message"]
    progress = _progress(run_dir)
    assert _tally(progress) == {"pass": s["passed"], "fail": s["failed"], "skip": s["skipped"]}
    same = sorted(p["file"].rsplit("/", 1)[-1] for p in progress if p["test"].endswith("same name"))
    assert same == ["alpha.test.js", "beta.test.js", "gamma.test.js"]


def test_jest_workers(tmp_path: Path) -> None:
    config = "module.exports = { maxWorkers: 2 }\n"
    ws = js_workspace(tmp_path / "ws", "jest", _jest_files(), config=config)
    data, run_dir, text = _run(ws)
    assert data["outcome"] == "red"
    assert _workers(ws) >= 2  # two workers (jest runs in band with one)
    tests = re.search(r"Tests:\s+(.*) total", text)
    assert tests is not None
    own = {w: int(n) for n, w in re.findall(r"(\d+) (failed|passed|skipped|todo)", tests.group(1))}
    not_run = text.count("● Test suite failed to run")
    assert not_run == 1  # the killed file: jest counts none of its tests
    _check_red_run(data, own, not_run, "›")
    s = data["summary"]
    crash = next(f for f in data["failures"] if f["file"] == "killed.test.js")
    assert "worker process" in crash["message"]
    progress = _progress(run_dir)
    # the test that passed before its worker died was shown live; jest's count drops it
    live_only = [p for p in progress if p["test"] == "ok before crash"]
    assert [p["status"] for p in live_only] == ["pass"]
    assert _tally(progress) == {"pass": s["passed"] + 1, "fail": s["failed"], "skip": s["skipped"]}


@pytest.mark.parametrize("how", ["node:test", "npm test script"])
def test_node_test_concurrency(tmp_path: Path, how: str) -> None:
    ws = node_workspace(tmp_path / "ws", _node_files())
    extra: tuple[str, ...] = ()
    if how == "node:test":
        extra = ("--target=--test-concurrency=2",)
    else:  # the script's own flags: greenloop runs `npm test` and reads node's text output
        (ws / "package.json").write_text(json.dumps(
            {"name": "ws", "private": True, "scripts": {"test": "node --test --test-concurrency=2"}}))
    data, run_dir, text = _run(ws, *extra)
    assert data["outcome"] == "red"
    own = {w: int(n) for w, n in re.findall(r"^(?:#|ℹ) (tests|pass|fail|cancelled|skipped|todo) (\d+)$",
                                            text, re.M)}
    s = data["summary"]
    assert s == {"total": own["tests"], "passed": own["pass"], "failed": own["fail"] + own["cancelled"],
                 "skipped": own["skipped"] + own["todo"]}
    assert (s["passed"], s["failed"], s["skipped"]) == (9, 4, 2)
    names = [(t, f) for t, f, _ in _failures(data)]
    assert names == [
        ("group > fails c", "test/gamma.test.js"),
        ("same name", "test/alpha.test.js"),
        ("same name", "test/beta.test.js"),
        ("test/killed.test.js", "test/killed.test.js"),
    ]
    if how == "node:test":  # node's TAP report says the file's process was killed
        crash = next(f for f in data["failures"] if f["test"] == "test/killed.test.js")
        assert crash["kind"] == "test" and "SIGKILL" in crash["message"]
        assert data.get("load_error") is None
        assert _tally(_progress(run_dir)) == {"pass": s["passed"], "fail": s["failed"], "skip": s["skipped"]}


def test_node_test_concurrency_stopped_at_its_deadline_names_each_file_s_test(tmp_path: Path) -> None:
    hang = "await new Promise(() => { setInterval(() => {}, 1000) })"
    head = "const { it } = require('node:test')\n"
    ws = node_workspace(tmp_path / "ws", {
        "test/alpha.test.js": head + f"it('a ok', () => {{}})\nit('a hangs', async () => {{ {hang} }})\n",
        "test/beta.test.js": head + f"it('b ok', () => {{}})\nit('b hangs', async () => {{ {hang} }})\n",
    })
    data, _, _ = _run(ws, "--target=--test-concurrency=2", "--timeout-ms", "15000")
    assert data["outcome"] == "broken" and "timed out" in data["crash_reason"]
    stopped = sorted((f["test"], f["file"], f["line"]) for f in data["failures"] if f["kind"] == "timeout")
    # node reports one file's tests as they run and may hold back the other's until the first
    # has finished: then that one is named by its file, its running test being unknown
    assert [file for _, file, _ in stopped] == ["test/alpha.test.js", "test/beta.test.js"]
    for (name, file, line), letter in zip(stopped, "ab", strict=True):
        assert (name, line) in ((f"{letter} hangs", 3), (file, None))
    assert stopped[0][0] == "a hangs" or stopped[1][0] == "b hangs"
    held_back = sum(1 for name, file, _ in stopped if name == file)
    assert data["summary"]["passed"] == 2 - held_back  # each file's first test, as seen


def test_vitest_bail_leaves_tests_unfinished_without_a_dead_worker(tmp_path: Path) -> None:
    """`bail` stops vitest early and leaves tests `pending` in its JSON report, as a dead
    worker does; only the worker's unhandled error makes one of them a failure."""
    config = "export default { test: { maxWorkers: 2, bail: 1 } }\n"
    head = "import { describe, it, expect } from 'vitest'\n"
    slow = "async () => { await new Promise((r) => setTimeout(r, 200)) }"
    files = {"alpha.test.js": head + BODIES["alpha.test.js"],
             "delta.test.js": head + BODIES["delta.test.js"].replace("() => {}", slow)}
    ws = js_workspace(tmp_path / "ws", "vitest", files, config=config)
    data, run_dir, text = _run(ws)
    tests = re.search(r"Tests\s+(.*)\((\d+)\)", text)
    assert tests is not None and "Errors" not in text
    own = {w: int(n) for n, w in re.findall(r"(\d+) (failed|passed|skipped|todo)", tests.group(1))}
    s = data["summary"]
    assert (s["passed"], s["failed"], s["skipped"]) == (
        own.get("passed", 0), own["failed"], own.get("skipped", 0) + own.get("todo", 0))
    assert [f["test"] for f in data["failures"]] == ["same name"]
    assert any("never reported a result" in n for n in data["notes"])  # delta.test.js was cut short
    assert _tally(_progress(run_dir)) == {"pass": s["passed"], "fail": s["failed"], "skip": s["skipped"]}
