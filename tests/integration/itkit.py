"""Helpers for the integration-run tests: projects of purpose-written units, and a process scan.

Every test gets a unique marker in the environment its units inherit; after the test a scan
of /proc finds every process carrying the marker or naming the test's folder in its command
line, and fails the test if anything is left (after killing it, so one failure does not leak
into the next test).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from greenloop.system import procfs

FAKE = str(Path(__file__).with_name("fakeunit.py"))
MARK = "GREENLOOP_IT_MARK"


def unit(uid: str, mode: str = "ok", arg: str = "", **extra: Any) -> dict[str, Any]:
    start = [sys.executable, FAKE, mode] + ([arg] if arg else [])
    return {"id": uid, "kind": "be", "path": f"units/{uid}", "start": start, **extra}


def step(uid: str, call: str, **kw: Any) -> dict[str, Any]:
    return {"unit": uid, "call": call, **kw}


def write_project(
    root: Path,
    units: list[dict[str, Any]],
    cases: list[dict[str, Any]],
    contracts: dict[str, Any] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for u in units:
        (root / u.get("path", f"units/{u['id']}")).mkdir(parents=True, exist_ok=True)
    for uid, contract in (contracts or {}).items():
        (root / "units" / uid / "contract.json").write_text(json.dumps(contract))
    (root / "units.json").write_text(json.dumps({"units": units}, indent=1))
    (root / "integration").mkdir(exist_ok=True)
    (root / "integration" / "spec.json").write_text(json.dumps({"cases": cases}, indent=1))
    return root


def scan(mark: str, folder: str) -> list[tuple[int, str]]:
    found = []
    me = os.getpid()
    for pid in procfs.pids():
        env = procfs.environ(pid)
        if pid == me or env is None or not procfs.alive(pid):
            continue
        cmd = procfs.cmdline(pid)
        if f"{MARK}={mark}".encode() in env or folder in cmd or procfs.cwd(pid).startswith(folder):
            found.append((pid, cmd))
    return found

def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False
