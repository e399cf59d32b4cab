"""The hook server: a resident process with the hook's modules loaded, answering hook events.

A hook client (greenloop.hook_client) connects to this server's Unix socket and sends one
event: the harness, its arguments, stdin, and the client's environment, working folder and
umask. The server takes those on for the event (and `ptree.ACTING_FOR` = the client's pid,
so the session binds to the client's harness process), runs `hook_main` exactly as a fresh
hook process would, writes back stdout and stderr, and puts its own environment, folder and
umask back. Events are answered one at a time, in the order they come.

Why not a worker process per event: a fork of the loaded server costs ~5 ms here in
copy-on-write faults (Python's reference counts touch every page an event reads), more than
the event itself (~3.5 ms). The hook path keeps no state between events but what it keeps
on disk: `handle` gives each event a fresh config cache, and nothing on it caches by process.

- Started by the first client that finds no server (`start`), detached (its own session,
  stdio on /dev/null and a log), and alone: it holds an exclusive lock beside its socket.
- Stops when its source is stale (a greenloop module it loaded, or the interpreter, changed
  since: the event that notices gets no answer, so its client answers in process and starts
  a fresh server), when every harness it served has exited and EXIT_GRACE_S have passed, or
  after IDLE_S without an event (`GREENLOOP_HOOK_SERVER_IDLE` seconds, when set).
- Answers only its own user: the socket folder is the user's, mode 0700, checked; the
  socket is 0600, and every peer's uid is checked too (SO_PEERCRED).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import NoReturn

__all__ = ["EXIT_GRACE_S", "IDLE_S", "WARM", "answer", "main", "serve", "start"]

IDLE_S = 600.0
EXIT_GRACE_S = 3.0
# What a worker would import for an event: loaded once, before the socket is bound.
WARM = (
    "greenloop.hooks", "greenloop.hooks.base", "greenloop.hooks.claude_code", "greenloop.hooks.codex",
    "greenloop.hooks.gemini", "greenloop.hooks.cursor", "greenloop.hooks.qwen", "greenloop.hooks.opencode",
    "greenloop.hooks.copilot", "greenloop.closure.store", "greenloop.closure.gate",
    "greenloop.closure.session", "greenloop.closure.messages", "greenloop.closure.run_evidence",
    "greenloop.config", "greenloop.state.url", "greenloop.system.ptree", "greenloop.system.fingerprint",
    "greenloop.system.tree_digest", "greenloop.frameworks",
)  # fmt: skip
_HEADER_DIGITS = 10


def start(path: str) -> None:
    """Start a server for `path`, detached from this process (never raises: a hook that
    cannot start one has still answered). It is told this hook's harness process, so it
    stops after that harness even when no event ever reaches it."""
    try:
        from greenloop.system import ptree

        found = ptree.harness_of(ptree.ancestors())
        harness = [] if found is None else [f"{found.pid}:{found.start}"]
        folder = os.path.dirname(path)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        from greenloop.hook_client import ROOT

        code = f"import sys;sys.path.insert(0,{ROOT!r});from greenloop.hooks.server import main;main()"
        log = path[: -len(".sock")] + ".log" if path.endswith(".sock") else path + ".log"
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-I", "-S", "-c", code, path, *harness],
            dict(os.environ),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600),
            ],
            setsid=True,
        )
    except Exception as exc:
        sys.stderr.write(f"greenloop: could not start the hook server ({type(exc).__name__}: {exc})\n")


def main() -> NoReturn:
    """`python -I -S -c '…main()' SOCKET [PID:START]`: serve until stale, orphaned or idle
    (PID:START: the harness of the hook that started it); exit 0."""
    os.closerange(3, 4096)  # nothing of the hook that started it (its harness's pipes) stays open
    try:
        harnesses = {}
        for arg in sys.argv[2:3]:
            pid, _, start = arg.partition(":")
            harnesses[int(pid)] = int(start)
        serve(sys.argv[1], harnesses=harnesses)
    except Exception as exc:
        sys.stderr.write(f"greenloop hook server: {type(exc).__name__}: {exc}\n")
    sys.stderr.flush()
    os._exit(0)


def _sources() -> dict[str, int]:
    """The file of every greenloop module loaded, and the interpreter, with their mtimes."""
    found: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and (name == "greenloop" or name.startswith("greenloop.")):
            found[file] = _mtime(file)
    found[sys.executable] = _mtime(sys.executable)
    return found


def _mtime(file: str) -> int:
    try:
        return os.stat(file).st_mtime_ns
    except OSError:
        return -1


def _stale(sources: dict[str, int]) -> bool:
    return any(_mtime(file) != mtime for file, mtime in sources.items())


def serve(path: str, *, idle_s: float | None = None, harnesses: dict[int, int] | None = None) -> None:
    """Listen at `path` and answer events until stale, orphaned or idle (module docstring).
    `harnesses`: pid -> start ticks of harness processes to outlive by EXIT_GRACE_S at most,
    beside each one an event comes from."""
    import fcntl
    import gc
    import select
    import socket
    import time

    for name in WARM:
        __import__(name)
    from greenloop.hook_client import own_folder, short_address
    from greenloop.system import ptree

    if idle_s is None:
        try:
            idle_s = float(os.environ.get("GREENLOOP_HOOK_SERVER_IDLE") or IDLE_S)
        except ValueError:
            idle_s = IDLE_S
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if not own_folder(path):
        raise PermissionError(f"{folder} is not this user's own folder with mode 0700")
    lock = open(path + ".lock", "a")  # noqa: SIM115 (held for the server's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another server has it
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ours = -1
    try:
        fresh = f"{path}.{os.getpid()}"
        if os.path.lexists(fresh):
            os.unlink(fresh)
        address, fd = short_address(fresh)
        try:
            listener.bind(address)
        finally:
            if fd >= 0:
                os.close(fd)
        os.chmod(fresh, 0o600)
        listener.listen(128)
        os.replace(fresh, path)  # listening before its name exists (a dead server's is replaced)
        ours = os.stat(path).st_ino
        sources = _sources()
        os.chdir("/")
        umask = os.umask(0o022)
        os.umask(umask)
        gc.collect()
        gc.freeze()  # the loaded modules' objects: never scanned again by an event's collections
        harnesses = dict(harnesses or {})  # pid -> start ticks of each harness served
        sys.stderr.write(f"greenloop hook server {os.getpid()}: serving {path}\n")
        sys.stderr.flush()
        loaded = len(sys.modules)
        last = time.monotonic()
        while True:
            ready, _, _ = select.select([listener], [], [], 0.5)
            now = time.monotonic()
            if not ready:
                if now - last >= idle_s:
                    break
                if harnesses and now - last >= EXIT_GRACE_S and not any(
                    _alive(pid, start) for pid, start in harnesses.items()
                ):
                    break
                continue
            conn, _ = listener.accept()
            if _stale(sources):
                conn.close()  # its client answers in process and starts a fresh server
                break
            pid = _peer(conn)
            if pid is None:
                conn.close()
                continue
            found = ptree.harness_of(ptree.ancestors(pid))  # while the client waits: it is alive
            if found is not None and found.pid not in harnesses:
                harnesses[found.pid] = found.start
                sys.stderr.write(f"greenloop hook server: serving harness {found.pid} ({found.comm})\n")
                sys.stderr.flush()
            _serve_one(conn, pid, umask)
            last = time.monotonic()
            if len(sys.modules) != loaded:  # an event loaded more of greenloop: watch it too
                sources = {**_sources(), **sources}
                loaded = len(sys.modules)
    finally:
        listener.close()
        try:
            if os.stat(path).st_ino == ours:
                os.unlink(path)
        except OSError:
            pass
        lock.close()


def _serve_one(conn: socket.socket, pid: int, umask: int) -> None:
    """Answer one connection as the client `pid`, then put this process back as it was: its
    environment, folder (/), umask and `ptree.ACTING_FOR`. A failure costs that event its
    answer (its client then answers in process), never the server."""
    from greenloop.system import ptree

    saved = dict(os.environ)
    try:
        _work(conn, pid)
    except Exception as exc:
        sys.stderr.write(f"greenloop hook server: an event failed ({type(exc).__name__}: {exc})\n")
        sys.stderr.flush()
    finally:
        conn.close()
        os.environ.clear()
        os.environ.update(saved)
        os.umask(umask)
        os.chdir("/")
        ptree.ACTING_FOR = None


def _alive(pid: int, start: int) -> bool:
    from greenloop.system import procfs

    found = procfs.stat(pid)
    return found is not None and found.start == start


def _peer(conn: socket.socket) -> int | None:
    """The connecting process's pid, when it runs as this user."""
    import socket
    import struct

    raw = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid if uid == os.getuid() and pid > 0 else None


def _work(conn: socket.socket, pid: int) -> None:
    """Read one client's event, answer it as that client (`answer`), send the answer."""
    from greenloop.hook_client import TIMEOUT_S, read_all

    conn.settimeout(TIMEOUT_S)
    out, err = answer(read_all(conn), pid)
    conn.sendall(b"%d\n" % len(out) + out + err)
    conn.close()


def answer(request: bytes, pid: int) -> tuple[bytes, bytes]:
    """Answer one client's request (greenloop.hook_client.request_bytes) as that client: its
    environment, folder and umask are taken on (`_serve_one` puts them back). Returns
    (stdout, stderr)."""
    import io

    from greenloop.hook_client import PROTOCOL
    from greenloop.hooks import hook_main
    from greenloop.system import ptree

    size = int(request[:_HEADER_DIGITS])
    header, data = request[_HEADER_DIGITS : _HEADER_DIGITS + size], request[_HEADER_DIGITS + size :]
    fields = header.split(b"\0")
    if fields[0] != PROTOCOL:
        raise ValueError(f"unknown hook protocol {fields[0]!r}")
    harness, encoding, errors = (f.decode() for f in fields[1:4])
    cwd = os.fsdecode(fields[4])
    umask, count = int(fields[5]), int(fields[6])
    extra = [os.fsdecode(f) for f in fields[7 : 7 + count]]
    environ = {}
    for item in fields[7 + count :]:
        key, _, value = item.partition(b"=")
        environ[os.fsdecode(key)] = os.fsdecode(value)
    os.environ.clear()
    os.environ.update(environ)
    os.umask(umask)
    os.chdir(cwd)
    ptree.ACTING_FOR = pid
    stdout, stderr = io.StringIO(), io.StringIO()
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = stdout, stderr  # what the hook path prints itself goes to the client too
    try:
        hook_main(harness, stdin=io.StringIO(data.decode(encoding, errors)), stdout=stdout, stderr=stderr,
                  extra=extra)
    finally:
        sys.stdout, sys.stderr = streams
    return (stdout.getvalue().encode("utf-8", "surrogatepass"),
            stderr.getvalue().encode("utf-8", "surrogatepass"))
