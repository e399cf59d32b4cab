"""The sweep after teardown: find, kill and reap every process a run's units left behind.

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

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Mapping
from typing import Any

from greenloop.system import proc, procfs

__all__ = ["Sweep"]

_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


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
        """Make greenloop the subreaper of its descendants' orphans (when the kernel allows)."""
        if self._libc is None:
            return
        prev = ctypes.c_int(0)
        if self._libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(prev), 0, 0, 0) == 0:
            self._previous = prev.value
        self.enabled = self._libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0

    def restore(self) -> None:
        """Give the subreaper role back unless greenloop already had it before the run."""
        if self.enabled and self._libc is not None and not self._previous:
            self._libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        self.enabled = False


class Sweep:
    """The run's processes outside the units themselves: token holders and adopted orphans.

    `children` maps each started unit's id to its process; the units are stopped by their own
    group signals, the sweep handles everything they left behind.
    """

    def __init__(self) -> None:
        self.subreaper = _Subreaper()
        self.start_ticks = procfs.boot_ticks_now()
        # pid -> start time of the run's descendants outside the unit processes themselves
        self.tracked: dict[int, int] = {}
        self.tokens: set[str] = set()  # every token handed to a unit of this run

    def _is_ours(self, pid: int, stat: procfs.Stat, children: Mapping[str, proc.Child]) -> bool:
        if stat.ppid != os.getpid() or stat.start < self.start_ticks:
            return False
        if any(child.pid == pid for child in children.values()):
            return False
        env = procfs.environ(pid) or []
        marker = proc.TOKEN_VAR.encode() + b"="
        tokens = {e[len(marker) :].decode("utf-8", "replace") for e in env if e.startswith(marker)}
        return not tokens or bool(tokens & self.tokens)

    def adopt_orphans(self, children: Mapping[str, proc.Child]) -> None:
        """Note processes re-parented to us (the subreaper) that belong to this run."""
        if not self.subreaper.enabled:
            return
        me = os.getpid()
        for pid in procfs.pids():
            if pid == me:
                continue
            st = procfs.stat(pid)
            if st is None or st.ppid != me or pid in self.tracked:
                continue
            if st.state != "Z" and self._is_ours(pid, st, children):
                self.tracked[pid] = st.start

    def token_holders(self, children: Mapping[str, proc.Child]) -> dict[int, str]:
        """Live processes carrying one of this run's unit tokens, by pid -> unit id (one /proc scan)."""
        units = {child.token: uid for uid, child in children.items()}
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

    def track_tokens(self, children: Mapping[str, proc.Child]) -> None:
        """Note every live descendant carrying one of this run's tokens (before any signal).

        Once killed, a descendant whose parent died first is a zombie child of greenloop (the
        subreaper); knowing its pid and start time lets the sweep reap exactly it, never a
        zombie that belongs to someone else's subprocess.Popen in the same process.
        """
        unit_pids = {child.pid for child in children.values()}
        for pid in self.token_holders(children):
            st = procfs.stat(pid)
            if st is not None and pid not in unit_pids:
                self.tracked.setdefault(pid, st.start)

    def kill_tracked(self, children: Mapping[str, proc.Child]) -> None:
        """SIGKILL every noted descendant (and newly adopted orphan) still alive."""
        self.adopt_orphans(children)
        for pid, started in list(self.tracked.items()):
            st = procfs.stat(pid)
            if st is None or st.start != started:
                self.tracked.pop(pid, None)
                continue
            if st.state != "Z":
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)

    def reap_tracked(self, wait_s: float) -> None:
        """Reap the run's killed descendants that ended up as our children; forget the rest."""
        me = os.getpid()
        deadline = time.monotonic() + wait_s
        while self.tracked:
            for pid, started in list(self.tracked.items()):
                st = procfs.stat(pid)
                if st is None or st.start != started:
                    self.tracked.pop(pid, None)
                    continue
                if st.ppid != me:
                    if st.state == "Z":  # someone else's zombie: its parent reaps it
                        self.tracked.pop(pid, None)
                    continue
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                self.tracked.pop(pid, None)
            if not self.tracked or time.monotonic() >= deadline:
                return
            time.sleep(0.02)

    def survivors(self, children: Mapping[str, proc.Child]) -> list[dict[str, Any]]:
        """Every process of this run still alive (should be none after teardown)."""
        holders = self.token_holders(children)
        out = [{"pid": pid, "unit": uid, "cmdline": procfs.cmdline(pid)} for pid, uid in holders.items()]
        for pid in self.tracked:
            st = procfs.stat(pid)
            if st is not None and st.state != "Z" and pid not in holders:
                out.append({"pid": pid, "unit": None, "cmdline": procfs.cmdline(pid)})
        return out
