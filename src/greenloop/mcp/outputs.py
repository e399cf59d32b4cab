"""What the MCP tools answer: one pydantic model per result, and how a library record becomes one.

Each model gives its tool's output schema (tools/list) and lists the fields of the library
record it renders (`to_json()` of the records in greenloop.model, greenloop.bugs,
greenloop.closure, greenloop.devloop.timeline, greenloop.integration); `extra="allow"` keeps
a field the library adds later instead of silently dropping it. The fixed sets of values
below are the library's own, repeated here so that this module alone (with greenloop.mcp.tools
and greenloop.mcp.server) decides the tools/list answer the shipped handshake snapshot is
keyed on; tests/test_mcp_outputs.py pins every model to its record, so they cannot drift.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AcceptedOutput",
    "BugListOutput",
    "BugOpenOutput",
    "BugOutput",
    "BugTransitionOutput",
    "ClosureOutput",
    "IntegrationOutput",
    "JobOutput",
    "OwedOutput",
    "ProbeOutput",
    "RunOutput",
    "TimelineOutput",
    "bounded_integration",
    "job_output",
    "plain",
    "run_output",
]

# The library's fixed sets of values (model.Outcome, model.Failure.kind, closure.jobs.JobState,
# bugs.Status / Source / Severity, devloop.timeline.Kind).
Outcome = Literal["green", "red", "broken"]
FailureKind = Literal["test", "load", "hook", "timeout", "cancelled"]
JobState = Literal["starting", "running", "done", "failed", "lost", "cancelled"]
BugStatus = Literal["open", "fixing", "fixed", "verified"]
BugSource = Literal["unit_test", "unit_test_infra", "integration_test"]
BugSeverity = Literal["low", "medium", "high", "critical"]
TimelineKind = Literal[
    "unit_tested", "test_passed", "test_failed", "integration_started", "integration_done",
    "integration_failed", "bug_opened", "bug_closed",
]


class _Output(BaseModel):
    """The base of every output model: it keeps the fields the library adds later."""

    model_config = ConfigDict(extra="allow")


class SummaryOutput(_Output):
    """Test counts of a run."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0


class FailureOutput(_Output):
    """One failing test, in full (model.Failure)."""

    test: str
    file: str | None = None
    line: int | None = None
    message: str = ""
    expected: str | None = None
    got: str | None = None
    stack: str = ""
    hint: str = ""
    bug_id: str | None = None
    kind: FailureKind = "test"
    origin: str | None = None  # where in source the error was thrown, when file:line is the test's


class SandboxOutput(_Output):
    """How a run was confined (result.SandboxInfo)."""

    mode: str = Field(default="full-access", description="auto | read-only | workspace-write | full-access")
    enforced_by: str | None = Field(
        default=None, description="e.g. 'bubblewrap 0.8.0' or 'landlock ABI 7'; null: NOT enforced"
    )
    workspace_root: str | None = None
    note: str | None = Field(default=None, description="Set when the sandbox was asked for but not enforced.")


class RunOutput(_Output):
    """A run's bounded result (or, in the background, the job that will produce it)."""

    session_id: str | None = Field(
        description="The session the run is recorded under (what the gate checks); null: the workspace."
    )
    session_source: str | None = Field(
        default=None,
        description="How the session was found: explicit, env:NAME, meta, process-tree, run, or none.",
    )
    background: bool = Field(default=False, description="True: the run continues as job `job_id`.")
    job_id: str | None = Field(default=None, description="Poll it with test_job.")
    run_id: str | None = None
    ok: bool | None = Field(default=None, description="Green: exit 0, no failed test, not timed out.")
    outcome: Outcome | None = None
    framework: str | None = None
    command: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    aborted: bool = False
    crashed: bool = False
    crash_reason: str | None = None
    summary: SummaryOutput | None = None
    failures: list[FailureOutput] = Field(
        default_factory=list, description="The first failures in full (message, expected, got, stack, hint)."
    )
    more_failures: list[str] = Field(default_factory=list, description="Further failing tests, by name.")
    more_failures_omitted: int = Field(default=0, description="Failing tests beyond those named.")
    output_tail: str = ""
    notes: list[str] = Field(default_factory=list)
    duration_ms: int | None = None
    sandbox: SandboxOutput | None = None
    result_ref: str | None = Field(default=None, description="Path of the full result.json on disk.")
    next_action: str | None = None
    retry: dict[str, Any] | None = Field(
        default=None, description="mode retry: previous_run, first_pass_run, fixed, remain, new, full_suite."
    )
    resume: dict[str, Any] | None = Field(
        default=None,
        description="mode resume: from_run, kept (tests), kept_files, rerun_files, dropped, rerun_run, "
        "whole_suite.",
    )
    shard: dict[str, int | str] | None = Field(
        default=None,
        description="A run of one shard: {index, total, commit (the git commit, when in git), target "
        "(the target it split, when one was given)}; "
        "selection is then 'shard'.",
    )
    resume_token: str | None = Field(
        default=None, description="Continues this run (mode resume) if it is cut short."
    )
    selection: str | None = Field(
        default=None, description="How the run was narrowed: null for the whole suite, else target, "
        "last_failed, command, shard or affected."
    )
    affected: dict[str, Any] | None = Field(
        default=None,
        description="An affected run: {changed (files since `since`), tests (the test files run), owed "
        "(owed tests included), since (HEAD), fallback (why the whole suite ran instead, or null)}.",
    )


class ProbeOutput(_Output):
    """What test_probe found: the framework, its root and the command test_run would run."""

    session_id: str | None
    framework: str | None = Field(description="Detected framework id, or null when none was found.")
    root: str
    config_path: str | None = None
    test_files: list[str] = Field(default_factory=list)
    command: list[str] = Field(default_factory=list, description="The command test_run would run.")
    package_manager: str | None = None
    notes: list[str] = Field(default_factory=list)
    suites: list[dict[str, Any]] = Field(
        default_factory=list, description="Every test root found (a monorepo may have several)."
    )


class LastRunOutput(_Output):
    """The session's last recorded run, as the closure gate sees it."""

    run_id: str | None = None
    ok: bool | None = None
    at: str | None = None
    outcome: str | None = None
    failing: list[str] = Field(default_factory=list, description="Names of the failing tests.")
    source: str | None = Field(default=None, description="Who ran it: a greenloop run, or a hook's parse.")


class OwedOutput(_Output):
    """A test the session owes: it failed and no later run passed it, or it was taken away."""

    test: str
    reason: str = Field(description="failed | skipped | removed | only")
    run_id: str = Field(description="The run that made it owed.")
    at: str | None = None
    file: str | None = None
    line: int | None = None
    detail: str = Field(default="", description="The mark the working tree shows (`@pytest.mark.skip`).")
    why: str = Field(default="", description="Why it is owed, in words (failed in run X, skipped …).")


class AcceptedOutput(OwedOutput):
    """A taken-away test the session would owe, which a person accepted (never a failure)."""

    accepted_by: str = Field(description="Who accepted it (git user.name and the login).")
    accepted_at: str = Field(description="When it was accepted (ISO 8601 UTC).")
    accepted_reason: str = Field(description="Why the person accepted it.")
    accepted_for: str | None = Field(
        default=None, description="The session it was accepted for; null: every session."
    )


class ClosureOutput(_Output):
    """Whether the session may end its turn, and why."""

    session_id: str | None
    session_source: str | None = None
    satisfied: bool = Field(description="True when the session may end its turn (last run green, or none).")
    last_run: LastRunOutput | None = None
    intercepts_this_turn: int = 0
    budget: int | None = None
    unresolved: bool = False
    notes: list[str] = Field(default_factory=list)
    owed: list[OwedOutput] = Field(
        default_factory=list, description="The first tests the session owes, failures first (see owed_count)."
    )
    owed_count: int = Field(default=0, description="How many tests the session owes.")
    holding: str = Field(
        default="",
        description="The rule holding the turn (owed, taken_away, red, stale, not_run, uncovered), or empty.",
    )
    unresolved_reason: str | None = Field(
        default=None, description="Why the open unresolved record was made: owed, taken away, stale, not run."
    )
    accepted: list[AcceptedOutput] = Field(
        default_factory=list,
        description="Skipped or removed tests no longer owed because a person accepted them: who, when, why.",
    )


class JobOutput(_Output):
    """A background run's state, with its bounded result once done."""

    session_id: str | None
    job_id: str
    status: JobState
    finished: bool = Field(default=False, description="True once the job has ended, however it ended.")
    run_id: str | None = None
    ok: bool | None = None
    result: RunOutput | None = Field(default=None, description="The bounded run result once done.")
    error: str | None = Field(default=None, description="Why the job failed or was lost.")
    log_path: str | None = None
    host: str | None = Field(default=None, description="The machine the job's worker runs on.")


class BugOutput(_Output):
    """One bug's current state (bugs.Bug)."""

    id: str
    status: BugStatus
    source: BugSource | None = None
    unit_id: str | None = None
    run_id: str | None = None
    test_name: str | None = None
    dedup_key: str | None = None
    category: str | None = None
    severity: BugSeverity | None = None
    title: str | None = None
    detail: str | None = None
    affected_units: list[str] = Field(default_factory=list)
    fix_refs: list[str] = Field(default_factory=list)
    created_at: str | None = None
    updated_at: str | None = None
    by: str | None = None


class BugOpenOutput(_Output):
    """What bug_open did: the bug, and whether it is new."""

    session_id: str | None
    bug: BugOutput
    created: bool = Field(description="False: the open bug for the same unit and test was reused.")
    log: str | None = Field(default=None, description="Path of bugs.ndjson.")
    warnings: list[str] = Field(default_factory=list, description="Torn or corrupt log lines skipped.")


class BugTransitionOutput(_Output):
    """What bug_transition did: the bug and the move it made."""

    session_id: str | None
    bug: BugOutput
    from_status: BugStatus | None = Field(default=None, alias="from")
    to: BugStatus | None = None
    log: str | None = None
    warnings: list[str] = Field(default_factory=list)


class BugListOutput(_Output):
    """The project's bugs in their current state."""

    session_id: str | None
    count: int
    bugs: list[BugOutput]
    log: str | None = None
    warnings: list[str] = Field(default_factory=list)


class TimelineEventOutput(_Output):
    """One event of the project's timeline."""

    at: str = Field(description="UTC time, ISO 8601.")
    kind: TimelineKind = Field(description="unit_tested, test_passed, test_failed, integration_started, "
                      "integration_done, integration_failed, bug_opened or bug_closed.")
    unit_id: str
    ref: str = Field(description="The run, integration run or bug the event is about.")
    summary: str


class TimelineOutput(_Output):
    """The last events of the project's timeline, in order."""

    session_id: str
    timeline: str = Field(description="Path of timeline.ndjson.")
    events: list[TimelineEventOutput]
    warnings: list[str] = Field(default_factory=list)


class CaseFailureOutput(_Output):
    """One failed integration case (or a unit that did not start), in full."""

    case_id: str = Field(description="The failed case, or `startup:<unit>` for a unit that did not start.")
    failed_step: int | str | None = Field(default=None, description="0-based index of the failing step.")
    reason: str | None = Field(
        default=None,
        description="status_mismatch | assertion_failed | placeholder_unresolved | timeout | "
        "connection_error | unit_crashed",
    )
    message: str = Field(default="", description="One line saying what went wrong, in words.")
    expected: Any = None
    got: Any = None
    involves: list[str] = Field(default_factory=list)
    unit: str | None = Field(default=None, description="The unit the failing step called.")
    stderr_excerpt: str | None = Field(default=None, description="Last stderr lines of the units involved.")
    artifacts: dict[str, str] = Field(
        default_factory=dict,
        description="Evidence files of a failing browser step, relative to the project: "
        "`screenshot` (PNG) and `html` (the page).",
    )
    bug_id: str | None = Field(default=None, description="The bug this failure opened or matched.")


class IntegrationOutput(_Output):
    """An integration run's bounded result: counts, the first failed cases in full, the rest by id."""

    session_id: str | None
    ok: bool
    run_id: str | None = None
    result_ref: str | None = Field(default=None, description="Path of the full result.json on disk.")
    cases_total: int = 0
    cases_passed: int = 0
    cases_failed: int = 0
    cases_timeout: int = 0
    failures: list[CaseFailureOutput] = Field(
        default_factory=list, description="The first failed cases in full (message, expected, got, stderr)."
    )
    more_failures: list[str] = Field(default_factory=list, description="Further failed cases, by id.")
    more_failures_omitted: int = Field(default=0, description="Failed cases beyond those named.")
    ports_used: dict[str, int] = Field(default_factory=dict)
    surviving_processes: list[Any] = Field(default_factory=list)
    category_hint: str | None = None
    crashed: bool = False
    aborted: bool = Field(default=False, description="Stopped before the end (cancelled); no bug recorded.")
    duration_ms: int | None = None
    notes: list[str] = Field(default_factory=list)
    bugs_opened: list[str] = Field(default_factory=list)
    process_log: str | None = Field(default=None, description="Path of the units' combined log.")
    http_trace: str | None = Field(default=None, description="Path of the request trace (NDJSON).")


# --------------------------------------------------------------------------- records to outputs


def plain(value: Any) -> Any:
    """A library record (frozen dataclass with to_json) or a plain value, as JSON-able data."""
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    return value


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str) and len(value) > limit:
        return value[:limit] + f"… [{len(value) - limit} more chars]"
    return value


def bounded_integration(
    data: Mapping[str, Any], *, max_failures: int = 5, max_names: int = 50, max_cases: int = 100
) -> dict[str, Any]:
    """What a model reads of an integration result (its to_json): the first failed cases in
    full, the rest by case id, each free-text field cut; `cases` rows (status per case, the
    why is in `failures`) and notes capped. The
    runner already bounds expected/got (2,000 chars); stderr excerpts are cut here, since one
    failure lists every involved unit's last lines."""
    out = dict(data)
    failures = list(data.get("failures") or ())
    shown = []
    for f in failures[: max(0, max_failures)]:
        d = dict(f)
        d["message"] = _cut(d.get("message") or "", 1000)
        d["stderr_excerpt"] = _cut(d.get("stderr_excerpt") or "", 2000)
        shown.append(d)
    rest = [str(f.get("case_id")) for f in failures[max(0, max_failures) :]]
    out["failures"] = shown
    out["more_failures"] = rest[:max_names]
    out["more_failures_omitted"] = max(0, len(rest) - max_names)
    cases = list(data.get("cases") or ())
    row_keys = ("id", "status", "duration_ms", "steps_run", "failed_step", "reason")
    out["cases"] = [{k: c.get(k) for k in row_keys if k in c} for c in cases[:max_cases]]
    if len(cases) > max_cases:
        out["cases_omitted"] = len(cases) - max_cases
    out["notes"] = [_cut(str(n), 500) for n in list(data.get("notes") or ())[:20]]
    out["surviving_processes"] = list(data.get("surviving_processes") or ())[:20]
    return out


def run_output(bounded: Any, session_id: str | None) -> RunOutput:
    """A bounded run (api.bounded) as test_run's output, under the session the call resolved."""
    data = dict(plain(bounded))
    # The session the run was recorded under: the one the call resolved, or, when it resolved
    # none, the one the run itself found (a hook may have bound the harness in between).
    data["session_id"] = session_id or data.get("session_id")
    return RunOutput.model_validate(data)


def job_output(status: Any, session_id: str | None) -> JobOutput:
    """A job's status (closure.jobs.JobStatus) as test_job's output; a finished job's whole
    RunResult becomes the same bounded view test_run gives."""
    data = dict(plain(status))
    data["session_id"] = data.get("session_id") or session_id
    result = data.get("result")
    if isinstance(result, Mapping):
        # The job stores the whole RunResult; a model reads the same bounded view as test_run's.
        from greenloop import api
        from greenloop.result import RunResult

        data["result"] = run_output(api.bounded(RunResult.from_json(dict(result))), data["session_id"])
    return JobOutput.model_validate(data)
