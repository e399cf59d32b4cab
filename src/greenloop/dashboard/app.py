"""The dashboard's Starlette app: pages, static assets and two Server-Sent Event streams.

Security (a local page that shows test output and agent sessions):
- every request must carry the access token (`?token=` once, then an HttpOnly, SameSite=Strict
  cookie), compared in constant time;
- the Host header must name the address the dashboard serves (127.0.0.1, localhost or the
  `--host` given, with its port), so a DNS-rebinding page cannot read it;
- only GET and HEAD exist: nothing a page does changes greenloop's state (the database is
  opened read-only);
- every value is escaped (pages.esc) and streamed output is inserted as text by app.js.

Streams: `/events` tells every open page that runs, bugs or gate decisions changed (its event
ids are a cursor over that state, so a reconnect with Last-Event-ID hears only what it missed);
`/runs/<id>/stream` tails a run in progress (event ids are byte offsets into its output), with
per-test progress from the runner's lines, and ends with the run's outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import sqlite3
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, MutableMapping
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from greenloop import layout
from greenloop.dashboard import data, live, pages
from greenloop.state.backend import StateError

__all__ = ["COOKIE", "create_app"]

COOKIE = "greenloop_token"
EVENTS_POLL_S = 0.25
OUTPUT_POLL_S = 0.05
END_CHECK_S = 0.5  # how often a run in progress is looked up in the state database
KEEPALIVE_S = 15.0
STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Guard:
    """ASGI middleware: Host check, token check, GET/HEAD only."""

    def __init__(self, app: ASGIApp, *, token: str, hosts: frozenset[str]) -> None:
        self.app = app
        self.token = token
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        host = request.headers.get("host", "")
        if host.lower() not in self.hosts:
            refused = PlainTextResponse(f"greenloop serve: unexpected Host header {host!r}", 421)
            await refused(scope, receive, send)
            return
        if request.method not in ("GET", "HEAD"):
            await PlainTextResponse("greenloop serve is read-only: only GET", 405,
                                    headers={"Allow": "GET, HEAD"})(scope, receive, send)
            return
        given = request.query_params.get("token")
        if given is not None and hmac.compare_digest(given.encode(), self.token.encode()):
            # Trade the token in the URL for a cookie, and drop it from the address bar.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            from urllib.parse import urlencode

            target = request.url.path + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, 303)
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="strict")
            await response(scope, receive, send)
            return
        cookie = request.cookies.get(COOKIE, "")
        if not hmac.compare_digest(cookie.encode(), self.token.encode()):
            await PlainTextResponse(
                "greenloop serve: open the link with its ?token=… as `greenloop serve` printed it", 403
            )(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _page(request: Request) -> int:
    try:
        return max(int(request.query_params.get("page", "0")), 0)
    except ValueError:
        return 0


def _html(request: Request, title: str, body: str, *, active: str) -> HTMLResponse:
    """The body alone for a fragment request (live refresh), else the whole page."""
    if request.query_params.get("fragment"):
        return HTMLResponse(body)
    return HTMLResponse(pages.layout(title, body, active=active))


def _tail(run_dir: str, limit: int = 60_000) -> str:
    try:
        with open(os.path.join(run_dir, "stdout.txt"), "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(size - limit, 0))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def create_app(path: str, *, token: str, hosts: frozenset[str]) -> ASGIApp:
    """The dashboard for the workspace or project at `path`."""
    src = data.Source.of(path)

    async def runs_view(request: Request) -> Response:
        q = request.query_params
        outcome = q.get("outcome") if q.get("outcome") in ("green", "red", "broken") else None
        session = q.get("session") or None
        page = _page(request)
        with data.connect(src) as conn:
            rows, more = data.runs(conn, outcome=outcome, session=session, page=page)
            trend = data.trend(conn)
        live = data.live_runs(src) if page == 0 else []
        body = pages.runs_page(rows, live, trend, outcome=outcome, session=session, page=page, more=more)
        return _html(request, "Runs", body, active="runs")

    async def run_view(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        with data.connect(src) as conn:
            result, run_dir = data.read_run(src, conn, run_id)
        if result is None and run_dir is None:
            return HTMLResponse(pages.not_found(f"no run {run_id}"), 404)
        output = _tail(run_dir) if result is None and run_dir else ""
        if request.query_params.get("fragment"):
            return HTMLResponse(pages.run_body(run_id, result, output))
        return HTMLResponse(pages.run_page(run_id, result, output))

    async def run_stream(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        with data.connect(src) as conn:
            result, run_dir = data.read_run(src, conn, run_id)
        framework = data.framework_of(src, run_id, result)
        if run_dir is None:
            return PlainTextResponse(f"no run {run_id}", 404)
        try:
            offset = int(request.headers.get("last-event-id", "0"))
        except ValueError:
            offset = 0
        watch = RunEnd(src, run_id, run_dir)
        return StreamingResponse(_follow_run(request, run_dir, framework, offset, watch),
                                 media_type="text/event-stream", headers=_SSE_HEADERS)

    async def events(request: Request) -> Response:
        return StreamingResponse(_changes(request, src, request.headers.get("last-event-id")),
                                 media_type="text/event-stream", headers=_SSE_HEADERS)

    async def sessions_view(request: Request) -> Response:
        page = _page(request)
        with data.connect(src) as conn:
            rows, more = data.sessions(conn, page=page)
        return _html(request, "Sessions", pages.sessions_page(rows, page=page, more=more), active="sessions")

    async def session_view(request: Request) -> Response:
        sid = request.path_params["session_id"]
        with data.connect(src) as conn:
            detail = data.session_detail(conn, sid)
        if detail is None:
            return HTMLResponse(pages.not_found(f"no session {sid}"), 404)
        body = pages.session_page(detail, pages.run_rows(detail["runs"]))
        return _html(request, f"session {sid}", body, active="sessions")

    async def bugs_view(request: Request) -> Response:
        with data.connect(src) as conn:
            board = data.bug_board(src, conn)
        return _html(request, "Bugs", pages.bugs_page(board), active="bugs")

    async def bug_view(request: Request) -> Response:
        bug_id = request.path_params["bug_id"]
        with data.connect(src) as conn:
            found = data.bug_detail(src, conn, bug_id)
        if found is None:
            return HTMLResponse(pages.not_found(f"no bug {bug_id}"), 404)
        return _html(request, bug_id, pages.bug_page(*found), active="bugs")

    async def integration_view(request: Request) -> Response:
        page = _page(request)
        rows, more = data.integration_runs(src, page=page)
        return _html(request, "Integration", pages.integration_page(rows, page=page, more=more),
                     active="integration")

    async def integration_run_view(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        found = data.integration_run(src, run_id)
        if found is None:
            return HTMLResponse(pages.not_found(f"no integration run {run_id}"), 404)
        return _html(request, run_id, pages.integration_run_page(found), active="integration")

    async def integration_file(request: Request) -> Response:
        found = data.integration_run(src, request.path_params["run_id"])
        name = request.path_params["name"]
        if found is None or name not in found["screenshots"]:
            return PlainTextResponse("not found", 404)
        return FileResponse(os.path.join(found["folder"], name), media_type="image/png")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            return PlainTextResponse("not found", 404)
        text = (resources.files("greenloop.dashboard") / "static" / name).read_text(encoding="utf-8")
        return Response(text, media_type=STATIC[name], headers={"Cache-Control": "no-cache"})

    routes = [
        Route("/", runs_view),
        Route("/runs/{run_id}", run_view),
        Route("/runs/{run_id}/stream", run_stream),
        Route("/events", events),
        Route("/sessions", sessions_view),
        Route("/sessions/{session_id}", session_view),
        Route("/bugs", bugs_view),
        Route("/bugs/{bug_id}", bug_view),
        Route("/integration", integration_view),
        Route("/integration/{run_id}", integration_run_view),
        Route("/integration/{run_id}/file/{name:path}", integration_file),
        Route("/static/{name}", static),
    ]
    app = Starlette(routes=routes, exception_handlers={StateError: _state_unavailable})
    return Guard(app, token=token, hosts=hosts)


async def _state_unavailable(request: Request, exc: Exception) -> Response:
    """The state database cannot be read (a PostgreSQL server that is down, a wrong URL):
    a page that says which database (password hidden) and what to do, status 503, instead of
    a server error; the integration pages, which do not read it, keep working."""
    message = exc.message if isinstance(exc, StateError) else str(exc)
    body = (f"<h1>The state database cannot be read</h1><p>{pages.esc(message)}</p>"
            "<p><code>greenloop doctor</code> checks it and says what to fix; this page works again "
            "once the database answers.</p>")
    return HTMLResponse(pages.layout("State unavailable", body, active=""), 503)


_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _sse(event: str, payload: object, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"


class RunEnd:
    """Whether a streamed run has ended, and with what outcome. Its `result.json` is the usual
    sign (checked every poll); the state database is the second (checked every END_CHECK_S): the
    run is recorded there before its result file is written, and a stream that watches another
    folder than the one the file lands in still ends. A run whose announcement went away with
    neither (it stopped without a result) ends `broken`."""

    def __init__(self, src: data.Source, run_id: str, run_dir: str) -> None:
        self.src = src
        self.run_id = run_id
        self.result_path = os.path.join(run_dir, "result.json")
        self.announcement = os.path.join(src.root, layout.STATE_DIR, live.LIVE_DIR, run_id)
        self.announced = os.path.exists(self.announcement)
        self.checked = 0.0
        self.gone_at: float | None = None

    def _recorded(self) -> str | None:
        with data.connect(self.src) as conn:
            if conn is None:
                return None
            row = conn.execute("SELECT outcome FROM runs WHERE run_id = ?", (self.run_id,)).fetchone()
        return str(row[0]) if row else None

    async def outcome(self) -> str | None:
        """The outcome once the run has ended, None while it runs."""
        found = _result_outcome(self.result_path)
        if found is not None:
            return found
        now = time.monotonic()
        if now - self.checked < END_CHECK_S:
            return None
        self.checked = now
        with contextlib.suppress(StateError, sqlite3.Error):
            recorded = await asyncio.to_thread(self._recorded)
            if recorded is not None:
                return recorded
        if self.announced and not os.path.exists(self.announcement):
            # gone without a result: allow the writer a moment, then call it what it is
            self.gone_at = self.gone_at or now
            if now - self.gone_at >= END_CHECK_S * 2:
                return "broken"
        return None


async def _follow_run(
    request: Request, run_dir: str, framework: str | None, offset: int, end: RunEnd | None = None
) -> AsyncGenerator[str, None]:
    """Tail a run's stdout as `line` events (id = byte offset after the line), per-test `progress`
    events from the runner's lines, and `end` with the outcome once the run has ended (its
    result.json, or `end`: the state database, a run gone without a result)."""
    from greenloop.frameworks import progress_counts

    out_path = os.path.join(run_dir, "stdout.txt")
    result_path = os.path.join(run_dir, "result.json")
    # Per-test progress: greenloop's reporters write a line per finished test to
    # progress.ndjson (greenloop.runner.dialects); the runner's text lines are the fallback without it.
    progress_path = os.path.join(run_dir, "progress.ndjson")
    progress_at = 0
    progress_pending = b""
    from_file = False
    counts = {"pass": 0, "fail": 0, "skip": 0}
    pending = b""
    # Progress is counted from the start of the output, even when the client resumes later on.
    position = 0  # the end of the last whole line sent (or skipped, below the resume offset)
    idle = 0.0
    yield "retry: 1000\n\n"
    while True:
        if await request.is_disconnected():
            return
        # Whether it has ended is asked before its output is read: a run ends after its last
        # output is written, so once it has, the read below drains all of it.
        outcome = await end.outcome() if end is not None else _result_outcome(result_path)
        extra = b""
        try:
            with open(progress_path, "rb") as fh:
                fh.seek(progress_at)
                extra = fh.read(1 << 20)
        except OSError:
            pass
        if extra:
            progress_at += len(extra)
            progress_pending += extra
            *records, progress_pending = progress_pending.split(b"\n")
            if not from_file:
                from_file = True
                counts = {"pass": 0, "fail": 0, "skip": 0}  # the file is exact: text counts give way
            for raw_record in records:
                try:
                    record = json.loads(raw_record)
                    counts[str(record["status"])] += int(record.get("count", 1))
                except (ValueError, TypeError, KeyError):
                    continue
            yield _sse("progress", {"passed": counts["pass"], "failed": counts["fail"],
                                    "skipped": counts["skip"]})
        chunk = b""
        try:
            with open(out_path, "rb") as fh:
                fh.seek(position + len(pending))  # a partial line waits in `pending`, read once
                chunk = fh.read(1 << 20)
        except OSError:
            pass
        if chunk:
            idle = 0.0
            pending += chunk
            *lines, pending = pending.split(b"\n")
            moved = False
            for raw in lines:
                position += len(raw) + 1
                text = raw.decode("utf-8", "replace").rstrip("\r")
                if framework and not from_file:
                    found = progress_counts(framework, text)
                    if found:
                        for key, n in found.items():
                            counts[key] = counts.get(key, 0) + n
                        moved = True
                if position > offset:
                    yield _sse("line", text, str(position))
            if moved:
                yield _sse("progress", {"passed": counts["pass"], "failed": counts["fail"],
                                        "skipped": counts["skip"]})
            continue
        if outcome is not None:
            if pending:
                yield _sse("line", pending.decode("utf-8", "replace"), str(position + len(pending)))
            yield _sse("end", {"outcome": outcome})
            return
        await asyncio.sleep(OUTPUT_POLL_S)
        idle += OUTPUT_POLL_S
        if idle >= KEEPALIVE_S:
            idle = 0.0
            yield ": keep-alive\n\n"


def _result_outcome(result_path: str) -> str | None:
    """The outcome in a run's result.json, None while it has none."""
    if not os.path.exists(result_path):
        return None
    try:
        with open(result_path, encoding="utf-8") as fh:
            return str(json.load(fh).get("outcome") or "broken")
    except (OSError, ValueError, AttributeError):
        return "broken"


_KEYS = ("runs", "decisions", "sessions", "bugs", "live")


def _state(src: data.Source) -> str:
    """A cursor over what pages show: the newest run, gate decisions, sessions, the bug log's
    size and the runs in progress, as one event id."""
    from greenloop.bugs.log import bug_log_path

    runs = decisions = sessions = 0.0
    with data.connect(src) as conn:
        if conn is not None:
            runs = float(conn.execute("SELECT MAX(at) FROM runs").fetchone()[0] or 0)
            decisions = float(conn.execute("SELECT MAX(id) FROM interceptions").fetchone()[0] or 0)
            sessions = float(conn.execute("SELECT MAX(last_seen) FROM sessions").fetchone()[0] or 0)
    size = 0
    with contextlib.suppress(OSError):
        size = os.stat(bug_log_path(src.project)).st_size
    running = ",".join(rid for rid, _, _ in data.live_runs(src))
    return f"{runs}|{decisions:.0f}|{sessions}|{size}|{running}"


def _parse_key(key: str | None) -> dict[str, str]:
    if not key:
        return {}
    return dict(zip(_KEYS, key.split("|"), strict=False))


async def _changes(request: Request, src: data.Source, last: str | None) -> AsyncIterator[str]:
    """One `change` event per change of state, naming what changed; ids resume a reconnect."""
    seen = _parse_key(last)
    yield "retry: 1000\n\n"
    idle = 0.0
    while True:
        if await request.is_disconnected():
            return
        key = await asyncio.to_thread(_state, src)
        if not seen:
            seen = _parse_key(key)
            yield _sse("hello", {}, key)
        now = _parse_key(key)
        kinds = [k for k in _KEYS if now.get(k) != seen.get(k)]
        if kinds:
            seen = now
            idle = 0.0
            yield _sse("change", {"kinds": kinds}, key)
        await asyncio.sleep(EVENTS_POLL_S)
        idle += EVENTS_POLL_S
        if idle >= KEEPALIVE_S:
            idle = 0.0
            yield ": keep-alive\n\n"
