"""pytest under pytest-xdist (`-n 2` in the workspace's addopts) with greenloop's real CLI.

The suite is built so that counts are easy to get wrong in parallel: several files spread over
two workers, failures in more than one worker, a test that kills its worker (`os._exit`, which
xdist reports as "worker 'gwN' crashed while running …" and replaces the worker), the same
test name in three files, skips, an xfail, a fixture that fails in setup and a file that
cannot be imported (every worker collects it; pytest counts it once). greenloop's counts
must be pytest's own closing line, every failure must be listed once with its details, the
live progress file must hold one line per test, and the report must be written once, by the
controller, with every worker's results. A run stopped at its deadline names the test each
worker was running; `--shard`, `--last-failed` and `--rerun-failures` work the same as
without xdist.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from greenloop import api
from greenloop.schema import validate_run_result

from .helpers import cli, py_workspace

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

pytest.importorskip("xdist", reason="pytest-xdist is a dev dependency (pip install -e '.[dev]')")

XDIST_INI = "[pytest]\naddopts = -n 2\n"

SUITE = {
    "pkg_a/__init__.py": "",
    "pkg_a/test_math.py": (
        "import pytest\n\n"
        "def add(a, b):\n    return a + b\n\n"
        "def test_same():\n    assert add(2, 2) == 5\n\n"
        "def test_ok():\n    assert add(1, 1) == 2\n\n"
        "@pytest.mark.skip(reason='not on this machine')\n"
        "def test_skipped():\n    pass\n\n"
        "@pytest.mark.parametrize('n', range(4))\n"
        "def test_p(n):\n    assert n != 2\n"
    ),
    "pkg_b/__init__.py": "",
    "pkg_b/test_math.py": (
        "import os\n\n"
        "def test_same():\n    assert 'left' == 'right'\n\n"
        "def test_ok():\n    pass\n\n"
        "def test_crash():\n    os._exit(3)\n\n"
        "def test_after_crash():\n    pass\n"
    ),
    "pkg_c/__init__.py": "",
    "pkg_c/test_more.py": (
        "import pytest\n\n"
        "@pytest.fixture\n"
        "def broken():\n    raise RuntimeError('setup boom')\n\n"
        "def test_same():\n    pass\n\n"
        "def test_err(broken):\n    pass\n\n"
        "@pytest.mark.xfail(reason='known')\n"
        "def test_xfail():\n    assert False\n\n"
        "def test_skip_inside():\n    pytest.skip('runtime skip')\n"
    ),
    "pkg_d/__init__.py": "",
    **{
        f"pkg_d/test_bulk_{i}.py": "".join(f"def test_b{j}():\n    pass\n\n" for j in range(6))
        for i in range(3)
    },
}
FAILING = {
    "pkg_a/test_math.py::test_same",
    "pkg_a/test_math.py::test_p[2]",
    "pkg_b/test_math.py::test_same",
    "pkg_b/test_math.py::test_crash",
    "pkg_c/test_more.py::test_err",
}
ALL_TESTS = {
    *(f"pkg_a/test_math.py::{n}" for n in ("test_same", "test_ok", "test_skipped")),
    *(f"pkg_a/test_math.py::test_p[{n}]" for n in range(4)),
    *(f"pkg_b/test_math.py::{n}" for n in ("test_same", "test_ok", "test_crash", "test_after_crash")),
    *(f"pkg_c/test_more.py::{n}" for n in ("test_same", "test_err", "test_xfail", "test_skip_inside")),
    *(f"pkg_d/test_bulk_{i}.py::test_b{j}" for i in range(3) for j in range(6)),
}


def _workspace(root: Path, files: dict[str, str] | None = None) -> Path:
    ws = py_workspace(root, files if files is not None else SUITE)
    (ws / "pytest.ini").write_text(XDIST_INI)
    return ws


def _run_dir(ws: Path, run_id: str) -> Path:
    return ws / ".greenloop" / "runs" / run_id


def _closing_counts(stdout: str) -> dict[str, int]:
    """pytest's own closing line (`=== 4 failed, 20 passed, 2 skipped, 1 xfailed, 1 error in 3s ===`)."""
    line = [ln for ln in stdout.splitlines() if re.match(r"^=+ .* in [\d.]+s", ln)][-1]
    return {word.rstrip("s") if word.startswith("error") else word: int(n)
            for n, word in re.findall(r"(\d+) ([a-z]+)", line.split(" in ")[0])}


def _progress(ws: Path, run_id: str) -> list[dict[str, Any]]:
    path = _run_dir(ws, run_id) / "progress.ndjson"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("workers", ["2", "auto"])
def test_xdist_counts_failures_and_progress_are_exact(tmp_path: Path, workers: str) -> None:
    # a file that cannot be imported: every worker collects it, pytest counts it once
    broken = "pkg_e/test_broken.py"
    ws = _workspace(tmp_path / "ws", {**SUITE, "pkg_e/__init__.py": "", broken: "import not_a_module\n"})
    (ws / "pytest.ini").write_text(f"[pytest]\naddopts = -n {workers}\n")
    failing = {*FAILING, broken}
    r = cli("run", str(ws), "--json", "--sandbox", "full-access")
    assert r.code == 1, r.stderr
    data = r.json
    validate_run_result(data)
    run_dir = _run_dir(ws, data["run_id"])
    stdout = (run_dir / "stdout.txt").read_text()
    assert re.search(r"^\d+ workers \[", stdout, re.M)  # the suite really ran under xdist
    assert "crashed while running 'pkg_b/test_math.py::test_crash'" in stdout

    # the counts are pytest's closing line, folded the documented way
    closing = _closing_counts(stdout)
    summary = data["summary"]
    assert summary["passed"] == closing.get("passed", 0) + closing.get("xpassed", 0)
    assert summary["failed"] == closing.get("failed", 0) + closing.get("error", 0)
    assert summary["skipped"] == closing.get("skipped", 0) + closing.get("xfailed", 0)
    assert summary == {"total": len(ALL_TESTS) + 1, "passed": 25, "failed": len(failing), "skipped": 3}
    assert data["outcome"] == "red"

    # every failure once, with the details of the worker that ran it
    names = [f["test"] for f in data["failures"]]
    assert sorted(names) == sorted(failing)
    by_name = {f["test"]: f for f in data["failures"]}
    assert by_name[broken]["kind"] == "load" and "not_a_module" in by_name[broken]["message"]
    same_a = by_name["pkg_a/test_math.py::test_same"]
    assert (same_a["file"], same_a["line"], same_a["expected"], same_a["got"]) == (
        "pkg_a/test_math.py", 7, "5", "4")
    assert "pkg_a/test_math.py:7" in same_a["stack"]
    same_b = by_name["pkg_b/test_math.py::test_same"]
    assert (same_b["expected"], same_b["got"]) == ("'right'", "'left'")
    crash = by_name["pkg_b/test_math.py::test_crash"]
    assert crash["kind"] == "test" and crash["file"] == "pkg_b/test_math.py" and crash["line"] == 9
    assert "crashed while running" in crash["message"]
    err = by_name["pkg_c/test_more.py::test_err"]
    assert err["kind"] == "hook" and "setup boom" in err["message"]
    assert by_name["pkg_a/test_math.py::test_p[2]"]["line"] == 18

    # the report was written once, by the controller, with both workers' tests
    report = json.loads((run_dir / "report.json").read_text())
    assert report["counts"] == {"passed": 25, "failed": 4, "error": 2, "skipped": 2, "xfailed": 1}
    assert sorted(report["passed"]) == sorted(
        t for t in ALL_TESTS if t not in FAILING and "skip" not in t and "xfail" not in t)
    assert not list(ws.rglob("report.json.tmp"))

    # live progress: one line per test, each test once, its status the result's
    progress = _progress(ws, data["run_id"])
    assert all("count" not in p for p in progress)
    assert sorted(p["test"] for p in progress) == sorted({*ALL_TESTS, broken})
    statuses = {s: sum(1 for p in progress if p["status"] == s) for s in ("pass", "fail", "skip")}
    assert statuses == {"pass": summary["passed"], "fail": summary["failed"], "skip": summary["skipped"]}

    # the partial stream saw every start once, from the controller alone
    stream = [json.loads(line) for line in (run_dir / "stream.ndjson").read_text().splitlines()]
    starts = [s["start"] for s in stream if "start" in s]
    assert sorted(starts) == sorted(ALL_TESTS)


HUNG = {
    "test_a.py": (
        "import time\n\n"
        "def test_a1():\n    pass\n\n"
        "def test_a2():\n    assert 1 == 2\n\n"
        "def test_a3():\n    time.sleep(600)\n"
    ),
    "test_b.py": (
        "import time\n\n"
        "def test_b1():\n    pass\n\n"
        "def test_b2():\n    time.sleep(600)\n"
    ),
}


def test_xdist_run_stopped_at_its_deadline_names_every_worker_s_test(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws", HUNG)
    # one file per worker, so each worker reaches its hung test whatever the timing
    (ws / "pytest.ini").write_text("[pytest]\naddopts = -n 2 --dist loadfile\n")
    r = cli("run", str(ws), "--json", "--sandbox", "full-access", "--timeout-ms", "30000", timeout=120)
    assert r.code == 3, r.stderr
    data = r.json
    validate_run_result(data)
    assert data["outcome"] == "broken" and "timed out" in data["crash_reason"]
    timeouts = sorted((f["test"], f["line"]) for f in data["failures"] if f["kind"] == "timeout")
    assert timeouts == [("test_a.py::test_a3", 9), ("test_b.py::test_b2", 6)]
    failed = [f for f in data["failures"] if f["kind"] == "test"]
    assert [(f["test"], f["expected"], f["got"]) for f in failed] == [("test_a.py::test_a2", "2", "1")]
    # the counts are those seen before the stop: two passed, one failed, two stopped
    assert data["summary"] == {"total": 5, "passed": 2, "failed": 3, "skipped": 0}
    finished = sorted(p["test"] for p in _progress(ws, data["run_id"]))
    assert finished == ["test_a.py::test_a1", "test_a.py::test_a2", "test_b.py::test_b1"]


def test_xdist_shards_are_disjoint_and_add_up_to_the_whole_run(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    whole = cli("run", str(ws), "--json", "--sandbox", "full-access").json
    parts = [cli("run", str(ws), "--json", "--sandbox", "full-access", "--shard", f"{i}/2").json
             for i in (1, 2)]
    for part in parts:
        validate_run_result(part)
        assert part["selection"] == "shard"
    for key in ("total", "passed", "failed", "skipped"):
        assert sum(p["summary"][key] for p in parts) == whole["summary"][key]
    names = [f["test"] for p in parts for f in p["failures"]]
    assert sorted(names) == sorted(FAILING)
    progress = [line["test"] for p in parts for line in _progress(ws, p["run_id"])]
    assert sorted(progress) == sorted(ALL_TESTS)


def test_xdist_last_failed_and_rerun_failures(tmp_path: Path) -> None:
    files = dict(SUITE)
    # fails on its first run, passes on the next: a rerun finds it flaky
    files["pkg_d/test_flaky.py"] = (
        "from pathlib import Path\n\n"
        "def test_flaky():\n"
        "    counter = Path(__file__).with_name('runs.txt')\n"
        "    n = int(counter.read_text()) if counter.exists() else 0\n"
        "    counter.write_text(str(n + 1))\n"
        "    assert n % 2 == 1\n"
    )
    ws = _workspace(tmp_path / "ws", files)
    first = api.test_run(str(ws), session_id="s", sandbox="full-access", rerun_failures=1)
    flaky = [f.test for f in first.failures if f.flaky]
    assert flaky == ["pkg_d/test_flaky.py::test_flaky"]
    assert sorted(f.test for f in first.failures if not f.flaky) == sorted(FAILING)
    rerun_dir = _run_dir(ws, first.run_id) / "rerun-1"
    assert "2 workers [" in (rerun_dir / "stdout.txt").read_text()
    rerun_lines = (rerun_dir / "progress.ndjson").read_text().splitlines()
    rerun_progress = [json.loads(line)["test"] for line in rerun_lines]
    # the failing tests are rerun (a fixture's setup error is not a test to rerun)
    rerun = {*FAILING, "pkg_d/test_flaky.py::test_flaky"} - {"pkg_c/test_more.py::test_err"}
    assert rerun <= set(rerun_progress)
    assert len(rerun_progress) == len(set(rerun_progress))

    again = api.test_run(str(ws), session_id="s", sandbox="full-access", last_failed=True)
    assert again.selection == "last_failed"
    assert sorted(f.test for f in again.failures) == sorted({*FAILING, *flaky})
    progress = _progress(ws, again.run_id)
    assert len(progress) == again.summary.total
    assert {p["test"] for p in progress} >= set(FAILING)
