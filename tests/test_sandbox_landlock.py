"""Landlock enforcement and the `auto` fallback order, for real.

Landlock runs are real: the kernel's own system calls (this machine's kernel offers Landlock),
real pytest suites and real processes. Bubblewrap is taken away through its seam
($GREENLOOP_BWRAP naming a missing binary) and Landlock through its own ($GREENLOOP_LANDLOCK=off),
so the fallback order is exercised on a machine that has both.

The tests marked `nobwrap` prove the fallback where bubblewrap is *really* unavailable (no
seam): they skip where it works. CI runs them once with bwrap hidden:
    unshare -m sh -c 'mount --bind /dev/null /usr/bin/bwrap && python -m pytest -q -m nobwrap tests'
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
from greenloop.model import Plan
from greenloop.system import enforcers, landlock, launcher, proc, sandbox

NO_BWRAP = {enforcers.BWRAP_ENV_VAR: "/nonexistent/bwrap"}
NOTHING = {**NO_BWRAP, landlock.DISABLE_ENV_VAR: "off"}


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "user-config"))
    for var in (
        "GREENLOOP_CONFIG_PATCH",
        enforcers.BWRAP_ENV_VAR,
        landlock.DISABLE_ENV_VAR,
        "GREENLOOP_SESSION",
    ):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host-writable folder outside the workspace and outside /tmp."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    d = base / f"greenloop-ll-{uuid.uuid4().hex[:8]}"
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


PROBE = """
import errno, json, os, pathlib, socket, sys, tempfile
res = {}
def attempt(name, fn):
    try:
        fn()
        res[name] = "ok"
    except OSError as e:
        res[name] = errno.errorcode.get(e.errno, str(e.errno))
attempt("workspace", lambda: pathlib.Path("inside.txt").write_text("x"))
attempt("private_tmp", lambda: pathlib.Path(tempfile.gettempdir(), "t.txt").write_text("x"))
attempt("outside", lambda: pathlib.Path(sys.argv[1], "out.txt").write_text("x"))
attempt("host_tmp", lambda: pathlib.Path("/tmp", sys.argv[2]).write_text("x"))
attempt("read_usr", lambda: os.listdir("/usr/bin") and open(sys.executable, "rb").read(64))
attempt("dev_null", lambda: open("/dev/null", "w").write("x"))
attempt("signal_outside", lambda: os.kill(int(sys.argv[3]), 0))
def loopback():
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    socket.create_connection(srv.getsockname(), timeout=5).close()
attempt("loopback", loopback)
res["tmpdir"] = tempfile.gettempdir()
print(json.dumps(res))
"""


def run_probe(ws: Path, logs: Path, mode: str, outside: Path) -> tuple[dict[str, str], launcher.Launch]:
    plan = Plan(framework="pytest", argv=(sys.executable, "-c", PROBE), cwd=str(ws), timeout_ms=60_000)
    stray = f"greenloop-ll-stray-{uuid.uuid4().hex[:8]}"
    plan = plan._replace(argv=(*plan.argv, str(outside), stray, str(os.getpid())))
    launch = launcher.launch(plan, sandbox.resolve(ws, explicit=mode), base_env={**os.environ, **NO_BWRAP})
    logs.mkdir(exist_ok=True)
    try:
        raw = proc.run_to_completion(
            list(launch.argv),
            cwd=str(ws),
            env=launch.env_dict,
            timeout_s=60,
            stdout_path=str(logs / "out"),
            stderr_path=str(logs / "err"),
            before_exec=launch.before_exec,
        )
    finally:
        launch.close()
    assert raw.exit_code == 0, (logs / "err").read_text()
    assert not Path("/tmp", stray).exists()
    return json.loads((logs / "out").read_text()), launch


def test_landlock_confines_writes_to_the_workspace_and_the_private_tmp(tmp_path: Path, outside: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    got, launch = run_probe(ws, tmp_path / "logs", "workspace-write", outside)
    abi = landlock.probe().abi
    assert launch.info.enforced_by == f"landlock ABI {abi}" and launch.before_exec is not None
    assert got["workspace"] == "ok" and (ws / "inside.txt").exists()
    assert got["private_tmp"] == "ok" and got["tmpdir"] == launch.tmpdir
    assert got["outside"] == "EACCES" and not (outside / "out.txt").exists()
    assert got["host_tmp"] == "EACCES"  # the rest of /tmp is not the run's
    assert got["read_usr"] == "ok" and got["dev_null"] == "ok"
    # documented: Landlock cannot keep loopback open and close the outside, so TCP is left alone
    assert got["loopback"] == "ok"
    if abi >= 6:  # the run cannot signal processes outside its own Landlock domain
        assert got["signal_outside"] == "EPERM"
    assert launch.tmpdir and not os.path.exists(launch.tmpdir)  # gone with the run
    assert any("network was not confined" in n for n in launch.notes)


def test_landlock_read_only_keeps_the_workspace_read_only(tmp_path: Path, outside: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    got, launch = run_probe(ws, tmp_path / "logs", "read-only", outside)
    assert launch.info.enforced_by and launch.info.enforced_by.startswith("landlock")
    assert got["workspace"] == "EACCES" and not (ws / "inside.txt").exists()
    assert got["private_tmp"] == "ok" and got["outside"] == "EACCES"


def test_a_run_under_landlock_is_red_with_the_sandbox_hint_and_keeps_its_report(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = suite(
        tmp_path,
        f"""
        import pathlib, os

        def test_writes_outside():
            pathlib.Path({str(outside / "x.txt")!r}).write_text("x")

        def test_writes_inside_and_tmp(tmp_path):
            pathlib.Path("inside.txt").write_text("x")
            (tmp_path / "t").write_text("x")
            assert "greenloop-tmp-" in os.environ["TMPDIR"]
        """,
    )
    monkeypatch.setenv(enforcers.BWRAP_ENV_VAR, NO_BWRAP[enforcers.BWRAP_ENV_VAR])
    r = api.test_run(ws)  # auto: bubblewrap is gone, Landlock enforces it
    assert r.outcome == "red", (r.crash_reason, r.output_tail)
    assert r.sandbox.mode == "auto" and (r.sandbox.enforced_by or "").startswith("landlock ABI ")
    assert r.sandbox.note is None
    assert (r.summary.passed, r.summary.failed) == (1, 1)
    assert not any("report was missing" in n for n in r.notes), r.notes
    assert any("network was not confined" in n for n in r.notes), r.notes
    [failure] = r.failures
    assert failure.hint.startswith("The sandbox (auto: workspace-write) stopped a write to " + str(outside))
    assert not (outside / "x.txt").exists() and (ws / "inside.txt").exists()
    # read-only, asked for by name, is enforced by Landlock too; the machine report still arrives
    r = api.test_run(ws, sandbox="read-only")
    assert r.sandbox.mode == "read-only" and (r.sandbox.enforced_by or "").startswith("landlock")
    assert (r.outcome, r.summary.passed, r.summary.failed) == ("red", 0, 2), (r.crash_reason, r.output_tail)
    assert not any("report was missing" in n for n in r.notes), r.notes


@pytest.mark.parametrize("framework", ["vitest", "jest", "pytest", "node:test"])
def test_every_runner_reports_through_landlock(
    framework: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Caches, the report folder and the temporary folder stay writable where each runner needs
    them when Landlock, not bubblewrap, enforces the mode."""
    from e2e.test_runners import build

    ws = build(framework, "red", tmp_path / "ws")
    monkeypatch.setenv(enforcers.BWRAP_ENV_VAR, NO_BWRAP[enforcers.BWRAP_ENV_VAR])
    for mode in ("workspace-write", "read-only"):
        r = api.test_run(ws, sandbox=mode)
        assert (r.outcome, r.framework) == ("red", framework), (mode, r.crash_reason, r.notes, r.output_tail)
        assert (r.summary.passed, r.summary.failed) == (1, 1), mode
        assert not any("report was missing" in n for n in r.notes), r.notes
        assert (r.sandbox.enforced_by or "").startswith("landlock")


def test_auto_with_nothing_to_enforce_it_runs_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = suite(tmp_path, "def test_ok():\n    pass\n")
    for k, v in NOTHING.items():
        monkeypatch.setenv(k, v)
    r = api.test_run(ws)
    assert r.outcome == "green", (r.crash_reason, r.output_tail)
    assert r.sandbox.mode == "auto" and r.sandbox.enforced_by is None
    note = r.sandbox.note or ""
    assert "NOT enforced" in note and "apt-get install bubblewrap" in note and "Landlock" in note
    assert note in r.notes
    # what the MCP tool returns: the sandbox with its note, and the note among the notes
    from greenloop.mcp.outputs import run_output

    out = run_output(api.bounded(r), "s").model_dump()
    assert out["sandbox"]["enforced_by"] is None and out["sandbox"]["note"] == note
    assert any("NOT enforced" in n for n in out["notes"])
    # the CLI's summary line and `greenloop check` say it too
    assert main(["run", str(ws)]) == 0
    printed = capsys.readouterr().out
    head = next(line for line in printed.splitlines() if "green" in line)
    assert "NOT enforced" in head
    assert main(["check", str(ws)]) == 0
    assert "NOT enforced" in capsys.readouterr().out
    # and `greenloop sandbox show` says what auto resolves to and why
    assert main(["sandbox", "show", "--path", str(ws), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["mode"] == "auto" and shown["enforcer"] is None and "NOT ENFORCED" in shown["why"]
    assert [c["name"] for c in shown["enforcers"]] == ["bwrap", "landlock"]


def test_fallback_order_bwrap_then_landlock_then_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = sandbox.resolve(ws)
    assert enforcers.enforce(policy).enforcer == "bwrap"
    assert enforcers.enforce(policy, {**os.environ, **NO_BWRAP}).enforcer == "landlock"
    nothing = enforcers.enforce(policy, {**os.environ, **NOTHING})
    assert nothing.enforcer is None and nothing.unenforced_note
    with pytest.raises(sandbox.SandboxUnavailable):
        enforcers.enforce(sandbox.resolve(ws, explicit="workspace-write"), {**os.environ, **NOTHING})
    assert enforcers.enforce(sandbox.resolve(ws, explicit="full-access"), NOTHING).enforcer is None


@pytest.mark.parametrize("how", ["explicit", "session", "config"])
def test_a_named_mode_is_refused_with_exit_3_and_nothing_runs(
    how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran.txt"
    ws = suite(
        tmp_path, f"import pathlib\n\ndef test_ok():\n    pathlib.Path({str(marker)!r}).write_text('x')\n"
    )
    for k, v in NOTHING.items():
        monkeypatch.setenv(k, v)
    args = ["run", str(ws), "--json"]
    if how == "explicit":
        args += ["--sandbox", "workspace-write"]
    elif how == "session":
        with Store(ws) as st:
            st.record_sandbox_mode("s1", "read-only")
        args += ["--session", "s1"]
    else:
        (ws / "greenloop.toml").write_text('sandbox = "workspace-write"\n')
    assert main(args) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "broken" and out["crash_reason"].startswith("sandbox_denied: ")
    assert "apt-get install bubblewrap" in out["crash_reason"] and "Landlock" in out["crash_reason"]
    assert out["summary"]["total"] == 0 and out["failures"] == []
    assert not marker.exists()


def test_a_failing_confinement_step_is_a_spawn_error_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran.txt"

    def refuse() -> None:
        raise OSError("landlock_restrict_self failed")

    raw = proc.run_to_completion(
        [sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
        cwd=str(tmp_path),
        env=dict(os.environ),
        timeout_s=30,
        stdout_path=str(tmp_path / "o"),
        stderr_path=str(tmp_path / "e"),
        before_exec=refuse,
    )
    assert raw.exit_code is None and raw.spawn_error and proc.BEFORE_EXEC_FAILED in raw.spawn_error
    assert not marker.exists()


# ------------------------------------------------------------- bubblewrap really unavailable


@pytest.fixture
def bwrap_hidden() -> enforcers.BwrapStatus:
    status = enforcers.probe_bwrap({k: v for k, v in os.environ.items() if k != enforcers.BWRAP_ENV_VAR})
    if status.available:
        pytest.skip(
            "bubblewrap works here; this test proves the fallback where it does not (CI: "
            "unshare -m sh -c 'mount --bind /dev/null /usr/bin/bwrap && python -m pytest -m nobwrap tests')"
        )
    return status


@pytest.mark.nobwrap
def test_nobwrap_enforcers_say_why_and_how(bwrap_hidden: enforcers.BwrapStatus) -> None:
    bwrap, ll = enforcers.available_enforcers()
    assert not bwrap.available and bwrap.detail == bwrap_hidden.reason and bwrap.fix
    assert "bwrap" in bwrap.detail  # names the binary and why it cannot run (missing, not executable)
    assert ll.available and ll.detail.startswith("Landlock ABI ")


@pytest.mark.nobwrap
def test_nobwrap_auto_falls_back_to_landlock(
    bwrap_hidden: enforcers.BwrapStatus, tmp_path: Path, outside: Path
) -> None:
    target = outside / "x.txt"
    ws = suite(
        tmp_path, f"import pathlib\n\ndef test_w():\n    pathlib.Path({str(target)!r}).write_text('x')\n"
    )
    r = api.test_run(ws)
    assert r.sandbox.mode == "auto" and (r.sandbox.enforced_by or "").startswith("landlock ABI ")
    assert r.outcome == "red" and not target.exists()
    assert any("since bubblewrap is unavailable" in n for n in r.notes), r.notes
    # a named mode is enforced by Landlock too
    r = api.test_run(ws, sandbox="workspace-write")
    assert (r.sandbox.enforced_by or "").startswith("landlock") and r.outcome == "red"


@pytest.mark.nobwrap
def test_nobwrap_named_mode_without_landlock_is_refused(
    bwrap_hidden: enforcers.BwrapStatus,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    marker = tmp_path / "ran.txt"
    ws = suite(
        tmp_path, f"import pathlib\n\ndef test_ok():\n    pathlib.Path({str(marker)!r}).write_text('x')\n"
    )
    monkeypatch.setenv(landlock.DISABLE_ENV_VAR, "off")
    assert main(["run", str(ws), "--sandbox", "workspace-write", "--json"]) == 3
    out = json.loads(capsys.readouterr().out)
    assert out["crash_reason"].startswith("sandbox_denied: ") and not marker.exists()
    assert main(["run", str(ws), "--json"]) == 0  # auto still runs, and says it was not enforced
    assert json.loads(capsys.readouterr().out)["sandbox"]["note"]
