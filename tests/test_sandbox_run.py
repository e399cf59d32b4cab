"""Sandboxed runs end to end: greenloop.api.test_run and `greenloop run` under each mode.

Real pytest suites in temporary workspaces, real bubblewrap, the real state store and config.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from greenloop import api
from greenloop.cli import main
from greenloop.closure.store import Store
from greenloop.errors import UsageError


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "user-config"))
    monkeypatch.delenv("GREENLOOP_CONFIG_PATCH", raising=False)
    monkeypatch.delenv("GREENLOOP_BWRAP", raising=False)
    monkeypatch.delenv("GREENLOOP_LANDLOCK", raising=False)


@pytest.fixture
def outside() -> Iterator[Path]:
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    d = base / f"greenloop-sbx-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def suite(tmp_path: Path, body: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / ".git").mkdir(exist_ok=True)
    (ws / "pytest.ini").write_text("[pytest]\n")
    (ws / "test_suite.py").write_text(textwrap.dedent(body))
    return ws


def writes_outside(tmp_path: Path, target: Path) -> Path:
    return suite(
        tmp_path,
        f"""
        import pathlib

        def test_writes_a_system_file():
            pathlib.Path({str(target)!r}).write_text("hi")

        def test_plain():
            assert 1 + 1 == 2
        """,
    )


def test_default_mode_stops_a_write_outside_and_full_access_allows_it(tmp_path: Path, outside: Path) -> None:
    target = outside / "out.txt"
    ws = writes_outside(tmp_path, target)
    r = api.test_run(ws)
    assert r.outcome == "red", (r.crash_reason, r.output_tail)
    assert r.sandbox.mode == "auto"  # the deployment default: bubblewrap here
    assert r.sandbox.enforced_by and r.sandbox.enforced_by.startswith("bubblewrap")
    assert r.sandbox.workspace_root == str(ws.resolve()) and r.sandbox.note is None
    assert r.summary.failed == 1 and r.summary.passed == 1
    [failure] = r.failures
    assert "test_writes_a_system_file" in failure.test
    assert failure.hint.startswith("The sandbox (auto: workspace-write) stopped a write")
    assert "--sandbox full-access" in failure.hint
    assert not target.exists()

    r = api.test_run(ws, sandbox="full-access")
    assert r.outcome == "green", (r.crash_reason, r.output_tail)
    assert r.sandbox.mode == "full-access" and r.sandbox.enforced_by is None
    assert target.read_text() == "hi"


def test_resolution_order_through_the_api_with_all_three_sources(tmp_path: Path, outside: Path) -> None:
    ws = writes_outside(tmp_path, outside / "x.txt")
    (ws / "greenloop.toml").write_text('sandbox = "full-access"\n')
    with Store(ws) as st:
        st.record_sandbox_mode("s1", "read-only")
    # explicit wins over the session's event and the config
    assert api.test_run(ws, session_id="s1", sandbox="workspace-write").sandbox.mode == "workspace-write"
    # the session's event wins over the config
    assert api.test_run(ws, session_id="s1").sandbox.mode == "read-only"
    # the config default applies to a session without events (and to no session)
    assert api.test_run(ws, session_id="s2").sandbox.mode == "full-access"


def test_unknown_mode_is_bad_input_and_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = suite(tmp_path, "def test_ok():\n    pass\n")
    with pytest.raises(UsageError) as info:
        api.test_run(ws, sandbox="lenient")
    assert "'lenient'" in str(info.value) and "workspace-write" in str(info.value)
    assert main(["run", str(ws), "--sandbox", "lenient", "--json"]) == 2
    assert "read-only, workspace-write, full-access" in capsys.readouterr().err
    assert not (ws / ".greenloop" / "runs").exists() or not any((ws / ".greenloop" / "runs").iterdir())


def test_missing_bwrap_is_a_denial_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mode asked for by name, with neither bubblewrap nor Landlock here: refused, nothing runs."""
    ws = suite(tmp_path, "def test_ok():\n    pass\n")
    monkeypatch.setenv("GREENLOOP_BWRAP", str(tmp_path / "no-bwrap"))
    monkeypatch.setenv("GREENLOOP_LANDLOCK", "off")
    r = api.test_run(ws, sandbox="workspace-write")
    assert r.outcome == "broken" and not r.ok
    assert r.crash_reason is not None and r.crash_reason.startswith("sandbox_denied: ")
    assert "apt-get install bubblewrap" in r.crash_reason and "full-access" in r.crash_reason
    assert "Landlock" in r.crash_reason
    assert r.summary.total == 0 and r.failures == ()
    # choosing full-access explicitly runs without bwrap, and says so
    r = api.test_run(ws, sandbox="full-access")
    assert r.outcome == "green" and r.sandbox.enforced_by is None


def test_bwrap_refusing_to_start_is_a_denial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bwrap that starts (passes the probe) but refuses this command's sandbox."""
    ws = suite(tmp_path, "def test_ok():\n    pass\n")
    real = shutil.which("bwrap")
    wrapper = tmp_path / "bwrap"
    # Behaves as bwrap for the probe (workspace under the probe's temp folder), refuses otherwise.
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *greenloop-bwrap-probe-*|--version) exec {real} "$@";; esac\n'
        'echo "bwrap: Creating new namespace failed: Operation not permitted" >&2\n'
        "exit 1\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("GREENLOOP_BWRAP", str(wrapper))
    r = api.test_run(ws)
    assert r.outcome == "broken"
    assert r.crash_reason == "sandbox_denied: Creating new namespace failed: Operation not permitted"
    assert r.failures == () and r.summary.failed == 0
    assert any("sandbox refused" in n for n in r.notes)


def test_read_only_run_reports_through_its_machine_report(tmp_path: Path) -> None:
    ws = suite(
        tmp_path,
        """
        import pathlib

        def test_reads():
            assert pathlib.Path("pytest.ini").exists()

        def test_writes_workspace():
            pathlib.Path("made.txt").write_text("x")
        """,
    )
    r = api.test_run(ws, sandbox="read-only")
    assert r.outcome == "red", (r.crash_reason, r.notes, r.output_tail)
    assert r.summary.passed == 1 and r.summary.failed == 1
    assert not any("report was missing" in n for n in r.notes)
    [failure] = r.failures
    assert "--sandbox workspace-write" in failure.hint
    assert not (ws / "made.txt").exists()


def test_cli_run_reports_the_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = suite(tmp_path, "def test_ok():\n    pass\n")
    assert main(["sandbox", "set", "--session", "cli-s", "read-only", "--path", str(ws)]) == 0
    capsys.readouterr()
    assert main(["run", str(ws), "--session", "cli-s", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    sb = out["sandbox"]
    assert sb["mode"] == "read-only" and sb["workspace_root"] == str(ws.resolve()) and sb["enforced_by"]


def test_verbatim_command_runs_inside_the_sandbox(tmp_path: Path, outside: Path) -> None:
    ws = suite(tmp_path, "def test_ok():\n    pass\n")
    target = outside / "cmd.txt"
    cmd = f"echo hi > {target}; {sys.executable} -m pytest -q"
    r = api.test_run(ws, command=cmd)
    assert not target.exists()
    assert "Read-only file system" in r.output_tail
    assert r.sandbox.mode == "auto" and (r.sandbox.enforced_by or "").startswith("bubblewrap")


def test_a_runner_killed_inside_the_sandbox_is_reported_as_killed(tmp_path: Path) -> None:
    ws = suite(tmp_path, "import os, signal\n\ndef test_dies():\n    os.kill(os.getpid(), signal.SIGKILL)\n")
    r = api.test_run(ws)
    assert r.outcome == "broken" and r.exit_code == -9
    assert r.crash_reason is not None and "signal 9" in r.crash_reason
    assert not r.crash_reason.startswith("sandbox_denied")


@pytest.mark.parametrize("framework", ["vitest", "jest", "pytest", "node:test"])
def test_every_runner_reports_through_a_read_only_sandbox(framework: str, tmp_path: Path) -> None:
    """Caches and the run's report folder stay writable where each runner needs them."""
    from e2e.test_runners import build

    ws = build(framework, "red", tmp_path / "ws")
    r = api.test_run(ws, sandbox="read-only")
    assert (r.outcome, r.framework) == ("red", framework), (r.crash_reason, r.notes, r.output_tail)
    assert r.summary.passed == 1 and r.summary.failed == 1
    assert not any("report was missing" in n for n in r.notes), r.notes
    assert r.sandbox.mode == "read-only" and r.sandbox.enforced_by


def test_a_run_on_a_declaring_workspace_does_not_walk_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = suite(tmp_path, "def test_ok():\n    pass\n")

    def no_walk(*_a: object, **_k: object) -> None:
        raise AssertionError("the workspace was walked")

    monkeypatch.setattr("greenloop.runner.probe.walk", no_walk)
    r = api.test_run(ws, sandbox="full-access")
    assert r.outcome == "green", (r.crash_reason, r.output_tail)
    assert r.summary.passed == 1
