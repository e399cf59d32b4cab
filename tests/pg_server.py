"""A throwaway PostgreSQL server for the tests: Debian's initdb + pg_ctl in a temporary folder.

The server listens on 127.0.0.1 only, on a free port, with trust authentication and no
durability (fsync off: the data dies with the test session anyway). initdb refuses to run
as root, so under root (as CI runs the suite) the cluster belongs to an unprivileged system
user: `postgres` when the machine has it, else `greenloop-pg`, created here. `stop` shuts
the server down and checks its postmaster is gone before removing the folder.

The binaries are found on PATH, else in /usr/lib/postgresql/<version>/bin (where Debian's
postgresql package puts initdb; scripts/system-packages installs it).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from typing import Any, NamedTuple

__all__ = ["PgServer", "find_bin_dir", "start"]

SUPERUSER = "greenloop"
DATABASE = "greenloop"
SYSTEM_USER = "greenloop-pg"
_TOOLS = ("initdb", "pg_ctl", "postgres")


def find_bin_dir() -> str | None:
    """The folder holding initdb, pg_ctl and postgres, or None when PostgreSQL is not installed."""
    on_path = shutil.which("initdb")
    candidates = [os.path.dirname(os.path.realpath(on_path))] if on_path else []

    def version(folder: str) -> float:
        with contextlib.suppress(ValueError):
            return float(folder.split("/")[-2])
        return 0.0

    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    for folder in candidates:
        if all(os.access(os.path.join(folder, t), os.X_OK) for t in _TOOLS):
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _owner() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: None when not root, else an unprivileged system user."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", SYSTEM_USER):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return entry.pw_uid, entry.pw_gid
    subprocess.run(
        [
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            SYSTEM_USER,
        ],
        check=True,
        capture_output=True,
    )
    entry = pwd.getpwnam(SYSTEM_USER)
    return entry.pw_uid, entry.pw_gid


class PgServer(NamedTuple):
    bin_dir: str
    folder: str
    port: int
    owner: tuple[int, int] | None

    @property
    def data(self) -> str:
        return os.path.join(self.folder, "data")

    def url(self, database: str = DATABASE, schema: str | None = None) -> str:
        url = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"
        return url + (f"?options=-csearch_path%3D{schema}" if schema else "")

    def fresh_schema(self) -> str:
        """A state URL whose tables land in a new, empty schema (one per test: cheap isolation)."""
        import psycopg

        schema = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}".encode())
        return self.url(schema=schema)

    def run(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        extra: dict[str, Any] = {}
        if self.owner is not None:
            extra = {"user": self.owner[0], "group": self.owner[1], "extra_groups": []}
        return subprocess.run(
            [os.path.join(self.bin_dir, args[0]), *args[1:]],
            capture_output=True,
            text=True,
            cwd=self.folder,
            env={**os.environ, "LC_ALL": "C"},
            **extra,
            **kwargs,
        )

    def postmaster_pid(self) -> int | None:
        try:
            with open(os.path.join(self.data, "postmaster.pid"), encoding="utf-8") as fh:
                return int(fh.readline().strip())
        except (OSError, ValueError):
            return None

    def stop(self) -> None:
        """Stop the server, make sure its postmaster is gone, and remove the folder."""
        pid = self.postmaster_pid()
        self.run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "-t", "30", "stop")
        if pid is not None:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            if _alive(pid):  # the postmaster ignored pg_ctl: end it, and its backends follow
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start() -> PgServer:
    """initdb and start a server (module docstring); RuntimeError with its log when it fails."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql)")
    owner = _owner()
    folder = tempfile.mkdtemp(prefix="greenloop-pg-", dir="/tmp" if owner else None)
    if owner is not None:
        os.chown(folder, *owner)
    server = PgServer(bin_dir, folder, _free_port(), owner)
    init = server.run(
        "initdb", "-D", server.data, "-U", SUPERUSER, "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"
    )
    if init.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise RuntimeError(f"initdb failed:\n{init.stdout}\n{init.stderr}")
    settings = (
        f"-c listen_addresses=127.0.0.1 -p {server.port} -k {folder} -c fsync=off "
        "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    log = os.path.join(folder, "server.log")
    started = server.run("pg_ctl", "-D", server.data, "-l", log, "-o", settings, "-w", "-t", "60", "start")
    if started.returncode != 0:
        server_log = ""
        with contextlib.suppress(OSError), open(log, encoding="utf-8") as fh:
            server_log = fh.read()
        server.stop()
        raise RuntimeError(f"pg_ctl start failed:\n{started.stdout}\n{started.stderr}\n{server_log}")
    try:
        import psycopg

        with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}".encode())
    except BaseException:
        server.stop()
        raise
    return server
