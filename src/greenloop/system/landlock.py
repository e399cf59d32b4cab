"""Landlock: the kernel's own unprivileged filesystem confinement, through its system calls.

Where bubblewrap is missing or cannot create namespaces, Linux 5.13+ still offers Landlock:
a process can give up rights for itself and every process it starts, without privileges and
without a helper binary. greenloop uses it as the second enforcer of the sandbox modes
(docs/sandbox.md): reads everywhere, writes only to the workspace (workspace-write), the run's
private temporary folder, the folder of its machine report and a few devices.

The ruleset is built in greenloop's own process (`Ruleset.build`: open each folder O_PATH, add
one rule for it); the child only calls `prctl(PR_SET_NO_NEW_PRIVS)` and
`landlock_restrict_self(fd)` between fork and exec (`Ruleset.restrict_child`, handed to proc.py
as the child's pre-exec step). Those two calls go through ctypes functions resolved here in
advance, so the forked child imports nothing, allocates nothing that another thread could hold
a lock on, and fails loudly (the start is refused) if the kernel says no.

Network: Landlock's TCP rights (ABI 4+) name ports, not addresses, so they cannot keep loopback
open while closing the outside. greenloop leaves the network unconfined under Landlock and says
so in the run's notes. With ABI 6+ the run cannot signal processes outside its own domain.

ctypes is imported on first use: a machine with bubblewrap never pays for it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

__all__ = [
    "DISABLE_ENV_VAR",
    "LandlockStatus",
    "Ruleset",
    "abi_version",
    "probe",
]

# A seam for tests and for a deployment that wants Landlock left alone: "0" / "off" / "no".
DISABLE_ENV_VAR = "GREENLOOP_LANDLOCK"

# System call numbers: x86_64 and every architecture on the generic table (aarch64, riscv64,
# loongarch64) share them; i386/arm32 differ and are not handled.
_SYSCALLS: dict[str, tuple[int, int, int]] = {
    "x86_64": (444, 445, 446),
    "amd64": (444, 445, 446),
    "aarch64": (444, 445, 446),
    "arm64": (444, 445, 446),
    "riscv64": (444, 445, 446),
    "loongarch64": (444, 445, 446),
}
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, by the ABI that introduced them.
_EXECUTE = 1 << 0
_WRITE_FILE = 1 << 1
_READ_FILE = 1 << 2
_READ_DIR = 1 << 3
_REMOVE_DIR = 1 << 4
_REMOVE_FILE = 1 << 5
_MAKE_CHAR = 1 << 6
_MAKE_DIR = 1 << 7
_MAKE_REG = 1 << 8
_MAKE_SOCK = 1 << 9
_MAKE_FIFO = 1 << 10
_MAKE_BLOCK = 1 << 11
_MAKE_SYM = 1 << 12
_REFER = 1 << 13  # ABI 2
_TRUNCATE = 1 << 14  # ABI 3
_IOCTL_DEV = 1 << 15  # ABI 5
_SCOPE_SIGNAL = 1 << 1  # ABI 6

_READ = _EXECUTE | _READ_FILE | _READ_DIR
_FILE_RIGHTS = _EXECUTE | _WRITE_FILE | _READ_FILE | _TRUNCATE | _IOCTL_DEV

# Devices a runner writes to as a matter of course (discarded output, terminals, randomness),
# and shared memory, where Python's multiprocessing and Chromium keep their semaphores.
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx")
_DEVICE_DIRS = ("/dev/pts", "/dev/shm")


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= _REFER
    if abi >= 3:
        rights |= _TRUNCATE
    if abi >= 5:
        rights |= _IOCTL_DEV
    return rights


class _Calls:
    """The C functions, resolved once (ctypes is imported here, on first use)."""

    def __init__(self, numbers: tuple[int, int, int]) -> None:
        import ctypes

        self.ctypes = ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        self.syscall = libc.syscall
        self.syscall.restype = ctypes.c_long
        self.prctl = libc.prctl
        self.prctl.restype = ctypes.c_int
        self.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        self.create, self.add, self.restrict = (ctypes.c_long(n) for n in numbers)

        class RulesetAttr(ctypes.Structure):
            _fields_ = [
                ("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64),
            ]

        class PathBeneathAttr(ctypes.Structure):
            _pack_ = 1
            _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

        self.RulesetAttr = RulesetAttr
        self.PathBeneathAttr = PathBeneathAttr
        # The two calls the child makes, with their arguments already C values. syscall() is
        # variadic and reads every argument as a long, so each one is passed as a long.
        self.one = ctypes.c_ulong(1)
        self.zero_ul = ctypes.c_ulong(0)


_calls: _Calls | None = None


def _get_calls() -> _Calls | None:
    global _calls
    if _calls is None:
        numbers = _SYSCALLS.get(os.uname().machine.lower())
        if numbers is None or not hasattr(os, "O_PATH"):
            return None
        try:
            _calls = _Calls(numbers)
        except (OSError, AttributeError):
            return None
    return _calls


class LandlockStatus(NamedTuple):
    """Whether this kernel offers Landlock, and which ABI (or why not)."""

    abi: int
    reason: str | None = None

    @property
    def available(self) -> bool:
        """Whether Landlock can confine a run here."""
        return self.abi >= 1

    @property
    def enforced_by(self) -> str:
        """How a result names this enforcer."""
        return f"landlock ABI {self.abi}"

    @property
    def network_note(self) -> str:
        """The note every Landlock run carries: the network is not confined, and why."""
        return (
            "the network was not confined (Landlock's TCP rules name ports, not addresses, so they "
            "cannot keep loopback open and close the outside; bubblewrap can)"
        )


def abi_version() -> LandlockStatus:
    """Ask the kernel: landlock_create_ruleset(NULL, 0, VERSION) answers the ABI. Never raises."""
    calls = _get_calls()
    if calls is None:
        return LandlockStatus(
            0, f"Landlock is not supported by greenloop on {os.uname().machine or 'this CPU'}"
        )
    try:
        answer = calls.syscall(
            calls.create, None, calls.ctypes.c_size_t(0), calls.ctypes.c_ulong(_CREATE_RULESET_VERSION)
        )
    except Exception as exc:  # a broken libc binding is "unavailable", never a crash
        return LandlockStatus(0, f"the Landlock system call could not be made ({exc})")
    if answer >= 1:
        return LandlockStatus(int(answer))
    err = calls.ctypes.get_errno()
    if err == errno.ENOSYS:
        why = "the kernel has no Landlock (it needs Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)"
    elif err == errno.EOPNOTSUPP:
        why = "Landlock is built into the kernel but not enabled (add landlock to the lsm= boot parameter)"
    else:
        why = f"the kernel refused the Landlock version query ({os.strerror(err)})"
    return LandlockStatus(0, why)


_probed: LandlockStatus | None = None


def probe(env: Mapping[str, str] | None = None) -> LandlockStatus:
    """`abi_version`, cached per process, unless $GREENLOOP_LANDLOCK turns Landlock off."""
    global _probed
    env = os.environ if env is None else env
    if (env.get(DISABLE_ENV_VAR) or "").strip().lower() in ("0", "off", "no", "false"):
        return LandlockStatus(0, f"Landlock is turned off by {DISABLE_ENV_VAR}={env[DISABLE_ENV_VAR]}")
    if _probed is None:
        _probed = abi_version()
    return _probed


class Ruleset(NamedTuple):
    """A built ruleset: its descriptor (close-on-exec) and the ABI it was built for."""

    fd: int
    abi: int

    @classmethod
    def build(cls, abi: int, *, writable: Iterable[str], scope_signals: bool = True) -> Ruleset:
        """Reads everywhere, writes under `writable` (folders) and to the usual devices.

        Raises OSError when the kernel refuses (the caller reports that as a denial).
        """
        calls = _get_calls()
        if calls is None:
            raise OSError(errno.ENOSYS, "Landlock is not available")
        ct = calls.ctypes
        handled = _fs_rights(abi)
        attr = calls.RulesetAttr(handled, 0, _SCOPE_SIGNAL if scope_signals and abi >= 6 else 0)
        size = 8 if abi < 4 else 16 if abi < 6 else 24  # the struct grew with the ABI
        fd = int(calls.syscall(calls.create, ct.byref(attr), ct.c_size_t(size), ct.c_ulong(0)))
        if fd < 0:
            err = ct.get_errno()
            raise OSError(err, f"landlock_create_ruleset: {os.strerror(err)}")
        try:
            cls._rule(calls, fd, "/", _READ & handled)
            for path in writable:
                cls._rule(calls, fd, path, handled)
            for path in _DEVICES:
                cls._rule(calls, fd, path, _FILE_RIGHTS & handled, missing_ok=True)
            for path in _DEVICE_DIRS:
                cls._rule(calls, fd, path, handled, missing_ok=True)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd, abi)

    @staticmethod
    def _rule(calls: _Calls, fd: int, path: str, rights: int, *, missing_ok: bool = False) -> None:
        ct = calls.ctypes
        try:
            target = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            if missing_ok:
                return
            raise
        try:
            if not os.path.isdir(path):
                rights &= _FILE_RIGHTS  # a rule on a file may only carry file rights
            attr = calls.PathBeneathAttr(rights, target)
            done = calls.syscall(
                calls.add, ct.c_long(fd), ct.c_long(_RULE_PATH_BENEATH), ct.byref(attr), ct.c_ulong(0)
            )
            if done != 0:
                err = ct.get_errno()
                if not missing_ok:
                    raise OSError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
        finally:
            os.close(target)

    def restrict_child(self) -> Callable[[], None]:
        """The step the child runs between fork and exec (a callable for proc.spawn).

        Only pre-resolved C calls: no import, no lookup beyond the closure's own cells.
        """
        calls = _get_calls()
        assert calls is not None
        prctl, syscall = calls.prctl, calls.syscall
        no_new_privs, one, zero = _PR_SET_NO_NEW_PRIVS, calls.one, calls.zero_ul
        restrict, fd, flags = calls.restrict, calls.ctypes.c_long(self.fd), calls.zero_ul

        def confine() -> None:
            if prctl(no_new_privs, one, zero, zero, zero) != 0:
                raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
            if syscall(restrict, fd, flags) != 0:
                raise OSError("landlock_restrict_self failed")

        return confine

    def close(self) -> None:
        """Close the ruleset's descriptors."""
        with contextlib.suppress(OSError):
            os.close(self.fd)
