"""The static server for a frontend unit that declares a `static` folder.

greenloop serves the folder itself, on the unit's own loopback port, in a thread of the run
(no process to start or to kill). It also serves `/greenloop-config.json`, which tells the page
where its backends are:

    {"api_base": "<URL of the unit's first dependency>", "backends": {"<unit>": "<URL>"}}

and injects into every HTML page, before anything else runs, a script that sets
`window.__API_BASE__` to the same `api_base` (and `window.__GREENLOOP__` to the whole config),
so a page without a build step calls the right backend port. Every request is logged to
process.log under the unit's name, like a unit's own output.
"""

from __future__ import annotations

import functools
import json
import mimetypes
import posixpath
import re
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from greenloop.integration.ports import HOST, MAX_PORT_TRIES, PortPicker, PortUnavailable
from greenloop.integration.spec.records import Unit

__all__ = ["CONFIG_PATH", "StaticServer", "frontend_config", "inject_config", "serve_unit"]

CONFIG_PATH = "/greenloop-config.json"
_HEAD = re.compile(rb"<head\b[^>]*>", re.IGNORECASE)
_HTML_START = re.compile(rb"<html\b[^>]*>", re.IGNORECASE)
_DOCTYPE = re.compile(rb"^\s*<!doctype[^>]*>", re.IGNORECASE)
# The types a browser is strict about (module scripts, styles) do not depend on /etc/mime.types.
_TYPES = {
    ".html": "text/html",
    ".htm": "text/html",
    ".js": "text/javascript",
    ".mjs": "text/javascript",
    ".css": "text/css",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".wasm": "application/wasm",
}


def frontend_config(dep_urls: Mapping[str, str]) -> dict[str, Any]:
    """`{"api_base", "backends"}` for a frontend unit whose dependencies run at `dep_urls`."""
    backends = dict(dep_urls)
    return {"api_base": next(iter(backends.values()), None), "backends": backends}


def _script(config: Mapping[str, Any]) -> bytes:
    # "</" inside a script element would end it early: escape it in the JSON.
    data = json.dumps(config, ensure_ascii=True).replace("</", "<\\/")
    return (
        f"<script>window.__GREENLOOP__ = {data}; "
        f"window.__API_BASE__ = window.__GREENLOOP__.api_base;</script>"
    ).encode()


def inject_config(html: bytes, config: Mapping[str, Any]) -> bytes:
    """The page with the config script as the first thing in <head> (or as early as possible)."""
    script = _script(config)
    for pattern in (_HEAD, _HTML_START, _DOCTYPE):
        m = pattern.search(html)
        if m is not None:
            return html[: m.end()] + script + html[m.end() :]
    return script + html


class StaticServer:
    """Serves one folder on 127.0.0.1:`port` until `stop()`; `port` 0 lets the kernel choose."""

    def __init__(
        self,
        folder: str | Path,
        config: Mapping[str, Any],
        *,
        port: int = 0,
        log: Callable[[str], None] = lambda _line: None,
    ) -> None:
        self.folder = Path(folder).resolve()
        self.config = dict(config)
        self.log = log  # one line per request, e.g. to process.log
        self._server = ThreadingHTTPServer((HOST, port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._started = False

    @property
    def port(self) -> int:
        """The loopback port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """Where the unit is served: `http://127.0.0.1:<port>`."""
        return f"http://{HOST}:{self.port}"

    def start(self) -> StaticServer:
        """Serve in a thread of the run; returns the server itself."""
        self._thread.start()
        self._started = True
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (nothing to do when it never started)."""
        if self._started:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._started = False
        self._server.server_close()

    def __enter__(self) -> StaticServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def resolve(self, url_path: str) -> Path | None:
        """The file a request path names inside the folder (index.html for folders), or None."""
        path = urllib.parse.unquote(urllib.parse.urlsplit(url_path).path)
        clean = posixpath.normpath("/" + path.lstrip("/"))
        target = (self.folder / clean.lstrip("/")).resolve()
        if target != self.folder and self.folder not in target.parents:
            return None  # outside the folder (a symlink or an encoded "..")
        if target.is_dir():
            target = target / "index.html"
        return target if target.is_file() else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "greenloop-static/1"

            def log_message(self, format: str, *args: Any) -> None:
                server.log(format % args)

            def _send(self, status: int, ctype: str, body: bytes, head: bool) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _serve(self, head: bool) -> None:
                if urllib.parse.urlsplit(self.path).path == CONFIG_PATH:
                    body = json.dumps(server.config, indent=2).encode()
                    self._send(200, "application/json", body, head)
                    return
                target = server.resolve(self.path)
                if target is None:
                    self._send(404, "text/plain; charset=utf-8", b"not found\n", head)
                    return
                try:
                    data = target.read_bytes()
                except OSError as exc:
                    self._send(500, "text/plain; charset=utf-8", f"{exc}\n".encode(), head)
                    return
                ctype = (
                    _TYPES.get(target.suffix.lower())
                    or mimetypes.guess_type(target.name)[0]
                    or "application/octet-stream"
                )
                if ctype == "text/html":
                    data = inject_config(data, server.config)
                if ctype.startswith("text/") or ctype == "application/json":
                    ctype += "; charset=utf-8"
                self._send(200, ctype, data, head)

            def do_GET(self) -> None:
                self._serve(head=False)

            def do_HEAD(self) -> None:
                self._serve(head=True)

        return Handler


def serve_unit(
    unit: Unit,
    dep_urls: Mapping[str, str],
    picker: PortPicker,
    write: Callable[[str, str], None] = lambda _label, _text: None,
) -> StaticServer:
    """Serve a static frontend unit on a fresh port from `picker` (a port taken between choice
    and bind is retried, MAX_PORT_TRIES times, then PortUnavailable). Each request is written as
    `write("[<unit>:<port>] out|", line)`, the label process.log gives a unit's output."""
    if unit.static is None:
        raise ValueError(f"unit {unit.id} has no static folder")
    config = frontend_config({d: dep_urls[d] for d in unit.depends_on if d in dep_urls})
    tried: list[int] = []
    for _ in range(MAX_PORT_TRIES):
        port = picker.pick()
        tried.append(port)
        try:
            srv = StaticServer(unit.static, config, port=port)
        except OSError:
            continue
        label = f"[{unit.id}:{srv.port}] out|"
        srv.log = functools.partial(write, label)
        return srv.start()
    raise PortUnavailable(
        f"unit {unit.id}: ports {', '.join(map(str, tried))} were taken before they could be bound"
    )
