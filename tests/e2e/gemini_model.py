"""A scripted Gemini API server and a leak guard, both on 127.0.0.1 (no pytest here: the
offline driver, gemini_offline.py, runs them inside a network namespace).

- `ScriptedModel` speaks the Gemini API the CLI calls: `models/M:streamGenerateContent?alt=sse`
  for the agent's turns, `models/M:generateContent` for its utility calls (model routing and
  the like, answered with JSON that fits the schema they ask for), `countTokens`. Each agent
  request gets the next `Step` of the script: text, or function calls (tools the CLI then
  runs). Every request is recorded; a request the script did not expect, or one that lacks
  the text its step expects, is an error the test reports.
- `LeakGuard` is a loopback HTTP proxy named in HTTP(S)_PROXY / ALL_PROXY for the CLI, with
  NO_PROXY covering only loopback: anything the CLI would send elsewhere (telemetry, update
  checks, Google's API) reaches it instead, is refused, and recorded.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

__all__ = ["LeakGuard", "Request", "ScriptedModel", "Step", "call", "isolated", "say"]


class Step(NamedTuple):
    """The model's answer to one agent request.

    `text` or `calls` ((tool name, args) pairs, answered as functionCall parts); `expect` is
    text (or texts) the request's last user content must contain (what the CLI just sent).
    """

    text: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    expect: str | tuple[str, ...] | None = None


def say(text: str, expect: str | tuple[str, ...] | None = None) -> Step:
    return Step(text=text, expect=expect)


def call(name: str, args: dict[str, Any] | None = None, expect: str | tuple[str, ...] | None = None) -> Step:
    return Step(calls=((name, args or {}),), expect=expect)


@dataclass
class Request:
    path: str
    body: dict[str, Any]

    @property
    def agent(self) -> bool:
        return ":streamGenerateContent" in self.path

    def last_user_text(self) -> str:
        """The text of the last content the CLI sent (the user's turn, a tool result, or a
        hook's reason)."""
        contents = self.body.get("contents") or []
        return json.dumps(contents[-1], ensure_ascii=False) if contents else ""

    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False)


def _sample(schema: Any) -> Any:
    """A value that satisfies a response schema (the CLI's utility calls ask for JSON)."""
    if not isinstance(schema, dict):
        return None
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _sample(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(1, int(schema.get("minimum", 1)))
    if kind == "boolean":
        return False
    return "scripted"


@dataclass
class ScriptedModel:
    """A Gemini API server on 127.0.0.1 that plays `steps` to the agent, in order."""

    steps: list[Step] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    played: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def play(self, steps: Sequence[Step]) -> None:
        """Queue the script of the next CLI run."""
        with self._lock:
            self.steps.extend(steps)

    def agent_requests(self) -> list[Request]:
        return [r for r in self.requests if r.agent]

    def check(self) -> None:
        """Every step played, no request unexpected."""
        assert not self.errors, "\n".join(self.errors)
        assert self.played == len(self.steps), f"the model played {self.played} of {len(self.steps)} steps"

    def _next(self, request: Request) -> Step:
        with self._lock:
            self.requests.append(request)
            if not request.agent:
                return Step()
            if self.played >= len(self.steps):
                self.errors.append(
                    f"unscripted agent request #{self.played + 1}: {request.last_user_text()[:300]}"
                )
                return say("(the script has ended)")
            step = self.steps[self.played]
            self.played += 1
        wanted = (step.expect,) if isinstance(step.expect, str) else (step.expect or ())
        missing = [text for text in wanted if text not in request.last_user_text()]
        if missing:
            self.errors.append(
                f"step {self.played}: expected {missing!r} in what the CLI sent, got "
                f"{request.last_user_text()[:500]}"
            )
        return step

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                model.errors.append(f"unexpected GET {self.path}")
                self._json(404, {"error": {"code": 404, "message": "not scripted"}})

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                request = Request(self.path, body)
                step = model._next(request)
                if ":countTokens" in self.path:
                    self._json(200, {"totalTokens": 100})
                    return
                if request.agent:
                    self._stream(step)
                    return
                if ":generateContent" in self.path:
                    config = body.get("generationConfig") or {}
                    schema = config.get("responseJsonSchema") or config.get("responseSchema")
                    text = json.dumps(_sample(schema)) if schema else "ok"
                    self._json(200, _candidate([{"text": text}]))
                    return
                model.errors.append(f"unexpected POST {self.path}")
                self._json(404, {"error": {"code": 404, "message": "not scripted"}})

            def _stream(self, step: Step) -> None:
                parts: list[dict[str, Any]] = [
                    {"functionCall": {"name": name, "args": args}} for name, args in step.calls
                ]
                if step.text is not None:
                    parts.insert(0, {"text": step.text})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                self.wfile.write(f"data: {json.dumps(_candidate(parts))}\r\n\r\n".encode())
                self.wfile.flush()

        return Handler


def _candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
        "modelVersion": "scripted",
    }


class LeakGuard:
    """A loopback proxy that records every request sent to it (none is forwarded)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        guard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _refuse(self) -> None:
                guard.hits.append(f"{self.command} {self.path}")
                self.send_response(403)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = do_DELETE = do_PATCH = _refuse

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> LeakGuard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def isolated() -> bool:
    """Whether only loopback is reachable here (a connection to a public address fails at once)."""
    try:
        socket.create_connection(("192.0.2.1", 443), timeout=1).close()  # TEST-NET-1
    except OSError as exc:
        return exc.errno == 101  # ENETUNREACH: no route off this namespace
    return False
