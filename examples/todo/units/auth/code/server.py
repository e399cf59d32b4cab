"""The auth unit: logs demo users in and verifies the bearer tokens it issued.

Endpoints (see ../contract.json):
  GET  /api/health   -> 200 {"ok": true}
  POST /api/login    {"username", "password"} -> 200 {"token", "user": {"id", "name"}}
                     400 {"error": "username_and_password_required"} | 401 {"error": "bad_credentials"}
  GET  /api/verify   Authorization: Bearer <token> -> 200 {"user": {...}} | 401 {"error": "invalid_token"}

Listens on HOST:PORT (default 127.0.0.1:8081); tokens live in memory for the life of the process.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOOPBACK_ORIGIN = re.compile(r"^http://(127\.0\.0\.1|localhost)(:\d+)?$")
USERS = {
    "alice": {"id": "u-alice", "name": "Alice", "password": "wonderland"},
    "bob": {"id": "u-bob", "name": "Bob", "password": "builder"},
}


class Tokens:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, str] = {}

    def issue(self, username: str) -> str:
        token = secrets.token_urlsafe(24)
        with self._lock:
            self._by_token[token] = username
        return token

    def user(self, token: str) -> str | None:
        with self._lock:
            return self._by_token.get(token)


def public(username: str) -> dict[str, str]:
    u = USERS[username]
    return {"id": u["id"], "name": u["name"], "username": username}


def make_handler(tokens: Tokens) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "auth/1"

        def log_message(self, fmt: str, *args: Any) -> None:
            sys.stderr.write("auth: " + (fmt % args) + "\n")

        def end_headers(self) -> None:
            # The todo-fe page is served from its own loopback port: allow its cross-origin calls.
            origin = self.headers.get("Origin", "")
            if LOOPBACK_ORIGIN.match(origin):
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Vary", "Origin")
                self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type")
                self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
            super().end_headers()

        def do_OPTIONS(self) -> None:  # noqa: N802 - a CORS preflight
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def send_json(self, status: int, data: Any) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            if self.path == "/api/health":
                self.send_json(200, {"ok": True})
            elif self.path == "/api/verify":
                auth = self.headers.get("Authorization", "")
                token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
                username = tokens.user(token) if token else None
                if username is None:
                    self.send_json(401, {"error": "invalid_token"})
                else:
                    self.send_json(200, {"user": public(username)})
            else:
                self.send_json(404, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/api/login":
                self.send_json(404, {"error": "not_found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                data = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self.send_json(400, {"error": "invalid_json"})
                return
            username = data.get("username") if isinstance(data, dict) else None
            password = data.get("password") if isinstance(data, dict) else None
            if not isinstance(username, str) or not isinstance(password, str) or not username or not password:
                self.send_json(400, {"error": "username_and_password_required"})
                return
            user = USERS.get(username)
            if user is None or not secrets.compare_digest(user["password"], password):
                self.send_json(401, {"error": "bad_credentials"})
                return
            self.send_json(200, {"token": tokens.issue(username), "user": public(username)})

    return Handler


def serve(host: str, port: int) -> ThreadingHTTPServer:
    return ThreadingHTTPServer((host, port), make_handler(Tokens()))


def main() -> None:
    host = os.environ.get("HOST", "127.0.0.1")
    port = int(os.environ.get("PORT", "8081"))
    server = serve(host, port)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"auth listening on http://{host}:{server.server_address[1]}", flush=True)
    server.serve_forever()
    print("auth stopped", flush=True)


if __name__ == "__main__":
    main()
