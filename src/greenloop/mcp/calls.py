"""One MCP tool call's plumbing on the SDK path: for whom, under which limit, with what progress.

- `ServerState`: what every tool of one server needs, and the call's session, resolved at
  every call as a shell run resolves it: the call's `session_id`, else a session variable in
  the server's environment, else the request's `_meta`, else the process tree (the harness
  that spawned this server is the one whose hooks recorded the session), else none (a
  workspace-level run, which every session's gate started before it sees). Never a private
  session no gate reads (greenloop.closure.session);
- `Stopwatch`: a blocking library call in a worker thread under a per-tool time limit; a
  client's cancellation (or the limit) sets the run's cancel event, so its process tree
  dies, and the tool waits for that before it answers; every failure becomes a `ToolError`
  (a tool result with `isError: true`) a model can act on;
- `ProgressRelay`: the library's progress callbacks as MCP progress notifications.

The fast lane (greenloop.mcp.fast) does the same for `test_run` before the SDK has loaded.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from greenloop.config import Config
from greenloop.errors import GreenloopError
from greenloop.mcp.fast import STOP_WAIT_S, Running, call_session, limit_message, progress_of

if TYPE_CHECKING:
    from greenloop.model import Progress

__all__ = ["ProgressRelay", "ServerState", "Stopwatch", "library"]

log = logging.getLogger("greenloop.mcp")

T = TypeVar("T")


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
        return call_session(self.workspace, self.session_id, self.session_source, named, request_meta(ctx))

    def session(self, named: str | None = None, ctx: Context | None = None) -> str | None:
        """The call's session id (None: the workspace)."""
        return cast("str | None", self.resolve(named, ctx).session_id)

    def who(self, named: str | None = None, ctx: Context | None = None) -> str:
        """A name for this caller: its session, else the connection's label."""
        return self.session(named, ctx) or self.label or "mcp"


def request_meta(ctx: Context | None) -> Mapping[str, Any] | None:
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


def library(name: str) -> Any:
    """A library module, imported in the worker thread on first use (keeps startup light)."""
    return importlib.import_module(f"greenloop.{name}")


class Stopwatch:
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
        """`fn()` in a worker thread; its result, or a ToolError saying why there is none."""
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


class ProgressRelay:
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
        """Send the queued notifications in order until the call ends."""
        async with self.receive:
            async for done, total, message in self.receive:
                try:
                    await self.ctx.report_progress(done, total, message)
                except Exception:
                    log.debug("progress notification failed", exc_info=True)
