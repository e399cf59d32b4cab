"""A process's ancestors, read from /proc, and which of them is the agent harness.

Used to tie a run to the agent session that caused it when nothing names the session: every
hook invocation records its harness process, and a `greenloop run` started from the agent's
shell, or the MCP server the harness spawned, looks for that same process among its own
ancestors (docs/closure-gate.md, "Which session a run belongs to").

A process is named by its pid *and* its start time (field 22 of /proc/<pid>/stat, clock ticks
since boot) and the boot id, so a pid the kernel hands out again later never matches the
process that had it before, not even after a reboot.

The hook is on the hot path of every agent turn: this module is standard library only and
reads one small file per ancestor.
"""

from __future__ import annotations

import os

from greenloop.system import procfs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "ACTING_FOR", "HOSTS", "MAX_DEPTH", "WRAPPERS", "Proc", "ancestors", "boot_id", "harness_of", "proc_key",
]  # fmt: skip

MAX_DEPTH = 64  # a deeper chain is a loop or a pathological tree; stop there

# Processes that stand between a harness and the command it runs, never a harness themselves:
# shells (`sh -c "greenloop hook …"`) and launchers that start one short-lived command.
WRAPPERS = frozenset(
    {
        "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "ash", "busybox", "tcsh", "csh",
        "env", "timeout", "nice", "nohup", "setsid", "stdbuf", "time", "sudo", "doas",
        "uv", "uvx", "pipx", "npx", "npm", "pnpm", "yarn", "bunx", "xargs", "script", "flock",
    }
)  # fmt: skip


# Processes that host every shell of a terminal or a login, never an agent harness. A hook run
# by hand from a terminal would otherwise bind its session to, say, the tmux server, and with
# it every later run started from that terminal.
HOSTS = frozenset(
    {
        "tmux: server", "tmux", "screen", "SCREEN", "sshd", "login", "su", "systemd", "init",
        "gnome-terminal-", "konsole", "xterm", "alacritty", "kitty", "wezterm-gui", "foot",
    }
)  # fmt: skip


class Proc(NamedTuple):
    """One process: pid, start time (clock ticks since boot) and its command name."""

    pid: int
    start: int
    comm: str


def _stat(pid: int) -> tuple[Proc, int] | None:
    """(the process, its parent's pid), or None when it is gone or unreadable."""
    found = procfs.stat(pid)
    return None if found is None else (Proc(pid, found.start, found.comm), found.ppid)


# The process a hook answers for when it is not this one: the hook server's worker answers a
# hook client's event (greenloop.hooks.server), so "this hook's harness" is the client's.
ACTING_FOR: int | None = None


def ancestors(pid: int | None = None) -> list[Proc]:
    """The ancestors of `pid` (default: this process, or the one it acts for: `ACTING_FOR`),
    nearest first, without pid 1 (init) and without the process itself. Empty where /proc
    cannot be read (not Linux, hidepid)."""
    if pid is None:
        pid = os.getpid() if ACTING_FOR is None else ACTING_FOR
    here = _stat(pid)
    chain: list[Proc] = []
    if here is None:
        return chain
    ppid = here[1]
    while ppid > 1 and len(chain) < MAX_DEPTH:
        found = _stat(ppid)
        if found is None:
            break
        chain.append(found[0])
        ppid = found[1]
    return chain


def harness_of(chain: list[Proc]) -> Proc | None:
    """The harness process of a hook: its nearest ancestor that is not a shell or a launcher;
    None when that is a terminal or login host (`HOSTS`: the hook was run by hand)."""
    for proc in chain:
        if proc.comm not in WRAPPERS:
            return None if proc.comm in HOSTS else proc
    return None


_BOOT: list[str] = []


def boot_id() -> str:
    """This boot's id (a start time only means something within one boot); "" if unknown."""
    if not _BOOT:
        try:
            # utf-8, not ascii: the same text for these hex digits, without loading a codec
            with open("/proc/sys/kernel/random/boot_id", encoding="utf-8") as fh:
                _BOOT.append(fh.read().strip()[:8])
        except OSError:
            _BOOT.append("")
    return _BOOT[0]


def proc_key(proc: Proc) -> str:
    """The stored name of a process: boot id, pid and start time."""
    return f"{boot_id()}:{proc.pid}:{proc.start}"
