"""The model tools over MCP: a second thin renderer over the library.

Each tool is a typed function whose parameters give the input schema and whose return
model gives the output schema; its body calls one library function and reshapes the
record into that model. Nothing is decided here that the CLI would decide differently.

What this module adds is the plumbing a long-lived tool server needs:

- the agent's session, resolved at every call as a shell run resolves it: the call's
  `session_id`, else a session variable in the server's environment, else the request's
  `_meta`, else the process tree (the harness that spawned this server is the one whose
  hooks recorded the session), else none (a workspace-level run, which every session's gate
  started before it sees). Never a private session no gate reads; every result reports the
  session id it was recorded under (greenloop.closure.session);
- blocking library calls run in a worker thread under a per-tool time limit; a client's
  cancellation (or the limit) sets the run's cancel event, so its process tree dies, and
  the tool waits for that before it answers;
- progress notifications while a suite runs (tests done so far);
- every failure becomes a tool result with `isError: true` and a message a model can act
  on: bad arguments (unknown names, wrong types) are named one by one; nothing reaches
  stdout but protocol (greenloop.mcp.wire owns the wire; fd 1 points at stderr).

See docs/mcp.md for the whole picture.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from greenloop import __version__
from greenloop.config import Config
from greenloop.errors import GreenloopError
from greenloop.mcp.args import INVALID_PARAMS, bad_arguments, tool_call_problem
from greenloop.mcp.fast import (
    RUN_MARGIN_S,
    STOP_WAIT_S,
    TOOL_TIMEOUT_S,
    Running,
    call_session,
    default_timeout_ms,
    limit_message,
    new_session_id,
    progress_of,
    run_limit_s,
    run_record,
)

if TYPE_CHECKING:
    from greenloop.model import Progress

__all__ = [
    "ANNOTATIONS",
    "RUN_MARGIN_S",
    "SERVER_NAME",
    "TOOL_NAMES",
    "TOOL_TIMEOUT_S",
    "BugListOutput",
    "BugOpenOutput",
    "BugOutput",
    "BugTransitionOutput",
    "ClosureOutput",
    "IntegrationOutput",
    "JobOutput",
    "ProbeOutput",
    "RunOutput",
    "Running",
    "ServerState",
    "bounded_integration",
    "build_server",
    "new_session_id",
    "serve_stdio",
]

SERVER_NAME = "greenloop"
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

log = logging.getLogger("greenloop.mcp")

T = TypeVar("T")

FrameworkArg = Literal[
    "vitest", "jest", "npm-test", "pytest", "node:test", "go", "cargo", "mocha", "unittest", "bun"
]
SandboxArg = Literal["auto", "read-only", "workspace-write", "full-access"]
SeverityArg = Literal["low", "medium", "high", "critical"]
SourceArg = Literal["unit_test", "unit_test_infra", "integration_test"]
StatusArg = Literal["open", "fixing", "fixed", "verified"]
SessionArg = Annotated[
    str | None,
    Field(min_length=1, description="Record under this agent session instead of the one greenloop resolves."),
]


# --------------------------------------------------------------------------- output models
# Each model lists the fields of the record it renders; `extra="allow"` keeps any
# field the library adds later instead of silently dropping it.


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")


class SummaryOutput(_Out):
    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0


class FailureOutput(_Out):
    test: str
    file: str | None = None
    line: int | None = None
    message: str = ""
    expected: str | None = None
    got: str | None = None
    stack: str = ""
    hint: str = ""
    bug_id: str | None = None
    kind: str = "test"


class SandboxOutput(_Out):
    mode: str = Field(default="full-access", description="auto | read-only | workspace-write | full-access")
    enforced_by: str | None = Field(
        default=None, description="e.g. 'bubblewrap 0.8.0' or 'landlock ABI 7'; null: NOT enforced"
    )
    workspace_root: str | None = None
    note: str | None = Field(default=None, description="Set when the sandbox was asked for but not enforced.")


class RunOutput(_Out):
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
    outcome: Literal["green", "red", "broken"] | None = None
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
    shard: dict[str, int] | None = Field(
        default=None, description="A run of one shard: {index, total}; selection is then 'shard'."
    )
    resume_token: str | None = Field(
        default=None, description="Continues this run (mode resume) if it is cut short."
    )


class ProbeOutput(_Out):
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


class LastRunOutput(_Out):
    run_id: str | None = None
    ok: bool | None = None
    at: str | None = None
    outcome: str | None = None
    failing: list[str] = Field(default_factory=list, description="Names of the failing tests.")
    source: str | None = Field(default=None, description="Who ran it: a greenloop run, or a hook's parse.")


class ClosureOutput(_Out):
    session_id: str | None
    session_source: str | None = None
    satisfied: bool = Field(description="True when the session may end its turn (last run green, or none).")
    last_run: LastRunOutput | None = None
    intercepts_this_turn: int = 0
    budget: int | None = None
    unresolved: bool = False
    notes: list[str] = Field(default_factory=list)


class JobOutput(_Out):
    session_id: str | None
    job_id: str
    status: Literal["starting", "running", "done", "failed", "lost", "cancelled"]
    finished: bool = Field(default=False, description="True once the job has ended, however it ended.")
    run_id: str | None = None
    ok: bool | None = None
    result: RunOutput | None = Field(default=None, description="The bounded run result once done.")
    error: str | None = Field(default=None, description="Why the job failed or was lost.")
    log_path: str | None = None


class BugOutput(_Out):
    id: str
    status: str
    source: str | None = None
    unit_id: str | None = None
    run_id: str | None = None
    test_name: str | None = None
    dedup_key: str | None = None
    category: str | None = None
    severity: str | None = None
    title: str | None = None
    detail: str | None = None
    affected_units: list[str] = Field(default_factory=list)
    fix_refs: list[str] = Field(default_factory=list)
    created_at: str | None = None
    updated_at: str | None = None
    by: str | None = None


class BugOpenOutput(_Out):
    session_id: str | None
    bug: BugOutput
    created: bool = Field(description="False: the open bug for the same unit and test was reused.")
    log: str | None = Field(default=None, description="Path of bugs.ndjson.")
    warnings: list[str] = Field(default_factory=list, description="Torn or corrupt log lines skipped.")


class BugTransitionOutput(_Out):
    session_id: str | None
    bug: BugOutput
    from_status: str | None = Field(default=None, alias="from")
    to: str | None = None
    log: str | None = None
    warnings: list[str] = Field(default_factory=list)


class BugListOutput(_Out):
    session_id: str | None
    count: int
    bugs: list[BugOutput]
    log: str | None = None
    warnings: list[str] = Field(default_factory=list)


class TimelineEventOutput(_Out):
    at: str = Field(description="UTC time, ISO 8601.")
    kind: str = Field(description="unit_tested, test_passed, test_failed, integration_started, "
                      "integration_done, integration_failed, bug_opened or bug_closed.")
    unit_id: str
    ref: str = Field(description="The run, integration run or bug the event is about.")
    summary: str


class TimelineOutput(_Out):
    session_id: str
    timeline: str = Field(description="Path of timeline.ndjson.")
    events: list[TimelineEventOutput]
    warnings: list[str] = Field(default_factory=list)


class CaseFailureOutput(_Out):
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


class IntegrationOutput(_Out):
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


# --------------------------------------------------------------------------- plumbing


@dataclass(frozen=True)
class ServerState:
    """What every tool of one server needs: where, for whom, under which config.

    `session_id` is the session the server's environment names (None: resolved at each call,
    `resolve`); `label` names this connection where a name is needed and no session applies
    (who moved a bug)."""

    workspace: Path
    session_id: str | None
    config: Config
    running: Running
    label: str = ""
    session_source: str = "env"

    def resolve(self, named: str | None = None, ctx: Context | None = None) -> Any:
        """The call's session (greenloop.closure.session.Resolved): named > environment > the request's
        `_meta` > the process tree > none (the workspace)."""
        # (in greenloop.mcp.fast, which the fast lane shares while the SDK loads)
        return call_session(self.workspace, self.session_id, self.session_source, named, _request_meta(ctx))

    def session(self, named: str | None = None, ctx: Context | None = None) -> str | None:
        return cast("str | None", self.resolve(named, ctx).session_id)

    def who(self, named: str | None = None, ctx: Context | None = None) -> str:
        """A name for this caller: its session, else the connection's label."""
        return self.session(named, ctx) or self.label or "mcp"


def _request_meta(ctx: Context | None) -> Mapping[str, Any] | None:
    """The `_meta` of the request a tool answers, as a mapping (None when there is none)."""
    if ctx is None:
        return None
    try:
        meta: object = ctx.request_context.meta  # a dict or a pydantic model, by SDK version
    except Exception:  # no request context (a direct call in a test)
        return None
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return meta
    dump = getattr(meta, "model_dump", None)
    if callable(dump):
        data = dump(by_alias=True, exclude_none=True)
        return data if isinstance(data, Mapping) else None
    return None


def _lib(name: str) -> Any:
    """A library module, imported in the worker thread on first use (keeps startup light)."""
    import importlib

    return importlib.import_module(f"greenloop.{name}")


def _plain(value: Any) -> Any:
    """A library record (frozen dataclass with to_json) or a plain value, as JSON-able data."""
    to_json = getattr(value, "to_json", None)
    if callable(to_json):
        return to_json()
    return value


class _Stopwatch:
    """Runs one blocking library call in a worker thread under a limit, honouring cancellation."""

    def __init__(
        self,
        tool: str,
        limit_s: float,
        cancel: threading.Event | None = None,
        running: Running | None = None,
    ) -> None:
        self.tool = tool
        self.limit_s = limit_s
        self.cancel = cancel
        self.running = running

    async def call(self, fn: Callable[[], T]) -> T:
        finished = threading.Event()
        key = None
        if self.cancel is not None and self.running is not None:
            key = self.running.add(self.cancel, finished)

        def work() -> T:
            try:
                return fn()
            finally:
                finished.set()
                if key is not None and self.running is not None:
                    self.running.discard(key)

        try:
            with anyio.fail_after(self.limit_s):
                return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except TimeoutError:
            await self._stop(finished)
            raise ToolError(limit_message(self.tool, self.limit_s, self.cancel is not None)) from None
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._stop(finished)
            raise
        except GreenloopError as exc:
            raise ToolError(exc.message) from exc
        except ToolError:
            raise
        except Exception as exc:
            log.exception("%s failed unexpectedly", self.tool)
            raise ToolError(
                f"greenloop failed inside {self.tool}: {type(exc).__name__}: {exc}. "
                "This is a greenloop bug, not a test failure; the server's stderr has the traceback."
            ) from exc

    async def _stop(self, finished: threading.Event) -> None:
        if self.cancel is None:
            return
        self.cancel.set()
        await anyio.to_thread.run_sync(finished.wait, STOP_WAIT_S)


class _Progress:
    """Forwards the library's progress callbacks (worker thread) as MCP progress notifications.

    Notifications are sent in order by one task; a count that does not grow is not sent
    (the protocol wants progress to increase), and a failing send never disturbs the run.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.send, self.receive = anyio.create_memory_object_stream[tuple[float, float | None, str]](256)
        self.last = 0.0
        # The library may call back from any thread (the run's output reader, not only the
        # worker), so the loop is named explicitly.
        self.token = anyio.lowlevel.current_token()

    def callback(self, progress: Progress) -> None:
        """Called from the worker thread with the run's Progress (tests finished so far)."""
        done, message = progress_of(progress)
        if done <= self.last:
            return
        self.last = done
        try:
            anyio.from_thread.run_sync(self.send.send_nowait, (done, None, message), token=self.token)
        except Exception:  # a full buffer or a closed loop loses one notification, never the run
            log.debug("progress notification dropped", exc_info=True)

    def event(self, message: str) -> None:
        """Called from the worker thread with one line of news (a unit started, a case began)."""
        self.last += 1
        try:
            anyio.from_thread.run_sync(self.send.send_nowait, (self.last, None, message), token=self.token)
        except Exception:
            log.debug("progress notification dropped", exc_info=True)

    async def around(self, call: Awaitable[T]) -> T:
        """Await `call` while forwarding notifications; its ToolError comes out unwrapped."""
        failed: ToolError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.forward)
            try:
                result = await call
            except ToolError as exc:  # raised outside the group, not as an ExceptionGroup
                failed = exc
            finally:
                self.send.close()
        if failed is not None:
            raise failed
        return result

    async def forward(self) -> None:
        async with self.receive:
            async for done, total, message in self.receive:
                try:
                    await self.ctx.report_progress(done, total, message)
                except Exception:
                    log.debug("progress notification failed", exc_info=True)


def _bad_arguments(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """A message naming every bad argument of a call, or None when the arguments are fine.

    Strict: the arguments are checked against the tool's published input schema as JSON
    (greenloop.mcp.args, as the fast lane does), so "5" is no integer and "true" no boolean;
    pydantic, which validates them next, would coerce both silently."""
    return bad_arguments(tool.name, tool.parameters, arguments)


def _first_error(exc: ValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return str(exc)
    first = errors[0]
    where = ".".join(str(p) for p in first["loc"]) or "params"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"'{where}': {first['msg']}{more}"


def _tool_error(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _argument_check(tools: Mapping[str, Tool]) -> Callable[..., Any]:
    """Middleware: refuse a tools/call with unknown or ill-typed arguments as a tool error."""

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call":
            # No tool name, or arguments that are no object: not a call at all, a protocol
            # error (-32602) naming what is wrong, not a tool result.
            problem = tool_call_problem(ctx.params, list(tools))
            if problem is not None:
                raise MCPError(INVALID_PARAMS, problem)
            assert ctx.params is not None
            name = str(ctx.params.get("name"))
            tool = tools.get(name)
            if tool is None:
                return _tool_error(
                    f"greenloop has no tool '{name}'; its tools are: {', '.join(tools)}."
                    if tools
                    else "greenloop is disabled for this workspace (enabled = false in its config), "
                    "so it offers no tools; set enabled = true to use them."
                )
            message = _bad_arguments(tool, ctx.params.get("arguments") or {})
            if message is not None:
                log.info("refused %s: %s", tool.name, message)
                return _tool_error(message)
        try:
            return await call_next(ctx)
        except ValidationError as exc:
            # The SDK answers ill-formed params with an empty -32602; name what is wrong.
            raise MCPError(INVALID_PARAMS, f"{ctx.method}: invalid params: {_first_error(exc)}") from None
        except MCPError as exc:
            if exc.code == INVALID_PARAMS and exc.message == "Invalid request parameters" and not exc.data:
                # the SDK's answer to a request before the handshake, with the same empty text
                raise MCPError(
                    INVALID_PARAMS,
                    f"{ctx.method} before the handshake: send initialize (then "
                    "notifications/initialized) first",
                ) from None
            raise

    return check


# --------------------------------------------------------------------------- the tools

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


def _tools(state: ServerState) -> list[Tool]:
    ws = state.workspace

    async def test_probe(ctx: Context) -> ProbeOutput:
        """Detect the workspace's test framework and the command test_run would use, running nothing."""
        detection = await _Stopwatch("test_probe", TOOL_TIMEOUT_S).call(lambda: _lib("api").test_probe(ws))
        return ProbeOutput.model_validate({**_plain(detection), "session_id": state.session(None, ctx)})

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
            Field(description="Run only shard I of N of the suite, as 'I/N' (e.g. '2/4'), in the "
                  "runner's own dialect; the result's selection is 'shard'. Fold the N results with "
                  "`greenloop merge`."),
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
    ) -> RunOutput:
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
        if shard is not None:
            options["shard"] = shard
        if rerun_failures:
            options["rerun_failures"] = rerun_failures
        if resume_token is not None:
            options["resume_token"] = resume_token
        if run_in_background:
            job_id = await _Stopwatch("test_run", TOOL_TIMEOUT_S).call(
                lambda: _lib("closure.jobs").start(ws, session_id=sid, **options)
            )
            return RunOutput(
                session_id=sid,
                session_source=resolved.source,
                background=True,
                job_id=str(job_id),
                notes=[f"started in the background; poll test_job with job_id {job_id}"],
            )
        run_ms = timeout_ms
        if run_ms is None:
            run_ms = await _Stopwatch("test_run", TOOL_TIMEOUT_S).call(
                lambda: default_timeout_ms(ws, state.config)
            )
        limit_s = run_limit_s(run_ms, mode, rerun_failures)  # retry: up to two runs; each rerun
        cancel = threading.Event()
        progress = _Progress(ctx)
        watch = _Stopwatch("test_run", limit_s, cancel, state.running)
        bounded = await progress.around(
            watch.call(lambda: _bounded_run(ws, sid, progress.callback, cancel, options))
        )
        # (the same record the fast lane answers with: greenloop.mcp.fast.run_record)
        return RunOutput.model_validate(run_record(_plain(bounded), sid, resolved.source))

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
    ) -> JobOutput:
        """Report on a background test run: starting/running, or ended (done, failed, lost,
        cancelled) with its bounded result."""
        jobs = _lib("closure.jobs")
        if cancel:
            status = await _Stopwatch("test_job", TOOL_TIMEOUT_S).call(lambda: jobs.cancel(ws, job_id))
        else:
            wait_s = (JOB_WAIT_DEFAULT_MS if wait_ms is None else wait_ms) / 1000 if wait else 0.0
            status = await _Stopwatch("test_job", wait_s + TOOL_TIMEOUT_S).call(
                lambda: jobs.status(ws, job_id, wait=wait, timeout_s=wait_s)
            )
        return await _Stopwatch("test_job", TOOL_TIMEOUT_S).call(
            lambda: _job_output(status, state.session(None, ctx))
        )

    async def test_closure_check(ctx: Context, session_id: SessionArg = None) -> ClosureOutput:
        """Is the session's last recorded run green? If not, fix the failures and call test_run again."""
        resolved = state.resolve(session_id, ctx)
        sid = resolved.session_id
        closure = await _Stopwatch("test_closure_check", TOOL_TIMEOUT_S).call(
            lambda: _lib("api").test_closure_check(ws, sid)
        )
        return ClosureOutput.model_validate(
            {**_plain(closure), "session_id": sid, "session_source": resolved.source}
        )

    def bug_log() -> Any:
        bug_log = _lib("bugs.log")
        return bug_log.BugLog(bug_log.bug_log_path(ws))

    async def bug_list(
        ctx: Context,
        unit: Annotated[
            str | None, Field(description="Only this unit's bugs (or bugs affecting it).")
        ] = None,
        status: Annotated[StatusArg | None, Field(description="Only bugs in this status.")] = None,
        source: Annotated[SourceArg | None, Field(description="Only bugs from this source.")] = None,
        severity: Annotated[SeverityArg | None, Field(description="Only bugs of this severity.")] = None,
    ) -> BugListOutput:
        """List the project's bugs (bugs.ndjson) in their current state."""
        fold = await _Stopwatch("bug_list", TOOL_TIMEOUT_S).call(
            lambda: bug_log().list(unit=unit, status=status, source=source, severity=severity)
        )
        return BugListOutput.model_validate({**_plain(fold), "session_id": state.session(None, ctx)})

    async def timeline(
        ctx: Context,
        unit: Annotated[str | None, Field(description="Only this unit's events.")] = None,
        last: Annotated[int, Field(ge=1, le=1000, description="The last N events (default 50).")] = 50,
    ) -> TimelineOutput:
        """What happened in the project, in order: unit runs, integration runs, bugs opened and closed."""
        tl = _lib("devloop.timeline")
        path = tl.timeline_path(ws)
        events, warnings = await _Stopwatch("timeline", TOOL_TIMEOUT_S).call(
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
        severity: SeverityArg | None = None,
        source: Annotated[SourceArg, Field(description="Where the bug was found.")] = "unit_test",
        detail: Annotated[str | None, Field(description="Message, expected/got, stack.")] = None,
        run_id: Annotated[str | None, Field(description="The run that found it.")] = None,
        category: str | None = None,
        affected_units: Annotated[
            list[str] | None, Field(description="Other units the bug concerns.")
        ] = None,
    ) -> BugOpenOutput:
        """Open a bug, or return the open (or fixing) one for the same unit and test."""
        opened = await _Stopwatch("bug_open", TOOL_TIMEOUT_S).call(
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
        return BugOpenOutput.model_validate({**_plain(opened), "session_id": state.session(None, ctx)})

    async def bug_transition(
        ctx: Context,
        bug_id: Annotated[str, Field(min_length=1)],
        to: Annotated[StatusArg, Field(description="The new status: open -> fixing -> fixed -> verified.")],
        by: Annotated[str | None, Field(description="Who moves it (default: this session).")] = None,
        fix_ref: Annotated[str | None, Field(description="A commit, patch or run that fixes it.")] = None,
    ) -> BugTransitionOutput:
        """Move a bug to another status. Illegal moves are refused, naming the allowed ones."""
        moved = await _Stopwatch("bug_transition", TOOL_TIMEOUT_S).call(
            lambda: bug_log().transition(
                bug_id, to, by=by or state.who(None, ctx), fix_refs=(fix_ref,) if fix_ref else ()
            )
        )
        return BugTransitionOutput.model_validate({**_plain(moved), "session_id": state.session(None, ctx)})

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
        integration = await _Stopwatch("integration_run", TOOL_TIMEOUT_S).call(
            lambda: _lib("integration.run")
        )
        project = _lib("layout").find_project_root(ws) or ws
        limit_s = integration.RUN_TIMEOUT_S + _lib("integration.health").HEALTH_TIMEOUT_S + RUN_MARGIN_S
        cancel = threading.Event()
        progress = _Progress(ctx)

        if (mode == "resume") != (resume_token is not None):
            raise ValueError("resume_token goes with mode resume, and mode resume needs one")

        def run() -> Any:
            if mode == "retry":
                return _lib("integration.modes").retry(project, on_event=progress.event, cancel=cancel)
            return integration.integrate(
                project, cases=tuple(case or ()), on_event=progress.event, cancel=cancel,
                resume_token=resume_token,
            )

        watch = _Stopwatch("integration_run", limit_s, cancel, state.running)
        result = await progress.around(watch.call(run))
        return IntegrationOutput.model_validate(
            {**bounded_integration(_plain(result)), "session_id": state.session(None, ctx)}
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
        # Unknown argument names are refused (_bad_arguments): the schema says so too.
        tool.parameters["additionalProperties"] = False
    return tools


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


def _bounded_run(
    ws: Path,
    sid: str | None,
    on_progress: Callable[..., None],
    cancel: threading.Event,
    options: Mapping[str, Any],
) -> Any:
    api = _lib("api")
    result = api.test_run(ws, session_id=sid, on_progress=on_progress, cancel=cancel, **options)
    return api.bounded(result)


def _run_output(bounded: Any, session_id: str | None) -> RunOutput:
    data = dict(_plain(bounded))
    # The session the run was recorded under: the one the call resolved, or, when it resolved
    # none, the one the run itself found (a hook may have bound the harness in between).
    data["session_id"] = session_id or data.get("session_id")
    return RunOutput.model_validate(data)


def _job_output(status: Any, session_id: str | None) -> JobOutput:
    data = dict(_plain(status))
    data["session_id"] = data.get("session_id") or session_id
    result = data.get("result")
    if isinstance(result, Mapping):
        # The job stores the whole RunResult; a model reads the same bounded view as test_run's.
        from greenloop.model import RunResult

        data["result"] = _run_output(
            _lib("api").bounded(RunResult.from_json(dict(result))), data["session_id"]
        )
    return JobOutput.model_validate(data)


# --------------------------------------------------------------------------- the server


def build_server(
    workspace: str | os.PathLike[str],
    *,
    config: Config,
    session_id: str | None,
    running: Running,
    label: str = "",
    session_source: str = "env",
) -> MCPServer[Any]:
    """The MCP server for one workspace. `session_id`: the session the environment names (None:
    each call resolves its own, `ServerState.resolve`). With `enabled = false`: no tools.

    `running` is shared with `serve_stdio` so that a signal stops the calls in flight.
    """
    state = ServerState(Path(workspace).resolve(), session_id, config, running, label, session_source)
    tools = _tools(state) if config.enabled else []
    if config.enabled:
        instructions = (
            "greenloop runs this workspace's tests and keeps the session honest about them. "
            "After changing code, call test_run; while its result is red, fix the failures it "
            "lists and call test_run again. test_closure_check says whether the turn may end. "
            "Every result names the session it was recorded under."
        )
    else:
        instructions = "greenloop is disabled for this workspace (enabled = false): no tools are offered."
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        instructions=instructions,
        version=__version__,
        tools=tools,
        log_level="WARNING",
        middleware=[_argument_check({t.name: t for t in tools})],
    )
    return server


def serve_stdio(
    server: MCPServer[Any],
    running: Running,
    *,
    stdin: Any = None,
    stdout: Any = None,
) -> None:
    """Serve over stdio until the client closes the connection or signals the server.

    `stdin`/`stdout` are the transport's text streams (greenloop.mcp.wire gives them);
    without them the SDK claims the process's own. On stdin's end the SDK cancels the calls
    in flight, and each stops its process tree. On SIGTERM or SIGHUP (what a client sends
    when the server does not leave on its own) the calls in flight are cancelled the same
    way and waited for, then the process exits at once.
    """
    anyio.run(_serve_until_signalled, server, running, stdin, stdout)


async def _serve_until_signalled(server: MCPServer[Any], running: Running, stdin: Any, stdout: Any) -> None:
    from mcp.server.stdio import stdio_server

    async with anyio.create_task_group() as tg:

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    stopped = await anyio.to_thread.run_sync(running.stop_all, STOP_WAIT_S)
                    log.warning("%s: stopped %d running call(s); exiting", name, stopped)
                    sys.stderr.flush()
                    os._exit(0)

        tg.start_soon(watch_signals)
        # MCPServer.run_stdio_async, with the transport's streams passed in (it takes none).
        lowlevel = server._lowlevel_server
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
        tg.cancel_scope.cancel()
