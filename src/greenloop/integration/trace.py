"""http-trace.ndjson: one line per request a case sends, redacted and with bounded bodies.

Secrets never reach the file: the Authorization, Cookie and Set-Cookie headers (and the other
credential headers below), token-like JSON fields and token-like query parameters are replaced
by "[redacted]". Bodies longer than `BODY_CAP` characters (as JSON text) are cut.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "BODY_CAP",
    "REDACTED",
    "TraceEntry",
    "TraceWriter",
    "bound_body",
    "redact",
    "redact_headers",
    "redact_url",
]

BODY_CAP = 4096
REDACTED = "[redacted]"
_SECRET_HEADERS = {
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
    "x-auth-token",
}
_SECRET_KEY = re.compile(
    r"(^|_|-)(token|access_token|refresh_token|id_token|jwt|password|passwd|secret|api_?key|authorization|cookie|session_?id)$",
    re.IGNORECASE,
)


def _secret_key(key: str) -> bool:
    k = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key).replace("-", "_")  # refreshToken -> refresh_Token
    return bool(_SECRET_KEY.search(k)) or k.lower() in ("token", "password", "secret", "apikey")


def redact(value: Any) -> Any:
    """A copy of a JSON value with token-like fields replaced by "[redacted]"."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and _secret_key(k) and v is not None else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers with the value of every secret one (Authorization, cookies, keys) replaced."""
    return {
        k: (REDACTED if k.lower() in _SECRET_HEADERS or _secret_key(k) else v) for k, v in headers.items()
    }


def redact_url(url: str) -> str:
    """The URL with the value of every secret query parameter replaced."""
    parts = urllib.parse.urlsplit(url)
    if not parts.query:
        return url
    pairs = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    query = urllib.parse.urlencode([(k, REDACTED if _secret_key(k) else v) for k, v in pairs], safe="[]")
    return urllib.parse.urlunsplit(parts._replace(query=query))


def bound_body(value: Any, cap: int = BODY_CAP) -> Any:
    """The (already redacted) body itself when small, else its JSON text cut to `cap` characters."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if len(text) <= cap:
        return value
    return text[:cap] + f"…[cut, {len(text) - cap} more chars]"


@dataclass(frozen=True)
class TraceEntry:
    """One request of a case (an HTTP step, or a page's own request) and its response."""

    ts: str
    case_id: str
    step: int
    unit: str
    method: str
    url: str
    request_headers: Mapping[str, str]
    request_body: Any
    status: int | None
    response_headers: Mapping[str, str]
    response_body: Any
    duration_ms: int
    error: str | None = None
    source: str | None = None  # "browser" for a page's own requests; HTTP steps leave it out

    def to_json(self) -> dict[str, Any]:
        """The entry as one line of http-trace.ndjson."""
        out: dict[str, Any] = {
            "ts": self.ts,
            "case_id": self.case_id,
            "step": self.step,
            "unit": self.unit,
            "method": self.method,
            "url": redact_url(self.url),
            "request_headers": redact_headers(self.request_headers),
            "request_body": bound_body(redact(self.request_body)),
            "status": self.status,
            "response_headers": redact_headers(self.response_headers),
            "response_body": bound_body(redact(self.response_body)),
            "duration_ms": self.duration_ms,
            "error": self.error,
        }
        if self.source is not None:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TraceEntry:
        """Read back one line of http-trace.ndjson."""
        return cls(
            ts=str(d.get("ts", "")),
            case_id=str(d.get("case_id", "")),
            step=int(d.get("step", 0)),
            unit=str(d.get("unit", "")),
            method=str(d.get("method", "")),
            url=str(d.get("url", "")),
            request_headers=dict(d.get("request_headers") or {}),
            request_body=d.get("request_body"),
            status=None if d.get("status") is None else int(d["status"]),
            response_headers=dict(d.get("response_headers") or {}),
            response_body=d.get("response_body"),
            duration_ms=int(d.get("duration_ms") or 0),
            error=None if d.get("error") is None else str(d["error"]),
            source=None if d.get("source") is None else str(d["source"]),
        )


class TraceWriter:
    """Appends entries to http-trace.ndjson, one flushed line each (safe from several threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.touch()

    def write(self, entry: TraceEntry) -> None:
        """Append one entry (safe from any thread)."""
        line = json.dumps(entry.to_json(), ensure_ascii=False) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line)
