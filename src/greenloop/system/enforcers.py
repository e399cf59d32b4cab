"""Which enforcer confines a run, and whether this machine offers one.

Bubblewrap (`bwrap`) where it can start a sandbox (`probe_bwrap` starts one tiny sandbox, once
per process and binary); else Landlock (greenloop.system.landlock: writes confined to the
workspace and the run's own temporary folder, the network not confined), applied in the child
between fork and exec; else nothing: `auto` runs and says so with how to get an enforcer, a
mode asked for by name is refused (`SandboxUnavailable`). `available_enforcers` reports both
for a doctor. `bwrap_denial` and `signal_exit` read a bubblewrap run's result.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from typing import Literal, NamedTuple

from greenloop.model import RawRun
from greenloop.system.bwrap_command import tmp_roots, wrap_argv
from greenloop.system.sandbox import Policy, SandboxUnavailable

__all__ = [
    "BWRAP_ENV_VAR",
    "BwrapStatus",
    "Enforcement",
    "Enforcer",
    "EnforcerCheck",
    "available_enforcers",
    "bwrap_denial",
    "enforce",
    "find_bwrap",
    "probe_bwrap",
    "signal_exit",
]

Enforcer = Literal["bwrap", "landlock"]

# Lets a deployment (or a test) point greenloop at a particular bwrap binary.
BWRAP_ENV_VAR = "GREENLOOP_BWRAP"

_INSTALL_BWRAP = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)
_ENABLE_USERNS = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
    "24.04+ kernel.apparmor_restrict_unprivileged_userns=0) or make bwrap setuid"
)
_INSTALL_BWRAP_SHORT = "install bubblewrap (apt-get install bubblewrap, or dnf/pacman)"
_ENABLE_USERNS_SHORT = (
    "enable unprivileged user namespaces for bubblewrap (greenloop's docs, \"Sandboxed runs\", say how)"
)
_GET_LANDLOCK = (
    "use a kernel with Landlock (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK=y, landlock in "
    "the lsm= boot parameter)"
)


class BwrapStatus(NamedTuple):
    """Whether bubblewrap exists and can start a sandbox here (and whether loopback is up in it)."""

    available: bool
    path: str | None
    version: str | None = None
    loopback: bool = False
    reason: str | None = None
    fix: str | None = None  # how to get a working bwrap, when it is unavailable

    @property
    def enforced_by(self) -> str:
        """How a result names this enforcer, with bwrap's version when known."""
        return f"bubblewrap {self.version}" if self.version else "bubblewrap"

    def require(self, mode: str) -> None:
        """Raise SandboxUnavailable with the fix when a sandboxed mode cannot be enforced."""
        if self.available:
            return
        raise SandboxUnavailable(
            f"sandbox mode {mode!r} needs bubblewrap, but {self.reason}. "
            "Install it (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
            "Arch: pacman -S bubblewrap), or choose --sandbox full-access (tool argument "
            "sandbox='full-access') explicitly to run without a sandbox."
        )


class EnforcerCheck(NamedTuple):
    """One way this machine could enforce a sandbox (for `greenloop doctor`, `sandbox show`)."""

    name: str  # "bwrap" | "landlock"
    available: bool
    detail: str  # e.g. "bwrap 0.8.0 at /usr/bin/bwrap, user namespaces allowed" or "Landlock ABI 7"
    fix: str | None  # how to get it when unavailable


def _bwrap_check(status: BwrapStatus) -> EnforcerCheck:
    if status.available:
        detail = f"bwrap {status.version or '(unknown version)'} at {status.path}, user namespaces allowed"
        if not status.loopback:
            detail += ", but loopback did not answer inside it"
        return EnforcerCheck("bwrap", True, detail, None)
    return EnforcerCheck(
        "bwrap", False, status.reason or "bwrap is unavailable", status.fix or _INSTALL_BWRAP
    )


def _landlock_check(env: Mapping[str, str]) -> EnforcerCheck:
    from greenloop.system import landlock

    status = landlock.probe(env)
    if status.available:
        return EnforcerCheck("landlock", True, f"Landlock ABI {status.abi}", None)
    fix = (
        f"unset {landlock.DISABLE_ENV_VAR}"
        if (env.get(landlock.DISABLE_ENV_VAR) or "").strip()
        else _GET_LANDLOCK
    )
    return EnforcerCheck("landlock", False, status.reason or "Landlock is unavailable", fix)


def available_enforcers(env: Mapping[str, str] | None = None) -> tuple[EnforcerCheck, ...]:
    """The enforcers this machine offers, strongest first: bubblewrap, then Landlock.

    Cheap (the bwrap probe, cached per process, and one system call) and never raising: a
    probe that fails for an unexpected reason reports the enforcer unavailable with that reason.
    """
    env = os.environ if env is None else env
    probes: tuple[tuple[str, Callable[[], EnforcerCheck]], ...] = (
        ("bwrap", lambda: _bwrap_check(probe_bwrap(env))),
        ("landlock", lambda: _landlock_check(env)),
    )
    checks: list[EnforcerCheck] = []
    for name, check in probes:
        try:
            checks.append(check())
        except Exception as exc:  # a doctor must never crash on the thing it diagnoses
            fix = _INSTALL_BWRAP if name == "bwrap" else _GET_LANDLOCK
            checks.append(
                EnforcerCheck(name, False, f"the {name} probe failed ({type(exc).__name__}: {exc})", fix)
            )
    return tuple(checks)


class Enforcement(NamedTuple):
    """Which enforcer a run gets under its policy, and what the run should be told about it."""

    enforcer: Enforcer | None  # None: full-access, or `auto` on a machine that offers nothing
    enforced_by: str | None = None  # "bubblewrap 0.8.0" | "landlock ABI 7"
    bwrap_path: str | None = None
    landlock_abi: int = 0
    notes: tuple[str, ...] = ()

    @property
    def unenforced_note(self) -> str | None:
        """The note that says the sandbox was asked for but not enforced (None when it was)."""
        return self.notes[0] if self.enforcer is None and self.notes else None


def enforce(
    policy: Policy, env: Mapping[str, str] | None = None, *, bwrap: BwrapStatus | None = None
) -> Enforcement:
    """The strongest enforcer for `policy` here: bubblewrap, else Landlock, else none.

    A mode asked for by name (read-only, workspace-write: explicit, a session's, the config's)
    is enforced or refused: SandboxUnavailable when neither enforcer works. `auto` runs without
    one rather than not at all, and its note says so and how to get one.
    """
    if not policy.sandboxed:
        return Enforcement(None)
    env = os.environ if env is None else env
    status = bwrap if bwrap is not None else probe_bwrap(env)
    if status.available and status.path:
        return Enforcement("bwrap", status.enforced_by, bwrap_path=status.path)
    from greenloop.system import landlock

    ll = landlock.probe(env)
    if ll.available:
        note = (
            f"sandbox enforced by {ll.enforced_by}, since bubblewrap is unavailable ({status.reason}): "
            "writes are confined to the workspace and the run's own temporary folder; " + ll.network_note
        )
        return Enforcement("landlock", ll.enforced_by, landlock_abi=ll.abi, notes=(note,))
    fixes = f"{status.fix or _INSTALL_BWRAP}; or {_GET_LANDLOCK}"
    if policy.strict:
        raise SandboxUnavailable(
            f"sandbox mode {policy.mode!r} cannot be enforced here: bubblewrap is unavailable "
            f"({status.reason}) and so is Landlock ({ll.reason}). To enforce it, {fixes}. "
            "Or choose --sandbox full-access (tool argument sandbox='full-access') explicitly to run "
            "without a sandbox, or --sandbox auto to run unconfined whenever no sandbox is available."
        )
    # Said first and briefly: a model reads notes cut at 500 characters.
    short_fix = _ENABLE_USERNS_SHORT if status.fix == _ENABLE_USERNS else _INSTALL_BWRAP_SHORT
    note = (
        f"sandbox NOT enforced ({policy.mode}): the run could write outside the workspace and reach "
        f"the network; only the environment allow-list applied. Neither bubblewrap ({status.reason}) "
        f"nor Landlock ({ll.reason}) is available. To enforce it, {short_fix}, or use a kernel with "
        "Landlock (Linux 5.13+)."
    )
    return Enforcement(None, notes=(note,))


def find_bwrap(env: Mapping[str, str]) -> str | None:
    """The bwrap binary to use: $GREENLOOP_BWRAP when set (even if it does not exist), else PATH."""
    override = env.get(BWRAP_ENV_VAR)
    if override:
        return override
    return shutil.which("bwrap", path=env.get("PATH") or os.defpath)


_LOOPBACK_CHECK = (
    "import socket\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
    "c = socket.create_connection(s.getsockname(), timeout=2); print('loopback-ok')\n"
)


def probe_bwrap(env: Mapping[str, str] | None = None) -> BwrapStatus:
    """Does bwrap exist and start a workspace-write-shaped sandbox with loopback up?

    The answer is cached per process and per binary: the probe starts one tiny sandbox.
    """
    env = os.environ if env is None else env
    path = find_bwrap(env)
    if path is None:
        # A bwrap that is there but cannot execute (hidden by a /dev/null bound over it, the
        # executable bit lost) is named as such: "not installed" would send the reader astray.
        for folder in (env.get("PATH") or os.defpath).split(os.pathsep):
            there = os.path.join(folder or ".", "bwrap")
            if os.path.lexists(there):
                return _probe(there, sys.executable)
        return BwrapStatus(False, None, reason="bwrap was not found on PATH", fix=_INSTALL_BWRAP)
    return _probe(path, sys.executable)


@functools.cache
def _probe(path: str, python: str) -> BwrapStatus:
    from greenloop.system import proc

    if not os.path.exists(path):
        return BwrapStatus(False, path, reason=f"{path} does not exist", fix=_INSTALL_BWRAP)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        # e.g. hidden by binding /dev/null over it, or a copy without the executable bit
        return BwrapStatus(
            False,
            path,
            reason=f"{path} is not an executable file, so it cannot run",
            fix=f"make {path} the executable bwrap again, or re{_INSTALL_BWRAP}",
        )
    import tempfile  # (loads random and hashlib: not before a full-access run starts)

    with tempfile.TemporaryDirectory(prefix="greenloop-bwrap-probe-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        raw = proc.run_to_completion(
            [path, "--version"], cwd=tmp, env=_minimal_env(), timeout_s=10, stdout_path=out, stderr_path=err
        )
        version_text = _read(out).strip()
        if raw.exit_code != 0:
            reason = raw.spawn_error or _read(err).strip() or f"`{path} --version` exited {raw.exit_code}"
            return BwrapStatus(False, path, reason=f"{path} cannot run ({reason})", fix=_INSTALL_BWRAP)
        version = version_text.split()[-1] if version_text else None
        policy = Policy("workspace-write", os.path.realpath(tmp), "explicit")
        readable = tmp_roots(python, _minimal_env())  # a venv under /tmp stays visible
        argv = wrap_argv(
            [python, "-I", "-S", "-c", _LOOPBACK_CHECK], policy, bwrap=path, cwd="/", readable=readable
        )
        raw = proc.run_to_completion(
            argv, cwd=tmp, env=_minimal_env(), timeout_s=20, stdout_path=out + "2", stderr_path=err + "2"
        )
        said = _read(out + "2")
        if raw.exit_code == 0 and "loopback-ok" in said:
            return BwrapStatus(True, path, version, loopback=True)
        denial = bwrap_denial(raw)
        if denial is not None:
            return BwrapStatus(
                False,
                path,
                version,
                reason=f"bwrap cannot start a sandbox here ({denial}); if user namespaces are disabled, "
                + _ENABLE_USERNS,
                fix=_ENABLE_USERNS,
            )
        # The sandbox starts but loopback did not answer: still a sandbox, say so.
        return BwrapStatus(True, path, version, loopback=False)


def _minimal_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"}


def _read(path: str, limit: int = 64_000) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def bwrap_denial(raw: RawRun, stderr_text: str | None = None) -> str | None:
    """bwrap's own refusal (it exits before the command runs, its error first on stderr), or None.

    `stderr_text` defaults to the start of the run's stderr file."""
    if raw.spawn_error:
        return raw.spawn_error
    if raw.exit_code is None or raw.exit_code == 0 or raw.timed_out or raw.aborted:
        return None
    if stderr_text is None:
        stderr_text = _read(raw.stderr_path, 4096)
    for line in stderr_text.splitlines():
        if line.strip():
            if line.startswith("bwrap: "):
                return line[len("bwrap: ") :].strip()
            return None
    return None


def signal_exit(raw: RawRun) -> RawRun:
    """A sandboxed run's exit as if it had run outside: bwrap reports a command killed by
    signal N as exit code 128+N; greenloop reports it as killed by N (exit_code -N), the way
    an unsandboxed run's is, so a crash reads the same in every mode."""
    code = raw.exit_code
    if raw.signal is None and code is not None and 128 < code < 128 + 65:
        return raw._replace(exit_code=-(code - 128), signal=code - 128)
    return raw
