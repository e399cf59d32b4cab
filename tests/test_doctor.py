"""greenloop doctor: real workspaces, real harness configurations written by `greenloop init`,
real state databases and real version queries; the CLI runs as a real process."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

from greenloop import render
from greenloop.closure.store import SCHEMA_VERSION, Store
from greenloop.doctor.harness import HARNESS_FILES, harness_checks
from greenloop.doctor.report import STATUSES, Check, Report
from greenloop.doctor.runner import runner_checks
from greenloop.doctor.sandbox import sandbox_checks
from greenloop.doctor.state import state_checks
from greenloop.hooks.install import HARNESSES, init
from greenloop.system import enforcers, landlock

REPO = Path(__file__).resolve().parents[1]


def fake_greenloop(folder: Path) -> Path:
    """An executable named greenloop (the hook check asks only that it exists and can run)."""
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "greenloop"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return exe


def workspace(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir()
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "test_a.py").write_text("def test_a():\n    assert True\n")
    return root


def path_env(*folders: Path) -> dict[str, str]:
    return {**os.environ, "PATH": os.pathsep.join([*map(str, folders), os.environ.get("PATH", "")])}


def doctor_cli(ws: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    full = dict(env or os.environ)
    full["PYTHONPATH"] = str(REPO / "src")
    done = subprocess.run(
        [sys.executable, "-m", "greenloop", "doctor", str(ws), *args],
        env=full,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout, done.stderr


def by_name(record: dict[str, Any], area: str) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in record["checks"] if c["area"] == area}


def test_a_healthy_workspace_with_every_harness_is_all_well(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    for harness in HARNESSES:
        init(harness, ws)
    with Store(ws):
        pass  # a real state database, as the first run creates it
    bin_dir = tmp_path / "bin"
    fake_greenloop(bin_dir)
    code, out, _ = doctor_cli(ws, "--json", env=path_env(bin_dir))
    record = json.loads(out)
    assert code == 0, out
    assert record["ok"] is True
    assert set(record) == {"ok", "workspace", "checks"}
    for check in record["checks"]:
        assert set(check) == {"area", "name", "status", "detail", "fix"}
        assert check["status"] in STATUSES
    harness_checks = by_name(record, "harness")
    # Every file init writes is read back, each hook command resolving to the greenloop on PATH.
    assert len(harness_checks) == len(HARNESS_FILES)
    assert all(c["status"] == "ok" for c in harness_checks.values()), harness_checks
    assert sys.executable in harness_checks["claude-code hooks"]["detail"]  # the interpreter form of init
    assert str(bin_dir / "greenloop") in harness_checks["claude-code MCP server"]["detail"]  # by name
    assert by_name(record, "state")["state.db"]["status"] == "ok"
    runner = by_name(record, "runner")
    assert runner["framework"]["detail"].startswith("pytest")
    assert runner["pytest"]["status"] == "ok" and runner["pytest"]["detail"].startswith("pytest ")


def test_a_hook_command_pointing_at_a_missing_file_fails_with_its_fix(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    init("claude-code", ws)
    settings = ws / ".claude" / "settings.json"
    # greenloop was reinstalled elsewhere: the interpreter init wrote into the hooks is gone.
    gone = tmp_path / "old-venv" / "bin" / "python"
    settings.write_text(settings.read_text().replace(sys.executable, str(gone)))
    code, out, _ = doctor_cli(ws, "--json", env=path_env(fake_greenloop(tmp_path / "bin").parent))
    assert code == 1
    record = json.loads(out)
    assert record["ok"] is False
    hooks = by_name(record, "harness")["claude-code hooks"]
    assert hooks["status"] == "fail"
    assert f"runs {gone}, which does not exist" in hooks["detail"]
    assert "greenloop init claude-code" in hooks["fix"]
    # The MCP registration still calls greenloop by name, which is on PATH: that one is fine.
    assert by_name(record, "harness")["claude-code MCP server"]["status"] == "ok"

    # The human rendering says the same, with the fix under the problem and no colour when piped.
    code, text, _ = doctor_cli(ws, env={**path_env(tmp_path / "bin"), "NO_COLOR": "1"})
    assert code == 1 and "\x1b[" not in text
    line = next(ln for ln in text.splitlines() if "claude-code hooks" in ln)
    assert line.startswith("✗ harness")
    assert "fix: install greenloop where the harness runs" in text
    assert text.splitlines()[-1] == "✗ 1 problem needs a fix"


def test_a_command_whose_program_is_not_on_path_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    init("cursor", ws)
    env = {**os.environ, "PATH": str(tmp_path / "empty")}
    checks = {c.name: c for c in harness_checks(str(ws), env)}
    assert checks["cursor hooks"].status == "ok"  # the hooks name their interpreter by path
    assert checks["cursor MCP server"].status == "fail"
    assert "calls `greenloop` by name, and it is not on PATH" in checks["cursor MCP server"].detail


def test_a_hook_whose_greenloop_folder_is_gone_fails(tmp_path: Path) -> None:
    import greenloop

    ws = workspace(tmp_path / "ws")
    init("gemini", ws)
    settings = ws / ".gemini" / "settings.json"
    root = os.path.dirname(os.path.dirname(os.path.abspath(greenloop.__file__)))
    moved = tmp_path / "moved-away"
    moved.mkdir()
    text = settings.read_text()
    assert json.dumps(root)[1:-1] in text
    settings.write_text(text.replace(json.dumps(root)[1:-1], str(moved)))
    path = fake_greenloop(tmp_path / "bin").parent
    checks = {c.name: c for c in harness_checks(str(ws), path_env(path))}
    assert checks["gemini hooks"].status == "fail"
    assert f"loads greenloop from {moved}, which no longer holds it" in checks["gemini hooks"].detail
    assert checks["gemini MCP server"].status == "ok"


def test_a_hook_event_removed_by_hand_is_a_warning(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    init("codex", ws)
    hooks_file = ws / ".codex" / "hooks.json"
    data = json.loads(hooks_file.read_text())
    del data["hooks"]["Stop"]
    hooks_file.write_text(json.dumps(data))
    checks = {
        c.name: c for c in harness_checks(str(ws), path_env(fake_greenloop(tmp_path / "b").parent))
    }
    assert checks["codex hooks"].status == "warn"
    assert "no greenloop hook for Stop" in checks["codex hooks"].detail


def test_a_harness_file_that_is_not_json_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    (ws / ".gemini").mkdir()
    (ws / ".gemini" / "settings.json").write_text("{not json")
    checks = harness_checks(str(ws), os.environ)
    assert {(c.name, c.status) for c in checks} == {("gemini hooks", "fail"), ("gemini MCP server", "fail")}
    assert "cannot be read" in checks[0].detail and "by hand" in (checks[0].fix or "")


def test_harness_configurations_at_the_repository_root_count_for_a_sub_package(tmp_path: Path) -> None:
    repo = workspace(tmp_path / "repo")
    init("claude-code", repo)
    sub = repo / "packages" / "api"
    sub.mkdir(parents=True)
    checks = {
        c.name: c for c in harness_checks(str(sub), path_env(fake_greenloop(tmp_path / "b").parent))
    }
    assert checks["claude-code hooks"].status == "ok"
    assert checks["claude-code hooks"].detail.startswith("../../.claude/settings.json")


def test_no_harness_configured_is_fine(tmp_path: Path) -> None:
    checks = harness_checks(str(workspace(tmp_path / "ws")), os.environ)
    assert [(c.name, c.status) for c in checks] == [("configured", "ok")]


def test_a_corrupt_state_database_fails_and_is_left_as_it_was(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    db = ws / ".greenloop" / "state.db"
    db.parent.mkdir()
    garbage = b"this is not an SQLite database, it is a torn file " * 40
    db.write_bytes(garbage)
    code, out, _ = doctor_cli(ws, "--json")
    assert code == 1
    state = by_name(json.loads(out), "state")["state.db"]
    assert state["status"] == "fail" and "not a usable database" in state["detail"]
    assert "mv " in state["fix"]
    assert db.read_bytes() == garbage  # the doctor looks; a run's Store is what rebuilds


def test_a_database_damaged_inside_fails_integrity_check(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    with Store(ws) as st:
        for i in range(300):
            st.touch_session(f"session-{i:04d}-" + "x" * 200)
    db = ws / ".greenloop" / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    data = bytearray(db.read_bytes())
    page = 4096
    # Scribble over the b-tree headers of pages 2 to 4 (tables' pages: the file still opens).
    for n in (1, 2, 3):
        data[n * page : n * page + 12] = b"\xff" * 12
    db.write_bytes(bytes(data))
    (check,) = state_checks(str(ws))
    assert check.status == "fail", check
    assert check.fix and "mv " in check.fix


def test_a_state_database_from_a_newer_greenloop_fails(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    with Store(ws):
        pass
    conn = sqlite3.connect(ws / ".greenloop" / "state.db")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    (check,) = state_checks(str(ws))
    assert check.status == "fail" and "upgrade greenloop" in (check.fix or "")


def test_no_state_database_yet_is_fine_and_nothing_is_created(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    (check,) = state_checks(str(ws))
    assert check.status == "ok" and "no state yet" in check.detail
    assert not (ws / ".greenloop").exists()


def test_pytest_missing_from_the_workspace_venv_fails_with_how_to_install_it(tmp_path: Path) -> None:
    ws = workspace(tmp_path / "ws")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True)
    checks = {c.name: c for c in runner_checks(str(ws), os.environ)}
    assert checks["pytest"].status == "fail"
    assert "pytest is not installed in .venv" in checks["pytest"].detail
    assert checks["pytest"].fix is not None and "-m pip install pytest" in checks["pytest"].fix


def test_the_js_runner_version_comes_from_its_package_json(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "package.json").write_text('{"devDependencies": {"vitest": "4.1.12"}}')
    modules = ws / "node_modules"
    fake_greenloop(modules / ".bin").rename(modules / ".bin" / "vitest")
    (modules / "vitest").mkdir()
    (modules / "vitest" / "package.json").write_text('{"name": "vitest", "version": "4.1.12"}')
    checks = {c.name: c for c in runner_checks(str(ws), os.environ)}
    assert checks["framework"].detail.startswith("vitest")
    assert checks["vitest"].status == "ok" and checks["vitest"].detail.startswith("vitest 4.1.12: ")
    assert checks["node"].status == "ok" and checks["node"].detail.startswith("node v")


def test_a_js_runner_that_is_not_installed_fails_with_the_install_command(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "package.json").write_text('{"devDependencies": {"jest": "30"}}')
    checks = {c.name: c for c in runner_checks(str(ws), os.environ)}
    assert (
        checks["jest"].status == "fail"
        and checks["jest"].fix
        == "run `npm install -D jest` (or `npm install` if package.json already lists it)"
    )


def test_nothing_to_test_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (check,) = runner_checks(str(tmp_path / "ws"), os.environ)
    assert (check.name, check.status) == ("framework", "warn")


def test_each_enforcer_is_listed_with_why_not_and_the_fix(tmp_path: Path) -> None:
    ws = str(workspace(tmp_path / "ws"))
    # Both enforcers taken away through their seams: auto runs go on unconfined (a warning) ...
    nothing = {
        **os.environ,
        "GREENLOOP_CONFIG_HOME": str(tmp_path / "user-config"),  # no user config: the default mode
        enforcers.BWRAP_ENV_VAR: str(tmp_path / "no-bwrap"),
        landlock.DISABLE_ENV_VAR: "off",
    }
    checks = {c.name: c for c in sandbox_checks(ws, nothing)}
    assert checks["mode"].detail == "auto (from config)"
    assert {checks["bwrap"].status, checks["landlock"].status} == {"warn"}
    assert str(tmp_path / "no-bwrap") in checks["bwrap"].detail and checks["bwrap"].fix
    assert "not sandboxed" in checks["landlock"].detail and checks["landlock"].fix
    # ... while a named mode would be refused: a failure.
    (tmp_path / "ws" / "greenloop.toml").write_text('sandbox = "workspace-write"\n')
    checks = {c.name: c for c in sandbox_checks(ws, nothing)}
    assert checks["bwrap"].status == "fail" and "workspace-write runs are refused" in checks["bwrap"].detail
    # With Landlock working, a missing bubblewrap is only information.
    checks = {c.name: c for c in sandbox_checks(ws, {**nothing, landlock.DISABLE_ENV_VAR: ""})}
    if checks["landlock"].status == "ok":  # this kernel offers Landlock
        assert checks["bwrap"].status == "ok" and "not needed (landlock enforces)" in checks["bwrap"].detail
        assert checks["landlock"].detail.endswith("used by sandboxed runs")


def test_a_missing_path_is_bad_input(tmp_path: Path) -> None:
    code, out, err = doctor_cli(tmp_path / "nope")
    assert code == 2 and out == ""
    assert "does not exist" in err


def test_render_marks_each_status_and_shows_fixes_only_for_problems() -> None:
    report = Report(
        "/ws",
        (
            Check("runner", "pytest", "ok", "pytest 8.3.0", "never shown"),
            Check("browser", "chromium", "warn", "not found", "apt-get install chromium"),
            Check("state", "state.db", "fail", "corrupt", "mv it"),
        ),
    )
    text = render.doctor_text(report)
    assert "never shown" not in text
    assert "! browser  chromium  not found" in text and "fix: apt-get install chromium" in text
    assert text.splitlines()[-1] == "✗ 1 problem needs a fix (1 warning)"
    assert "\x1b[" in render.doctor_text(report, colour=True)
    assert not report.ok
    assert render.doctor_text(Report("/ws", report.checks[:1])).splitlines()[-1] == "✓ all well"
