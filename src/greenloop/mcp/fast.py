"""The fast lane of `greenloop mcp`: `test_run` served before the MCP SDK has loaded.

Importing the SDK costs seconds of CPU on a busy machine, and a model's first call after the
handshake is nearly always `test_run`. Waiting for the SDK made that first call 2.6 times as
slow as the same run from the shell. So while the SDK loads, `greenloop.mcp.wire` hands
`tools/call test_run` here, and it is served with the standard library and greenloop's own
library, exactly as the SDK would serve it:

- the arguments are checked strictly against the input schema the SDK published
  (greenloop.mcp.args, the same check the SDK path runs, with the same message);
- the run is `api.test_run` + `api.bounded` in a worker thread under the same limit
  (`timeout_ms` + RUN_MARGIN_S), recorded under the connection's session;
- progress notifications go out per finished test when the call has a progressToken;
- `notifications/cancelled` for the call, the limit, the client's EOF or SIGTERM set the
  run's cancel event (its process tree dies) through the `Running` table the SDK path
  shares; a cancelled call gets no answer, as MCP wants;
- the answer is the output schema's shape (every property, defaults filled, as pydantic
  would dump the model) as structured content, and the run in the agent format as text
  (`agent_text`, what the SDK path answers too).

Once the SDK is up every new call goes to it; calls already on the lane finish here.
Only `test_run` takes this lane: the other tools are quick, and a model calls them later.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from greenloop.config import Config
    from greenloop.mcp.wire import Wire
    from greenloop.model import Progress

__all__ = [
    "FAST_TOOLS",
    "RERUN",
    "RUN_MARGIN_S",
    "STOP_WAIT_S",
    "TOOL_TIMEOUT_S",
    "FastLane",
    "Running",
    "agent_text",
    "call_session",
    "default_timeout_ms",
    "limit_message",
    "new_session_id",
    "progress_of",
    "run_limit_s",
    "run_record",
]

TOOL_TIMEOUT_S = 20.0  # the quick tools (probe, closure check, bugs): they read a few files
RUN_MARGIN_S = 15.0  # test_run beyond its own timeout: the kill escalation, parsing, recording
STOP_WAIT_S = 30.0  # after a cancel, how long a call waits for the library to stop the run
FAST_TOOLS = ("test_run",)
RERUN = "test_run with last_failed=true"  # what reruns just the failures, in a tool call's words

log = logging.getLogger("greenloop.mcp")


def new_session_id() -> str:
    """A fresh id for one MCP connection: a label (who moved a bug), never a session a run is
    recorded under."""
    return f"mcp-{uuid.uuid4().hex[:16]}"


class Running:
    """The cancellable calls in flight (the SDK's and the fast lane's), so that a shutdown can
    stop their process trees before the server exits: each call's cancel and finished events."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: dict[int, tuple[threading.Event, threading.Event]] = {}

    def add(self, cancel: threading.Event, finished: threading.Event) -> int:
        """Register a call in flight; the key discards it once it has ended."""
        with self._lock:
            key = id(cancel)
            self._calls[key] = (cancel, finished)
            return key

    def discard(self, key: int) -> None:
        """Forget a call that has ended."""
        with self._lock:
            self._calls.pop(key, None)

    def stop_all(self, wait_s: float) -> int:
        """Cancel every call, then wait up to `wait_s` in all for them to end."""
        with self._lock:
            calls = list(self._calls.values())
        for cancel, _ in calls:
            cancel.set()
        deadline = time.monotonic() + wait_s
        for _, finished in calls:
            finished.wait(max(0.0, deadline - time.monotonic()))
        return len(calls)


def progress_of(progress: Progress) -> tuple[float, str]:
    """(tests done so far, a one-line message) from the run's Progress record."""
    counts = {"passed": progress.passed, "failed": progress.failed, "skipped": progress.skipped}
    parts = [f"{n} {k}" for k, n in counts.items() if n]
    done = progress.done
    return float(done), f"{done} test(s) done" + (f": {', '.join(parts)}" if parts else "")


def limit_message(tool: str, limit_s: float, killed: bool) -> str:
    """What a model reads when a call ran past its limit, and what to try instead."""
    return (
        f"{tool} did not finish within its limit of {limit_s:g} s and was stopped"
        + ("; its processes were killed" if killed else "")
        + ". Retry with a narrower target, a larger timeout_ms, or run_in_background=true."
    )


def default_timeout_ms(ws: Path, started_with: Config) -> int:
    """The run timeout api.test_run will use without timeout_ms: the config as it is now, which
    it loads for each call. A config that no longer loads leaves the server's value (the run
    then stops at once, reporting the config's error)."""
    from greenloop import config as config_mod
    from greenloop.errors import GreenloopError

    try:
        return config_mod.load(ws).default_timeout_ms
    except GreenloopError:
        return started_with.default_timeout_ms


def call_session(
    workspace: Path, env_session: str | None, env_source: str, named: str | None, meta: Any
) -> Any:
    """The session a call records under (greenloop.closure.session.Resolved): the call's `session_id` >
    the one the server's environment names > the request's `_meta` > the process tree > none
    (the workspace). The SDK path (ServerState.resolve) and the fast lane both ask here."""
    from greenloop.closure import session as session_mod

    if named:
        return session_mod.Resolved(named, "explicit")
    if env_session:
        return session_mod.Resolved(env_session, env_source)
    return session_mod.resolve_with_source(
        None, env={}, mcp_context=session_mod.from_meta(meta), workspace=workspace
    )


def agent_text(result: Any, workspace: Path) -> str:
    """A RunResult as a tool's text content: the agent format (greenloop.agent_format), its
    long-lived notes said once per session; structuredContent keeps the record."""
    from greenloop.commands.output import run_agent_text

    return run_agent_text(result, rerun=RERUN, cwd=str(workspace), with_run_id=False)


def run_limit_s(run_ms: int, mode: str, reruns: int = 0) -> float:
    """test_run's limit: its own timeout (twice for mode retry: up to two runs; once more for
    each rerun of `rerun_failures`) plus the margin."""
    return run_ms / 1000 * (2 if mode == "retry" else 1) * (1 + reruns) + RUN_MARGIN_S


def run_record(bounded: Mapping[str, Any], sid: str | None, source: str) -> dict[str, Any]:
    """A bounded run as test_run reports it: the session it was recorded under (the one the
    call resolved, or, when it resolved none, the one the run itself found: a hook may have
    bound the harness in between) and where that session came from."""
    data = dict(bounded)
    data["session_id"] = sid or data.get("session_id")
    data["session_source"] = source if sid or data["session_id"] is None else "run"
    return data


def _filled(schema: Mapping[str, Any], defs: Mapping[str, Any], value: Any) -> Any:
    """`value` as pydantic dumps the model `schema` describes: every property present (its
    default where the value lacks it), nested models alike, extra keys kept after them."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = defs.get(ref.rsplit("/", 1)[-1], {})
    if "anyOf" in schema and value is not None:
        for option in schema["anyOf"]:
            if option.get("type") != "null":
                return _filled(option, defs, value)
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_filled(schema["items"], defs, v) for v in value]
    properties = schema.get("properties")
    if not isinstance(value, Mapping) or not isinstance(properties, Mapping):
        return value
    out: dict[str, Any] = {}
    for name, prop in properties.items():
        if name in value:
            out[name] = _filled(prop, defs, value[name])
        elif "default" in prop:
            out[name] = prop["default"]
    for name, v in value.items():
        if name not in out:
            out[name] = v
    return out


class FastLane:
    """Serves `tools/call` for FAST_TOOLS on the wire while the SDK loads (see the module)."""

    def __init__(
        self,
        wire: Wire,
        *,
        workspace: Path,
        config: Config,
        resolve: Callable[[str | None, Any], Any],
        running: Running,
        tools: list[Mapping[str, Any]] | None = None,
    ) -> None:
        self.wire = wire
        self.workspace = workspace.resolve()
        self.config = config
        self.resolve = resolve  # (named session, the request's _meta) -> session.Resolved
        self.running = running
        self.tools: dict[str, Mapping[str, Any]] = {}
        self.offer(tools or [])
        self._lock = threading.Lock()
        self._calls: dict[Any, tuple[threading.Event, threading.Event]] = {}  # id -> (cancel, by client)
        self.served = 0  # calls taken so far

    @property
    def busy(self) -> bool:
        """A call is on the lane now."""
        with self._lock:
            return bool(self._calls)

    def offer(self, tools: list[Mapping[str, Any]]) -> None:
        """The tools as the SDK lists them (its schemas are the lane's contract)."""
        self.tools = {str(t.get("name")): t for t in tools if t.get("name") in FAST_TOOLS}

    def take(self, msg: Mapping[str, Any]) -> bool:
        """Serve `msg` when it is a call this lane serves (True: never pass it on)."""
        if msg.get("method") != "tools/call" or msg.get("id") is None:
            return False
        params = msg.get("params")
        if not isinstance(params, Mapping):
            return False
        tool = self.tools.get(str(params.get("name")))
        arguments = params.get("arguments")
        if tool is None or not isinstance(arguments, (Mapping, type(None))):
            return False  # the SDK answers it (an ill-formed call is its -32602)
        from greenloop.mcp.args import bad_arguments

        rid = msg["id"]
        args = dict(arguments or {})
        refused = bad_arguments(str(tool["name"]), tool.get("inputSchema") or {}, args)
        if refused is not None:
            log.info("refused %s: %s", tool["name"], refused)
            self._answer(rid, self._error(refused))
            return True
        meta = params.get("_meta")
        meta = meta if isinstance(meta, Mapping) else None
        token = meta.get("progressToken") if meta is not None else None
        cancel, by_client = threading.Event(), threading.Event()
        with self._lock:
            self._calls[rid] = (cancel, by_client)
            self.served += 1
        threading.Thread(
            target=self._serve,
            args=(rid, tool, args, meta, token, cancel, by_client),
            name="mcp-fast",
            daemon=True,
        ).start()
        return True

    def see(self, msg: Mapping[str, Any]) -> None:
        """Watch a client message: a cancellation of a call on this lane stops its run."""
        if msg.get("method") != "notifications/cancelled":
            return
        params = msg.get("params")
        rid = params.get("requestId") if isinstance(params, Mapping) else None
        with self._lock:
            call = self._calls.get(rid)
        if call is not None:
            call[1].set()
            call[0].set()

    # ------------------------------------------------------------------ one call

    def _serve(
        self,
        rid: Any,
        tool: Mapping[str, Any],
        args: dict[str, Any],
        meta: Mapping[str, Any] | None,
        token: Any,
        cancel: threading.Event,
        by_client: threading.Event,
    ) -> None:
        try:
            result = self._call(tool, args, meta, token, cancel)
        except Exception as exc:  # the lane's own bug: reported as such, never a test failure
            log.exception("test_run failed unexpectedly")
            result = self._error(
                f"greenloop failed inside test_run: {type(exc).__name__}: {exc}. "
                "This is a greenloop bug, not a test failure; the server's stderr has the traceback."
            )
        finally:
            with self._lock:
                self._calls.pop(rid, None)
        if not by_client.is_set():  # a call the client cancelled gets no answer
            self._answer(rid, result)

    def _call(
        self,
        tool: Mapping[str, Any],
        args: dict[str, Any],
        meta: Mapping[str, Any] | None,
        token: Any,
        cancel: threading.Event,
    ) -> dict[str, Any]:
        from greenloop.errors import GreenloopError

        resolved = self.resolve(args.get("session_id"), meta)
        sid = resolved.session_id
        mode = str(args.get("mode") or "test")
        options: dict[str, Any] = {
            "framework": args.get("framework"),
            "target": args.get("target"),
            "last_failed": bool(args.get("last_failed", False)),
            "command": args.get("command"),
            "timeout_ms": args.get("timeout_ms"),
            "sandbox": args.get("sandbox"),
            "affected": args.get("affected"),  # None: the config's `affected`
        }
        if mode != "test":
            options["mode"] = mode
        if args.get("shard") is not None:
            options["shard"] = args["shard"]
        reruns = int(args.get("rerun_failures") or 0)
        if reruns:
            options["rerun_failures"] = reruns
        if args.get("resume_token") is not None:
            options["resume_token"] = str(args["resume_token"])
        ws = self.workspace
        try:
            if args.get("run_in_background"):
                from greenloop.closure import jobs

                job_id = jobs.start(ws, session_id=sid, **options)
                data: dict[str, Any] = {
                    "session_id": sid,
                    "session_source": resolved.source,
                    "background": True,
                    "job_id": str(job_id),
                    "notes": [f"started in the background; poll test_job with job_id {job_id}"],
                }
                return self._structured(tool, data, data["notes"][0])
            run_ms = options["timeout_ms"] or default_timeout_ms(ws, self.config)
            limit_s = run_limit_s(run_ms, mode, reruns)
            box: dict[str, Any] = {}
            finished = threading.Event()
            key = self.running.add(cancel, finished)
            last = [0.0]
            lock = threading.Lock()

            def on_progress(progress: Progress) -> None:
                if token is None:
                    return
                done, message = progress_of(progress)
                with lock:
                    if done <= last[0]:
                        return  # the protocol wants progress to grow
                    last[0] = done
                    params = {"progressToken": token, "progress": done, "message": message}
                    self.wire.send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

            def work() -> None:
                from greenloop import api

                try:
                    result = api.test_run(
                        ws, session_id=sid, on_progress=on_progress, cancel=cancel, **options
                    )
                    box["result"] = api.bounded(result)
                    box["text"] = agent_text(result, ws)
                except BaseException as exc:
                    box["error"] = exc
                finally:
                    finished.set()
                    self.running.discard(key)

            threading.Thread(target=work, name="mcp-fast-run", daemon=True).start()
            if not finished.wait(limit_s):
                cancel.set()
                finished.wait(STOP_WAIT_S)
                return self._error(limit_message("test_run", limit_s, killed=True))
            if "error" in box:
                raise box["error"]
            return self._structured(tool, run_record(box["result"], sid, resolved.source), box["text"])
        except GreenloopError as exc:
            return self._error(exc.message)

    # ------------------------------------------------------------------ answers

    def _structured(self, tool: Mapping[str, Any], data: Mapping[str, Any], text: str) -> dict[str, Any]:
        schema = tool.get("outputSchema") or {}
        structured = _filled(schema, schema.get("$defs") or {}, data)
        content = [{"type": "text", "text": text}]
        return {"content": content, "structuredContent": structured, "isError": False}

    @staticmethod
    def _error(message: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": message}], "isError": True}

    def _answer(self, rid: Any, result: Mapping[str, Any]) -> None:
        # `_meta` (MCP's reserved member for metadata) says which path served the call: the
        # answers are otherwise the SDK's, by design
        answer = {**result, "_meta": {"greenloop/lane": "fast"}}
        with contextlib.suppress(OSError):  # the client has gone; nothing to tell
            self.wire.send({"jsonrpc": "2.0", "id": rid, "result": answer})
