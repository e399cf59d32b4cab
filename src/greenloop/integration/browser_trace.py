"""The page's own requests in http-trace.ndjson (`"source": "browser"`): which requests are
traced, and each one as a trace entry."""

from __future__ import annotations

import contextlib
import time
import urllib.parse
from collections.abc import Collection, Mapping
from typing import Any

from greenloop.closure.transitions import iso
from greenloop.integration.http_call import parse_body
from greenloop.integration.static import CONFIG_PATH
from greenloop.integration.trace import TraceEntry

__all__ = ["origin", "trace_entry", "traced"]


def origin(url: str) -> str:
    """`scheme://host:port` of a URL."""
    p = urllib.parse.urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


def traced(request: Any, backend_origins: Collection[str]) -> bool:
    """Whether a page request goes to the trace: every call to a backend, and the page's own
    fetch/XHR calls elsewhere (greenloop's config file aside)."""
    url = str(request.url)
    if not url.startswith("http"):
        return False
    if origin(url) in backend_origins:
        return True
    kind = request.resource_type
    return kind in ("fetch", "xhr") and urllib.parse.urlsplit(url).path != CONFIG_PATH


def trace_entry(
    request: Any, urls: Mapping[str, str], *, case_id: str, step: int, unit: str, failure: str | None
) -> TraceEntry:
    """A finished (or failed) page request as a trace entry, named after the unit it called."""
    timing = request.timing or {}
    start_ms = float(timing.get("startTime") or 0.0)
    end = float(timing.get("responseEnd") or -1.0)
    response = None if failure is not None else request.response()
    status = None
    headers: Mapping[str, str] = {}
    body: Any = None
    if response is not None:
        status = int(response.status)
        headers = dict(response.headers)
        with contextlib.suppress(Exception):
            body = parse_body(response.body().decode("utf-8", "replace"))
    target = origin(request.url)
    called = next((u for u, url in urls.items() if origin(url) == target), unit)
    return TraceEntry(
        ts=iso(start_ms / 1000 if start_ms > 0 else time.time()),
        case_id=case_id,
        step=step,
        unit=called,
        method=str(request.method),
        url=str(request.url),
        request_headers=dict(request.headers),
        request_body=parse_body(request.post_data) if request.post_data else None,
        status=status,
        response_headers=headers,
        response_body=body,
        duration_ms=max(0, int(end)) if end >= 0 else 0,
        error=None if failure is None else str(failure),
        source="browser",
    )
