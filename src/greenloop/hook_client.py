"""The hook command's client: hand the event to a warm hook server, or answer it here.

`greenloop init` writes every hook as `python -I -S -c '…hook_client.main()' hook HARNESS`.
A hook runs on every agent turn and every tool call, and a fresh greenloop process spends most
of its time importing (the store, the gate, the config, sqlite). So this module imports only
what the interpreter has built in (`sys`, `posix`, `_socket`), sends the event to the hook
server (greenloop.hooks.server: one resident process per user, greenloop install and set of
namespaces, with those modules loaded) over a Unix socket, and prints its answer. The server
forks a worker per event that takes on this process's environment, working folder, umask and
place in the process tree, then runs the same `hook_main` a fresh process would.

When there is no server (the first hook, or after it stopped), or it does not answer in full,
the event is answered here, in process, exactly as before, and a server is started for the
next hook. `GREENLOOP_HOOK_SERVER=0` turns the server off (every hook answers in process);
`GREENLOOP_HOOK_SERVER_DIR` moves its socket folder (default `$XDG_RUNTIME_DIR`, else /tmp,
then `greenloop-UID`). docs/architecture.md, "The hook server", has the whole design.
"""

from __future__ import annotations

import _socket
import posix
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = [
    "PROTOCOL", "ROOT", "TIMEOUT_S", "main", "own_folder", "read_all", "request_bytes", "short_address",
    "socket_path",
]  # fmt: skip

PROTOCOL = b"GLH1"
# A worker that has not answered by then is given up on and the event answered here (the
# harnesses' own hook timeouts are 30 s or more).
TIMEOUT_S = 20.0
_OFF = (b"0", b"off", b"false", b"no")
ROOT = __file__.rpartition("/")[0].rpartition("/")[0]  # the folder greenloop is imported from


def _fnv(data: bytes) -> str:
    """FNV-1a, 64 bits (hashlib and zlib are not built in everywhere)."""
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def socket_path(environ: dict[bytes, bytes] | None = None) -> str:
    """The socket of the server for this user, this interpreter and greenloop install, and this
    process's namespaces (network, mount, user, pid): a server answers only for processes that
    see the same files, network and processes it does."""
    env = posix.environ if environ is None else environ
    base = env.get(b"GREENLOOP_HOOK_SERVER_DIR") or b""
    if not base:
        base = (env.get(b"XDG_RUNTIME_DIR") or b"/tmp") + b"/greenloop-%d" % posix.getuid()
    key = [sys.executable, ROOT]
    for ns in ("net", "mnt", "user", "pid"):
        try:
            key.append(posix.readlink("/proc/self/ns/" + ns))
        except OSError:
            key.append("")
    return base.decode("utf-8", "surrogateescape") + "/hook-" + _fnv("\0".join(key).encode()) + ".sock"


def request_bytes(harness: str, extra: list[str], data: bytes, cwd: str, umask: int,
                  environ: dict[bytes, bytes], encoding: str, errors: str) -> bytes:
    """One event for the server: a 10-digit header length, the NUL-separated header (protocol,
    harness, stdin's encoding and error handler, cwd, umask, the extra arguments, the
    environment), then stdin's bytes as read."""
    fields = [PROTOCOL, harness.encode(), encoding.encode(), errors.encode(),
              cwd.encode("utf-8", "surrogateescape"), b"%d" % umask, b"%d" % len(extra)]
    fields += [arg.encode("utf-8", "surrogateescape") for arg in extra]
    fields += [k + b"=" + v for k, v in environ.items()]
    header = b"\0".join(fields)
    return b"%010d" % len(header) + header + data


def short_address(path: str) -> tuple[str, int]:
    """An address for the socket at `path` that fits a Unix socket's 107 bytes: `path` itself,
    or, when it is longer, `/proc/self/fd/N/NAME` through its folder opened as N (the fd to
    close afterwards; -1 when none was opened)."""
    if len(path.encode("utf-8", "surrogateescape")) <= 100:
        return path, -1
    folder, _, name = path.rpartition("/")
    fd = posix.open(folder, posix.O_RDONLY | posix.O_DIRECTORY | posix.O_CLOEXEC)
    return f"/proc/self/fd/{fd}/{name}", fd


def read_all(sock: _socket.socket) -> bytes:
    """Everything the peer sends until it shuts its side (the protocol's one message each way)."""
    chunks: list[bytes] = []
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def own_folder(path: str) -> bool:
    """Whether the socket's folder is this user's alone (a folder, not a link, owned, mode 0700
    or stricter): the event carries the whole environment, so it goes to no socket another
    user could have put there. A folder not made yet is the server's to make (and check, with
    this same function) when it starts."""
    try:
        st = posix.lstat(path.rpartition("/")[0])
    except OSError:
        return True
    is_folder = st.st_mode & 0o170000 == 0o040000  # stat.S_ISDIR (stat is not built in)
    return is_folder and st.st_uid == posix.getuid() and not st.st_mode & 0o077


def _ask(path: str, request: bytes) -> tuple[bytes, bytes] | None:
    """The server's (stdout, stderr) for `request`, or None when there is no server or its
    answer is not whole."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    fd = -1
    try:
        sock.settimeout(TIMEOUT_S)
        address, fd = short_address(path)
        sock.connect(address)
        sock.sendall(request)
        sock.shutdown(_socket.SHUT_WR)
        answer = read_all(sock)
    except OSError:  # no socket, refused, reset, timed out: answer here
        return None
    finally:
        sock.close()
        if fd >= 0:
            posix.close(fd)
    head, newline, rest = answer.partition(b"\n")
    if not newline or not head.isdigit() or int(head) > len(rest):
        return None
    size = int(head)
    return rest[:size], rest[size:]


def main() -> NoReturn:
    """`python -I -S -c '…main()' hook HARNESS [ARGS…]`: answer one hook event; exit 0."""
    args = sys.argv[1:]
    if args[:1] != ["hook"] or len(args) < 2 or {"-h", "--help"} & set(args):
        from greenloop.cli import entry  # anything else is the CLI's to answer

        entry()
    harness, extra = args[1], args[2:]
    stdin = sys.stdin
    try:
        data = stdin.buffer.read()
    except (OSError, ValueError, AttributeError):
        data = b""
    encoding = getattr(stdin, "encoding", None) or "utf-8"
    errors = getattr(stdin, "errors", None) or "strict"
    environ = posix.environ
    path = ""
    try:
        cwd = posix.getcwd()
    except OSError:  # a deleted folder: the in-process answer says what is wrong
        cwd = ""
    # Linux only: the server names its clients by SO_PEERCRED and their namespaces by /proc.
    if sys.platform == "linux" and cwd and environ.get(b"GREENLOOP_HOOK_SERVER", b"").lower() not in _OFF:
        path = socket_path(environ)
        if not own_folder(path):  # not ours alone: answer here and start no server there
            _in_process(harness, extra, data.decode(encoding, errors), "")
        umask = posix.umask(0o022)
        posix.umask(umask)
        request = request_bytes(harness, extra, data, cwd, umask, environ, encoding, errors)
        answer = _ask(path, request)
        if answer is not None:
            out, err = answer
            if out:
                sys.stdout.write(out.decode("utf-8", "surrogatepass"))
            if err:
                sys.stderr.write(err.decode("utf-8", "surrogatepass"))
            _exit()
    _in_process(harness, extra, data.decode(encoding, errors), path)


def _in_process(harness: str, extra: list[str], text: str, path: str) -> NoReturn:
    """Answer the event in this process (`hook_main`), then start a server at `path` for the
    next hook (none when `path` is empty: the server is off)."""
    import gc
    import io

    gc.disable()  # milliseconds of life, nearly all imports (as `greenloop.cli.entry` does)
    from greenloop.hooks import hook_main

    hook_main(harness, stdin=io.StringIO(text), extra=extra)
    if path:
        try:  # noqa: SIM105 (no contextlib on the hook path)
            sys.stdout.flush()  # the answer is out before the server's start costs anything
        except (OSError, ValueError):
            pass
        from greenloop.hooks.server import start

        start(path)
    _exit()


def _exit() -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 (no contextlib on the hook path)
            stream.flush()
        except (OSError, ValueError):
            pass
    posix._exit(0)
