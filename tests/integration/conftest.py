"""Fixtures of the integration-run tests (helpers live in itkit.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from greenloop.integration.result import IntegrationResult
from greenloop.integration.run import integrate

from .itkit import MARK, scan


@pytest.fixture()
def mark() -> str:
    return uuid.uuid4().hex


@pytest.fixture(autouse=True)
def no_survivors(mark: str, tmp_path: Path) -> Iterator[None]:
    yield
    left = scan(mark, str(tmp_path))
    for pid, _ in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"


@pytest.fixture()
def run(mark: str) -> Callable[..., IntegrationResult]:
    """integrate() with the test's marker, no sandbox (this tests greenloop's own teardown)
    and short health/grace defaults; keyword arguments override."""

    def go(project: Path, **kw: Any) -> IntegrationResult:
        env = {**os.environ, MARK: mark}
        kw.setdefault("env", env)
        kw.setdefault("sandbox", "full-access")
        kw.setdefault("grace_s", 1.0)
        kw.setdefault("health_timeout_s", 15.0)
        kw.setdefault("record_bugs", False)
        return integrate(project, **kw)

    return go
