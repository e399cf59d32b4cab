"""The stdio wire of `greenloop mcp`, and a warm handshake while the MCP SDK loads.

Importing the SDK costs most of a second of CPU, and a client sends `initialize` the moment
it has started the server. So the wire is owned here, with the standard library only:

- the protocol gets private copies of fd 0 and fd 1; fd 0 then reads /dev/null and fd 1
  writes to stderr, so nothing a handler or a child prints can reach the wire;
- one daemon thread reads lines from the client into a queue (so reads never block a
  shutdown), and the SDK's stdio transport reads that queue and writes through `Output`;
- while the SDK loads in another thread, `initialize` and `tools/list` are answered from
  the SDK's own earlier answers (greenloop.mcp.handshake: the handshake cache an earlier
  start wrote, else the snapshot shipped in the package when its key matches what is
  installed), so a client that gives up on a slow server (Codex drops one that takes
  ~1.5 s) never waits for the SDK. `ping` is answered at once, and `tools/call
  test_run` is served by the fast lane (greenloop.mcp.fast) without the SDK. Every other
  line read meanwhile is replayed to the SDK in order once it is up; the SDK's own answer
  to a replayed `initialize` is not sent again but refreshes the cache. A miss, or any
  other first message, simply waits for the SDK.

Lines that are no MCP message at all (invalid JSON, a batch, a non-object) are answered by
the reader thread itself, in every phase (greenloop.mcp.args).

A client that shows a model a tool's `structuredContent` in place of its text (Claude Code
does: the model reads the JSON of the whole record, never the agent format) is answered
text-first: its `tools/list` carries no `outputSchema` and its call results no
`structuredContent` (MCP makes both optional; a declared schema would oblige the structured
part). `TEXT_FIRST_CLIENTS` names them by the clientInfo of `initialize` or of a request's
`_meta`; GREENLOOP_MCP_STRUCTURED=always
keeps the structured part for every client.

GREENLOOP_MCP_HANDSHAKE=sdk switches the cache and the snapshot off (every answer is the
SDK's; scripts/mcp_handshake uses it to write the snapshot).
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from greenloop.mcp.fast import FastLane
    from greenloop.mcp.handshake import HandshakeCache

__all__ = ["SDK_GRACE_S", "TEXT_FIRST_CLIENTS", "Input", "Output", "Wire", "text_first", "warm_handshake"]

EOF_MARK = None  # what the reader queues when the client closes stdin
# Clients (initialize's clientInfo.name) whose model is shown structuredContent instead of the
# text content when a result has both: answered without the structured part.
TEXT_FIRST_CLIENTS = frozenset({"claude-code"})


def text_first(msg: Mapping[str, Any]) -> bool | None:
    """Whether the client that sent this request is answered text-first; None when the
    message does not name its client. The client names itself in `initialize`'s clientInfo,
    or (the stateless protocol of 2026-07-28, which has no initialize) in every request's
    `_meta`."""
    params = _params(msg)
    meta = params.get("_meta")
    info = params.get("clientInfo") if msg.get("method") == "initialize" else None
    if info is None and isinstance(meta, dict):
        info = meta.get("io.modelcontextprotocol/clientInfo")
    name = info.get("name") if isinstance(info, dict) else None
    if not isinstance(name, str) or not name:
        return None
    return name in TEXT_FIRST_CLIENTS and os.environ.get("GREENLOOP_MCP_STRUCTURED") != "always"


def _text_only(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """A result without outputSchema (tools/list) or structuredContent (tools/call)."""
    result = message.get("result")
    if not isinstance(result, dict):
        return message
    if "structuredContent" in result:
        result = {k: v for k, v in result.items() if k != "structuredContent"}
    tools = result.get("tools")
    if isinstance(tools, list) and any(isinstance(t, dict) and "outputSchema" in t for t in tools):
        bare = [
            {k: v for k, v in t.items() if k != "outputSchema"} if isinstance(t, dict) else t for t in tools
        ]
        result = {**result, "tools": bare}
    return {**message, "result": result}


def _params(msg: Mapping[str, Any]) -> dict[str, Any]:
    params = msg.get("params")
    return params if isinstance(params, dict) else {}


def _message(line: bytes | str) -> dict[str, Any] | None:
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


class Wire:
    """The process's stdio, claimed for the protocol."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self._in = os.fdopen(read_fd, "rb")
        self._write_fd = write_fd
        self._write_lock = threading.Lock()
        self.text_first = False  # set by the client's first message that names it (`text_first`)
        self.client_known = False
        threading.Thread(target=self._read, name="mcp-stdin", daemon=True).start()

    @classmethod
    def claim(cls) -> Wire:
        """Private copies of fd 0 and 1 for the protocol; fd 0 <- /dev/null, fd 1 -> stderr."""
        read_fd, write_fd = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        return cls(read_fd, write_fd)

    def _read(self) -> None:
        from greenloop.mcp.args import check_message

        try:
            for line in self._in:
                if not line.strip():
                    continue
                # A line that is no MCP message is answered here, in every phase (warm
                # handshake, fast lane, SDK): the SDK would only log it, and the client hang.
                msg, error = check_message(line)
                if error is not None:
                    self.send(error)
                    continue
                if msg is not None and not self.client_known:
                    known = text_first(msg)
                    if known is not None:
                        self.client_known, self.text_first = True, known
                self.lines.put(line)
        except (OSError, ValueError):
            pass
        self.lines.put(EOF_MARK)

    def send(self, message: Mapping[str, Any] | str) -> None:
        """Write one message (a JSON-RPC object or its text) as one line, whole."""
        if self.text_first:
            if isinstance(message, str):
                if '"structuredContent"' in message or '"outputSchema"' in message:
                    parsed = _message(message)
                    if parsed is not None:
                        message = _text_only(parsed)
            else:
                message = _text_only(message)
        text = message if isinstance(message, str) else json.dumps(message, separators=(",", ":"))
        data = (text.rstrip("\n") + "\n").encode("utf-8")
        with self._write_lock:
            view = memoryview(data)
            while view:
                written = os.write(self._write_fd, view)
                view = view[written:]


class Input:
    """The SDK transport's stdin: the replayed lines first, then the wire's queue.

    Iterating it also tells `Output` which request ids were `initialize` and `tools/list`,
    so that their answers can be cached.
    """

    def __init__(self, wire: Wire, replay: list[bytes], watch: Callable[[dict[str, Any]], None]) -> None:
        self.wire = wire
        self.replay = list(replay)
        self.watch = watch

    def __aiter__(self) -> Input:
        return self

    async def __anext__(self) -> str:
        import anyio.to_thread

        while True:
            if self.replay:
                line: bytes | None = self.replay.pop(0)
            else:
                # abandon_on_cancel: a shutdown never waits on a client that says nothing
                line = await anyio.to_thread.run_sync(self.wire.lines.get, abandon_on_cancel=True)
            if line is None:  # EOF_MARK
                self.wire.lines.put(EOF_MARK)  # later readers see the end too
                raise StopAsyncIteration
            text = line.decode("utf-8", "replace")
            refused = _sdk_refusal(text)
            if refused is not None:  # the SDK would log it and answer nothing
                self.wire.send(refused)
                continue
            msg = _message(text)
            if msg is not None:
                self.watch(msg)
            return text


def _sdk_refusal(text: str) -> dict[str, Any] | None:
    """The -32600 answer to a message the SDK's own message model refuses (the stdlib check
    in `Wire` lets through what JSON-RPC allows; the SDK's model is the final word)."""
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    try:
        jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError as exc:
        from greenloop.mcp.args import INVALID_REQUEST, error_reply

        msg = _message(text) or {}
        rid = msg.get("id")
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
        where = ".".join(str(p) for p in first["loc"]) or "message"
        return error_reply(
            rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None,
            INVALID_REQUEST,
            f"invalid request: {where}: {first['msg']}",
        )
    return None


class Output:
    """The SDK transport's stdout: writes to the wire, swallowing the answers the warm
    handshake already gave and remembering the SDK's handshake answers in the cache."""

    def __init__(self, wire: Wire, cache: HandshakeCache, swallow: set[Any]) -> None:
        self.wire = wire
        self.cache = cache
        self.swallow = set(swallow)
        self.pending: dict[Any, tuple[str, str | None]] = {}  # request id -> (kind, protocol version)
        self.version: str | None = None  # the protocol version the client asked for
        self._lock = threading.Lock()

    def watch(self, msg: dict[str, Any]) -> None:
        """See a client message on its way to the SDK."""
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            return
        params = _params(msg)
        if method == "initialize":
            with self._lock:
                self.version = str(params.get("protocolVersion"))
                self.pending[rid] = ("initialize", self.version)
        elif method == "tools/list" and not params.get("cursor"):
            with self._lock:
                self.pending[rid] = ("tools_list", self.version)

    async def write(self, text: str) -> None:
        """Send one of the SDK's messages, unless the warm handshake already answered it."""
        # Parsed only while a handshake answer is awaited (to cache) or already given (to swallow).
        msg = _message(text) if self.pending or self.swallow else None
        rid = msg.get("id") if msg is not None else None
        if msg is not None and rid is not None and isinstance(msg.get("result"), dict):
            with self._lock:
                kind = self.pending.pop(rid, None)
            if kind is not None and not msg["result"].get("nextCursor"):
                self.cache.remember(kind[0], msg["result"], kind[1])
        if (
            rid is not None
            and rid in self.swallow
            and msg is not None
            and ("result" in msg or "error" in msg)
        ):
            self.swallow.discard(rid)
            return
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.wire.send, text)

    async def flush(self) -> None:
        """Nothing to flush: every message is written whole when sent."""
        return None


SDK_GRACE_S = 0.5  # after the handshake, how long the SDK's import waits for a first test_run


def warm_handshake(
    wire: Wire,
    cache: HandshakeCache,
    ready: threading.Event,
    lane: FastLane | None = None,
    go: threading.Event | None = None,
) -> tuple[list[bytes], set[Any]]:
    """Answer `initialize`, `tools/list` and `ping` from the cache, and hand `tools/call` to
    the fast `lane`, until `ready` is set.

    `go` tells the loader to start importing the SDK. A model's first call is nearly always
    a run, served on the lane; the SDK's import (seconds of CPU) would compete with that run
    for the machine, so it waits while the lane runs: `go` is set once the lane's calls are
    done, when a request needs the SDK, when no call came SDK_GRACE_S after the handshake,
    or when the cache cannot answer at all.

    Returns the lines read (to replay to the SDK, in order) and the request ids already
    answered (whose SDK answers are swallowed). Reads nothing when the cache cannot answer
    the first message, so the SDK then sees the conversation exactly as it came.
    """
    go = go if go is not None else threading.Event()
    try:
        return _warm(wire, cache, ready, lane, go)
    finally:
        go.set()


def _warm(
    wire: Wire, cache: HandshakeCache, ready: threading.Event, lane: FastLane | None, go: threading.Event
) -> tuple[list[bytes], set[Any]]:
    if not cache.can_answer():
        go.set()  # the SDK answers the handshake: load it at once
    first = wire.lines.get()
    if first is None:
        wire.lines.put(EOF_MARK)
        return [], set()
    replay = [first]
    msg = _message(first)
    if msg is None or msg.get("method") != "initialize" or msg.get("id") is None:
        return replay, set()
    version = str(_params(msg).get("protocolVersion"))
    answer = cache.initialize(version)
    if answer is None:
        return replay, set()
    wire.send({"jsonrpc": "2.0", "id": msg["id"], "result": answer})
    answered_at = time.monotonic()
    swallow = {msg["id"]}
    tools = cache.tools(version)
    if lane is not None and tools is not None:
        lane.offer(tools.get("tools") or [])
    else:
        go.set()  # no lane: nothing to wait for
    while not ready.is_set():
        idle = not go.is_set() and lane is not None and not lane.busy
        if idle and lane is not None and (lane.served or time.monotonic() - answered_at >= SDK_GRACE_S):
            go.set()
        try:
            line = wire.lines.get(timeout=0.005)
        except queue.Empty:
            continue
        if line is None:
            wire.lines.put(EOF_MARK)
            break
        m = _message(line)
        method = m.get("method") if m is not None else None
        rid = m.get("id") if m is not None else None
        if m is not None and rid is not None:
            if method == "tools/list" and tools is not None and not _params(m).get("cursor"):
                wire.send({"jsonrpc": "2.0", "id": rid, "result": tools})
                continue  # answered; the SDK need not see it
            if method == "ping":
                wire.send({"jsonrpc": "2.0", "id": rid, "result": {}})
                continue
            if lane is not None and lane.take(m):
                continue  # the lane answers it, the SDK never sees it
            if method is not None:
                go.set()  # a request only the SDK answers
        if m is not None and lane is not None:
            lane.see(m)  # a cancellation of a call on the lane
        replay.append(line)
    return replay, swallow
