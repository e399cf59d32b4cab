"""Readers of Linux's /proc: one process's stat line, environment, command line and folder,
the list of processes, and the clock its start times use.

Product code (proc, ptree, integration's supervisor) and the tests' survivor checks read
/proc only through here, so the one subtle parse (the command name sits in parentheses and
may itself hold spaces or ")") is written once. Every reader answers None or empty for a
process that is gone or cannot be read (another user's, hidepid): callers treat that as
"not there", never as an error. Standard library only; on the hook path.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "GONE_STATES",
    "Stat",
    "alive",
    "boot_ticks_now",
    "cmdline",
    "cwd",
    "environ",
    "pids",
    "stat",
]

# Process states that mean "no longer running": Z a zombie waiting for its parent, X dead.
GONE_STATES = frozenset({"Z", "X"})


class Stat(NamedTuple):
    """The fields of /proc/<pid>/stat that greenloop uses."""

    pid: int
    comm: str  # the command name (at most 15 bytes, as the kernel keeps it)
    state: str  # one letter: R running, S sleeping, Z zombie, …
    ppid: int
    start: int  # start time in clock ticks since boot: with the pid, names one process for good

    @property
    def gone(self) -> bool:
        """A zombie or a dead process: it runs no more code."""
        return self.state in GONE_STATES


def stat(pid: int | str) -> Stat | None:
    """The stat line of `pid`, or None when the process is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    open_, close = raw.find(b"("), raw.rfind(b")")
    if open_ < 0 or close < 0:
        return None
    # After ") ": state, ppid, pgrp, session, …; starttime is field 22 of the line, the 20th here.
    fields = raw[close + 2 :].split()
    try:
        return Stat(int(pid), raw[open_ + 1 : close].decode("utf-8", "replace"),
                    fields[0].decode(), int(fields[1]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def alive(pid: int | str) -> bool:
    """Whether `pid` is a live process (not gone, not a zombie)."""
    found = stat(pid)
    return found is not None and not found.gone


def environ(pid: int | str) -> list[bytes] | None:
    """The initial environment of `pid` as `NAME=value` byte strings; None when unreadable."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read().split(b"\0")
    except OSError:
        return None


def cmdline(pid: int | str) -> str:
    """A process's command line as one line of text ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def cwd(pid: int | str) -> str:
    """A process's working folder ("" when unreadable)."""
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def pids() -> list[int]:
    """Every process id /proc lists now (some may be gone by the time they are read)."""
    try:
        return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []


def boot_ticks_now() -> int:
    """The current time in the clock ticks that a stat line's start time uses."""
    with open("/proc/uptime") as fh:
        up = float(fh.read().split()[0])
    return int(up * os.sysconf("SC_CLK_TCK"))
