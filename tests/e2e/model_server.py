"""A scripted model server on 127.0.0.1 speaking the Anthropic Messages API, for driving a real
agent CLI offline.

`POST /v1/messages` answers the agent's *main* requests (those that offer the agent's tools:
one with a tool named `Bash`) from a script, one response per request, in order; once the
script is spent every main request gets "Done." and the model ends its turn. Other requests
(the CLI's side calls: titles, summaries, command checks) get a short text answer. Streaming
requests get server-sent events (message_start, content_block_start/delta/stop for text and
for tool_use with input_json_delta, message_delta, message_stop); others get one JSON message.
Every request is recorded (path and body), so a test can assert on what reached the model.

A script item is `{"text": "..."}` (end the turn) or `{"tool": NAME, "input": {...}}`, with an
optional `"text"` said before the tool call (stop reason tool_use).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ModelServer", "is_main", "last_user_text"]

DONE = {"text": "Done."}


def is_main(body: dict[str, Any]) -> bool:
    """A request of the agent's own loop: it offers the agent's tools (Bash among them)."""
    tools = body.get("tools")
    return isinstance(tools, list) and any(isinstance(t, dict) and t.get("name") == "Bash" for t in tools)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    out: list[str] = []
    if isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            if isinstance(block.get("text"), str):
                out.append(block["text"])
            if "content" in block:
                out += _texts(block["content"])
    return out


def last_user_text(body: dict[str, Any]) -> str:
    """All the text of the request's last user message (tool results included)."""
    messages = body.get("messages") or []
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return "\n".join(_texts(message.get("content")))
    return ""


class ModelServer:
    """The server (module docstring). `script` may be replaced between agent runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.script: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                server._record(self.path, "GET", None)
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "offline"}})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                server._record(self.path, "POST", body)
                if not self.path.startswith("/v1/messages") or self.path.startswith(
                    "/v1/messages/count_tokens"
                ):
                    if "count_tokens" in self.path:
                        self._json(200, {"input_tokens": 100})
                    else:
                        self._json(
                            404, {"type": "error", "error": {"type": "not_found_error", "message": "offline"}}
                        )
                    return
                item = server._next(body)
                message = server._message(body, item)
                if body.get("stream"):
                    self._stream(message)
                else:
                    self._json(200, message)

            def _json(self, code: int, data: Any) -> None:
                payload = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, message: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()

                def event(name: str, data: dict[str, Any]) -> None:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
                start["usage"] = {"input_tokens": 50, "output_tokens": 1}
                event("message_start", {"type": "message_start", "message": start})
                for index, block in enumerate(message["content"]):
                    if block["type"] == "text":
                        event(
                            "content_block_start",
                            {
                                "type": "content_block_start",
                                "index": index,
                                "content_block": {"type": "text", "text": ""},
                            },
                        )
                        event(
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "text_delta", "text": block["text"]},
                            },
                        )
                    else:
                        opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                        event(
                            "content_block_start",
                            {"type": "content_block_start", "index": index, "content_block": opened},
                        )
                        text = json.dumps(block["input"])
                        for part in (text[: len(text) // 2], text[len(text) // 2 :]):
                            delta = {"type": "input_json_delta", "partial_json": part}
                            event(
                                "content_block_delta",
                                {"type": "content_block_delta", "index": index, "delta": delta},
                            )
                    event("content_block_stop", {"type": "content_block_stop", "index": index})
                stop_delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
                usage = {"output_tokens": 20}
                event("message_delta", {"type": "message_delta", "delta": stop_delta, "usage": usage})
                event("message_stop", {"type": "message_stop"})
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ModelServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _record(self, path: str, method: str, body: Any) -> None:
        with self.lock:
            self.requests.append({"path": path, "method": method, "body": body})

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            if not is_main(body):
                return {"text": "ok"}
            return self.script.pop(0) if self.script else DONE

    def _message(self, body: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self._ids += 1
            n = self._ids
        content: list[dict[str, Any]] = []
        if item.get("text"):
            content.append({"type": "text", "text": item["text"]})
        if "tool" in item:
            content.append(
                {"type": "tool_use", "id": f"toolu_{n:04d}", "name": item["tool"], "input": item["input"]}
            )
        return {
            "id": f"msg_{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model") or "claude-scripted",
            "content": content,
            "stop_reason": "tool_use" if "tool" in item else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 20},
        }
