"""integrate(cancel=...): a caller's cancel stops the run mid-start, mid-case or between cases,
tears everything down, and writes an aborted result (no bug, exit 130, no survivors)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from greenloop.integration.result import IntegrationResult

from .itkit import read_lines, step, unit, wait_for, write_project

Run = Callable[..., IntegrationResult]


def _slow_project(root: Path) -> Path:
    cases = [
        {"id": "quick", "steps": [step("api", "GET /api/items", expect={"status": 200})]},
        {"id": "hangs", "steps": [step("api", "GET /api/slow?s=60", expect={"status": 200})]},
        {"id": "after", "steps": [step("api", "GET /api/items", expect={"status": 200})]},
    ]
    return write_project(root, [unit("api")], cases)


def _cancel_when(predicate: Callable[[], bool], cancel: threading.Event) -> threading.Thread:
    def watch() -> None:
        wait_for(predicate, timeout=30.0)
        cancel.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _result_json(project: Path, r: IntegrationResult) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((project / r.result_ref).read_text())
    return data


def test_cancel_during_a_hanging_case(tmp_path: Path, run: Run) -> None:
    project = _slow_project(tmp_path / "p")
    cancel = threading.Event()
    events: list[str] = []
    watcher = _cancel_when(lambda: "case hangs" in events, cancel)
    t0 = time.monotonic()
    r = run(project, cancel=cancel, on_event=events.append, case_timeout_s=60.0, record_bugs=True)
    elapsed = time.monotonic() - t0
    watcher.join()
    # far from the 60 s the case would hang (the wait is cut, the unit's SIGTERM ends the request)
    assert elapsed < 30, elapsed
    assert r.aborted and not r.interrupted and not r.ok and not r.crashed
    assert r.exit_code == 130 and r.category_hint is None
    assert r.surviving_processes == ()
    rows = {c["id"]: c["status"] for c in r.cases}
    assert rows == {"quick": "passed", "hangs": "aborted", "after": "not_run"}
    assert r.failures == () and r.bugs_opened == ()  # a cancelled run opens no bug
    data = _result_json(project, r)
    assert data["aborted"] is True and data["crashed"] is False and data["ok"] is False
    assert any("cancelled during case hangs" in n for n in data["notes"])
    log = (project / r.process_log).read_text()
    assert "case hangs: cancelled" in log and "teardown done" in log
    # the quick case's request is in the trace; the in-flight one too, with its error
    trace = read_lines(project / r.http_trace)
    assert [e["case_id"] for e in trace][:1] == ["quick"]


def test_cancel_while_a_unit_is_starting(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("api", "never-healthy")],
        [{"id": "c", "steps": [step("api", "GET /api/items")]}],
    )
    cancel = threading.Event()
    events: list[str] = []
    watcher = _cancel_when(lambda: bool(events), cancel)  # "starting 1 units"
    r = run(project, cancel=cancel, on_event=events.append, health_timeout_s=60.0)
    watcher.join()
    assert r.aborted and not r.crashed and r.exit_code == 130
    assert r.startup_failure is None and r.failures == ()
    assert [c["status"] for c in r.cases] == ["not_run"]
    assert any("cancelled: the run was cancelled while starting api" in n for n in r.notes)
    assert r.surviving_processes == ()


def test_a_cancel_set_before_the_run_starts_no_case(tmp_path: Path, run: Run) -> None:
    project = _slow_project(tmp_path / "p")
    cancel = threading.Event()
    cancel.set()
    r = run(project, cancel=cancel)
    assert r.aborted and r.exit_code == 130 and r.cases_passed == 0
    assert {c["status"] for c in r.cases} == {"not_run"}
    assert r.surviving_processes == ()


def test_an_unset_cancel_changes_nothing(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("api")],
        [
            {"id": "ok", "steps": [step("api", "GET /api/items", expect={"status": 200})]},
            {"id": "red", "steps": [step("api", "GET /api/items", expect={"status": 201})]},
        ],
    )
    r = run(project, cancel=threading.Event())
    assert not r.aborted and r.exit_code == 1
    assert [c["status"] for c in r.cases] == ["passed", "failed"]
    assert r.failures[0].reason == "status_mismatch"


def test_junit_shows_the_aborted_case_as_skipped(tmp_path: Path, run: Run) -> None:
    project = _slow_project(tmp_path / "p")
    cancel = threading.Event()
    events: list[str] = []
    watcher = _cancel_when(lambda: "case hangs" in events, cancel)
    junit = tmp_path / "junit.xml"
    r = run(project, cancel=cancel, on_event=events.append, case_timeout_s=60.0, junit=junit)
    watcher.join()
    assert r.aborted
    xml = junit.read_text()
    assert "aborted: the run was cancelled during this case" in xml
    assert "not run: the run stopped before this case" in xml


def test_the_summary_says_aborted(tmp_path: Path, run: Run) -> None:
    from greenloop.commands.integrate import summary_text

    project = _slow_project(tmp_path / "p")
    cancel = threading.Event()
    events: list[str] = []
    watcher = _cancel_when(lambda: "case hangs" in events, cancel)
    r = run(project, cancel=cancel, on_event=events.append, case_timeout_s=60.0)
    watcher.join()
    text = summary_text(r)
    assert text.startswith("integration ABORTED: 1/3 cases passed")
    assert "- hangs (aborted after" in text and "- after (not run)" in text
