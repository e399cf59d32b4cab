"""The run store (api.list_runs, latest_run, load_run, prune_runs) and the bounded view."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from greenloop import api, layout
from greenloop.errors import UsageError
from greenloop.model import Failure, Summary
from greenloop.result import RunResult


def stored(ws: Path, run_id: str, age: int, **kw: object) -> RunResult:
    fields: dict[str, Any] = {"ok": False, "outcome": "red", "framework": "pytest", "command": "pytest",
                              "exit_code": 1, **kw}
    r = RunResult(run_id=run_id, **fields)
    path = layout.run_dir(ws, run_id) / "result.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(r.to_json()))
    os.utime(path, ns=(age * 10**9, age * 10**9))
    return r


def test_latest_run_is_the_newest_readable_result(tmp_path: Path) -> None:
    assert api.latest_run(tmp_path) is None
    stored(tmp_path, "run-b", 100)
    stored(tmp_path, "run-a", 200, failures=(Failure(test="t"),))
    torn = layout.run_dir(tmp_path, "run-c") / "result.json"
    torn.parent.mkdir(parents=True)
    torn.write_text('{"run_id": "run-c", "ok": tr')  # a torn write is skipped
    os.utime(torn, ns=(300 * 10**9, 300 * 10**9))
    (layout.run_dir(tmp_path, "run-d")).mkdir()  # no result yet (a run in progress)
    assert api.list_runs(tmp_path) == ["run-b", "run-a", "run-c"]
    latest = api.latest_run(tmp_path)
    assert latest is not None and latest.run_id == "run-a" and latest.failures[0].test == "t"
    with pytest.raises(UsageError, match="run-c"):
        api.load_run(tmp_path, "run-c")


def test_prune_keeps_the_newest_and_the_protected_run(tmp_path: Path) -> None:
    for i in range(6):
        stored(tmp_path, f"run-{i}", 100 + i)
    orphan = layout.run_dir(tmp_path, "run-orphan")
    orphan.mkdir()
    os.utime(orphan, ns=(50 * 10**9, 50 * 10**9))  # oldest of all, and without a result
    deleted = api.prune_runs(tmp_path, keep=3, protect="run-0")
    assert sorted(deleted) == ["run-1", "run-2", "run-orphan"]
    assert api.list_runs(tmp_path) == ["run-0", "run-3", "run-4", "run-5"]
    assert api.prune_runs(tmp_path / "nowhere") == []


def test_bounded_view_caps_every_part(tmp_path: Path) -> None:
    failures = tuple(
        Failure(test=f"test_{i}", file="t.py", line=i, message="x" * 10_000, expected="1", got="2", hint="h")
        for i in range(80)
    )
    r = RunResult(
        run_id="r",
        ok=False,
        outcome="red",
        framework="pytest",
        command="pytest",
        exit_code=1,
        summary=Summary(80, 0, 80, 0),
        failures=failures,
        result_ref="/w/.greenloop/runs/r/result.json",
        notes=tuple(f"note {i}" for i in range(40)),
    )
    view = api.bounded(r, max_failures=3)
    assert [f["test"] for f in view["failures"]] == ["test_0", "test_1", "test_2"]
    assert (
        view["failures"][0]["message"].startswith("x" * 4000)
        and "more characters" in view["failures"][0]["message"]
    )
    assert view["more_failures"] == [f"test_{i}" for i in range(3, 53)]
    assert view["more_failures_omitted"] == 27
    assert view["summary"]["failed"] == 80 and view["result_ref"] == r.result_ref
    assert len(view["notes"]) == 20
    assert len(json.dumps(view)) < 20_000
