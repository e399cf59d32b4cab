"""The model tools over MCP: a second thin renderer over the library.

Each tool is a typed function whose parameters give the input schema and whose return
model (greenloop.mcp.outputs) gives the output schema; its body calls one library function
in a `Stopwatch` (greenloop.mcp.calls) and reshapes the record into that model. Nothing is
decided here that the CLI would decide differently. Bad arguments never reach a tool: the
server's argument check (greenloop.mcp.server) names them one by one.

See docs/mcp.md for the whole picture.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from greenloop.mcp.calls import ProgressRelay, ServerState, Stopwatch, library
from greenloop.mcp.fast import (
    RERUN,
    RUN_MARGIN_S,
    TOOL_TIMEOUT_S,
    agent_text,
    default_timeout_ms,
    run_limit_s,
    run_record,
)
from greenloop.mcp.outputs import (
    BugListOutput,
    BugOpenOutput,
    BugSeverity,
    BugSource,
    BugStatus,
    BugTransitionOutput,
    ClosureOutput,
    IntegrationOutput,
    JobOutput,
    ProbeOutput,
    RunOutput,
    TimelineOutput,
    bounded_integration,
    job_output,
    plain,
)

__all__ = ["ANNOTATIONS", "TOOL_NAMES", "answer", "build_tools"]

TOOL_NAMES = (
    "test_probe",
    "test_run",
    "test_job",
    "test_closure_check",
    "bug_list",
    "bug_open",
    "bug_transition",
    "integration_run",
    "timeline",
)
JOB_WAIT_DEFAULT_MS = 50_000  # test_job(wait=true) answers "running" after this, below common client limits

# model.FrameworkId; the sandbox modes of greenloop.system.sandbox
FrameworkArg = Literal[
    "vitest", "jest", "npm-test", "pytest", "node:test", "go", "cargo", "mocha", "unittest", "bun"
]
SandboxArg = Literal["auto", "read-only", "workspace-write", "full-access"]
SessionArg = Annotated[
    str | None,
    Field(min_length=1, description="Record under this agent session instead of the one greenloop resolves."),
]


# What each tool may do to the machine, for clients that ask before calling (MCP tool
# annotations). None is meant to reach beyond the machine: sandboxed runs see only their own
# loopback network, integration runs use loopback ports, so openWorld is false throughout
# (a run with sandbox="full-access" reaches whatever its tests reach).
ANNOTATIONS: dict[str, ToolAnnotations] = {
    # reads the workspace's files, starts nothing
    "test_probe": ToolAnnotations(
        read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    # runs the project's tests, or a verbatim shell `command`: code that may change or delete
    # files (inside the sandbox's writable roots); each call records a new run
    "test_run": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    ),
    # `cancel=true` kills a background run's whole process tree; asking again changes nothing
    "test_job": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    # reads the state database
    "test_closure_check": ToolAnnotations(
        read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    "bug_list": ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    # reads timeline.ndjson
    "timeline": ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    # appends to bugs.ndjson; the same unit and test again returns the open bug, no new one
    "bug_open": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    # appends a status change (history is kept); the same move again is refused, changing nothing
    "bug_transition": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
    # starts the project's services and a browser on loopback, runs their code, opens bugs,
    # writes artifacts; tears everything down
    "integration_run": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    ),
}


def answer(output: BaseModel, text: str) -> CallToolResult:
    """A tool's answer: the whole record as structuredContent, what a model reads (the agent
    format) as its text content."""
    structured = output.model_dump(mode="json", by_alias=True)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def build_tools(state: ServerState) -> list[Tool]:
    """The tools of one server, each bound to its workspace, config and session (`state`)."""
    ws = state.workspace

    async def test_probe(ctx: Context) -> ProbeOutput:
        """Detect the workspace's test framework and the command test_run would use, running nothing."""
        detection = await Stopwatch("test_probe", TOOL_TIMEOUT_S).call(lambda: library("api").test_probe(ws))
        return ProbeOutput.model_validate({**plain(detection), "session_id": state.session(None, ctx)})

    async def test_run(
        ctx: Context,
        framework: Annotated[
            FrameworkArg | None, Field(description="Override the detected framework.")
        ] = None,
        target: Annotated[
            str | None,
            Field(description="Space-separated test files or node ids appended to the command."),
        ] = None,
        last_failed: Annotated[
            bool,
            Field(description="Rerun only the tests that failed in this session's previous run; a "
                  "session with no run yet reruns the workspace's latest run, and a note names whose."),
        ] = False,
        affected: Annotated[
            bool | None,
            Field(description="Run only the tests the files changed since git HEAD can break, plus every "
                  "test this session owes, in the runner's own dialect (vitest related, jest "
                  "--findRelatedTests, an import graph for pytest, unittest, node:test, mocha and bun, "
                  "go list for go); "
                  "a file it cannot map (a lockfile, a config, a deleted file) runs the whole suite, "
                  "with a note. The result's selection is 'affected' and `affected` lists the changed "
                  "files and the tests; nothing to run is not green. Not with target, last_failed, "
                  "command, shard or mode retry/resume. Left out: the config's `affected` (false "
                  "unless set) for a call that chooses no tests itself."),
        ] = None,
        command: Annotated[
            str | None,
            Field(description="Run this shell command verbatim instead (ignores target and last_failed)."),
        ] = None,
        timeout_ms: Annotated[
            int | None,
            Field(ge=1, description="Kill the run's whole process tree after this long (default: config)."),
        ] = None,
        run_in_background: Annotated[
            bool, Field(description="Start the run as a job and return its job_id at once; poll test_job.")
        ] = False,
        session_id: SessionArg = None,
        sandbox: Annotated[
            SandboxArg | None, Field(description="Sandbox mode for the run (default: the session's).")
        ] = None,
        mode: Annotated[
            Literal["test", "retry", "resume"],
            Field(description="test: run as asked. retry (after changing code): the previous run's "
                  "failures first, then, if they pass, the whole suite; `retry` says which failures "
                  "were fixed, remain or are new. resume: continue the run resume_token names."),
        ] = "test",
        shard: Annotated[
            str | None,
            Field(description="Run only shard I of N of the suite (or of target), as 'I/N' (e.g. '2/4'), "
                  "in the runner's own dialect; the result's selection is 'shard'. Fold the N results "
                  "with `greenloop merge`."),
        ] = None,
        rerun_failures: Annotated[
            int,
            Field(ge=0, description="Rerun failing tests up to this many times; a test that fails, then "
                  "passes is marked flaky (failures[].flaky, summary.flaky) and gets a bug of category "
                  "flaky. The run stays red unless the config says flaky = \"warn\"."),
        ] = 0,
        resume_token: Annotated[
            str | None, Field(description="With mode resume: a result's resume_token.")
        ] = None,
    ) -> Annotated[CallToolResult, RunOutput]:
        """Run the workspace's tests and return a bounded structured result: counts, the first
        failures in full with hints, the rest by name, and result_ref for the full record.
        The run is recorded for the session, so the closure gate sees it."""
        resolved = state.resolve(session_id, ctx)
        sid = resolved.session_id
        options: dict[str, Any] = {
            "framework": framework,
            "target": target,
            "last_failed": last_failed,
            "command": command,
            "timeout_ms": timeout_ms,
            "sandbox": sandbox,
        }
        if mode != "test":
            options["mode"] = mode
        options["affected"] = affected  # None: the config's `affected`
        if shard is not None:
            options["shard"] = shard
        if rerun_failures:
            options["rerun_failures"] = rerun_failures
        if resume_token is not None:
            options["resume_token"] = resume_token
        if run_in_background:
            job_id = await Stopwatch("test_run", TOOL_TIMEOUT_S).call(
                lambda: library("closure.jobs").start(ws, session_id=sid, **options)
            )
            started = f"started in the background; poll test_job with job_id {job_id}"
            return answer(
                RunOutput(
                    session_id=sid,
                    session_source=resolved.source,
                    background=True,
                    job_id=str(job_id),
                    notes=[started],
                ),
                started,
            )
        run_ms = timeout_ms
        if run_ms is None:
            run_ms = await Stopwatch("test_run", TOOL_TIMEOUT_S).call(
                lambda: default_timeout_ms(ws, state.config)
            )
        limit_s = run_limit_s(run_ms, mode, rerun_failures)  # retry: up to two runs; each rerun
        cancel = threading.Event()
        progress = ProgressRelay(ctx)
        watch = Stopwatch("test_run", limit_s, cancel, state.running)
        bounded, text = await progress.around(
            watch.call(lambda: bounded_run(ws, sid, progress.callback, cancel, options))
        )
        # (the same record and text the fast lane answers with: greenloop.mcp.fast)
        return answer(RunOutput.model_validate(run_record(plain(bounded), sid, resolved.source)), text)

    async def test_job(
        ctx: Context,
        job_id: Annotated[str, Field(min_length=1, description="The job_id test_run returned.")],
        wait: Annotated[bool, Field(description="Wait until the job ends (up to wait_ms).")] = False,
        wait_ms: Annotated[
            int | None,
            Field(ge=0, description=f"Longest wait before it answers 'running' ({JOB_WAIT_DEFAULT_MS} ms)."),
        ] = None,
        cancel: Annotated[
            bool, Field(description="Stop the job (and its run's process tree) instead of reporting.")
        ] = False,
    ) -> Annotated[CallToolResult, JobOutput]:
        """Report on a background test run: starting/running, or ended (done, failed, lost,
        cancelled) with its bounded result."""
        jobs = library("closure.jobs")
        if cancel:
            status = await Stopwatch("test_job", TOOL_TIMEOUT_S).call(lambda: jobs.cancel(ws, job_id))
        else:
            wait_s = (JOB_WAIT_DEFAULT_MS if wait_ms is None else wait_ms) / 1000 if wait else 0.0
            status = await Stopwatch("test_job", wait_s + TOOL_TIMEOUT_S).call(
                lambda: jobs.status(ws, job_id, wait=wait, timeout_s=wait_s)
            )
        return await Stopwatch("test_job", TOOL_TIMEOUT_S).call(
            lambda: answer(job_output(status, state.session(None, ctx)), job_agent_text(status, ws))
        )

    async def test_closure_check(
        ctx: Context, session_id: SessionArg = None
    ) -> Annotated[CallToolResult, ClosureOutput]:
        """Is the session's last recorded run green? If not, fix the failures and call test_run again."""
        resolved = state.resolve(session_id, ctx)
        sid = resolved.session_id
        closure = await Stopwatch("test_closure_check", TOOL_TIMEOUT_S).call(
            lambda: library("api").test_closure_check(ws, sid)
        )
        output = ClosureOutput.model_validate(
            {**plain(closure), "session_id": sid, "session_source": resolved.source}
        )
        text = library("agent_format").check_text(plain(closure), run_again="call test_run")
        return answer(output, text)

    def bug_log() -> Any:
        bug_log = library("bugs.log")
        return bug_log.BugLog(bug_log.bug_log_path(ws))

    async def bug_list(
        ctx: Context,
        unit: Annotated[
            str | None, Field(description="Only this unit's bugs (or bugs affecting it).")
        ] = None,
        status: Annotated[BugStatus | None, Field(description="Only bugs in this status.")] = None,
        source: Annotated[BugSource | None, Field(description="Only bugs from this source.")] = None,
        severity: Annotated[BugSeverity | None, Field(description="Only bugs of this severity.")] = None,
    ) -> BugListOutput:
        """List the project's bugs (bugs.ndjson) in their current state."""
        fold = await Stopwatch("bug_list", TOOL_TIMEOUT_S).call(
            lambda: bug_log().list(unit=unit, status=status, source=source, severity=severity)
        )
        return BugListOutput.model_validate({**plain(fold), "session_id": state.session(None, ctx)})

    async def timeline(
        ctx: Context,
        unit: Annotated[str | None, Field(description="Only this unit's events.")] = None,
        last: Annotated[int, Field(ge=1, le=1000, description="The last N events (default 50).")] = 50,
    ) -> TimelineOutput:
        """What happened in the project, in order: unit runs, integration runs, bugs opened and closed."""
        tl = library("devloop.timeline")
        path = tl.timeline_path(ws)
        events, warnings = await Stopwatch("timeline", TOOL_TIMEOUT_S).call(
            lambda: tl.read(path, unit=unit, last=last)
        )
        return TimelineOutput.model_validate({
            "session_id": state.session_id, "timeline": str(path),
            "events": [e.to_json() for e in events], "warnings": warnings,
        })

    async def bug_open(
        ctx: Context,
        unit: Annotated[str, Field(min_length=1, description="The unit the bug is in.")],
        test: Annotated[str, Field(min_length=1, description="The failing test's name.")],
        title: Annotated[str, Field(min_length=1, description="One line saying what is wrong.")],
        severity: BugSeverity | None = None,
        source: Annotated[BugSource, Field(description="Where the bug was found.")] = "unit_test",
        detail: Annotated[str | None, Field(description="Message, expected/got, stack.")] = None,
        run_id: Annotated[str | None, Field(description="The run that found it.")] = None,
        category: str | None = None,
        affected_units: Annotated[
            list[str] | None, Field(description="Other units the bug concerns.")
        ] = None,
    ) -> BugOpenOutput:
        """Open a bug, or return the open (or fixing) one for the same unit and test."""
        opened = await Stopwatch("bug_open", TOOL_TIMEOUT_S).call(
            lambda: bug_log().open(
                unit_id=unit,
                test_name=test,
                title=title,
                severity=severity,
                source=source,
                detail=detail,
                run_id=run_id,
                category=category,
                affected_units=affected_units,
                by=state.who(None, ctx),
            )
        )
        return BugOpenOutput.model_validate({**plain(opened), "session_id": state.session(None, ctx)})

    async def bug_transition(
        ctx: Context,
        bug_id: Annotated[str, Field(min_length=1)],
        to: Annotated[BugStatus, Field(description="The new status: open -> fixing -> fixed -> verified.")],
        by: Annotated[str | None, Field(description="Who moves it (default: this session).")] = None,
        fix_ref: Annotated[str | None, Field(description="A commit, patch or run that fixes it.")] = None,
    ) -> BugTransitionOutput:
        """Move a bug to another status. Illegal moves are refused, naming the allowed ones."""
        moved = await Stopwatch("bug_transition", TOOL_TIMEOUT_S).call(
            lambda: bug_log().transition(
                bug_id, to, by=by or state.who(None, ctx), fix_refs=(fix_ref,) if fix_ref else ()
            )
        )
        return BugTransitionOutput.model_validate({**plain(moved), "session_id": state.session(None, ctx)})

    async def integration_run(
        ctx: Context,
        case: Annotated[
            list[str] | None, Field(description="Run only these case ids (default: all).")
        ] = None,
        mode: Annotated[
            Literal["run", "retry", "resume"],
            Field(description="run: a new run. retry (after a fix): the previous run's failed cases "
                  "first, then, if they pass, every case. resume: continue the interrupted run that "
                  "resume_token names, running only its unfinished cases."),
        ] = "run",
        resume_token: Annotated[
            str | None, Field(description="With mode resume: the resume_token of the run to continue.")
        ] = None,
    ) -> IntegrationOutput:
        """Start the project's services on loopback ports, run the integration cases (HTTP steps
        with expectations; browser steps drive the frontend in headless Chromium and, when they
        fail, leave a screenshot and the page's HTML under the failure's `artifacts`), tear
        everything down, and record failures as bugs. Returns the first failed cases in full,
        the rest by id; the full result is at `result_ref`."""
        integration = await Stopwatch("integration_run", TOOL_TIMEOUT_S).call(
            lambda: library("integration.run")
        )
        project = library("layout").find_project_root(ws) or ws
        limit_s = integration.RUN_TIMEOUT_S + library("integration.health").HEALTH_TIMEOUT_S + RUN_MARGIN_S
        cancel = threading.Event()
        progress = ProgressRelay(ctx)

        if (mode == "resume") != (resume_token is not None):
            raise ValueError("resume_token goes with mode resume, and mode resume needs one")

        def run() -> Any:
            if mode == "retry":
                return library("integration.modes").retry(project, on_event=progress.event, cancel=cancel)
            return integration.integrate(
                project, cases=tuple(case or ()), on_event=progress.event, cancel=cancel,
                resume_token=resume_token,
            )

        watch = Stopwatch("integration_run", limit_s, cancel, state.running)
        result = await progress.around(watch.call(run))
        return IntegrationOutput.model_validate(
            {**bounded_integration(plain(result)), "session_id": state.session(None, ctx)}
        )

    table: list[tuple[Callable[..., Any], ToolAnnotations]] = [
        (test_probe, ANNOTATIONS["test_probe"]),
        (test_run, ANNOTATIONS["test_run"]),
        (test_job, ANNOTATIONS["test_job"]),
        (test_closure_check, ANNOTATIONS["test_closure_check"]),
        (bug_list, ANNOTATIONS["bug_list"]),
        (bug_open, ANNOTATIONS["bug_open"]),
        (bug_transition, ANNOTATIONS["bug_transition"]),
        (integration_run, ANNOTATIONS["integration_run"]),
        (timeline, ANNOTATIONS["timeline"]),
    ]
    tools = [Tool.from_function(fn, annotations=ann) for fn, ann in table]
    for tool in tools:
        # Unknown argument names are refused (the server's argument check): the schema says so too.
        tool.parameters["additionalProperties"] = False
    return tools


def bounded_run(
    ws: Path,
    sid: str | None,
    on_progress: Callable[..., None],
    cancel: threading.Event,
    options: Mapping[str, Any],
) -> tuple[Any, str]:
    """api.test_run: the record bounded as a model's structured data (api.bounded), and the run
    in the agent format."""
    api = library("api")
    result = api.test_run(ws, session_id=sid, on_progress=on_progress, cancel=cancel, **options)
    return api.bounded(result), agent_text(result, ws)


def job_agent_text(status: Any, ws: Path) -> str:
    """A job in the agent format: its finished run's text, else where it stands."""
    if status.finished and status.result is not None:
        run = library("result").RunResult.from_json(dict(status.result))
        return agent_text(run, ws)
    follow = f"test_job with job_id {status.job_id} and wait=true"
    return str(library("agent_format").job_text(status.to_json(), None, follow=follow, rerun=RERUN))
