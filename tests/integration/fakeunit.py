"""A unit written for the integration tests: one script, one misbehaviour per mode.

    python fakeunit.py MODE [ARG]

Modes: ok [startup_delay_s] · crash · never-healthy · ignore-term · grandchildren · daemon ·
daemon-clearenv · flood MEGABYTES · port-in-use. Every serving mode answers:
GET /api/health, GET /api/env, POST /api/echo, GET /api/items, GET /api/items/<id>,
GET /api/slow?s=SECONDS, POST /api/crash (the process exits 7 after answering).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
ARG = sys.argv[2] if len(sys.argv) > 2 else ""
SLEEPER = "import time\nwhile True: time.sleep(1)"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt: str, *args: Any) -> None:
        sys.stderr.write(f"{os.environ.get('UNIT_ID')}: {fmt % args}\n")

    def send(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.headers.get("Origin"):  # a page on another loopback port (browser tests)
            self.send_header("Access-Control-Allow-Origin", "*")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/api/health":
            self.send(503 if MODE == "never-healthy" else 200, {"ok": MODE != "never-healthy"})
        elif url.path == "/api/env":
            keys = ("UNIT_ID", "PORT", "HOST", "PYTHONUNBUFFERED", "EXTRA")
            env = {k: v for k, v in os.environ.items() if k in keys or k.endswith("_URL")}
            self.send(200, env)
        elif url.path == "/api/items":
            self.send(200, {"items": [{"id": 1, "done": False}, {"id": 2, "done": False}], "empty": []})
        elif url.path.startswith("/api/items/"):
            item = url.path.rsplit("/", 1)[1]
            if item.isdigit():
                self.send(200, {"id": int(item), "auth": self.headers.get("Authorization")})
            else:
                self.send(404, {"error": "not_found", "got": item})
        elif url.path == "/api/slow":
            seconds = float(urllib.parse.parse_qs(url.query).get("s", ["3"])[0])
            time.sleep(seconds)
            self.send(200, {"slept": seconds})
        else:
            self.send(404, {"error": "not_found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path == "/api/echo":
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.send(
                201,
                {"body": body, "headers": headers, "token": "tok-" + os.environ["UNIT_ID"]},
                {"Set-Cookie": "sid=secret-cookie"},
            )
        elif self.path == "/api/crash":
            self.send(200, {"bye": True})
            self.wfile.flush()
            sys.stderr.write("fatal: crashing on purpose\n")
            sys.stderr.flush()
            threading.Timer(0.05, lambda: os._exit(7)).start()
        else:
            self.send(404, {"error": "not_found"})


def spawn_sleeper(env: dict[str, str] | None = None) -> None:
    subprocess.Popen([sys.executable, "-c", SLEEPER], env=env)


def daemonize(clear_env: bool) -> None:
    """The classic double fork into a new session; the daemon outlives its parent."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            env = {} if clear_env else dict(os.environ)
            os.execve(sys.executable, [sys.executable, "-c", SLEEPER], env)
        os._exit(0)
    os.wait()


def main() -> None:
    host, port = os.environ["HOST"], int(os.environ["PORT"])
    if MODE == "crash":
        print("starting up", flush=True)
        sys.stderr.write("Error: cannot read config.yml\nboom: giving up\n")
        sys.exit(3)
    if MODE == "port-in-use":
        sys.stderr.write(f"Error: listen EADDRINUSE: address already in use {host}:{port}\n")
        sys.exit(1)
    if MODE == "ok" and ARG:
        time.sleep(float(ARG))
    if MODE == "ignore-term":
        signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
    if MODE == "grandchildren":
        spawn_sleeper()
        # This one outlives the SIGTERM: it is SIGKILLed after its parent is gone, and must be reaped.
        subprocess.Popen(
            [sys.executable, "-c", "import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + SLEEPER]
        )
    if MODE in ("daemon", "daemon-clearenv"):
        daemonize(MODE == "daemon-clearenv")
    if MODE == "flood":
        mb = float(ARG or "11")
        line = "x" * 99
        print("FIRST-LINE of the flood", flush=True)
        n = int(mb * 1024 * 1024 / 112)
        out = sys.stdout
        for i in range(n):
            out.write(f"{i:09d} {line}\n")
        print("LAST-LINE of the flood", flush=True)
    server = ThreadingHTTPServer((host, port), Handler)
    print(f"{os.environ.get('UNIT_ID')} listening on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
