"""The hook server and its client, as `greenloop init` writes the hook: real processes, a real
Unix socket, a real state database.

Each test has its own socket folder (GREENLOOP_HOOK_SERVER_DIR), so its server is its own. The
first hook finds no server, answers in process and starts one; later hooks are answered by
it (shown by the client's own imports: no gate, no store, no sqlite in the client process).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.hooks.config_merge import hook_command
from greenloop.system import procfs, ptree

SRC = Path(__file__).resolve().parent.parent / "src"


def _red(ws: Path) -> None:
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "greenloop.toml").write_text("max_intercept_rounds = 1000\n")
    with Store(ws) as store:
        store.record_run(
            RunRecord("run-red", ok=False, at=time.time(), outcome="red", session_id="s1",
                      summary=Counts(3, 1, 2, 0), failing=("tests/test_a.py::test_one",))
        )


def _event(ws: Path, session: str = "s1") -> str:
    return json.dumps({"session_id": session, "transcript_path": str(ws / "t.jsonl"), "cwd": str(ws),
                       "hook_event_name": "Stop", "permission_mode": "default", "stop_hook_active": False})


class Hooks:
    """The hook command as init writes it, with this test's socket folder."""

    def __init__(self, tmp: Path, root: Path | None = None) -> None:
        self.folder = tmp / "sock"
        self.argv = shlex.split(hook_command("claude-code"))
        if root is not None:  # a copy of greenloop's source: its own server, its own files
            code = self.argv.index("-c") + 1
            self.argv[code] = self.argv[code].replace(json.dumps(str(SRC)), json.dumps(str(root)))
        drop = ("CLAUDE_PROJECT_DIR", "GREENLOOP_HOOK_SERVER")
        self.env = {k: v for k, v in os.environ.items() if k not in drop}
        self.env.update(GREENLOOP_HOOK_SERVER_DIR=str(self.folder),
                        GREENLOOP_CONFIG_HOME=str(tmp / "no-user"), XDG_CACHE_HOME=str(tmp / "cache"))

    def run(self, ws: Path, *, env: dict[str, str] | None = None, importtime: bool = False,
            event: str | None = None) -> tuple[str, str, set[str]]:
        argv = [self.argv[0], "-X", "importtime", *self.argv[1:]] if importtime else self.argv
        proc = subprocess.run(argv, input=event or _event(ws), capture_output=True, text=True, cwd=ws,
                              env={**self.env, **(env or {})}, timeout=60, check=True)
        modules = {line.split("|")[2].strip() for line in proc.stderr.splitlines()
                   if line.startswith("import time:") and line.count("|") == 2 and "cumulative" not in line}
        stderr = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("import time:"))
        return proc.stdout, stderr, modules

    def servers(self) -> list[int]:
        return [pid for pid in procfs.pids()
                if str(self.folder) in procfs.cmdline(pid) and procfs.alive(pid) and pid != os.getpid()]

    def warm(self, ws: Path) -> int:
        """Run one hook so a server starts, and wait for it to listen; its pid."""
        self.run(ws)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if list(self.folder.glob("*.sock")) and self.servers():
                return self.servers()[0]
            time.sleep(0.05)
        raise AssertionError(f"no hook server started: {list(self.folder.glob('*'))}, {self.log()}")

    def log(self) -> str:
        return "".join(p.read_text() for p in self.folder.glob("*.log"))


@pytest.fixture
def hooks(tmp_path: Path) -> Iterator[Hooks]:
    h = Hooks(tmp_path)
    yield h
    for pid in h.servers():
        os.kill(pid, 9)


def _answered_by_server(modules: set[str]) -> bool:
    ours = {m for m in modules if m == "greenloop" or m.startswith("greenloop.")}
    return ours == {"greenloop", "greenloop.hook_client"} and "_sqlite3" not in modules


def test_the_first_hook_answers_in_process_and_the_next_is_the_servers_with_the_same_answer(
    hooks: Hooks, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    _red(ws)
    cold, _, cold_modules = hooks.run(ws, importtime=True)
    assert "greenloop.closure.gate" in cold_modules  # no server yet: the gate ran in the client
    assert '"decision": "block"' in cold and "tests/test_a.py::test_one" in cold
    hooks.warm(ws)
    out, _, modules = hooks.run(ws, importtime=True)
    assert _answered_by_server(modules), sorted(modules)
    assert json.loads(out)["decision"] == "block"
    assert json.loads(out)["reason"].replace("Intercept 3", "Intercept 1") == json.loads(cold)["reason"]
    off, _, off_modules = hooks.run(ws, env={"GREENLOOP_HOOK_SERVER": "0"}, importtime=True)
    assert "greenloop.closure.gate" in off_modules and json.loads(off)["reason"].startswith("greenloop:")
    with Store(ws) as store:  # every answer was recorded, the server's as the client's
        assert len(store.interceptions("s1")) == 4


def test_each_event_is_answered_with_its_clients_environment_and_folder(hooks: Hooks, tmp_path: Path) -> None:
    red, green = tmp_path / "red", tmp_path / "green"
    _red(red)
    green.mkdir()
    (green / "greenloop.toml").write_text("max_intercept_rounds = 1000\n")
    hooks.warm(green)
    patch = tmp_path / "patch.toml"
    patch.write_text("disabled = true\n")
    out, _, modules = hooks.run(red, env={"GREENLOOP_CONFIG_PATCH": str(patch)}, importtime=True)
    assert _answered_by_server(modules) and out == ""  # disabled by this event's own environment
    out, _, modules = hooks.run(red, importtime=True)
    assert _answered_by_server(modules) and json.loads(out)["decision"] == "block"  # not by the last one's
    out, _, _ = hooks.run(green)
    assert out == ""  # another workspace, no run owed there
    assert json.loads(hooks.run(red)[0])["decision"] == "block"


def test_the_session_binds_to_the_clients_harness_not_the_servers(hooks: Hooks, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _red(ws)
    hooks.warm(ws)
    harness = subprocess.run(  # a harness process that runs the hook as its child, as harnesses do
        [sys.executable, "-c", "import subprocess, sys, os; print(os.getpid(), flush=True); "
         "subprocess.run(sys.argv[1:], check=True)", *hooks.argv],
        input=_event(ws), capture_output=True, text=True, cwd=ws, env=hooks.env, timeout=60, check=True,
    )
    pid = int(harness.stdout.split()[0])
    assert json.loads(harness.stdout.split("\n", 1)[1])["decision"] == "block"
    with Store(ws) as store:
        rows = store.conn.execute("SELECT harness_proc, session_id FROM bindings").fetchall()
    keys = {row[0].split(":")[1]: row[1] for row in rows}
    assert keys.get(str(pid)) == "s1", rows
    assert not [k for k in keys if int(k) in hooks.servers()]


def test_a_server_whose_source_changed_stops_and_the_event_is_answered_in_process(tmp_path: Path) -> None:
    root = tmp_path / "src"
    shutil.copytree(SRC / "greenloop", root / "greenloop", ignore=shutil.ignore_patterns("__pycache__"))
    hooks = Hooks(tmp_path, root=root)
    ws = tmp_path / "ws"
    _red(ws)
    try:
        first = hooks.warm(ws)
        assert _answered_by_server(hooks.run(ws, importtime=True)[2])
        base = root / "greenloop" / "hooks" / "base.py"
        os.utime(base, ns=(base.stat().st_atime_ns, base.stat().st_mtime_ns + 10**9))  # a new version
        out, _, modules = hooks.run(ws, importtime=True)
        assert "greenloop.closure.gate" in modules and json.loads(out)["decision"] == "block"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (
            first in hooks.servers() or not hooks.servers() or not list(hooks.folder.glob("*.sock"))
        ):
            time.sleep(0.05)
        assert first not in hooks.servers() and hooks.servers(), hooks.log()  # a fresh one serves
        assert _answered_by_server(hooks.run(ws, importtime=True)[2])
    finally:
        for pid in hooks.servers():
            os.kill(pid, 9)


def test_the_server_stops_soon_after_the_harnesses_it_served_are_gone(hooks: Hooks, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _red(ws)
    script = (
        "import subprocess, sys, time\n"
        "for _ in range(2):\n"
        "    subprocess.run(sys.argv[2:], input=sys.argv[1], text=True, capture_output=True)\n"
        "    time.sleep(0.3)\n"
    )
    harness = subprocess.Popen([sys.executable, "-c", script, _event(ws), *hooks.argv], env=hooks.env, cwd=ws)
    assert harness.wait(60) == 0
    deadline = time.monotonic() + 20
    while not hooks.servers() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    while hooks.servers() and time.monotonic() - started < 20:
        time.sleep(0.1)
    assert not hooks.servers(), hooks.log()
    assert not list(hooks.folder.glob("*.sock"))  # it took its socket with it


def test_many_events_at_once_each_get_their_own_answer(hooks: Hooks, tmp_path: Path) -> None:
    workspaces = []
    for n in range(6):
        ws = tmp_path / f"ws{n}"
        if n % 2:
            _red(ws)
        else:
            ws.mkdir()
        workspaces.append(ws)
    hooks.warm(workspaces[0])
    procs = [subprocess.Popen(hooks.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ws,
                              env=hooks.env) for ws in workspaces]
    for proc, ws in zip(procs, workspaces, strict=True):
        proc.stdin.write(_event(ws))  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
    for n, proc in enumerate(procs):
        out = proc.stdout.read()  # type: ignore[union-attr]
        assert proc.wait(60) == 0
        assert ('"decision": "block"' in out) == bool(n % 2), (n, out)


def test_a_socket_folder_open_to_others_is_refused_and_every_hook_still_answers(
    hooks: Hooks, tmp_path: Path
) -> None:
    hooks.folder.mkdir(mode=0o700)
    hooks.folder.chmod(0o777)
    ws = tmp_path / "ws"
    _red(ws)
    for _ in range(3):
        out, _, modules = hooks.run(ws, importtime=True)
        assert json.loads(out)["decision"] == "block" and "greenloop.closure.gate" in modules
        time.sleep(0.3)
    # the client sends its environment to no socket in a folder others could write to, and
    # starts no server there
    assert list(hooks.folder.iterdir()) == [] and not hooks.servers()


def test_a_server_refuses_a_folder_open_to_others(tmp_path: Path) -> None:
    """The server's own check, for a folder that became open to others after a client looked."""
    from greenloop.hooks.server import serve

    folder = tmp_path / "sock"
    folder.mkdir(mode=0o700)
    folder.chmod(0o770)
    with pytest.raises(PermissionError, match="not this user's own folder"):
        serve(str(folder / "hook-x.sock"), idle_s=1)


def test_bad_requests_cost_the_server_nothing(hooks: Hooks, tmp_path: Path) -> None:
    import socket

    ws = tmp_path / "ws"
    _red(ws)
    hooks.warm(ws)
    path = str(next(hooks.folder.glob("*.sock")))
    for junk in (b"", b"0000000004XXXX", b"garbage that is not a header", b"0000000099GLH1\0claude-code"):
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)
            sock.sendall(junk)
            sock.shutdown(socket.SHUT_WR)
            assert sock.recv(100) == b""  # no answer: a real client would answer in process
    out, _, modules = hooks.run(ws, importtime=True)
    assert _answered_by_server(modules) and json.loads(out)["decision"] == "block"
    assert ptree.ACTING_FOR is None  # (this process never acts for another)
