"""One HTTP request of an HTTP step, and its response with the body parsed as JSON when it is."""

from __future__ import annotations

import http.client
import json
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["HttpResponse", "Transport", "http_transport", "parse_body"]


@dataclass(frozen=True)
class HttpResponse:
    """A response as a case sees it: status, headers and the parsed body."""

    status: int
    headers: Mapping[str, str]
    body: Any  # parsed JSON, or the text when the body is not JSON, or None when empty


Transport = Callable[[str, str, Mapping[str, str], "bytes | None", float], HttpResponse]


def http_transport(
    method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
) -> HttpResponse:
    """One HTTP request over http.client; raises OSError/socket.timeout on network trouble."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=max(0.01, timeout))
    try:
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        conn.request(method, target, body=body, headers=dict(headers))
        resp = conn.getresponse()
        raw = resp.read()
        resp_headers = {k: v for k, v in resp.getheaders()}
        status = resp.status
    finally:
        conn.close()
    return HttpResponse(status, resp_headers, parse_body(raw.decode("utf-8", "replace")))


def parse_body(text: str | None) -> Any:
    """A body as parsed JSON, or the text when it is not JSON, or None when empty."""
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text
