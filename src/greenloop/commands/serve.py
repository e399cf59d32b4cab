"""`greenloop serve`: the live dashboard for a workspace or project, on a loopback port."""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import signal
import socket
import sys
from collections.abc import Iterator

from greenloop.errors import ExitCode, UsageError

__all__ = ["serve"]


def _port(value: str | None) -> int:
    if value is None:
        return ExitCode.OK
    text = value.strip()
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise UsageError(f"--port must be a port number from 0 to 65535 (0 picks a free one), got {value!r}")
    return int(text)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"--host {host!r} --port {port}: cannot listen there ({exc.strerror or exc}); "
            "pick another port, or --port 0 for a free one"
        ) from None
    sock.listen(128)
    return sock


def serve(args: argparse.Namespace) -> int:
    """`greenloop serve [PATH]`: the local dashboard on 127.0.0.1 with a token link."""
    from greenloop.commands.run import _path

    path = os.path.abspath(_path(args.path))
    port = _port(args.port)
    host = (args.host or "127.0.0.1").strip()
    if not host:
        raise UsageError("--host must not be empty (default 127.0.0.1)")
    sock = _bind(host, port)
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        print("greenloop serve: listening on every interface; the token is the only lock", file=sys.stderr)
        shown = "127.0.0.1"
    hosts = frozenset({f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", f"{shown}:{port}".lower()})
    token = secrets.token_urlsafe(24)

    import uvicorn

    from greenloop.dashboard import live
    from greenloop.dashboard.app import create_app
    from greenloop.dashboard.data import Source

    src = Source.of(path)
    info = live.Serving(f"http://{shown}:{port}", token, os.getpid())
    record = live.write_serving(src.root, info)
    link = info.link("/")
    print(f"greenloop serve: dashboard for {src.root}", flush=True)
    print(f"    {link}", flush=True)
    if args.open:
        import webbrowser

        webbrowser.open(link)
    app = create_app(path, token=token, hosts=hosts)

    class _Server(uvicorn.Server):
        # uvicorn re-raises SIGTERM/SIGINT once it has shut down, which would end the process
        # before serve.json is removed; stop on those signals ourselves instead.
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    server = _Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))

    def stop(_signum: int, _frame: object) -> None:
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
        if live.serving(src.root) == info:  # another serve may have taken over the file
            with contextlib.suppress(OSError):
                os.unlink(record)
    return ExitCode.OK
