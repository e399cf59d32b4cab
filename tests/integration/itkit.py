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
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = fh.read()
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            with open(f"/proc/{pid}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if state in (b"Z", b"X"):
            continue
        if f"{MARK}={mark}".encode() in env.split(b"\0") or folder in cmd or cwd.startswith(folder):
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
