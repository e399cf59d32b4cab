"""Unit tests of the auth service against a real server on a free loopback port."""

from __future__ import annotations

import json
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code"))
import server  # noqa: E402


@pytest.fixture()
def base() -> Iterator[str]:
    srv = server.serve("127.0.0.1", 0)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def call(url: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_health(base: str) -> None:
    assert call(base + "/api/health") == (200, {"ok": True})


def test_login_issues_a_token_that_verifies(base: str) -> None:
    status, body = call(base + "/api/login", "POST", {"username": "alice", "password": "wonderland"})
    assert status == 200 and body["user"]["username"] == "alice"
    status, who = call(base + "/api/verify", headers={"Authorization": "Bearer " + body["token"]})
    assert status == 200 and who["user"]["id"] == "u-alice"


def test_wrong_password_gives_401(base: str) -> None:
    assert call(base + "/api/login", "POST", {"username": "alice", "password": "nope"})[0] == 401


def test_missing_fields_give_400(base: str) -> None:
    assert call(base + "/api/login", "POST", {"username": "alice"}) == (400, {"error": "username_and_password_required"})


def test_unknown_token_gives_401(base: str) -> None:
    assert call(base + "/api/verify", headers={"Authorization": "Bearer forged"})[0] == 401
