"""The real Gemini CLI, offline, for the end-to-end tests (the pytest side).

`GeminiCli` prepares a temporary HOME with the CLI's settings (API-key auth with a fake key;
telemetry, usage statistics and update checks off), trusts the project folder, and puts
`greenloop` on PATH as this checkout. `turn(prompt, steps, …)` runs one `gemini -p PROMPT
--yolo -o json` through gemini_offline.py inside a fresh network namespace (`unshare -rn`,
loopback up) when the machine allows one, with the scripted model server and the leak guard
of gemini_model.py in there with it; it records what reached the model server and fails the
test if the guard saw anything, if the namespace was not isolated, or if the turn overran.

The CLI is pinned in tests/harnesses/gemini-cli (package.json + package-lock.json; `npm ci`
there installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .gemini_model import Request, Step
from .helpers import REPO

GEMINI_VERSION = "0.61.0"
GEMINI_PACKAGE = REPO / "tests" / "harnesses" / "gemini-cli" / "node_modules" / "@google" / "gemini-cli"
GEMINI_JS = GEMINI_PACKAGE / "bundle" / "gemini.js"
DRIVER = Path(__file__).with_name("gemini_offline.py")


def require_gemini() -> tuple[str, Path]:
    """node and the pinned CLI's entry point, or skip saying how to install them."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not GEMINI_JS.is_file():
        pytest.skip("Gemini CLI is not installed: run `npm ci` in tests/harnesses/gemini-cli")
    version = json.loads((GEMINI_PACKAGE / "package.json").read_text())["version"]
    assert version == GEMINI_VERSION, f"tests/harnesses/gemini-cli holds {version}; run `npm ci` there"
    return node, GEMINI_JS


@dataclass
class TurnResult:
    code: int
    stdout: str
    stderr: str
    seconds: float
    requests: list[Request]

    @property
    def json(self) -> dict[str, Any]:
        start = self.stdout.find("{")
        data: dict[str, Any] = json.loads(self.stdout[start:])
        return data


class GeminiCli:
    """The pinned Gemini CLI in a temporary HOME, run offline one turn at a time."""

    def __init__(self, root: Path, project: Path, *, netns: bool) -> None:
        self.node, self.entry = require_gemini()
        self.root = root
        self.project = project
        self.netns = netns
        self.home = root / "home"
        self.bin = root / "bin"
        self.extra_env: dict[str, str] = {}
        self.requests: list[Request] = []  # every request of every turn, in order
        self.hits: list[str] = []  # what reached the leak guard
        self.turns = 0
        gemini_dir = self.home / ".gemini"
        gemini_dir.mkdir(parents=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2))
        # Hooks and stdio MCP servers of a project run only in a trusted folder.
        (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
        # `greenloop` on the CLI's PATH (its shell, its MCP server) is this checkout.
        self.bin.mkdir()
        wrapper = self.bin / "greenloop"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m greenloop "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)

    def env(self) -> dict[str, str]:
        """A clean environment: nothing inherited but what the tools need to run (the driver
        adds the model server's URL and the proxy variables)."""
        path = [str(self.bin), os.path.dirname(self.node), "/usr/local/bin", "/usr/bin", "/bin"]
        return {
            "PATH": os.pathsep.join(path),
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONPATH": str(REPO / "src"),
            "GREENLOOP_CONFIG_HOME": str(self.home / ".config" / "greenloop"),
            "GEMINI_API_KEY": "fake-key-for-a-scripted-model",
            **self.extra_env,
        }

    def run(
        self, prompt: str, steps: Sequence[Step], *args: str, timeout: float, until_guard_hit: bool = False
    ) -> dict[str, Any]:
        """One `gemini -p PROMPT --yolo -o json ARGS` through the offline driver; its report."""
        self.turns += 1
        out = self.root / f"turn-{self.turns}.json"
        plan = {
            "argv": [self.node, str(self.entry), "-p", prompt, "--yolo", "--output-format", "json", *args],
            "cwd": str(self.project),
            "env": self.env(),
            "steps": [{"text": s.text, "calls": list(s.calls), "expect": s.expect} for s in steps],
            "timeout": timeout,
            "until_guard_hit": until_guard_hit,
            "out": str(out),
        }
        plan_path = self.root / f"turn-{self.turns}-plan.json"
        plan_path.write_text(json.dumps(plan))
        runner = [sys.executable, str(DRIVER), str(plan_path)]
        argv = (
            ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *runner]
            if self.netns
            else runner
        )
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 60, check=False)
        assert p.returncode == 0 and out.exists(), p.stderr[-3000:]
        report: dict[str, Any] = json.loads(out.read_text())
        self.requests += [Request(r["path"], r["body"]) for r in report["requests"]]
        self.hits += report["hits"]
        if self.netns:
            assert report["isolated"] is True, "the network namespace let a connection off the machine"
        return report

    def turn(self, prompt: str, steps: Sequence[Step], *args: str, timeout: float = 240) -> TurnResult:
        """One user turn with the model playing `steps`: every step played, none unexpected,
        within `timeout` seconds."""
        report = self.run(prompt, steps, *args, timeout=timeout)
        assert not report["timed_out"], (
            f"gemini did not finish within {timeout} s:\n{report['stderr'][-3000:]}"
        )
        assert not report["errors"], "\n".join(report["errors"])
        assert report["played"] == report["steps"], (
            f"the model played {report['played']} of {report['steps']}"
        )
        requests = [Request(r["path"], r["body"]) for r in report["requests"]]
        return TurnResult(report["code"], report["stdout"], report["stderr"], report["seconds"], requests)


def steer_requests(requests: Sequence[Request]) -> Iterator[Request]:
    """The agent requests that carry one of greenloop's steer messages back to the model."""
    for request in requests:
        if request.agent and "greenloop: the last test run" in request.last_user_text():
            yield request
