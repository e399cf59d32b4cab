"""Helpers of the end-to-end layer: real workspaces, the real CLI as a subprocess, a process scan."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from greenloop.system import procfs

REPO = Path(__file__).resolve().parents[2]
RUNNERS = REPO / "tests" / "runners" / "node_modules"


@dataclass
class CliRun:
    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


def cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> CliRun:
    """`greenloop …` as a real subprocess of this interpreter (what a user or an agent runs)."""
    full_env = dict(os.environ)
    full_env.pop("GREENLOOP_SESSION", None)
    full_env["PYTHONPATH"] = str(REPO / "src")
    if env:
        full_env.update(env)
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "greenloop", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)


def processes_under(path: Path) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose command line or working folder mentions `path`."""
    needle = str(path)
    found: list[tuple[int, str]] = []
    me = os.getpid()
    for pid in procfs.pids():
        if pid == me or not procfs.alive(pid):
            continue
        cmd, cwd = procfs.cmdline(pid), procfs.cwd(pid)
        if needle in cmd or cwd == needle or cwd.startswith(needle + "/"):
            found.append((pid, cmd))
    return found

def netns_works() -> bool:
    """Can this machine give a process a network namespace of its own (user namespaces)?"""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    p = subprocess.run(
        ["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True, timeout=30, check=False
    )
    return p.returncode == 0


def wait_until(pred: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def write_files(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def js_workspace(root: Path, runner: str, files: dict[str, str], *, config: str | None = None) -> Path:
    """A JS workspace declaring `runner`, with the repo's real runners linked in as node_modules."""
    if not (RUNNERS / ".bin" / runner).exists():
        pytest.skip(f"{runner} is not installed in tests/runners (run `npm ci` there)")
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir()  # stop upward searches (lockfiles, hoisted binaries) at the workspace
    version = {"vitest": "4.1.12", "jest": "30.5.2"}[runner]
    pkg: dict[str, Any] = {"name": "ws", "private": True, "devDependencies": {runner: version}}
    if runner == "vitest":
        pkg["type"] = "module"
    (root / "package.json").write_text(json.dumps(pkg))
    os.symlink(RUNNERS, root / "node_modules")
    if config:
        name = "vitest.config.js" if runner == "vitest" else "jest.config.js"
        (root / name).write_text(config)
    return write_files(root, files)


def py_workspace(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    return write_files(root, files)


def node_workspace(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir()
    return write_files(root, files)
