"""The supervisor of one integration run's units: start, watch, stop (through greenloop.system.proc).

- Each unit is started by `proc.spawn` in its own session with its own token; its stdout and
  stderr go to raw files in a private scratch folder, and one pump thread
  (`output_pump.OutputPump`) turns every line into a `process.log` line prefixed with time, unit
  and port (`process_log.ProcessLog` caps the file, keeping its start and its end).
- Units start in topological order of `depends_on`: a unit starts as soon as all of its
  dependencies are healthy (`health.watch_health`), so independent units start together and the
  time to the first case is the slowest dependency chain, not the sum of all units.
- Teardown sends SIGTERM to every unit's group at once, waits the grace period, SIGKILLs the
  groups, then sweeps escaped descendants (`sweep.Sweep` says how they are found).
"""

from __future__ import annotations

import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from greenloop.integration.health import HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S, watch_health
from greenloop.integration.output_pump import RAW_ROLL_BYTES, OutputPump
from greenloop.integration.ports import PortPicker, PortUnavailable
from greenloop.integration.process_log import ProcessLog
from greenloop.integration.spec.records import Unit
from greenloop.integration.start_command import confine, start_command
from greenloop.integration.sweep import Sweep
from greenloop.integration.unit_process import StartFailure, UnitProcess, describe_exit, unit_exit
from greenloop.system import proc, sandbox

__all__ = ["GRACE_S", "Supervisor"]

GRACE_S = 5.0
_STOP_SLACK_S = 5.0  # beyond a stop's own bounds, before the teardown stops waiting for it
_PORT_IN_USE = re.compile(r"EADDRINUSE|address already in use", re.IGNORECASE)


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
        self._output = OutputPump(log, scratch, self.units, raw_roll_bytes=raw_roll_bytes)
        self._sweep = Sweep()
        self._left: list[dict[str, Any]] | None = None  # what the finished teardown found alive

    # ---- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> Supervisor:
        self._sweep.subreaper.enable()
        self._output.start()
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
        """The port of every unit with a process, by unit id."""
        return {uid: up.port for uid, up in self.units.items()}

    def _children(self) -> dict[str, proc.Child]:
        """The process of every unit started so far, by unit id."""
        return {uid: up.child for uid, up in self.units.items() if up.child is not None}

    def _ports_changed(self) -> None:
        if self.on_ports is not None:
            self.on_ports(self.ports())

    # ---- starting --------------------------------------------------------------------------
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
            command = confine(
                start_command(up.unit, up.port, deps, self.base_env),
                self.sandbox_policy,
                base_env=self.base_env,
                scratch=self.scratch,
                bwrap=self.bwrap,
                landlock_abi=self.landlock_abi,
                unconfined=self.unconfined,
            )
        except OSError as exc:  # the Landlock ruleset could not be built: refused, as bwrap would
            msg = f"unit {up.unit.id}: the sandbox could not be set up ({exc})"
            self.log.note(msg)
            return StartFailure(up.unit.id, "spawn_error", msg)
        # bwrap reports a unit killed by signal N as exit 128+N; under Landlock it is the unit's own
        policy = self.sandbox_policy
        bwrapped = policy is not None and policy.sandboxed and not (self.landlock_abi or self.unconfined)
        up.sandboxed = bwrapped
        token = f"{proc.TOKEN_VAR.lower()}-{os.getpid()}-{up.unit.id}-{os.urandom(4).hex()}"
        self._sweep.tokens.add(token)
        try:
            up.child = proc.spawn(
                command.argv,
                cwd=command.cwd,
                env=command.env,
                stdout_path=self._output.raw_path(up.unit.id, "out"),
                stderr_path=self._output.raw_path(up.unit.id, "err"),
                token=token,
                before_exec=command.before_exec,
            )
        except OSError as exc:
            if command.ruleset is not None:
                command.ruleset.close()
            msg = (
                f"unit {up.unit.id} could not start {list(command.argv)} in {command.cwd}: "
                f'{exc.strerror or exc}; fix "start" in units.json'
            )
            self.log.note(msg)
            return StartFailure(up.unit.id, "spawn_error", msg)
        if command.ruleset is not None:
            command.ruleset.close()  # the child has it: exec has happened once spawn returns
        up.attempts += 1
        self.log.note(f"started {up.unit.id} pid {up.child.pid} on {up.url}: {' '.join(command.argv)}")
        return None

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
                target=watch_health,
                args=(self.units[uid],),
                kwargs={
                    "log": self.log,
                    "clock": self.clock,
                    "timeout_s": health_timeout_s,
                    "interval_s": health_interval_s,
                    "abort": abort,
                    "out": events,
                },
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
                    self._output.pump_final(up)
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
                        f"unit {uid} {describe_exit(int(detail))} before it became healthy "
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

    def pump(self) -> None:
        """Move new output lines of every unit into process.log (safe from any thread)."""
        self._output.pump()

    def crashed(self, unit_id: str) -> int | None:
        """The exit code of a unit that stopped on its own while the run goes on, else None."""
        up = self.units.get(unit_id)
        if up is None or up.child is None or self.stopping.is_set():
            return None
        # Asked after a connection error: a dying process closes its sockets a moment before
        # it can be reaped, so give it that moment.
        return unit_exit(up.child.wait(0.3), sandboxed=up.sandboxed)

    # ---- stopping --------------------------------------------------------------------------
    def survivors(self) -> list[dict[str, Any]]:
        """Every process of this run still alive (should be none after teardown)."""
        return self._sweep.survivors(self._children())

    def teardown(self, grace_s: float | None = None) -> list[dict[str, Any]]:
        """SIGTERM every group at once, grace, SIGKILL, sweep; return the survivors (none).

        Called again once done (e.g. by __exit__ after the run's own teardown), it hands back
        what the first teardown found instead of scanning /proc again."""
        grace_s = self.grace_s if grace_s is None else grace_s
        if self.stopping.is_set() and not self._output.running:
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
        self._sweep.track_tokens(self._children())
        self._sweep.adopt_orphans(self._children())
        for t in stoppers:
            t.start()
        # Each stop is bounded (grace, SIGKILL, sweep, reap); the join is too, so that a machine
        # too busy to schedule a stopper cannot hold the teardown (what is still alive after it
        # is reported in the survivors).
        joined_by = time.monotonic() + grace_s + proc.SWEEP_WAIT_S + proc.REAP_WAIT_S + _STOP_SLACK_S
        for t in stoppers:
            t.join(max(0.0, joined_by - time.monotonic()))
        self._sweep.kill_tracked(self._children())
        self._sweep.reap_tracked(proc.SWEEP_WAIT_S)
        left = self._left = self.survivors()
        self._sweep.subreaper.restore()
        self._output.stop()
        for up in self.units.values():
            self._output.pump_final(up)
        for up in started:
            code = up.exit_code()
            how = "still running" if code is None else describe_exit(code)
            self.log.note(f"teardown: {up.unit.id} {how}")
        self.log.note(
            f"teardown done in {time.monotonic() - t0:.2f} s; "
            + (f"{len(left)} processes survived: {left}" if left else "no process left")
        )
        return left
