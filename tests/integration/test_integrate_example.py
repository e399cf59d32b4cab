"""The example project (examples/todo): a Python auth unit and an Express + better-sqlite3 unit.

Runs the real project, through the default sandbox policy, exactly as `greenloop integrate`
would: a token flow, a cross-unit workflow and the 400/401/404 negative cases all pass, and a
broken expectation is reported with its evidence.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from greenloop.integration.run import integrate

from .itkit import MARK, read_lines

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "todo"
MODULES = EXAMPLE / "units" / "todo-api" / "node_modules"

pytestmark = pytest.mark.skipif(
    not (MODULES / "better-sqlite3").is_dir() or shutil.which("node") is None,
    reason="the example's Node unit is not installed: npm ci in examples/todo/units/todo-api",
)


def copy_example(dest: Path) -> Path:
    shutil.copytree(
        EXAMPLE, dest, ignore=shutil.ignore_patterns("node_modules", "runs", "bugs.ndjson*", ".greenloop")
    )
    (dest / "units" / "todo-api" / "node_modules").symlink_to(MODULES, target_is_directory=True)
    return dest


def test_the_example_project_passes_every_case(tmp_path: Path, mark: str) -> None:
    project = copy_example(tmp_path / "todo")
    r = integrate(project, env={**os.environ, MARK: mark}, grace_s=2.0)
    assert r.ok, json.dumps(r.to_json(), indent=1)
    cases = json.loads((project / "integration" / "spec.json").read_text())["cases"]
    assert r.cases_total == r.cases_passed == len(cases) >= 6
    assert {"auth", "todo-api"} <= set(r.ports_used)
    folder = project / r.result_ref.rsplit("/", 1)[0]
    trace = read_lines(folder / "http-trace.ndjson")
    # The token flow: the token auth issued went to todo-api, and is redacted in the trace.
    login = next(t for t in trace if t["case_id"] == "login-then-create-and-list" and t["step"] == 0)
    assert login["response_body"]["token"] == "[redacted]"
    create = next(t for t in trace if t["case_id"] == "login-then-create-and-list" and t["step"] == 1)
    assert create["request_headers"]["Authorization"] == "[redacted]" and create["status"] == 201
    statuses = {(t["case_id"], t["status"]) for t in trace}
    assert {("empty-title-is-400", 400), ("no-token-is-401", 401), ("missing-todo-is-404", 404)} <= statuses
    log = (folder / "process.log").read_text()
    assert f"[todo-api:{r.ports_used['todo-api']}] out| todo-api listening" in log
    assert f"(auth at http://127.0.0.1:{r.ports_used['auth']})" in log  # AUTH_URL reached the Node unit


def test_a_wrong_expectation_in_the_example_is_reported(tmp_path: Path, mark: str) -> None:
    project = copy_example(tmp_path / "todo")
    spec_path = project / "integration" / "spec.json"
    spec = json.loads(spec_path.read_text())
    spec["cases"][0]["steps"][1]["expect"]["json"]["$.done"] = True
    spec_path.write_text(json.dumps(spec))
    r = integrate(project, env={**os.environ, MARK: mark}, cases=["login-then-create-and-list"], grace_s=2.0)
    assert r.exit_code == 1 and r.cases_total == 1
    [f] = r.failures
    assert (f.case_id, f.failed_step, f.reason) == ("login-then-create-and-list", 1, "assertion_failed")
    assert f.expected == {"$.done": True} and f.got == {"$.done": False}
    assert f.involves == ("auth", "todo-api") and "auth:" in f.stderr_excerpt
    assert f.bug_id is not None
