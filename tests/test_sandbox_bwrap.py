"""Real runs under bubblewrap: filesystem, network, process lifetime, denials, the probe.

Every test starts real sandboxes through proc.py (the same path a run takes). No traffic
leaves the machine: the one outside address is TEST-NET-1 (192.0.2.1), which the sandbox's
network namespace cannot route at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from greenloop.layout import PACKAGE_DIR
from greenloop.model import Failure, Plan, RawRun
from greenloop.system import bwrap_command, denials, enforcers, launcher, proc, sandbox
from greenloop.system.env import child_env


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


class Ran:
    def __init__(self, raw: RawRun, out: str, err: str, launch: launcher.Launch) -> None:
        self.raw, self.out, self.err, self.launch = raw, out, err, launch

    @property
    def text(self) -> str:
        return self.out + self.err


def run(
    ws: Path,
    argv: list[str],
    mode: str,
    *,
    logs: Path,
    report_file: str | None = None,
    base_env: dict[str, str] | None = None,
    timeout_s: float = 60,
) -> Ran:
    plan = Plan(framework="pytest", argv=tuple(argv), cwd=str(ws), timeout_ms=int(timeout_s * 1000))
    if report_file:
        plan = plan._replace(report_file=report_file)
    policy = sandbox.resolve(ws, explicit=mode)
    launch = launcher.launch(plan, policy, base_env=dict(os.environ) if base_env is None else base_env)
    logs.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:6]
    out, err = logs / f"out-{tag}", logs / f"err-{tag}"
    raw = proc.run_to_completion(
        list(launch.argv),
        cwd=str(ws) if ws.is_dir() else str(logs),
        env=launch.env_dict,
        timeout_s=timeout_s,
        stdout_path=str(out),
        stderr_path=str(err),
        shell=launch.shell,
    )
    return Ran(raw, _read(out), _read(err), launch)


def pytest_argv(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *extra]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


@pytest.fixture
def outside() -> Iterator[Path]:
    """A host-writable folder outside the workspace and outside /tmp (so the sandbox hides nothing:
    it is visible, just read-only)."""
    base = Path("/var/tmp") if os.access("/var/tmp", os.W_OK) else Path.home()
    d = base / f"greenloop-sbx-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_probe_finds_a_working_bwrap_with_loopback() -> None:
    status = enforcers.probe_bwrap()
    assert status.available, status.reason
    assert status.loopback and status.version and status.enforced_by.startswith("bubblewrap ")
    assert enforcers.probe_bwrap() is status  # cached per process


def test_write_outside_workspace_fails_under_workspace_write_and_passes_under_full_access(
    ws: Path, outside: Path, tmp_path: Path
) -> None:
    target = outside / "written.txt"
    (ws / "test_write.py").write_text(
        textwrap.dedent(f"""
            import pathlib

            def test_write_outside():
                pathlib.Path({str(target)!r}).write_text("hello")

            def test_write_inside_and_tmp(tmp_path):
                pathlib.Path("inside.txt").write_text("ok")
                (tmp_path / "t.txt").write_text("ok")
        """)
    )
    r = run(ws, pytest_argv(), "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 1, r.text
    assert "1 failed, 1 passed" in r.text
    assert "Read-only file system" in r.text
    assert not target.exists()
    assert (ws / "inside.txt").read_text() == "ok"
    assert r.launch.info.mode == "workspace-write" and r.launch.info.enforced_by
    hint = denials.denial_hint(Failure(test="test_write_outside", message=r.text), r.launch.info)
    assert hint is not None and str(target) in hint and "--sandbox full-access" in hint

    r = run(ws, pytest_argv(), "full-access", logs=tmp_path / "logs")
    assert r.raw.exit_code == 0, r.text
    assert target.read_text() == "hello"
    assert r.launch.info.enforced_by is None


def test_private_tmp_hides_the_hosts_tmp(ws: Path, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"  # under /tmp on the host, outside the workspace
    secret.write_text("x")
    code = f"import os, sys; sys.exit(3 if os.path.exists({str(secret)!r}) else 0)"
    r = run(ws, [sys.executable, "-c", code], "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 0, r.text
    r = run(ws, [sys.executable, "-c", code], "full-access", logs=tmp_path / "logs")
    assert r.raw.exit_code == 3


def test_read_only_mode(ws: Path, tmp_path: Path) -> None:
    (ws / "test_ro.py").write_text(
        textwrap.dedent("""
            import pathlib

            def test_reads():
                assert "def test_reads" in pathlib.Path(__file__).read_text()

            def test_tmp_is_writable(tmp_path):
                (tmp_path / "x").write_text("ok")

            def test_writes_workspace():
                pathlib.Path("out.txt").write_text("nope")
        """)
    )
    report = ws / ".greenloop" / "runs" / "r1" / "junit.xml"
    r = run(
        ws,
        pytest_argv(f"--junitxml={report}"),
        "read-only",
        logs=tmp_path / "logs",
        report_file=str(report),
    )
    assert r.raw.exit_code == 1, r.text
    assert "1 failed, 2 passed" in r.text
    assert "Read-only file system" in r.text
    assert not (ws / "out.txt").exists()
    assert report.is_file()  # the run folder stays writable for the runner's report
    # pytest's cache went to the private /tmp, not to a warning about the read-only rootdir
    assert "PytestCacheWarning" not in r.text and not (ws / ".pytest_cache").exists()
    hint = denials.denial_hint(Failure(test="test_writes_workspace", message=r.text), r.launch.info)
    assert hint is not None and "--sandbox workspace-write" in hint


def test_network_outside_is_blocked_and_loopback_works(ws: Path, tmp_path: Path) -> None:
    (ws / "test_net.py").write_text(
        textwrap.dedent("""
            import errno, socket, threading

            def test_outside_address_is_unreachable():
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.settimeout(2)
                try:
                    assert s.connect_ex(("192.0.2.1", 80)) == errno.ENETUNREACH
                finally:
                    s.close()

            def test_loopback_server_and_client():
                srv = socket.socket()
                srv.bind(("127.0.0.1", 0))
                srv.listen(1)
                def serve():
                    conn, _ = srv.accept()
                    conn.sendall(conn.recv(5).upper())
                    conn.close()
                t = threading.Thread(target=serve)
                t.start()
                c = socket.create_connection(srv.getsockname(), timeout=5)
                c.sendall(b"hello")
                assert c.recv(5) == b"HELLO"
                c.close(); t.join(); srv.close()
        """)
    )
    r = run(ws, pytest_argv(), "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 0, r.text
    assert "2 passed" in r.text
    hint = denials.denial_hint(
        Failure(test="t", message="OSError: [Errno 101] Network is unreachable"), r.launch.info
    )
    assert hint is not None and "full-access" in hint


def _pids_with_marker(marker: str) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(entry.name))
        except OSError:
            continue
    return [p for p in found if p != os.getpid()]


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:300].decode(errors="replace")
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return "gone"
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return f"{cmd!r} state={fields.get('State', '').strip()} ppid={fields.get('PPid', '').strip()}"


def test_a_daemonizing_grandchild_dies_with_the_run(ws: Path, tmp_path: Path) -> None:
    marker = f"greenloop-daemon-{uuid.uuid4().hex}"
    # The daemon double-forks, starts a new session and execs with an empty environment, so
    # neither the process group nor greenloop's token sweep can find it: only the sandbox's
    # pid namespace ends it.
    daemon = textwrap.dedent(f"""
        import os, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                argv = [sys.executable, "-c", "import time; time.sleep(120)", {marker!r}]
                os.execve(sys.executable, argv, {{}})
            os._exit(0)
        time.sleep(0.3)
        print("parent done")
    """)
    plan = Plan(framework="pytest", argv=(sys.executable, "-c", daemon), cwd=str(ws), timeout_ms=30_000)
    launch = launcher.launch(plan, sandbox.resolve(ws, explicit="workspace-write"), base_env=dict(os.environ))
    child = proc.spawn(
        list(launch.argv),
        cwd=str(ws),
        env=launch.env_dict,
        stdout_path=str(tmp_path / "out"),
        stderr_path=str(tmp_path / "err"),
    )
    try:
        assert child.wait(30) == 0, _read(tmp_path / "err")
        # Checked before greenloop's own shutdown and sweep run: the sandbox alone did it.
        # No signal is sent here: the kernel is still finishing processes it already killed
        # when the pid namespace ended, so give it a moment under load.
        deadline = time.monotonic() + 5
        while _pids_with_marker(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = {p: _describe(p) for p in _pids_with_marker(marker)}
        assert left == {}
        assert "parent done" in _read(tmp_path / "out")
    finally:
        child.stop()
        for pid in _pids_with_marker(marker):  # only if the assertion above failed
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_timeout_inside_the_sandbox_stops_everything(ws: Path, tmp_path: Path) -> None:
    marker = f"greenloop-sleeper-{uuid.uuid4().hex}"
    code = textwrap.dedent(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", {marker!r}])
        time.sleep(120)
    """)
    r = run(ws, [sys.executable, "-c", code], "workspace-write", logs=tmp_path / "logs", timeout_s=1.5)
    try:
        assert r.raw.timed_out and r.raw.survivors == ()
        deadline = time.monotonic() + 5
        while _pids_with_marker(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _pids_with_marker(marker) == []
        assert enforcers.bwrap_denial(r.raw, r.err) is None  # a timeout is not a denial
    finally:
        for pid in _pids_with_marker(marker):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_missing_workspace_is_a_denial_not_a_failure(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    r = run(missing, pytest_argv(), "workspace-write", logs=tmp_path / "logs")
    reason = enforcers.bwrap_denial(r.raw, r.err)
    assert reason is not None and str(missing) in reason, r.text
    assert not missing.exists()  # nothing was created on its behalf
    # An ordinary red run is not mistaken for a denial.
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "test_red.py").write_text("def test_red():\n    assert 1 == 2\n")
    r = run(ws, pytest_argv(), "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 1 and enforcers.bwrap_denial(r.raw, r.err) is None


def test_a_bwrap_that_cannot_create_namespaces_is_refused_with_the_fix(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --version ]; then echo "bubblewrap 0.8.0"; exit 0; fi\n'
        'echo "bwrap: No permissions to create new namespace, likely because the kernel does not '
        'allow non-privileged user namespaces." >&2\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    status = enforcers.probe_bwrap({"PATH": os.environ["PATH"], enforcers.BWRAP_ENV_VAR: str(fake)})
    assert not status.available
    assert status.reason is not None and "user namespaces" in status.reason
    with pytest.raises(sandbox.SandboxUnavailable) as info:
        status.require("workspace-write")
    assert "full-access" in str(info.value) and "bubblewrap" in str(info.value)
    nowhere = str(tmp_path / "nope")
    missing = enforcers.probe_bwrap({"PATH": os.environ["PATH"], enforcers.BWRAP_ENV_VAR: nowhere})
    assert not missing.available and "does not exist" in (missing.reason or "")


def test_sandboxed_child_env_is_allow_listed(ws: Path, tmp_path: Path) -> None:
    base = {
        **os.environ,
        "GREENLOOP_TEST_SECRET_TOKEN": "s3cret",
        "AWS_SECRET_ACCESS_KEY": "k",
        "LC_ALL": "C",
    }
    code = "import json, os; print(json.dumps(dict(os.environ)))"
    r = run(ws, [sys.executable, "-c", code], "workspace-write", logs=tmp_path / "logs", base_env=base)
    assert r.raw.exit_code == 0, r.text
    env = json.loads(r.out)
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["LC_ALL"] == "C" and env["TMPDIR"] == "/tmp" and env["PATH"] == base["PATH"]
    assert env["npm_config_cache"].startswith(str(ws.resolve()))
    assert os.path.isdir(env["XDG_CACHE_HOME"])  # created before the run, inside the workspace


def test_interpreter_under_tmp_stays_visible(ws: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True
    )
    py = str(venv / "bin" / "python")
    code = "import sys, pytest; print(sys.prefix)"
    r = run(ws, [py, "-c", code], "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 0, r.text
    assert r.out.strip() == str(venv)
    # the probe itself, run by an interpreter under /tmp, still finds a working sandbox
    probe = (
        "from greenloop.system import enforcers; s = enforcers.probe_bwrap(); print(s.available, s.reason)"
    )
    # (that venv sees the base interpreter's packages, not this one's: point it at greenloop)
    env = {**os.environ, "PYTHONPATH": os.path.dirname(PACKAGE_DIR)}
    done = subprocess.run([py, "-c", probe], capture_output=True, text=True, check=True, env=env)
    assert done.stdout.strip() == "True None", done.stderr


def test_share_net_lets_integration_units_reach_host_loopback(tmp_path: Path) -> None:
    """Integration units share one network (loopback between units) with the filesystem confined."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = srv.accept()
                conn.sendall(b"pong")
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    unit = tmp_path / "unit"
    unit.mkdir()
    code = textwrap.dedent(f"""
        import socket, sys, pathlib
        try:
            pathlib.Path("/etc/greenloop-unit-probe").write_text("x")
            sys.exit(5)
        except OSError:
            pass
        s = socket.create_connection(("127.0.0.1", {port}), timeout=5)
        print(s.recv(4).decode())
    """)
    policy = sandbox.resolve(unit, explicit="workspace-write")
    status = enforcers.probe_bwrap()
    env = child_env(dict(os.environ), policy)
    try:
        for share_net, expect in ((True, 0), (False, 1)):
            argv = bwrap_command.wrap_argv(
                [sys.executable, "-c", code], policy, share_net=share_net, bwrap=status.path or "bwrap"
            )
            raw = proc.run_to_completion(
                argv,
                cwd=str(unit),
                env=env,
                timeout_s=30,
                stdout_path=str(tmp_path / f"o{share_net}"),
                stderr_path=str(tmp_path / f"e{share_net}"),
            )
            assert raw.exit_code == expect, _read(tmp_path / f"e{share_net}")
            if share_net:
                assert _read(tmp_path / "oTrue").strip() == "pong"
            else:
                assert "Connection refused" in _read(tmp_path / "eFalse")
    finally:
        srv.close()


def test_a_command_killed_inside_reads_as_killed_by_that_signal(ws: Path, tmp_path: Path) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    r = run(ws, [sys.executable, "-c", code], "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 128 + 9  # bwrap's way of saying it
    raw = enforcers.signal_exit(r.raw)
    assert (raw.exit_code, raw.signal) == (-9, 9)
    assert enforcers.bwrap_denial(raw, r.err) is None
    plain = run(ws, [sys.executable, "-c", code], "full-access", logs=tmp_path / "logs")
    assert (plain.raw.exit_code, plain.raw.signal) == (raw.exit_code, raw.signal)
    assert enforcers.signal_exit(plain.raw) == plain.raw
    exited = run(ws, [sys.executable, "-c", "raise SystemExit(3)"], "workspace-write", logs=tmp_path / "logs")
    assert enforcers.signal_exit(exited.raw) == exited.raw and exited.raw.exit_code == 3


def test_a_venv_linked_into_the_workspace_from_tmp_stays_visible(ws: Path, tmp_path: Path) -> None:
    """A workspace's .venv that is a link to a virtualenv elsewhere under /tmp (a shared CI venv)."""
    shared = tmp_path / "shared" / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(shared)], check=True
    )
    (ws / ".venv").symlink_to(shared)
    py = str(ws / ".venv" / "bin" / "python")
    code = "import sys, pytest; print(sys.prefix)"
    r = run(ws, [py, "-c", code], "workspace-write", logs=tmp_path / "logs")
    assert r.raw.exit_code == 0, r.text
    assert os.path.realpath(r.out.strip()) == str(shared)
    assert "--ro-bind" in r.launch.argv and str(shared) in r.launch.argv


def test_a_node_install_under_tmp_runs_a_node_test_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """node from an install outside /usr (under /tmp, as nvm/volta/fnm or a CI cache put it)."""
    from greenloop import api

    system_node = shutil.which("node")
    assert system_node, "node is needed for the JS runner tests"
    install = tmp_path / "opt" / "node-install" / "bin"
    install.mkdir(parents=True)
    node = install / "node"
    try:  # a hard link is a real file under /tmp (a symlink would resolve back to /usr)
        os.link(os.path.realpath(system_node), node)
    except OSError:
        shutil.copy2(os.path.realpath(system_node), node)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".git").mkdir()
    (ws / "package.json").write_text(json.dumps({"name": "n", "scripts": {"test": "node --test"}}))
    (ws / "where.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "test('runs the node under /tmp', () => {\n"
        f"  assert.strictEqual(process.execPath, {str(node)!r});\n}});\n"
    )
    monkeypatch.setenv("PATH", f"{install}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "cfg"))
    r = api.test_run(ws, sandbox="workspace-write", framework="node:test")
    assert r.outcome == "green", (r.crash_reason, r.output_tail, r.notes)
    assert (r.sandbox.enforced_by or "").startswith("bubblewrap") and r.summary.passed == 1
