"""A scripted model server on 127.0.0.1 that speaks the OpenAI Responses API as Codex consumes it.

Codex (`model_providers.<id>.wire_api = "responses"`) POSTs `{base_url}/responses` with the
whole conversation (`input`) and the tools it offers (`tools`), and reads the answer as a
server-sent event stream: `response.created`, for each output item
`response.output_item.added` then `response.output_item.done` (a `message` item streams its
text as `response.output_text.delta` in between), then `response.completed`. A
`function_call` item makes Codex run that tool and POST again with the call's output.

The server plays the model: a script (a function of the request's JSON body) says what to
answer each time. Every request is recorded (method, path, headers, body), so a test can
look at what reached the model: a Stop hook's block reason arrives as a user message.
Nothing here reaches beyond the loopback interface.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Answer",
    "Model",
    "ProxyTrap",
    "Recorded",
    "ResponsesServer",
    "call",
    "function_outputs",
    "say",
    "texts",
]


@dataclass(frozen=True)
class Answer:
    """One model turn: a tool call (`name`, `arguments`) or, when `name` is empty, a message."""

    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    namespace: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arguments": self.arguments,
            "text": self.text,
            "namespace": self.namespace,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Answer:
        return cls(
            name=str(data.get("name") or ""),
            arguments=dict(data.get("arguments") or {}),
            text=str(data.get("text") or ""),
            namespace=str(data.get("namespace") or ""),
        )


def call(name: str, **arguments: Any) -> Answer:
    """A function call; `ns__tool` calls `tool` of the namespace `ns` (Codex groups an MCP
    server's tools in the namespace `mcp__<server>`)."""
    namespace, _, tool = name.rpartition("__")
    return Answer(name=tool, arguments=arguments, namespace=namespace)


def say(text: str) -> Answer:
    return Answer(text=text)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Script = Callable[[dict[str, Any]], Answer]


def texts(body: dict[str, Any]) -> list[str]:
    """Every text of every message in a request's `input`, in order (user, developer, assistant)."""
    out: list[str] = []
    for item in body.get("input") or []:
        if not isinstance(item, dict) or item.get("type", "message") != "message":
            continue
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return out


def function_outputs(body: dict[str, Any]) -> list[str]:
    """The outputs of the tool calls in a request's `input`, in order."""
    out: list[str] = []
    for item in body.get("input") or []:
        if isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output"):
            value = item.get("output")
            out.append(value if isinstance(value, str) else json.dumps(value))
    return out


_RUNNING = re.compile(r"Process running with session ID (\d+)")


class Model:
    """A script for `ResponsesServer`: answers from `plan` in order, then "done" for ever.

    A shell command still running when Codex's `exec_command` yields (its output says
    "Process running with session ID N") is waited for with `write_stdin` before the plan
    goes on, so a slow machine changes the number of requests, never the story. For the same
    reason a request whose conversation (`input`) is one already answered is a retry (Codex
    retries a request whose stream it lost; a new turn always carries more input) and gets the
    same answer, not the plan's next step.
    """

    def __init__(self, plan: list[Answer]) -> None:
        self.plan = list(plan)
        self._answered: dict[str, Answer] = {}

    def __call__(self, body: dict[str, Any]) -> Answer:
        items = body.get("input") or []
        key = json.dumps(items, sort_keys=True)
        if key in self._answered:
            return self._answered[key]
        answer = self._next(items)
        self._answered[key] = answer
        return answer

    def _next(self, items: list[Any]) -> Answer:
        last = items[-1] if items else {}
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            running = _RUNNING.search(str(last.get("output", "")))
            if running:
                return call("write_stdin", session_id=int(running.group(1)), chars="", yield_time_ms=30000)
        if self.plan:
            return self.plan.pop(0)
        return say("done")


def _sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class ResponsesServer:
    """`with ResponsesServer(script) as server:` serves `server.base_url` until the block ends."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[Recorded] = []
        self.errors: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        """The bodies of the `POST …/responses` requests, in order."""
        return [r.body for r in self.requests if r.method == "POST" and r.path.endswith("/responses")]

    def __enter__(self) -> ResponsesServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def _events(self, answer: Answer) -> list[dict[str, Any]]:
        n = next(self._ids)
        resp_id = f"resp_{n}"
        if answer.name:
            item: dict[str, Any] = {
                "type": "function_call",
                "id": f"fc_{n}",
                "call_id": f"call_{n}",
                "name": answer.name,
                "arguments": json.dumps(answer.arguments),
                "status": "completed",
            }
            if answer.namespace:
                item["namespace"] = answer.namespace
            added = {**item, "arguments": "", "status": "in_progress"}
            middle: list[dict[str, Any]] = []
        else:
            item = {
                "type": "message",
                "id": f"msg_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer.text, "annotations": []}],
            }
            added = {**item, "content": [], "status": "in_progress"}
            middle = [
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": answer.text,
                }
            ]
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        return [
            {"type": "response.created", "response": {"id": resp_id, "status": "in_progress"}},
            {"type": "response.output_item.added", "output_index": 0, "item": added},
            *middle,
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {
                "type": "response.completed",
                "response": {"id": resp_id, "status": "completed", "output": [item], "usage": usage},
            },
        ]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _record(self) -> Recorded:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                rec = Recorded(self.command, self.path, dict(self.headers.items()), body)
                with server._lock:
                    server.requests.append(rec)
                return rec

            def _plain(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._record()
                if self.path.split("?")[0].endswith("/models"):
                    self._plain(200, {"object": "list", "data": [], "models": []})
                else:
                    self._plain(404, {"error": {"message": f"no {self.path} here"}})

            def do_POST(self) -> None:
                rec = self._record()
                if not rec.path.split("?")[0].endswith("/responses"):
                    self._plain(404, {"error": {"message": f"no {rec.path} here"}})
                    return
                try:
                    with server._lock:  # one answer at a time: a script keeps its place in a plan
                        answer = server.script(rec.body)
                except Exception as exc:  # the test reads it; the agent gets a plain message
                    server.errors.append(f"{type(exc).__name__}: {exc}")
                    answer = say(f"script error: {exc}")
                data = b"".join(_sse(e) for e in server._events(answer))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class ProxyTrap:
    """A loopback HTTP proxy that answers 403 to everything and records what reached it.

    Point HTTP_PROXY/HTTPS_PROXY/ALL_PROXY at it (with NO_PROXY for 127.0.0.1): any request a
    program under test tries to send off the machine lands here instead of the network, and
    a test asserts that `hits` stayed empty.
    """

    def __init__(self) -> None:
        self.hits: list[str] = []
        trap = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _refuse(self) -> None:
                trap.hits.append(f"{self.command} {self.path}")
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.send_header("Connection", "close")
                self.end_headers()

            do_CONNECT = do_GET = do_POST = do_PUT = do_HEAD = do_DELETE = do_PATCH = _refuse

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def env(self) -> dict[str, str]:
        """Proxy variables (both spellings) that send everything but loopback to the trap."""
        out: dict[str, str] = {}
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            out[name] = out[name.lower()] = self.url
        out["NO_PROXY"] = out["no_proxy"] = "127.0.0.1,localhost,::1"
        return out

    def __enter__(self) -> ProxyTrap:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
