"""Starting, watching and stopping the units of one integration run (through greenloop.system.proc).

- Each unit is started by `proc.spawn` in its own session with its own token; its stdout and
  stderr go to raw files in a private scratch folder, and one pump thread turns every line into
  a `process.log` line prefixed with time, unit and port (`ProcessLog` caps the file, keeping
  its start and its end).
- Units start in topological order of `depends_on`: a unit starts as soon as all of its
  dependencies are healthy, so independent units start together and the time to the first case
  is the slowest dependency chain, not the sum of all units.
- Teardown sends SIGTERM to every unit's group at once, waits the grace period, SIGKILLs the
  groups, then sweeps escaped descendants.

Why a token *and* a child subreaper: the token (an environment marker proc.py gives every child)
follows a process through fork, exec and setsid, so double-forked daemons in new sessions are
found by reading /proc/<pid>/environ. A process that also wipes its environment would escape
the token; for those the run makes greenloop a child subreaper (PR_SET_CHILD_SUBREAPER) while it
lasts, so orphans re-parent to greenloop instead of init: a process adopted that way during the
run, started after the run began and carrying no other greenloop token is ours, is killed in the
sweep, and is reaped so that no zombie stays behind. A PID namespace would be tighter but needs
user namespaces or CAP_SYS_ADMIN, which containers and CI machines often lack; the sandbox module
(bubblewrap, --unshare-pid) gives that where available.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import http.client
import os
import queue
import re
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greenloop.closure.transitions import iso
from greenloop.integration.ports import HOST, PortPicker, PortUnavailable
from greenloop.integration.spec import Unit, env_var_name
from greenloop.system import bwrap_command, proc, procfs, sandbox
from greenloop.system.env import child_env

__all__ = [
    "EXCERPT_LINES",
    "GRACE_S",
    "HEALTH_TIMEOUT_S",
    "LOG_CAP_BYTES",
    "Launch",
    "ProcessLog",
    "StartFailure",
    "Supervisor",
    "UnitProcess",
    "unit_exit",
    "unit_launch",
]

GRACE_S = 5.0
HEALTH_TIMEOUT_S = 30.0
HEALTH_INTERVAL_S = 0.2  # between health requests once the port accepts connections
REFUSED_INTERVAL_S = 0.02  # while the port refuses connections (a refused connect costs the unit nothing)
LOG_CAP_BYTES = 10 * 1024 * 1024
EXCERPT_LINES = 20
MAX_LINE = 16 * 1024
RAW_ROLL_BYTES = 32 * 1024 * 1024  # a unit's raw output file is emptied past this, once read
_READ_CHUNK = 4 * 1024 * 1024
_PORT_IN_USE = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


class ProcessLog:
    """process.log: prefixed lines from every unit, capped at `cap_bytes`, keeping start and end."""

    def __init__(
        self, path: Path, *, cap_bytes: int = LOG_CAP_BYTES, wall: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.wall = wall
        self._lock = threading.Lock()
        self._fh = open(path, "ab")  # noqa: SIM115 - closed by close()
        self._head_left = cap_bytes // 2
        self._tail_cap = cap_bytes - cap_bytes // 2 - 256  # room for the omission marker
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self._dropped_bytes = 0
        self._dropped_lines = 0
        self._closed = False

    def write(self, label: str, text: str) -> None:
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + f" …[line cut, {len(text) - MAX_LINE} more chars]"
        line = f"{iso(self.wall())} {label} {text}\n".encode("utf-8", "replace")
        with self._lock:
            if self._closed:
                return
            if self._head_left >= len(line) and not self._tail:
                self._fh.write(line)
                self._head_left -= len(line)
                return
            self._head_left = 0
            self._tail.append(line)
            self._tail_bytes += len(line)
            while self._tail_bytes > self._tail_cap and self._tail:
                gone = self._tail.popleft()
                self._tail_bytes -= len(gone)
                self._dropped_bytes += len(gone)
                self._dropped_lines += 1

    def note(self, text: str) -> None:
        """A line from greenloop itself (starts, health, teardown); flushed at once."""
        self.write("[greenloop]", text)
        self.flush()

    def flush(self) -> None:
        """Make what was written so far visible to someone tailing the file."""
        with self._lock:
            if not self._closed:
                self._fh.flush()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._dropped_lines:
                self._fh.write(
                    f"… {self._dropped_lines} lines ({self._dropped_bytes} bytes) omitted: process.log keeps "
                    "its start and its end …\n".encode()
                )
            for line in self._tail:
                self._fh.write(line)
            self._fh.close()


@dataclass(frozen=True)
class Launch:
    """How a unit is started: the one place its argv, folder and environment are built."""

    argv: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    # What units.json and the run add to the host's environment (also when a value equals the
    # host's): a sandboxed start keeps these on top of the allow-list.
    added: Mapping[str, str] = field(default_factory=dict)
    # Under Landlock: the step the child runs before exec, and the ruleset to close once started.
    before_exec: Callable[[], None] | None = None
    ruleset: Any = None


def unit_launch(unit: Unit, port: int, dep_urls: Mapping[str, str], base_env: Mapping[str, str]) -> Launch:
    """argv, cwd and env for a backend unit on `port` (a sandboxed start wraps this argv)."""
    added = dict(unit.env)
    for dep, url in dep_urls.items():
        added[env_var_name(dep)] = url
    added.update(
        {
            "PORT": str(port),
            "HOST": HOST,
            "UNIT_ID": unit.id,
            "PYTHONUNBUFFERED": "1",  # lines reach process.log as they are written
        }
    )
    env = dict(base_env)
    env.pop(proc.TOKEN_VAR, None)
    env.update(added)
    return Launch(tuple(unit.start), unit.path, env, added)


@dataclass
class UnitProcess:
    unit: Unit
    port: int
    child: proc.Child | None = None
    attempts: int = 0
    stderr_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=EXCERPT_LINES)
    )
    stdout_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=EXCERPT_LINES)
    )
    sandboxed: bool = False  # started inside bwrap: its exit code 128+N means killed by signal N

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def exit_code(self) -> int | None:
        return None if self.child is None else unit_exit(self.child.poll(), sandboxed=self.sandboxed)

    def excerpt(self) -> str:
        lines = list(self.stderr_tail) or list(self.stdout_tail)
        return "\n".join(lines)


@dataclass(frozen=True)
class StartFailure:
    """Why the units could not all become healthy."""

    unit: str
    reason: str  # exited | health_timeout | port_unavailable | spawn_error | run_timeout | cancelled
    message: str
    exit_code: int | None = None
    stderr_excerpt: str = ""

    @property
    def infra(self) -> bool:
        return self.reason in ("health_timeout", "port_unavailable", "run_timeout")

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "reason": self.reason,
            "message": self.message,
            "exit_code": self.exit_code,
            "stderr_excerpt": self.stderr_excerpt,
        }


def unit_exit(code: int | None, *, sandboxed: bool) -> int | None:
    """A unit's exit code as if it had run outside the sandbox: bwrap (the unit's pid 1 inside
    its namespace) reports a command killed by signal N as exit code 128+N; greenloop reports
    it as -N, as Popen does for an unsandboxed unit, so the reason reads "killed by SIGKILL"
    in every mode (the same mapping as `enforcers.signal_exit` for test runs)."""
    if sandboxed and code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


def _describe_exit(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exited with code {code}"


class _Subreaper:
    """PR_SET_CHILD_SUBREAPER for the span of a run (restored afterwards)."""

    def __init__(self) -> None:
        self.enabled = False
        self._previous = 0
        try:
            self._libc: Any = ctypes.CDLL(None, use_errno=True)
        except OSError:
            self._libc = None

    def enable(self) -> None:
        if self._libc is None:
            return
        prev = ctypes.c_int(0)
        if self._libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(prev), 0, 0, 0) == 0:
            self._previous = prev.value
        self.enabled = self._libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

    def restore(self) -> None:
        if self.enabled and self._libc is not None and not self._previous:
            self._libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        self.enabled = False


class Supervisor:
    """The processes of one run: start in dependency order, health, crash watch, teardown."""

    def __init__(
        self,
        log: ProcessLog,
        scratch: Path,
        *,
        base_env: Mapping[str, str],
        picker: PortPicker,
        clock: Callable[[], float] = time.monotonic,
        on_ports: Callable[[Mapping[str, int]], None] | None = None,
        sandbox_policy: sandbox.Policy | None = None,
        bwrap: str = "bwrap",
        landlock_abi: int = 0,
        unconfined: bool = False,
        grace_s: float = GRACE_S,
        raw_roll_bytes: int = RAW_ROLL_BYTES,
        before_teardown: Callable[[], None] | None = None,
    ) -> None:
        self.log = log
        self.before_teardown = before_teardown  # e.g. close the browser that talks to the units
        self.grace_s = grace_s
        self.raw_roll_bytes = raw_roll_bytes
        self.sandbox_policy = sandbox_policy
        self.bwrap = bwrap
        self.landlock_abi = landlock_abi  # > 0: units are confined by Landlock, not bubblewrap
        self.unconfined = unconfined  # `auto` with no enforcer here: only the environment allow-list
        self.scratch = scratch
        self.base_env = base_env
        self.picker = picker
        self.clock = clock
        self.on_ports = on_ports
        self.units: dict[str, UnitProcess] = {}
        self.stopping = threading.Event()
        self._pump_stop = threading.Event()
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self._pump_lock = threading.Lock()
        self._pump = threading.Thread(target=self._pump_loop, name="greenloop-process-log", daemon=True)
        self._subreaper = _Subreaper()
        self._start_ticks = procfs.boot_ticks_now()
        # pid -> start time of the run's descendants outside the unit processes themselves
        self._tracked: dict[int, int] = {}
        self._tokens: set[str] = set()
        self._left: list[dict[str, Any]] | None = None  # what the finished teardown found alive

    # ---- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> Supervisor:
        self._subreaper.enable()
        self._pump.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def assign_ports(self, units: Sequence[Unit]) -> dict[str, int]:
        """A port for every unit with a process, before anything starts (raises PortUnavailable)."""
        for u in units:
            if u.static is None and u.id not in self.units:  # greenloop serves static fe units
                self.units[u.id] = UnitProcess(u, self.picker.pick())
        self._ports_changed()
        return self.ports()

    def ports(self) -> dict[str, int]:
        return {uid: up.port for uid, up in self.units.items()}

    def _ports_changed(self) -> None:
        if self.on_ports is not None:
            self.on_ports(self.ports())

    # ---- output ----------------------------------------------------------------------------
    def _raw(self, unit_id: str, stream: str) -> str:
        return str(self.scratch / f"{unit_id}.{stream}")

    def _pump_loop(self) -> None:
        # Orphans adopted by the subreaper stay our children until they die, so one scan at
        # teardown finds them; scanning /proc here would cost a few ms every 50 ms.
        while not self._pump_stop.wait(0.05):
            self.pump()

    def pump(self) -> None:
        """Move new output lines of every unit into process.log (safe from any thread)."""
        with self._pump_lock:
            for up in list(self.units.values()):
                for stream in ("out", "err"):
                    self._pump_file(up, stream, final=False)
        self.log.flush()

    def _pump_file(self, up: UnitProcess, stream: str, *, final: bool) -> None:
        path = self._raw(up.unit.id, stream)
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(_READ_CHUNK)
        except OSError:
            return
        if not data and not (final and self._partial.get(path)):
            return
        self._offsets[path] = offset + len(data)
        if len(data) < _READ_CHUNK and offset + len(data) > self.raw_roll_bytes:
            # A chatty unit must not fill the disk (or a tmpfs /tmp) with output that
            # process.log drops anyway: the unit appends (O_APPEND), so once read to the end the
            # raw file is emptied and its next writes land at offset 0. Lines written in the
            # instant between the read and the truncate are lost, and only from the middle.
            with contextlib.suppress(OSError):
                os.truncate(path, 0)
                self._offsets[path] = 0
        buf = self._partial.get(path, b"") + data
        *lines, rest = buf.split(b"\n")
        if final and rest:
            lines.append(rest)
            rest = b""
        if len(rest) > MAX_LINE:  # a line that never ends is still logged, in pieces
            lines.append(rest)
            rest = b""
        self._partial[path] = rest
        label = f"[{up.unit.id}:{up.port}] {stream}|"
        tail = up.stderr_tail if stream == "err" else up.stdout_tail
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            self.log.write(label, text)
            tail.append(text[:500])

    # ---- starting --------------------------------------------------------------------------
    def _confine(self, launch: Launch) -> Launch:
        """A unit's start wrapped in the run's sandbox (the same bubblewrap argv as a test run).

        The filesystem is confined per the mode and each unit gets its own pid namespace that
        dies with it, but the units share the host's network namespace (`share_net`): a
        namespace per unit would cut the loopback they use to reach each other. The child
        environment starts from the sandbox allow-list plus what units.json and the run add.
        """
        policy = self.sandbox_policy
        if policy is None or not policy.sandboxed:
            return launch
        if self.unconfined:
            env = child_env(self.base_env, policy, add=launch.added)
            env.pop(proc.TOKEN_VAR, None)
            return Launch(launch.argv, launch.cwd, env, launch.added)
        if self.landlock_abi:
            return self._landlocked(launch, policy)
        env = child_env(self.base_env, policy, add=launch.added)
        env.pop(proc.TOKEN_VAR, None)
        readable = bwrap_command.tmp_roots(launch.argv[0] if launch.argv else None, env, launch.cwd)
        argv = bwrap_command.wrap_argv(
            launch.argv, policy, share_net=True, cwd=launch.cwd, readable=readable, bwrap=self.bwrap
        )
        return Launch(tuple(argv), launch.cwd, env, launch.added)

    def _landlocked(self, launch: Launch, policy: sandbox.Policy) -> Launch:
        """A unit's start under Landlock (no bubblewrap here): the same argv, a temporary folder
        of its own in the run's scratch folder, writes confined to it and the project (in
        workspace-write), the ruleset applied in the child before exec."""
        from greenloop.system import landlock

        tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=self.scratch))
        env = child_env(self.base_env, policy, add=launch.added, tmp=str(tmp))
        env.pop(proc.TOKEN_VAR, None)
        if not policy.workspace_writable:
            (tmp / "cache").mkdir()
        writable = [str(tmp), *([policy.workspace_root] if policy.workspace_writable else [])]
        ruleset = landlock.Ruleset.build(self.landlock_abi, writable=writable)
        return Launch(launch.argv, launch.cwd, env, launch.added, ruleset.restrict_child(), ruleset)

    def _spawn(self, up: UnitProcess) -> StartFailure | None:
        deps = {d: self.units[d].url for d in up.unit.depends_on if d in self.units}
        for _ in range(3):
            if self.picker.still_free(up.port):
                break
            self.log.note(f"port {up.port} of {up.unit.id} was taken before the start; choosing another")
            try:
                up.port = self.picker.pick()
            except PortUnavailable as exc:
                return StartFailure(up.unit.id, "port_unavailable", f"unit {up.unit.id}: {exc}")
            self._ports_changed()
        try:
            launch = self._confine(unit_launch(up.unit, up.port, deps, self.base_env))
        except OSError as exc:  # the Landlock ruleset could not be built: refused, as bwrap would
            msg = f"unit {up.unit.id}: the sandbox could not be set up ({exc})"
            self.log.note(msg)
            return StartFailure(up.unit.id, "spawn_error", msg)
        # bwrap reports a unit killed by signal N as exit 128+N; under Landlock it is the unit's own
        policy = self.sandbox_policy
        bwrapped = policy is not None and policy.sandboxed and not (self.landlock_abi or self.unconfined)
        up.sandboxed = bwrapped
        token = f"{proc.TOKEN_VAR.lower()}-{os.getpid()}-{up.unit.id}-{os.urandom(4).hex()}"
        self._tokens.add(token)
        try:
            up.child = proc.spawn(
                launch.argv,
                cwd=launch.cwd,
                env=launch.env,
                stdout_path=self._raw(up.unit.id, "out"),
                stderr_path=self._raw(up.unit.id, "err"),
                token=token,
                before_exec=launch.before_exec,
            )
        except OSError as exc:
            if launch.ruleset is not None:
                launch.ruleset.close()
            msg = (
                f"unit {up.unit.id} could not start {list(launch.argv)} in {launch.cwd}: "
                f'{exc.strerror or exc}; fix "start" in units.json'
            )
            self.log.note(msg)
            return StartFailure(up.unit.id, "spawn_error", msg)
        if launch.ruleset is not None:
            launch.ruleset.close()  # the child has it: exec has happened once spawn returns
        up.attempts += 1
        self.log.note(f"started {up.unit.id} pid {up.child.pid} on {up.url}: {' '.join(launch.argv)}")
        return None

    def _health_once(self, up: UnitProcess, timeout: float) -> int | None:
        """The health status code, or None when the port refuses connections."""
        conn = http.client.HTTPConnection(HOST, up.port, timeout=max(0.05, timeout))
        try:
            conn.request("GET", up.unit.health, headers={"User-Agent": "greenloop-health"})
            return conn.getresponse().status
        except (ConnectionRefusedError, ConnectionResetError):
            return None
        except (OSError, http.client.HTTPException):
            return -1
        finally:
            conn.close()

    def _watch_health(
        self,
        up: UnitProcess,
        timeout_s: float,
        interval_s: float,
        abort: threading.Event,
        out: queue.Queue[Any],
    ) -> None:
        start = self.clock()
        last_status: int | str | None = "none"
        while True:
            code = up.exit_code()
            if code is not None:
                out.put((up.unit.id, "exited", code))
                return
            if abort.is_set():
                out.put((up.unit.id, "aborted", None))
                return
            remaining = start + timeout_s - self.clock()
            if remaining <= 0:
                out.put((up.unit.id, "health_timeout", last_status))
                return
            status = self._health_once(up, min(remaining, 2.0))
            if status != last_status:
                shown = (
                    "connection refused" if status is None else ("no answer" if status == -1 else str(status))
                )
                self.log.note(f"health {up.unit.id} GET {up.url}{up.unit.health} -> {shown}")
                last_status = status
            if status is not None and 200 <= status < 300:
                out.put((up.unit.id, "healthy", status))
                return
            wait = REFUSED_INTERVAL_S if status is None else interval_s
            if abort.wait(wait):
                continue

    def start_all(
        self,
        units: Sequence[Unit],
        *,
        health_timeout_s: float = HEALTH_TIMEOUT_S,
        health_interval_s: float = HEALTH_INTERVAL_S,
        deadline: float | None = None,
        cancel: threading.Event | None = None,
    ) -> StartFailure | None:
        """Start every unit with a process as soon as its dependencies are healthy; wait for all.

        A set `cancel` ends the wait within about 50 ms with reason "cancelled" (the caller
        tears down what was started)."""
        pending = {u.id: u for u in units if u.static is None}
        healthy: set[str] = set()
        watching: set[str] = set()
        events: queue.Queue[Any] = queue.Queue()
        abort = threading.Event()
        threads: list[threading.Thread] = []

        def launch(uid: str) -> StartFailure | None:
            failure = self._spawn(self.units[uid])
            if failure is not None:
                return failure
            t = threading.Thread(
                target=self._watch_health,
                args=(self.units[uid], health_timeout_s, health_interval_s, abort, events),
                daemon=True,
            )
            threads.append(t)
            watching.add(uid)
            t.start()
            return None

        try:
            while pending or watching:
                for uid in [u for u, unit in pending.items() if all(d in healthy for d in unit.depends_on)]:
                    del pending[uid]
                    failure = launch(uid)
                    if failure is not None:
                        return failure
                if not watching:
                    break
                if deadline is not None and self.clock() >= deadline:
                    waiting = ", ".join(sorted(watching | set(pending)))
                    return StartFailure(waiting, "run_timeout", f"the run timed out while starting {waiting}")
                if cancel is not None and cancel.is_set():
                    waiting = ", ".join(sorted(watching | set(pending)))
                    return StartFailure(
                        waiting, "cancelled", f"the run was cancelled while starting {waiting}"
                    )
                try:
                    uid, what, detail = events.get(timeout=0.05)
                except queue.Empty:
                    continue
                watching.discard(uid)
                up = self.units[uid]
                if what == "healthy":
                    healthy.add(uid)
                    continue
                if what == "exited":
                    self._pump_final(up)
                    if _PORT_IN_USE.search("\n".join(up.stderr_tail) + "\n".join(up.stdout_tail)):
                        if up.attempts < 3:
                            self.log.note(f"{uid} could not bind port {up.port}; retrying on another port")
                            try:
                                up.port = self.picker.pick()
                            except PortUnavailable as exc:
                                return StartFailure(
                                    uid, "port_unavailable", f"unit {uid}: {exc}", detail, up.excerpt()
                                )
                            self._ports_changed()
                            up.stderr_tail.clear()
                            up.stdout_tail.clear()
                            failure = launch(uid)
                            if failure is not None:
                                return failure
                            continue
                        return StartFailure(
                            uid,
                            "port_unavailable",
                            f"unit {uid} found its port taken {up.attempts} times in a row",
                            detail,
                            up.excerpt(),
                        )
                    return StartFailure(
                        uid,
                        "exited",
                        f"unit {uid} {_describe_exit(int(detail))} before it became healthy "
                        f"(GET {up.url}{up.unit.health})",
                        int(detail),
                        up.excerpt(),
                    )
                if what == "health_timeout":
                    self.pump()
                    return StartFailure(
                        uid,
                        "health_timeout",
                        f"unit {uid} did not answer 2xx on GET {up.url}{up.unit.health} within "
                        f"{health_timeout_s:g} s "
                        f"(last: {'connection refused' if detail is None else detail})",
                        None,
                        up.excerpt(),
                    )
            return None
        finally:
            abort.set()
            for t in threads:
                t.join(timeout=5)

    def _pump_final(self, up: UnitProcess) -> None:
        with self._pump_lock:
            for stream in ("out", "err"):
                self._pump_file(up, stream, final=True)

    def crashed(self, unit_id: str) -> int | None:
        """The exit code of a unit that stopped on its own while the run goes on, else None."""
        up = self.units.get(unit_id)
        if up is None or up.child is None or self.stopping.is_set():
            return None
        # Asked after a connection error: a dying process closes its sockets a moment before
        # it can be reaped, so give it that moment.
        return unit_exit(up.child.wait(0.3), sandboxed=up.sandboxed)

    # ---- stopping --------------------------------------------------------------------------
    def _is_ours(self, pid: int, stat: procfs.Stat) -> bool:
        if stat.ppid != os.getpid() or stat.start < self._start_ticks:
            return False
        if any(up.child is not None and up.child.pid == pid for up in self.units.values()):
            return False
        env = procfs.environ(pid) or []
        marker = proc.TOKEN_VAR.encode() + b"="
        tokens = {e[len(marker) :].decode("utf-8", "replace") for e in env if e.startswith(marker)}
        return not tokens or bool(tokens & self._tokens)

    def _adopt_orphans(self) -> None:
        """Note processes re-parented to us (the subreaper) that belong to this run."""
        if not self._subreaper.enabled:
            return
        me = os.getpid()
        for pid in procfs.pids():
            if pid == me:
                continue
            st = procfs.stat(pid)
            if st is None or st.ppid != me or pid in self._tracked:
                continue
            if st.state != "Z" and self._is_ours(pid, st):
                self._tracked[pid] = st.start

    def _token_holders(self) -> dict[int, str]:
        """Live processes carrying one of this run's unit tokens, by pid -> unit id (one /proc scan)."""
        units = {up.child.token: uid for uid, up in self.units.items() if up.child is not None}
        if not units:
            return {}
        marker = proc.TOKEN_VAR.encode() + b"="
        me = os.getpid()
        found: dict[int, str] = {}
        for pid in procfs.pids():
            if pid == me:
                continue
            for var in procfs.environ(pid) or []:
                if var.startswith(marker):
                    uid = units.get(var[len(marker) :].decode("utf-8", "replace"))
                    if uid is not None and procfs.alive(pid):
                        found[pid] = uid
                    break
        return found

    def _track_tokens(self) -> None:
        """Note every live descendant carrying one of this run's tokens (before any signal).

        Once killed, a descendant whose parent died first is a zombie child of greenloop (the
        subreaper); knowing its pid and start time lets the sweep reap exactly it, never a
        zombie that belongs to someone else's subprocess.Popen in the same process.
        """
        unit_pids = {up.child.pid for up in self.units.values() if up.child is not None}
        for pid in self._token_holders():
            st = procfs.stat(pid)
            if st is not None and pid not in unit_pids:
                self._tracked.setdefault(pid, st.start)

    def _kill_tracked(self) -> None:
        self._adopt_orphans()
        for pid, started in list(self._tracked.items()):
            st = procfs.stat(pid)
            if st is None or st.start != started:
                self._tracked.pop(pid, None)
                continue
            if st.state != "Z":
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def _reap_tracked(self, wait_s: float) -> None:
        """Reap the run's killed descendants that ended up as our children; forget the rest."""
        me = os.getpid()
        deadline = time.monotonic() + wait_s
        while self._tracked:
            for pid, started in list(self._tracked.items()):
                st = procfs.stat(pid)
                if st is None or st.start != started:
                    self._tracked.pop(pid, None)
                    continue
                if st.ppid != me:
                    if st.state == "Z":  # someone else's zombie: its parent reaps it
                        self._tracked.pop(pid, None)
                    continue
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                self._tracked.pop(pid, None)
            if not self._tracked or time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def survivors(self) -> list[dict[str, Any]]:
        """Every process of this run still alive (should be none after teardown)."""
        holders = self._token_holders()
        out = [{"pid": pid, "unit": uid, "cmdline": procfs.cmdline(pid)} for pid, uid in holders.items()]
        for pid in self._tracked:
            st = procfs.stat(pid)
            if st is not None and st.state != "Z" and pid not in holders:
                out.append({"pid": pid, "unit": None, "cmdline": procfs.cmdline(pid)})
        return out

    def teardown(self, grace_s: float | None = None) -> list[dict[str, Any]]:
        """SIGTERM every group at once, grace, SIGKILL, sweep; return the survivors (none).

        Called again once done (e.g. by __exit__ after the run's own teardown), it hands back
        what the first teardown found instead of scanning /proc again."""
        grace_s = self.grace_s if grace_s is None else grace_s
        if self.stopping.is_set() and not self._pump.is_alive():
            return list(self._left) if self._left is not None else self.survivors()
        if self.before_teardown is not None and not self.stopping.is_set():
            self.before_teardown()
        self.stopping.set()
        started = [up for up in self.units.values() if up.child is not None]
        t0 = time.monotonic()
        if started:
            self.log.note(
                f"teardown: SIGTERM to {', '.join(up.unit.id for up in started)} (grace {grace_s:g} s)"
            )
        stoppers = [
            threading.Thread(target=up.child.stop, args=(grace_s,), daemon=True)
            for up in started
            if up.child is not None
        ]
        self._track_tokens()
        self._adopt_orphans()
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        self._kill_tracked()
        self._reap_tracked(proc.SWEEP_WAIT_S)
        left = self._left = self.survivors()
        self._subreaper.restore()
        self._pump_stop.set()
        if self._pump.is_alive():
            self._pump.join()
        for up in self.units.values():
            self._pump_final(up)
        for up in started:
            code = up.exit_code()
            how = "still running" if code is None else _describe_exit(code)
            self.log.note(f"teardown: {up.unit.id} {how}")
        self.log.note(
            f"teardown done in {time.monotonic() - t0:.2f} s; "
            + (f"{len(left)} processes survived: {left}" if left else "no process left")
        )
        return left
