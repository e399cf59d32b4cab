"""The one module that starts processes.

Every child gets its own session (so its whole group can be signalled), stdin closed, and
its output written straight to files on disk as it arrives (no pipe a grandchild could hold
open). Every child also carries a unique marker variable, GREENLOOP_PROC_TOKEN, so that a
sweep can find descendants that escaped the group (double forks, new sessions) by reading
/proc/<pid>/environ. Shutdown escalates with named timeouts: SIGTERM to the group, a grace
period, SIGKILL to the group, then a sweep by token.

A caller may hand a `before_exec` step that the child runs between fork and exec (the sandbox's
Landlock confinement: two system calls through pre-resolved ctypes functions, nothing that
imports or takes a lock). If it fails the child never execs, and the start fails with
BEFORE_EXEC_FAILED in its spawn error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from greenloop.model import RawRun
from greenloop.system import procfs

__all__ = [
    "BEFORE_EXEC_FAILED",
    "GRACE_S",
    "REAP_WAIT_S",
    "SWEEP_WAIT_S",
    "TOKEN_VAR",
    "Child",
    "alive",
    "carries_token",
    "find_by_token",
    "kill_token",
    "reap_ended",
    "run_to_completion",
    "spawn",
    "started_by_token",
]

TOKEN_VAR = "GREENLOOP_PROC_TOKEN"
BEFORE_EXEC_FAILED = "the confinement step before exec failed"
GRACE_S = 2.0  # between SIGTERM and SIGKILL of the group
SWEEP_WAIT_S = 0.5  # how long a SIGKILLed sweep waits for escaped processes to vanish
REAP_WAIT_S = 5.0  # how long a stop waits for its SIGKILLed child's exit status, before a thread does
POLL_S = 0.05


alive = procfs.alive


def carries_token(pid: int, token: str) -> bool | None:
    """Whether the initial environment of `pid` carries `token`; None when it cannot be read."""
    env = procfs.environ(pid)
    return None if env is None else f"{TOKEN_VAR}={token}".encode() in env


def find_by_token(token: str) -> list[int]:
    """Pids of live processes whose initial environment carries this token."""
    me = os.getpid()
    found: list[int] = []
    for pid in procfs.pids():
        if pid != me and carries_token(pid, token) and alive(pid):
            found.append(pid)
    return found


def kill_token(token: str, wait_s: float = SWEEP_WAIT_S, *, own: Collection[int] = ()) -> tuple[int, ...]:
    """SIGKILL every live process carrying the token; return those still alive after `wait_s`.

    Whatever of them is, or becomes, a zombie child of this process is reaped here: a process
    whose parent died is re-parented to the nearest child subreaper, which can be this very
    process (an integration run makes greenloop one; Chromium's crash handler double-forks into
    it at launch), and a long-lived greenloop (the MCP server, the dashboard) would otherwise
    keep it <defunct>. `own` names the caller's subprocess.Popen children, whose exit status
    their Popen collects."""
    me = os.getpid()
    pids = find_by_token(token)
    killed: dict[int, int] = {}  # pid -> start time, of the killed processes to reap
    for pid in pids:
        st = procfs.stat(pid)
        if st is not None and pid not in own:
            killed[pid] = st.start
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + wait_s
    remaining = [p for p in pids if alive(p)]
    while True:
        _reap_killed(killed, me, pids)
        if not (remaining or killed) or time.monotonic() >= deadline:
            break
        time.sleep(POLL_S)
        remaining = [p for p in remaining if alive(p)]
    return tuple(remaining)


def started_by_token(token: str) -> dict[int, int]:
    """pid -> start time of each live process carrying the token and of their descendants (for
    `reap_ended` later): a process can hide its token (Chromium's zygotes write their title over
    their environment), not its parent."""
    holders = set(find_by_token(token))
    stats = [st for st in map(procfs.stat, procfs.pids()) if st is not None and not st.gone]
    children: dict[int, list[procfs.Stat]] = {}
    for st in stats:
        children.setdefault(st.ppid, []).append(st)
    found = {st.pid: st.start for st in stats if st.pid in holders}
    todo = list(found)
    while todo:
        for st in children.get(todo.pop(), ()):
            if st.pid not in found:
                found[st.pid] = st.start
                todo.append(st.pid)
    return found


def reap_ended(tracked: Mapping[int, int], wait_s: float = SWEEP_WAIT_S) -> None:
    """Reap those of `tracked` (as `started_by_token` gives them, none a Popen child of ours)
    that ended as zombie children of this process, waiting up to `wait_s` for the ones still
    alive: processes that exited on their own after being re-parented to us (the subreaper)
    are reaped by no one else."""
    me = os.getpid()
    left = dict(tracked)
    deadline = time.monotonic() + wait_s
    while True:
        _reap_killed(left, me, tracked)
        if not any(alive(p) for p in left) or time.monotonic() >= deadline:
            return
        time.sleep(POLL_S)


def _reap_killed(killed: dict[int, int], me: int, pids: Collection[int]) -> None:
    """Reap each of `killed` that is now a zombie child of ours, and forget those that are gone.
    A zombie whose parent was killed too stays listed (that parent's exit hands it on, maybe to
    us); one of any other parent is its parent's to reap (an init that never reaps must not make
    every sweep wait its whole `wait_s`)."""
    for pid, started in list(killed.items()):
        st = procfs.stat(pid)
        if st is None or st.start != started:
            del killed[pid]
        elif st.state == "Z" and st.ppid == me:
            try:
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue  # shown re-parented a moment before it can be waited for
            except ChildProcessError:
                pass
            del killed[pid]
        elif st.state == "Z" and st.ppid not in pids:
            del killed[pid]


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


class Child(NamedTuple):
    """A started process: its own session and group, output in files, a token for sweeps."""

    popen: subprocess.Popen[bytes]
    token: str

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.popen.pid

    def poll(self) -> int | None:
        """The exit code once the child has ended, else None."""
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, or None when `timeout` passed first. Wakes the moment the child exits
        (a pidfd where there is one; Popen.wait(timeout) polls with growing sleeps)."""
        if timeout is not None and self.popen.poll() is None:
            fd = _pidfd(self.popen.pid)
            if fd is not None:
                try:
                    select.select([fd], [], [], max(0.0, timeout))
                finally:
                    os.close(fd)
                return self.popen.poll()
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = GRACE_S, sweep_wait_s: float = SWEEP_WAIT_S) -> tuple[int, ...]:
        """Escalating shutdown of the whole tree; returns pids that survived (should be none).

        After a normal exit with nothing left carrying the token this is one scan of /proc:
        no process can gain the token once none has it."""
        pgid = self.popen.pid  # start_new_session makes the child its group leader
        if self.popen.poll() is not None and not find_by_token(self.token):
            return ()
        _signal_group(pgid, signal.SIGTERM)
        for pid in find_by_token(self.token):  # escaped ones get the same polite first word
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if self.popen.poll() is not None and not find_by_token(self.token):
                break
            time.sleep(POLL_S)
        _signal_group(pgid, signal.SIGKILL)
        survivors = kill_token(self.token, sweep_wait_s, own=(self.pid,))
        self.reap()
        return survivors

    def reap(self, wait_s: float = REAP_WAIT_S) -> None:
        """Collect the child's exit status once it is killed: wait up to `wait_s` (a SIGKILLed
        process on a busy machine can take a moment to be scheduled and die), then leave the
        waiting to a daemon thread, so that the child is never left <defunct> in a long-lived
        process."""
        if self.wait(wait_s) is None:
            threading.Thread(target=self.popen.wait, name="greenloop-reap", daemon=True).start()


def spawn(
    argv: Iterable[str] | str,
    *,
    cwd: str,
    env: Mapping[str, str],
    stdout_path: str,
    stderr_path: str | None = None,
    shell: bool = False,
    token: str | None = None,
    before_exec: Callable[[], None] | None = None,
) -> Child:
    """Start a child in its own session with stdin closed and output going to files.

    `shell=True` is only for a user's verbatim command, passed as one string. With
    `stderr_path` None, stderr goes to the stdout file. `before_exec` runs in the child between
    fork and exec (module docstring). Raises OSError when it cannot start.
    """
    token = token or os.urandom(16).hex()  # (not uuid: it imports platform at every start)
    child_env = dict(env)
    child_env[TOKEN_VAR] = token
    Path(stdout_path).parent.mkdir(parents=True, exist_ok=True)
    out = open(stdout_path, "ab")  # noqa: SIM115 - handed to the child, closed below
    err = open(stderr_path, "ab") if stderr_path else None  # noqa: SIM115
    try:
        args: str | list[str] = argv if isinstance(argv, str) else list(argv)
        popen = subprocess.Popen(
            args,
            cwd=cwd,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err if err is not None else subprocess.STDOUT,
            start_new_session=True,
            shell=shell,
            close_fds=True,
            preexec_fn=before_exec,
        )
    except subprocess.SubprocessError as exc:  # the child's before_exec step raised
        raise OSError(errno.EPERM, f"{BEFORE_EXEC_FAILED} ({exc})") from None
    finally:
        out.close()
        if err is not None:
            err.close()
    return Child(popen, token)


class _Tail(threading.Thread):
    """Follows files as they grow and hands each file's callback whole lines (live progress),
    buffered per file so that stdout and stderr never splice into one line. Reads at most
    CHUNK bytes at a time. After a pass over the files that delivered lines, `on_read` is
    called once: consumers report once per pass (at most every POLL_S), not once per line.
    """

    CHUNK = 1 << 20
    POLL_S = 0.1

    def __init__(
        self, follow: Mapping[str, Callable[[str], None]], on_read: Callable[[], None] | None = None
    ) -> None:
        super().__init__(daemon=True)
        self.follow = dict(follow)
        self.paths = list(self.follow)
        self.on_read = on_read
        self.done = threading.Event()

    def _emit(self, path: str, data: bytes, partial: bytes) -> bytes:
        buf = partial + data
        *lines, rest = buf.split(b"\n")
        on_line = self.follow[path]
        for line in lines:
            with contextlib.suppress(Exception):  # a renderer bug must not stop a run
                on_line(line.decode("utf-8", "replace"))
        return rest[-self.CHUNK :]

    def run(self) -> None:
        offsets = dict.fromkeys(self.paths, 0)
        partial = dict.fromkeys(self.paths, b"")
        while True:
            finished = self.done.is_set()
            read = False
            for path in self.paths:
                try:
                    with open(path, "rb") as fh:
                        fh.seek(offsets[path])
                        while True:
                            data = fh.read(self.CHUNK)
                            if not data:
                                break
                            read = True
                            offsets[path] += len(data)
                            partial[path] = self._emit(path, data, partial[path])
                except OSError:
                    continue
            if finished:
                for path in self.paths:
                    if partial[path]:
                        read = True
                        with contextlib.suppress(Exception):
                            self.follow[path](partial[path].decode("utf-8", "replace"))
            if read and self.on_read is not None:
                with contextlib.suppress(Exception):
                    self.on_read()
            if finished:
                return
            self.done.wait(self.POLL_S)


def _pidfd(pid: int) -> int | None:
    """A pollable descriptor for the child (Linux 5.3+), or None where there is none."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def run_to_completion(
    argv: Iterable[str] | str,
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    stdout_path: str,
    stderr_path: str,
    shell: bool = False,
    on_line: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    grace_s: float = GRACE_S,
    on_spawn: Callable[[], None] | None = None,
    follow: Mapping[str, Callable[[str], None]] | None = None,
    on_read: Callable[[], None] | None = None,
    before_exec: Callable[[], None] | None = None,
) -> RawRun:
    """Run a child to its end or its deadline; never raises for the child's own failures.

    `on_line` receives whole lines of output as they reach the files, `follow` maps further
    files the child writes (a progress stream) to their own line callbacks, and `on_read` is
    called after each poll that delivered lines; `on_spawn` is called once the child has
    started (work to do while it runs); `before_exec` as for `spawn`.
    At the deadline (or when `cancel` is set) the whole tree is stopped: SIGTERM to the group,
    `grace_s`, SIGKILL, then a sweep of escaped descendants by token. After a normal exit the
    sweep still runs, so a background grandchild never outlives the run.
    """
    start = time.monotonic()
    Path(stderr_path).parent.mkdir(parents=True, exist_ok=True)  # (spawn makes stdout's)
    try:
        child = spawn(
            argv,
            cwd=cwd,
            env=env,
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            shell=shell,
            before_exec=before_exec,
        )
    except OSError as exc:
        Path(stdout_path).touch()
        Path(stderr_path).touch()
        return RawRun(
            exit_code=None,
            timed_out=False,
            aborted=False,
            duration_ms=int((time.monotonic() - start) * 1000),
            stdout_path=stdout_path,
            stderr_path=stderr_path,
            spawn_error=f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "),
        )
    tailed: dict[str, Callable[[str], None]] = {}
    if on_line is not None:
        tailed = dict.fromkeys((stdout_path, stderr_path), on_line)
    tailed.update(follow or {})
    tail = _Tail(tailed, on_read) if tailed else None
    if tail:
        tail.start()
    if on_spawn is not None:
        with contextlib.suppress(Exception):  # the caller's own work never disturbs the run
            on_spawn()
    deadline = start + timeout_s
    timed_out = aborted = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            if cancel is not None and cancel.is_set():
                aborted = True
                break
            step = min(remaining, 0.1) if cancel is not None else remaining
            if child.wait(step) is not None:  # wakes the moment the child exits
                break
    except KeyboardInterrupt:
        child.stop(grace_s)
        if tail:
            tail.done.set()
            tail.join()
        raise
    survivors = child.stop(grace_s)
    if tail:
        tail.done.set()
        tail.join()
    rc = child.popen.returncode
    sig = -rc if rc is not None and rc < 0 else None
    return RawRun(
        exit_code=rc,
        timed_out=timed_out,
        aborted=aborted,
        duration_ms=int((time.monotonic() - start) * 1000),
        stdout_path=stdout_path,
        stderr_path=stderr_path,
        signal=sig,
        survivors=survivors,
    )
