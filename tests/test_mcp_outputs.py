"""The MCP output models stay pinned to the library records they render.

Each output model of greenloop.mcp.outputs is compared with its record's JSON form
(`to_json()` of a real record, every optional field set): every key the record writes is a
field of the model (or is named below as left to `extra="allow"`), every field of the model
is a key of the record (or is named below as added by the tool), each value passes the
model's field in strict JSON mode (so a type that no longer maps fails), and each field the
record types as a fixed set of values (a Literal) has exactly that set in the model. The
tools' input choices are pinned to the library's sets the same way.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel

from greenloop import api, model, result
from greenloop.bugs import record as bugs
from greenloop.closure import evidence, gate, jobs, transitions
from greenloop.devloop import timeline
from greenloop.integration import result as integration_run
from greenloop.mcp import outputs, tools
from greenloop.state import evidence as state_evidence
from greenloop.system import sandbox


def _literal_values(annotation: Any) -> frozenset[Any] | None:
    """The values of a Literal annotation (None and Optional[...] unwrapped); None when not one."""
    if get_origin(annotation) is Literal:
        return frozenset(get_args(annotation))
    if get_origin(annotation) in (typing.Union, types.UnionType):
        found = [_literal_values(a) for a in get_args(annotation) if a is not type(None)]
        if len(found) == 1:
            return found[0]
    return None


def _bug() -> bugs.Bug:
    return bugs.Bug(
        id="b1", source="integration_test", unit_id="api", test_name="t", title="broken",
        status="fixing", severity="high", category="logic", detail="d", run_id="r1",
        affected_units=("web",), fix_refs=("abc",), created_at="2026-01-01T00:00:00Z",
        updated_at="2026-01-01T00:00:01Z", by="s1", closed_by="r2", evidence="test_passed",
    )


def _failure() -> model.Failure:
    return model.Failure(
        "t", file="a.py", line=3, message="m", expected="1", got="2", stack="s", hint="h",
        bug_id="b1", kind="hook", flaky=True, origin="src/a.py:9",
    )


def _run() -> result.RunResult:
    return result.RunResult(
        run_id="r1", ok=False, outcome="red", framework="pytest", command="pytest", exit_code=1,
        crash_reason="c", summary=model.Summary(3, 1, 1, 0, flaky=1), failures=(_failure(),) * 7,
        notes=("n",), duration_ms=5, sandbox=result.SandboxInfo("auto", "landlock ABI 7", "/w", "n"),
        result_ref="/w/result.json", workspace="/w", session_id="s1", started_at="2026",
        next_action="retry_coder", bugs_opened=("b1",), bugs_transitioned=({"id": "b2"},),
        selection="target", passed_tests=("u",),
        retry=result.RetryInfo("r0", "r05", ("a",), ("b",), ("c",), True),
        shard=model.ShardInfo(2, 4, "abc"), resume_token="tok",
    )


def _integration_failure() -> integration_run.IntegrationFailure:
    return integration_run.IntegrationFailure(
        case_id="c1", failed_step=2, reason="status_mismatch", expected={"status": 200},
        got={"status": 500}, involves=("api",), stderr_excerpt="boom", message="m", unit="api",
        bug_id="b1", artifacts={"screenshot": "s.png", "html": "p.html"},
    )


def _integration() -> integration_run.IntegrationResult:
    return integration_run.IntegrationResult(
        ok=False, run_id="i1", result_ref="/w/result.json", cases_total=2, cases_passed=1,
        cases_failed=1, cases_timeout=0, failures=(_integration_failure(),),
        ports_used={"api": 4000}, surviving_processes=({"pid": 1},), category_hint="logic",
        crashed=False, duration_ms=9, project="/w", started_at="2026",
        cases=({"id": "c1", "status": "failed"},), startup_failure={"reason": "x"}, aborted=False,
        process_log="/w/p.log", http_trace="/w/t.ndjson", env_ref="/w/env", junit="/w/j.xml",
        notes=("n",), bugs_opened=("b1",), bugs_transitioned=({"id": "b2"},), resume_token="tok",
    )


def _last_run() -> transitions.RunRecord:
    return transitions.RunRecord(
        "r1", False, 1.0, outcome="red", session_id="s1", failing=("t",), source="run"
    )


def _owed() -> evidence.OwedTest:
    return evidence.OwedTest("t.py::test_a", "skipped", "r1", 1.0, "t.py", 3, "@pytest.mark.skip")


def _acceptance() -> state_evidence.Acceptance:
    return state_evidence.Acceptance("t.py::test_a", "tracked in #12", "Ana Lima (ana)", 2.0, "s1")


class Pin(typing.NamedTuple):
    output: type[BaseModel]
    record: Mapping[str, Any]  # the record's JSON form, every optional field set
    hints: Mapping[str, Any]  # the record's own field types
    added: frozenset[str] = frozenset()  # fields the tool adds to the record's JSON
    unlisted: frozenset[str] = frozenset()  # record keys the model leaves to extra="allow"


def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls, vars(__import__(cls.__module__, fromlist=["_"])))


PINS: dict[str, Pin] = {
    # flaky is written only when set (summary.flaky, failures[].flaky)
    "summary": Pin(outputs.SummaryOutput, model.Summary(3, 1, 1, 0, 1).to_json(), _hints(model.Summary),
                   unlisted=frozenset({"flaky"})),
    "failure": Pin(outputs.FailureOutput, _failure().to_json(), _hints(model.Failure),
                   unlisted=frozenset({"flaky"})),
    "sandbox": Pin(outputs.SandboxOutput, result.SandboxInfo("auto", "bubblewrap", "/w", "n").to_json(),
                   _hints(result.SandboxInfo)),
    "probe": Pin(
        outputs.ProbeOutput,
        model.Detection("pytest", "/w", "/w/pyproject.toml", ("t.py",), ("pytest",), "uv", ("n",),
                        (model.Suite("/w", "pytest"),)).to_json(),
        _hints(model.Detection),
        added=frozenset({"session_id"}),
    ),
    "run": Pin(
        outputs.RunOutput,
        api.bounded(_run()),
        {**_hints(result.RunResult), "outcome": model.Outcome},
        added=frozenset({"session_source", "background", "job_id"}),
        unlisted=frozenset({"workspace", "started_at", "bugs_opened", "bugs_transitioned"}),
    ),
    "job": Pin(
        outputs.JobOutput,
        jobs.JobStatus("j1", "done", "s1", "/w", 1.0, 2.0, "r1", True, None, "e", "/w/log").to_json(),
        _hints(jobs.JobStatus),
        unlisted=frozenset({"workspace", "created_at", "ended_at"}),
    ),
    "closure": Pin(
        outputs.ClosureOutput,
        gate.ClosureCheck("s1", False, _last_run(), 1, 3, False, ("n",)).to_json(),
        _hints(gate.ClosureCheck),
        added=frozenset({"session_source"}),
    ),
    "owed": Pin(
        outputs.OwedOutput,
        gate.ClosureCheck("s1", False, None, 1, 3, False, (), (_owed(),), 1, "taken_away")
        .to_json()["owed"][0],
        {**_hints(evidence.OwedTest), "at": str, "why": str},  # check adds the ISO time, the words
    ),
    "accepted": Pin(
        outputs.AcceptedOutput,
        gate.ClosureCheck("s1", True, None, 0, 3, False, accepted=((_owed(), _acceptance()),))
        .to_json()["accepted"][0],
        {**_hints(evidence.OwedTest), "at": str, "why": str, "accepted_by": str, "accepted_at": str,
         "accepted_reason": str, "accepted_for": str | None},
    ),
    "last_run": Pin(
        outputs.LastRunOutput,
        gate.ClosureCheck("s1", False, _last_run(), 1, 3, False).to_json()["last_run"],
        _hints(transitions.RunRecord),
        unlisted=frozenset({"summary", "session_id"}),
    ),
    "bug": Pin(outputs.BugOutput, _bug().to_json(), _hints(bugs.Bug),
               unlisted=frozenset({"closed_by", "evidence"})),
    "bug_open": Pin(outputs.BugOpenOutput, bugs.Opened(_bug(), True, "/w/bugs.ndjson", ("w",)).to_json(),
                    _hints(bugs.Opened), added=frozenset({"session_id"})),
    "bug_transition": Pin(
        outputs.BugTransitionOutput,
        bugs.Transitioned(_bug(), "open", "/w/bugs.ndjson", ("w",)).to_json(),
        {"from": bugs.Status, "to": bugs.Status},
        added=frozenset({"session_id"}),
    ),
    "bug_list": Pin(outputs.BugListOutput, bugs.Fold((_bug(),), "/w/bugs.ndjson", ("w",)).to_json(),
                    _hints(bugs.Fold), added=frozenset({"session_id"})),
    "timeline_event": Pin(
        outputs.TimelineEventOutput,
        timeline.Event("2026", "bug_opened", "api", "b1", "opened").to_json(),
        {**_hints(timeline.Event), "kind": timeline.Kind},
    ),
    "case_failure": Pin(outputs.CaseFailureOutput, _integration_failure().to_json(),
                        _hints(integration_run.IntegrationFailure)),
    "integration": Pin(
        outputs.IntegrationOutput,
        outputs.bounded_integration(_integration().to_json()),
        _hints(integration_run.IntegrationResult),
        added=frozenset({"session_id"}),
        unlisted=frozenset({"project", "started_at", "cases", "startup_failure", "interrupted", "env_ref",
                            "junit", "bugs_transitioned", "resume_token", "attempts"}),
    ),
}


def _field_names(output: type[BaseModel]) -> set[str]:
    return {f.alias or name for name, f in output.model_fields.items()}


@pytest.mark.parametrize("name", sorted(PINS))
def test_each_output_model_lists_its_records_fields(name: str) -> None:
    pin = PINS[name]
    fields, keys = _field_names(pin.output), set(pin.record)
    assert keys - fields == set(pin.unlisted), f"{pin.output.__name__}: record keys not in the model"
    assert fields - keys == set(pin.added), f"{pin.output.__name__}: model fields the record lacks"


@pytest.mark.parametrize("name", sorted(PINS))
def test_each_records_values_pass_its_output_model_strictly(name: str) -> None:
    pin = PINS[name]
    data = dict(pin.record)
    for added in pin.added:
        default = pin.output.model_fields[added].default
        data.setdefault(added, None if default is None or not isinstance(default, bool) else default)
    pin.output.model_validate_json(json.dumps(data), strict=True)


@pytest.mark.parametrize("name", sorted(PINS))
def test_each_fixed_set_of_values_is_the_records(name: str) -> None:
    pin = PINS[name]
    by_alias = {f.alias or n: f for n, f in pin.output.model_fields.items()}
    hints = {"from" if k == "from_status" else k: v for k, v in pin.hints.items()}
    for key, hint in hints.items():
        values = _literal_values(hint)
        if values is None or key not in by_alias:
            continue
        assert _literal_values(by_alias[key].annotation) == values, f"{pin.output.__name__}.{key}"


def test_the_failure_kind_and_run_outcome_are_the_models() -> None:
    """model.Failure.kind was once a plain str in the output model: now the same fixed set."""
    assert _literal_values(outputs.FailureOutput.model_fields["kind"].annotation) == frozenset(
        get_args(_hints(model.Failure)["kind"])
    )
    assert frozenset(get_args(outputs.Outcome)) == frozenset(get_args(model.Outcome))
    assert frozenset(get_args(outputs.JobState)) == frozenset(get_args(jobs.JobState))
    assert frozenset(get_args(outputs.TimelineKind)) == frozenset(timeline.KINDS)


def test_the_tools_input_choices_are_the_librarys() -> None:
    assert frozenset(get_args(tools.FrameworkArg)) == frozenset(model.FRAMEWORKS)
    assert frozenset(get_args(tools.SandboxArg)) == frozenset(sandbox.MODES)
    assert frozenset(get_args(outputs.BugStatus)) == frozenset(bugs.STATUSES)
    assert frozenset(get_args(outputs.BugSource)) == frozenset(bugs.SOURCES)
    assert frozenset(get_args(outputs.BugSeverity)) == frozenset(bugs.SEVERITIES)
