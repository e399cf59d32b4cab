"""The published run-result schema: it matches model.py's JSON form and catches drift."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest

from greenloop.errors import UsageError
from greenloop.model import AffectedInfo, Failure, ShardInfo, Summary
from greenloop.result import ResumeInfo, RunResult, SandboxInfo
from greenloop.schema import SCHEMA_NAMES, builtin_errors, load_schema, validate_run_result

# Keys the schema documents beyond RunResult.to_json(): written by DevLoop agents into result.json.
DEVLOOP_OPTIONAL = {"unit_id", "loop", "agent", "attempt", "retry_budget_left"}
# Keys of to_json() that older files may lack (not required by the schema).
OPTIONAL_TOP = {"workspace", "session_id", "started_at", "next_action", "bugs_opened", "bugs_transitioned",
                "selection", "passed_tests", "skipped_tests", "retry", "resume_token", "resume", "shard",
                "affected"}


def _full_result() -> RunResult:
    return RunResult(
        run_id="run-20260513-103100-a1b2c3",
        ok=False,
        outcome="red",
        framework="vitest",
        command="npx vitest run",
        exit_code=1,
        crash_reason=None,
        summary=Summary(total=6, passed=4, failed=1, skipped=0, flaky=1),
        failures=(
            Failure(
                test="todo-be POST /api/todos > missing title gives 400",
                file="tests/todo.spec.ts",
                line=31,
                message="expected 500 to be 400 // Object.is equality",
                expected="400",
                got="500",
                stack="at tests/todo.spec.ts:31:22",
                hint="The route handler throws on a missing title; check req.body.title before use.",
                bug_id="bug-20260513-1031-c9f2",
                kind="test",
                flaky=True,
                origin="src/todos.ts:12",
            ),
        ),
        output_tail="1 failed",
        notes=("built from the vitest JSON report",),
        duration_ms=1245,
        sandbox=SandboxInfo(mode="workspace-write", enforced_by="bwrap", workspace_root="/w"),
        result_ref="units/todo-be/runs/run-20260513-103100-a1b2c3/result.json",
        workspace="/w",
        session_id="s1",
        started_at="2026-05-13T10:31:00Z",
        next_action="retry_coder",
        bugs_opened=("bug-20260513-1031-c9f2",),
        bugs_transitioned=({"id": "bug-1", "from": "open", "to": "fixed"},),
        selection="shard",
        shard=ShardInfo(index=2, total=3),
        resume=ResumeInfo(from_run="run-20260513-103000-000000", kept=4, kept_files=("a.test.ts",),
                          rerun_files=("b.test.ts",), dropped=1,
                          rerun_run="run-20260513-103000-000000-resume-1"),
        affected=AffectedInfo(changed=("src/a.ts", "package.json"), tests=(), owed=("a.test.ts > adds",),
                              fallback="package.json is not a code file greenloop maps"),
    )


def _both(doc: Any) -> tuple[list[str], list[str]]:
    return validate_run_result(doc), builtin_errors(doc, load_schema("run-result"))


def test_schema_is_draft_2020_12_and_named() -> None:
    schema = load_schema("run-result")
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA_NAMES == ("run-result",)
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema)


def test_model_result_validates_with_both_validators() -> None:
    doc = _full_result().to_json()
    assert _both(doc) == ([], [])
    minimal = RunResult(run_id="r", ok=True, outcome="green", framework=None, command="x", exit_code=0)
    assert _both(minimal.to_json()) == ([], [])
    # round trip through from_json keeps it valid
    again = RunResult.from_json(json.loads(json.dumps(doc))).to_json()
    assert again == doc


def test_property_snapshot_matches_model_keys() -> None:
    schema = load_schema("run-result")
    doc = _full_result().to_json()
    props = set(schema["properties"])
    assert props - set(doc) == DEVLOOP_OPTIONAL
    assert set(doc) <= props
    assert set(schema["required"]) == set(doc) - OPTIONAL_TOP
    failure_schema = schema["$defs"]["failure"]
    assert set(failure_schema["properties"]) == set(doc["failures"][0])
    assert set(failure_schema["required"]) == set(doc["failures"][0]) - {"kind", "flaky", "origin"}
    assert set(schema["$defs"]["summary"]["required"]) == set(doc["summary"]) - {"flaky"}
    assert set(schema["$defs"]["summary"]["properties"]) == set(doc["summary"])
    assert set(schema["$defs"]["sandbox"]["properties"]) == set(doc["sandbox"])


def test_older_file_without_optional_keys_and_devloop_keys_validate() -> None:
    doc = _full_result().to_json()
    for key in OPTIONAL_TOP:
        del doc[key]
    del doc["failures"][0]["kind"]
    del doc["failures"][0]["flaky"]
    del doc["summary"]["flaky"]
    doc.update({"unit_id": "todo-be", "loop": "L1", "agent": "tester", "attempt": 1, "retry_budget_left": 4})
    assert _both(doc) == ([], [])


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda d: d.update(extra_key=1), "extra_key"),
        (lambda d: d.pop("summary"), "summary"),
        (lambda d: d.update(outcome="yellow"), "yellow"),
        (lambda d: d.update(exit_code="1"), "exit_code"),
        (lambda d: d.update(ok="false"), "ok"),
        (lambda d: d["failures"][0].pop("hint"), "hint"),
        (lambda d: d["failures"][0].update(line="31"), "line"),
        (lambda d: d["failures"][0].update(hints="x"), "hints"),
        (lambda d: d["summary"].update(failed=-1), "failed"),
        (lambda d: d["summary"].update(failed=True), "failed"),
        (lambda d: d["sandbox"].update(profile="x"), "profile"),
        (lambda d: d.update(duration_ms=1.5), "duration_ms"),
        (lambda d: d.update(run_id=""), "run_id"),
    ],
)
def test_drift_and_bad_values_are_caught_by_both(mutate: Any, fragment: str) -> None:
    doc = copy.deepcopy(_full_result().to_json())
    mutate(doc)
    lib, builtin = _both(doc)
    assert lib, "jsonschema accepted a drifted document"
    assert builtin, "built-in checker accepted a drifted document"
    assert any(fragment in e for e in lib)
    assert any(fragment in e for e in builtin)


def test_unknown_schema_name_is_usage_error() -> None:
    with pytest.raises(UsageError, match="run-result"):
        load_schema("result")


def test_cli_prints_schema_and_rejects_unknown_names() -> None:
    cmd = [sys.executable, "-m", "greenloop", "schema"]
    ok = subprocess.run([*cmd, "run-result"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0
    assert json.loads(ok.stdout) == load_schema("run-result")
    bad = subprocess.run([*cmd, "nope"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2
    assert "run-result" in bad.stderr and bad.stdout == ""
