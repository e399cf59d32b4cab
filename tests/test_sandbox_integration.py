"""Integration units under the sandbox: filesystem confined, loopback between units kept.

A real two-unit project (Python HTTP servers) run by greenloop.integration.run.integrate.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from greenloop.errors import UsageError
from greenloop.integration.ports import PortPicker
from greenloop.integration.result import IntegrationResult
from greenloop.integration.run import integrate as _integrate
from greenloop.system import enforcers, sandbox

SERVER = """
import json, os, pathlib, sys, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OUTSIDE = sys.argv[1]


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/health":
            return self.send(200, {"ok": True})
        if self.path == "/api/ping":
            return self.send(200, {"pong": os.environ["UNIT_ID"]})
        if self.path == "/api/relay":
            with urllib.request.urlopen(os.environ["ALPHA_URL"] + "/api/ping", timeout=5) as r:
                return self.send(200, json.loads(r.read()))
        if self.path == "/api/write-outside":
            try:
                pathlib.Path(OUTSIDE).write_text("x")
                return self.send(200, {"written": True})
            except OSError as exc:
                return self.send(200, {"written": False, "error": str(exc)})
        self.send(404, {"error": "not_found"})


ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
"""


def _free_ports() -> Iterator[int]:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        yield port  # yielded after the probe socket is closed


def integrate(project: Path, **kw: Any) -> IntegrationResult:
    return _integrate(project, port_picker=PortPicker(candidates=_free_ports()), **kw)


@pytest.fixture
def outside() -> Iterator[Path]:
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    d = base / f"greenloop-sbx-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def project(tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "user-config"))
    root = tmp_path / "proj"
    units = []
    for uid, deps in (("alpha", []), ("beta", ["alpha"])):
        code = root / "units" / uid / "code"
        code.mkdir(parents=True)
        (code / "server.py").write_text(SERVER)
        units.append(
            {
                "id": uid,
                "kind": "be",
                "path": f"units/{uid}",
                "start": [sys.executable, "code/server.py", str(outside / f"{uid}.txt")],
                "health": "/api/health",
                "depends_on": deps,
                "env": {},
            }
        )
    (root / "units.json").write_text(json.dumps({"units": units}))
    (root / "integration").mkdir()
    cases = [
        {
            "id": "beta-reaches-alpha-over-loopback",
            "involves": ["alpha", "beta"],
            "steps": [
                {
                    "unit": "beta",
                    "call": "GET /api/relay",
                    "expect": {"status": 200, "json": {"$.pong": "alpha"}},
                }
            ],
        },
        {
            "id": "alpha-cannot-write-outside-the-project",
            "involves": ["alpha"],
            "steps": [
                {
                    "unit": "alpha",
                    "call": "GET /api/write-outside",
                    "expect": {"status": 200, "json": {"$.written": False}},
                }
            ],
        },
    ]
    (root / "integration" / "spec.json").write_text(json.dumps({"cases": cases}))
    return root


def test_units_are_confined_but_reach_each_other(project: Path, outside: Path) -> None:
    result = integrate(project, record_bugs=False)
    assert result.cases_passed == 2, result.to_json()
    assert result.ok
    assert any("sandbox mode auto (bubblewrap" in n for n in result.to_json().get("notes", []))
    assert not (outside / "alpha.txt").exists()
    assert not result.surviving_processes


def test_full_access_units_are_not_confined(project: Path, outside: Path) -> None:
    result = integrate(project, record_bugs=False, sandbox="full-access")
    data = result.to_json()
    assert data["cases_passed"] == 1 and data["cases_failed"] == 1, data
    assert (outside / "alpha.txt").exists()


def test_integration_sandbox_refusals(project: Path, tmp_path: Path, outside: Path) -> None:
    with pytest.raises(UsageError, match="'loose'"):
        integrate(project, record_bugs=False, sandbox="loose")
    env = {**os.environ, enforcers.BWRAP_ENV_VAR: str(tmp_path / "no-bwrap"), "GREENLOOP_LANDLOCK": "off"}
    with pytest.raises(sandbox.SandboxUnavailable, match="full-access"):
        integrate(project, record_bugs=False, env=env, sandbox="workspace-write")
    assert not (project / "integration" / "runs").exists()  # refused before anything started
    # auto (the default) with neither enforcer runs the units unconfined, and says so
    data = integrate(project, record_bugs=False, env=env).to_json()
    assert any("NOT enforced" in n and "bubblewrap" in n for n in data["notes"]), data["notes"]
    assert (outside / "alpha.txt").exists()


def test_units_are_confined_by_landlock_without_bubblewrap(
    project: Path, outside: Path, tmp_path: Path
) -> None:
    env = {**os.environ, enforcers.BWRAP_ENV_VAR: str(tmp_path / "no-bwrap")}
    for mode in (None, "workspace-write"):  # auto, and a mode asked for by name
        result = integrate(project, record_bugs=False, env=env, sandbox=mode)
        data = result.to_json()
        assert result.cases_passed == 2, data  # loopback between units works, the write is denied
        assert any("(landlock ABI" in n for n in data["notes"]), data["notes"]
        assert any("network was not confined" in n for n in data["notes"]), data["notes"]
        assert not (outside / "alpha.txt").exists()


def test_a_sandboxed_unit_killed_by_a_signal_reads_as_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bwrap reports a command killed by signal N as exit 128+N; the run says killed by N."""
    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "user-config"))
    root = tmp_path / "proj"
    (root / "units" / "doomed").mkdir(parents=True)
    (root / "integration").mkdir()
    suicide = "import os, signal, sys; print('going', file=sys.stderr, flush=True); os.kill(os.getpid(), 9)"
    unit = {"id": "doomed", "kind": "be", "start": [sys.executable, "-c", suicide]}
    (root / "units.json").write_text(json.dumps({"units": [unit]}))
    case = {"id": "c", "steps": [{"unit": "doomed", "call": "GET /api/health"}]}
    (root / "integration" / "spec.json").write_text(json.dumps({"cases": [case]}))
    result = integrate(root, record_bugs=False, sandbox="workspace-write")
    failure = result.startup_failure
    assert failure is not None and failure["reason"] == "exited", result.to_json()
    assert failure["exit_code"] == -9
    assert "killed by SIGKILL" in failure["message"]
    assert "going" in failure["stderr_excerpt"]
    assert result.crashed and result.surviving_processes == ()
