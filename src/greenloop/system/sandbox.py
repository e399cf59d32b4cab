"""Sandbox policy: which mode a run gets, which enforcer enforces it, and how it is started.

Four modes (docs/sandbox.md):

- ``auto`` (the default): workspace-write with the strongest enforcer the machine offers, or
  none, in which case the run still runs and its result says plainly that it was not confined;
- ``read-only``: the workspace and the system are read-only, the temporary folder is private;
- ``workspace-write``: the workspace and a private temporary folder are writable, the rest of
  the filesystem is read-only;
- ``full-access``: no sandbox at all (and the run says so).

Resolution is pure (`resolve`): a mode given explicitly for this call wins over the session's
latest recorded mode event, which wins over the deployment default from config. The workspace
root comes from the same resolved `Policy`, so the two cannot disagree.

Enforcement (`enforce`) is bubblewrap (`bwrap`) where it can start a sandbox: read-only binds
of the system, a writable (or read-only) bind of the workspace, `--tmpfs /tmp` (re-showing the
workspace and the runner's toolchain when they live under /tmp), `--unshare-net` (loopback
only), `--unshare-pid` with `--die-with-parent` (nothing the run starts can outlive it),
`--new-session` and `--cap-drop ALL`. Else Landlock (greenloop.system.landlock: writes confined to the
workspace and the run's own temporary folder, the network not confined), applied in the child
between fork and exec. Else nothing: `auto` runs and says so with how to get an enforcer; a
mode asked for by name is refused (`SandboxUnavailable`). The child environment of a sandboxed
run starts from an allow-list either way. `available_enforcers` reports both for a doctor.

This module computes argv, environments and verdicts; starting processes is proc.py's job
(the bwrap probe goes through it too).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

from greenloop.errors import ConfigError, ExitCode, GreenloopError, UsageError
from greenloop.layout import PACKAGE_DIR
from greenloop.model import Failure, Plan, RawRun, SandboxInfo

__all__ = [
    "BWRAP_ENV_VAR",
    "DEFAULT_MODE",
    "DENIED_PREFIX",
    "ENV_ALLOW",
    "ENV_ALLOW_PREFIXES",
    "MODES",
    "BwrapStatus",
    "Enforcement",
    "Enforcer",
    "EnforcerCheck",
    "Launch",
    "Mode",
    "Policy",
    "SandboxUnavailable",
    "Source",
    "allowed_env",
    "apply_denial_hints",
    "available_enforcers",
    "bwrap_denial",
    "cache_env",
    "child_env",
    "denial_hint",
    "enforce",
    "find_bwrap",
    "launch",
    "parse_mode",
    "probe_bwrap",
    "resolve",
    "resolve_for",
    "signal_exit",
    "tmp_roots",
    "wrap_argv",
]

Mode = Literal["auto", "read-only", "workspace-write", "full-access"]
MODES: tuple[Mode, ...] = get_args(Mode)
# The deployment default: workspace-write with the strongest enforcer the machine offers, and
# a plain "not enforced" when it offers none (a mode asked for by name is refused instead).
DEFAULT_MODE: Mode = "auto"
Enforcer = Literal["bwrap", "landlock"]
Source = Literal["explicit", "session", "config"]

# Lets a deployment (or a test) point greenloop at a particular bwrap binary.
BWRAP_ENV_VAR = "GREENLOOP_BWRAP"
# How a refused start shows in RunResult.crash_reason (outcome "broken").
DENIED_PREFIX = "sandbox_denied: "

# The variables a sandboxed child inherits; everything else (tokens, keys, agent variables,
# the variables that make runners switch reporters) stays outside. Plan.env adds on top.
ENV_ALLOW: frozenset[str] = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM",
        # what a test may assert on (colour, CI): passed as the shell has them
        "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "PY_COLORS", "CI",
        "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "PYTHONHOME",
        "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "NODE_PATH", "NODE_OPTIONS", "NODE_ENV", "NVM_DIR", "NVM_BIN",
        "PYENV_ROOT", "PYENV_VERSION", "VOLTA_HOME", "ASDF_DIR", "ASDF_DATA_DIR", "FNM_DIR",
        "FNM_MULTISHELL_PATH", "UV_PYTHON_INSTALL_DIR",
        "JAVA_HOME", "GOPATH", "GOROOT", "GOFLAGS", "CARGO_HOME", "RUSTUP_HOME",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "LD_LIBRARY_PATH", "PLAYWRIGHT_BROWSERS_PATH",
        # Go and Rust toolchains, by name: a GO*/CARGO_* prefix would also let credentials
        # through (CARGO_REGISTRY_TOKEN, GOOGLE_APPLICATION_CREDENTIALS)
        "GOMODCACHE", "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOTOOLCHAIN",
        "GOWORK", "GOOS", "GOARCH", "GOAMD64", "GODEBUG", "GOEXPERIMENT", "CGO_ENABLED", "GOCACHE",
        "CARGO_TARGET_DIR", "CARGO_BUILD_JOBS", "CARGO_BUILD_TARGET", "CARGO_INCREMENTAL",
        "CARGO_NET_OFFLINE", "CARGO_TERM_COLOR", "RUSTUP_TOOLCHAIN", "RUSTFLAGS", "RUSTDOCFLAGS",
        "RUST_BACKTRACE", "RUST_TEST_THREADS", "RUST_MIN_STACK", "NEXTEST_PROFILE",
    }
)  # fmt: skip
ENV_ALLOW_PREFIXES: tuple[str, ...] = ("LC_", "PYTEST_", "GREENLOOP_")

_TMP = "/tmp"
_CACHE_IN_TMP = "/tmp/greenloop-cache"


class SandboxUnavailable(GreenloopError):
    """A run asked for a sandbox that cannot be provided here (exit 3: infrastructure)."""

    exit_code = ExitCode.BROKEN


def parse_mode(value: object, *, field: str = "sandbox") -> Mode:
    """Check a mode name; an unknown one is bad input naming the field and listing the modes."""
    if isinstance(value, str):
        name = value.strip().lower().replace("_", "-")
        for mode in MODES:
            if name == mode:
                return mode
    raise UsageError(f"unknown sandbox mode {value!r} for {field}: choose one of {', '.join(MODES)}")


class Policy(NamedTuple):
    """The resolved sandbox policy of one run: mode, where it came from, and the workspace root."""

    mode: Mode
    workspace_root: str
    source: Source

    @property
    def sandboxed(self) -> bool:
        return self.mode != "full-access"

    @property
    def strict(self) -> bool:
        """A mode asked for by name is enforced or refused; `auto` runs unconfined rather than not at all."""
        return self.mode in ("read-only", "workspace-write")

    @property
    def workspace_writable(self) -> bool:
        return self.mode != "read-only"

    @property
    def network(self) -> Literal["loopback", "host"]:
        """What the run can reach: only its own loopback when sandboxed, else the host's network."""
        return "host" if self.mode == "full-access" else "loopback"

    def info(self, enforced_by: str | None) -> SandboxInfo:
        return SandboxInfo(mode=self.mode, enforced_by=enforced_by, workspace_root=self.workspace_root)

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "workspace_root": self.workspace_root,
            "source": self.source,
            "network": self.network,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Policy:
        source = d.get("source", "config")
        return cls(
            mode=parse_mode(d.get("mode", DEFAULT_MODE)),
            workspace_root=str(d["workspace_root"]),
            source=source if source in ("explicit", "session", "config") else "config",
        )


def resolve(
    workspace: str | os.PathLike[str],
    *,
    explicit: str | None = None,
    session_mode: str | None = None,
    default: str = DEFAULT_MODE,
) -> Policy:
    """Pure resolution: explicit mode for this call > session's latest mode event > config default.

    An unknown explicit mode is bad input (UsageError). A recorded session mode that is not a
    mode (a hand-edited store) is skipped, since state is tolerant on read. An unknown config
    default is a ConfigError naming the `sandbox` field.
    """
    root = os.path.realpath(os.path.abspath(os.fspath(workspace)))
    if explicit is not None and explicit != "":
        return Policy(parse_mode(explicit, field="--sandbox (tool argument `sandbox`)"), root, "explicit")
    if session_mode:
        try:
            return Policy(parse_mode(session_mode), root, "session")
        except UsageError:
            pass
    try:
        mode = parse_mode(default, field="config field `sandbox`")
    except UsageError as exc:
        raise ConfigError(str(exc)) from None
    return Policy(mode, root, "config")


def resolve_for(
    workspace: str | os.PathLike[str],
    *,
    explicit: str | None = None,
    session_id: str | None = None,
    default: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Policy:
    """`resolve` fed from the real sources: the session's recorded events in the workspace's
    store and the workspace's config (`greenloop.config.load(workspace, env=env).sandbox`)."""
    if explicit:
        return resolve(workspace, explicit=explicit)  # nothing else is read when the call decides
    session_mode: str | None = None
    if session_id:
        session_mode = _recorded_mode(workspace, session_id)
    if default is None:
        from greenloop import config

        default = config.load(workspace, env=env).sandbox
    return resolve(workspace, session_mode=session_mode, default=default)


def _recorded_mode(workspace: str | os.PathLike[str], session_id: str) -> str | None:
    """The session's latest sandbox mode event, or None (no state yet: nothing is created)."""
    from greenloop.closure import store

    if not store.has_state(workspace):
        return None
    with store.Store(workspace) as st:
        return st.latest_sandbox_mode(session_id)


# --------------------------------------------------------------------------- bubblewrap probe


_INSTALL_BWRAP = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)
_ENABLE_USERNS = (
    "enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
    "24.04+ kernel.apparmor_restrict_unprivileged_userns=0) or make bwrap setuid"
)
_INSTALL_BWRAP_SHORT = "install bubblewrap (apt-get install bubblewrap, or dnf/pacman)"
_ENABLE_USERNS_SHORT = "enable unprivileged user namespaces for bubblewrap (docs/sandbox.md)"
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


# --------------------------------------------------------------------------- the bwrap argv


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _tool_root(path: str) -> str:
    """The installation a tool belongs to: the `node_modules` folder holding it, the prefix
    above `bin/`, else its own folder."""
    parts = path.split(os.sep)
    if "node_modules" in parts[:-1]:
        return os.sep.join(parts[: parts.index("node_modules") + 1])
    folder = os.path.dirname(path)
    if os.path.basename(folder) in ("bin", "Scripts"):
        prefix = os.path.dirname(folder)
        if prefix not in (_TMP, "/"):
            return prefix
    return folder


# Where toolchain managers keep their installs and caches (read by the runner, never written
# by it under the sandbox): each variable names a folder or a PATH-like list.
_TOOLCHAIN_VARS = (
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "NVM_DIR", "NVM_BIN", "VOLTA_HOME", "ASDF_DATA_DIR",
    "ASDF_DIR", "FNM_DIR", "FNM_MULTISHELL_PATH", "UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR",
    "UV_TOOL_DIR", "npm_config_prefix", "NODE_PATH", "PYTHONPATH", "JAVA_HOME", "GOROOT",
    "GOPATH", "GOMODCACHE", "CARGO_HOME", "RUSTUP_HOME",
)  # fmt: skip


def _python_home(root: str) -> list[str]:
    """A virtualenv's base interpreter prefix (`home` in its pyvenv.cfg), resolved."""
    try:
        with open(os.path.join(root, "pyvenv.cfg"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    home = value.strip()
                    return [_tool_root(os.path.join(home, "x")), _tool_root(os.path.realpath(home) + "/x")]
    except OSError:
        pass
    return []


def tmp_roots(argv0: str | None, env: Mapping[str, str], cwd: str = ".") -> list[str]:
    """Folders under /tmp that a private /tmp must still show: the runner's installation (as
    named and as resolved, a virtualenv's base interpreter too), folders the working folder
    links to, PATH entries and the toolchain managers' folders (_TOOLCHAIN_VARS) that live there.
    """
    candidates: list[str] = []
    if argv0:
        found = argv0 if "/" in argv0 else shutil.which(argv0, path=env.get("PATH") or os.defpath)
        if found:
            found = os.path.abspath(os.path.join(cwd, found))
            for root in (_tool_root(found), _tool_root(os.path.realpath(found))):
                # a venv linked into the workspace: its own folder resolved, and its base Python
                candidates += [root, os.path.realpath(root), *_python_home(os.path.realpath(root))]
    # A workspace whose node_modules or virtualenv is a link to a folder under /tmp (a shared
    # install, a monorepo's hoisted modules) must still see the whole linked installation.
    try:
        with os.scandir(cwd) as links:
            for link in links:
                if link.is_symlink():
                    real = os.path.realpath(link.path)
                    candidates += [real, *_python_home(real)]
    except OSError:
        pass
    for entry in (env.get("PATH") or "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            candidates += [_tool_root(os.path.join(entry, "x")), _tool_root(os.path.realpath(entry) + "/x")]
    for var in _TOOLCHAIN_VARS:
        for entry in (env.get(var) or "").split(os.pathsep):
            if entry and os.path.isabs(entry):
                candidates += [entry, os.path.realpath(entry)]
    # greenloop's own files that runners load (the pytest plugin, the vitest/jest/node/mocha
    # reporters, the unittest runner) live in its package folder: a checkout or virtualenv
    # under /tmp (CI, tox) must still show it.
    package = PACKAGE_DIR
    candidates += [package, os.path.realpath(package)]
    roots: list[str] = []
    for c in candidates:
        c = os.path.normpath(c)
        if _under(c, _TMP) and c != _TMP and os.path.exists(c) and c not in roots:
            roots.append(c)
    return roots


def wrap_argv(
    argv: Sequence[str],
    policy: Policy,
    *,
    share_net: bool = False,
    cwd: str | None = None,
    readable: Iterable[str] = (),
    writable: Iterable[str] = (),
    bwrap: str = "bwrap",
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The command line that runs `argv` under `policy` (unchanged for full-access).

    `readable` are extra folders to re-show read-only (only those under /tmp need it), on top
    of the toolchain of `argv[0]` that `tmp_roots` finds from `env` (default: this process's
    environment), so a command run by an interpreter under /tmp always finds it. `writable` are
    extra folders to bind writable (for example the run folder where a runner writes its report
    in read-only mode; they must exist). `share_net=True` keeps the host's network namespace:
    the integration runner uses it so its units still reach each other over loopback, with the
    filesystem still confined.
    """
    if not policy.sandboxed:
        return list(argv)
    ws = policy.workspace_root
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", _TMP]
    toolchain = tmp_roots(argv[0] if argv else None, os.environ if env is None else env, cwd or ws)
    # Parents before children, so a bind inside another one lands on top of it.
    binds: list[tuple[str, str]] = []
    for path in (*readable, *toolchain):
        real = os.path.realpath(path)
        if _under(real, _TMP) and real != _TMP and not _under(real, ws):
            binds.append(("--ro-bind", real))
    binds.append(("--bind" if policy.workspace_writable else "--ro-bind", ws))
    for path in writable:
        real = os.path.realpath(path)
        if policy.workspace_writable and _under(real, ws):
            continue
        binds.append(("--bind", real))
    seen: set[str] = set()
    for flag, path in sorted(binds, key=lambda b: (b[1].count("/"), b[1])):
        if path in seen:
            continue
        seen.add(path)
        out += [flag, path, path]
    if not policy.workspace_writable:
        out += ["--dir", _CACHE_IN_TMP]
    if not share_net:
        out.append("--unshare-net")
    out += ["--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    out += ["--chdir", os.path.realpath(cwd or ws), "--"]
    return out + list(argv)


# --------------------------------------------------------------------------- the environment


_TMP_VARS = ("TMPDIR", "TMP", "TEMP", "TEMPDIR")


def cache_env(policy: Policy, base_env: Mapping[str, str], *, tmp: str | None = None) -> dict[str, str]:
    """Cache locations redirected to places the mode can write (npm, XDG, pytest, Go, Cargo, TMPDIR).

    workspace-write: under the workspace's `.greenloop/cache/` (kept between runs);
    read-only: under the private temporary folder (gone with the run). That folder is /tmp
    inside bubblewrap; without bubblewrap it is the run's own folder `tmp`, which TMPDIR, TMP,
    TEMP and TEMPDIR then name.
    """
    if not policy.sandboxed:
        return {}
    private = tmp or _TMP
    base = (
        os.path.join(policy.workspace_root, ".greenloop", "cache")
        if policy.workspace_writable
        else (os.path.join(tmp, "cache") if tmp else _CACHE_IN_TMP)
    )
    env = {"TMPDIR": private}
    if tmp:
        env.update(dict.fromkeys(_TMP_VARS, tmp))
    env["npm_config_cache"] = os.path.join(base, "npm")
    env["XDG_CACHE_HOME"] = os.path.join(base, "xdg")
    # Go's build cache must be writable; the module cache (GOMODCACHE) and CARGO_HOME are only
    # read, from where they are. Cargo builds into the workspace's target/ unless the
    # workspace is read-only.
    env["GOCACHE"] = os.path.join(base, "go-build")
    if not policy.workspace_writable:
        env["CARGO_TARGET_DIR"] = os.path.join(base, "cargo-target")
    env["BUN_INSTALL_CACHE_DIR"] = os.path.join(base, "bun")  # bun's module cache (bun test, bunx)
    # Playwright finds its browsers under the XDG cache; they stay where they are (read-only).
    home = base_env.get("HOME") or os.path.expanduser("~")
    browsers = os.path.join(base_env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "ms-playwright")
    if "PLAYWRIGHT_BROWSERS_PATH" not in base_env and os.path.isdir(browsers):
        env["PLAYWRIGHT_BROWSERS_PATH"] = browsers
    if not policy.workspace_writable:
        # pytest keeps .pytest_cache in the (now read-only) rootdir; point it at /tmp instead.
        addopts = base_env.get("PYTEST_ADDOPTS", "")
        env["PYTEST_ADDOPTS"] = f"{addopts} -o cache_dir={base}/pytest".strip()
    return env


def allowed_env(base_env: Mapping[str, str], policy: Policy) -> dict[str, str]:
    """What a run inherits before greenloop's own changes: the allow-list when sandboxed."""
    if not policy.sandboxed:
        return dict(base_env)
    base = {k: v for k, v in base_env.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES)}
    base.setdefault("PATH", os.defpath)
    return base


def child_env(
    base_env: Mapping[str, str],
    policy: Policy,
    *,
    add: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    drop: Iterable[str] = (),
    tmp: str | None = None,
) -> dict[str, str]:
    """A run's child environment under its policy.

    Sandboxed modes start from the allow-list; full-access inherits `base_env`. Either way
    greenloop.system.env.child_env then drops the variables that change runners' output and those in
    `drop`, adds its fixed variables and the plan's `add`; last come the cache redirections
    the mode needs (`tmp`: the run's private temporary folder when it is not bubblewrap's /tmp).
    """
    from greenloop.system import env as runner_env

    base = allowed_env(base_env, policy)
    pairs = tuple(add.items()) if isinstance(add, Mapping) else tuple(add)
    env = runner_env.child_env(base, add=pairs, drop=drop)
    env.update(cache_env(policy, {**base_env, **env}, tmp=tmp))  # the original XDG_CACHE_HOME, new addopts
    return env


class Launch(NamedTuple):
    """How to start one planned run under a policy: argv, environment and what to report.

    Under Landlock, `before_exec` is the step the child runs between fork and exec (proc.py
    hands it to the child); `close()` after the run releases the ruleset and removes the run's
    private temporary folder.
    """

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    shell: bool
    info: SandboxInfo
    before_exec: Callable[[], None] | None = None
    tmpdir: str | None = None
    ruleset: Any = None  # landlock.Ruleset, kept open until the child has started
    notes: tuple[str, ...] = ()
    # how the environment differs from what the run inherits (env.changes), for the notes
    env_note: str | None = None

    @property
    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def close(self) -> None:
        if self.ruleset is not None:
            self.ruleset.close()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)


def launch(
    plan: Plan,
    policy: Policy,
    *,
    base_env: Mapping[str, str] | None = None,
    status: BwrapStatus | None = None,
) -> Launch:
    """Wrap a Plan for its policy and the enforcer `enforce` picks. Raises SandboxUnavailable
    when a mode asked for by name cannot be enforced here.

    bubblewrap: a verbatim shell command (`plan.shell`) runs as `/bin/sh -c CMD` inside the
    sandbox, so the returned `shell` is False then. Landlock (or `auto` with no enforcer): the
    command runs as planned, with a private temporary folder of its own and, under Landlock, the
    ruleset applied in the child. For read-only mode the folder of the planned report file stays
    writable (and is created), so the runner can still hand greenloop its machine report.
    """
    base_env = os.environ if base_env is None else base_env
    from greenloop.system.env import changes

    if not policy.sandboxed:
        env = child_env(base_env, policy, add=plan.env)
        note = changes(allowed_env(base_env, policy), env)
        return Launch(tuple(plan.argv), tuple(env.items()), plan.shell, policy.info(None), env_note=note)
    chosen = enforce(policy, base_env, bwrap=status)
    writable: list[str] = []
    # A missing workspace is left for the enforcer to refuse (a denial, reported as one):
    # nothing is created on its behalf.
    present = os.path.isdir(policy.workspace_root)
    if plan.report_file and present:
        report_dir = os.path.dirname(os.path.abspath(os.path.join(plan.cwd, plan.report_file)))
        Path(report_dir).mkdir(parents=True, exist_ok=True)
        writable.append(report_dir)
    if policy.workspace_writable and present:
        for sub in ("npm", "xdg", "bun"):
            Path(policy.workspace_root, ".greenloop", "cache", sub).mkdir(parents=True, exist_ok=True)
    if chosen.enforcer == "bwrap":
        assert chosen.bwrap_path is not None
        env = child_env(base_env, policy, add=plan.env)
        argv: list[str] = ["/bin/sh", "-c", plan.argv[0]] if plan.shell else list(plan.argv)
        wrapped = wrap_argv(argv, policy, cwd=plan.cwd, writable=writable, bwrap=chosen.bwrap_path, env=env)
        note = changes(allowed_env(base_env, policy), env)
        info = policy.info(chosen.enforced_by)
        return Launch(tuple(wrapped), tuple(env.items()), False, info, env_note=note)
    tmpdir = tempfile.mkdtemp(prefix="greenloop-tmp-")
    env = child_env(base_env, policy, add=plan.env, tmp=tmpdir)
    note = changes(allowed_env(base_env, policy), env)
    if not policy.workspace_writable:
        Path(tmpdir, "cache").mkdir()
    info = policy.info(chosen.enforced_by)._replace(note=chosen.unenforced_note)
    if chosen.enforcer is None:  # `auto` on a machine without an enforcer: runs, and says so
        return Launch(
            tuple(plan.argv), tuple(env.items()), plan.shell, info, tmpdir=tmpdir, notes=chosen.notes,
            env_note=note,
        )
    from greenloop.system import landlock

    if policy.workspace_writable and present:
        writable.append(policy.workspace_root)
    try:
        ruleset = landlock.Ruleset.build(chosen.landlock_abi, writable=[tmpdir, *writable])
    except OSError as exc:
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise SandboxUnavailable(
            f"sandbox mode {policy.mode!r}: the Landlock ruleset could not be built ({exc}); "
            f"choose --sandbox full-access explicitly to run without a sandbox"
        ) from None
    return Launch(
        tuple(plan.argv),
        tuple(env.items()),
        plan.shell,
        info,
        before_exec=ruleset.restrict_child(),
        tmpdir=tmpdir,
        ruleset=ruleset,
        notes=chosen.notes,
        env_note=note,
    )


# --------------------------------------------------------------------------- denials as hints

_ROFS = r"(?:EROFS|[Rr]ead-only file system)"
_PERM = r"(?:EACCES|[Pp]ermission denied)"
# Each finds the path a refused write named, in Python, Node and shell wording.
_PATH_FORMS = (
    r"{err}[:,]\s*(?:[a-z]+\s+)?['\"](?P<path>[^'\"]+)['\"]",  # ...: '/p'  |  ..., open '/p'
    r"{err}[^\n]*?(?:open|mkdir|write|unlink|rename|copyfile|scandir)\s+['\"](?P<path>[^'\"]+)['\"]",
    r"['\"](?P<path>/[^'\"]+)['\"]:\s*{err}",  # touch: cannot touch '/p': Read-only file system
    r"(?:cannot create|can't create)\s+(?P<path>/[^:\s]+):\s*{err}",  # sh: cannot create /p: ...
)
_NET = (
    r"ENETUNREACH|[Nn]etwork is unreachable|EAI_AGAIN|Temporary failure in name resolution"
    r"|getaddrinfo ENOTFOUND|Name or service not known|nodename nor servname"
)


class _Denials(NamedTuple):
    erofs: tuple[re.Pattern[str], ...]
    eacces: tuple[re.Pattern[str], ...]
    erofs_bare: re.Pattern[str]
    net: re.Pattern[str]


@functools.cache
def _denials() -> _Denials:
    """The patterns, compiled on first use: only a failed sandboxed run needs them, and every
    run imports this module before its runner starts."""
    return _Denials(
        tuple(re.compile(f.format(err=_ROFS)) for f in _PATH_FORMS),
        tuple(re.compile(f.format(err=_PERM)) for f in _PATH_FORMS),
        re.compile(_ROFS),
        re.compile(_NET),
    )


def _denied_path(text: str, forms: tuple[re.Pattern[str], ...]) -> str | None:
    for form in forms:
        m = form.search(text)
        if m:
            return m.group("path")
    return None


def _inside(path: str, root: str) -> bool:
    return _under(os.path.normpath(path), os.path.normpath(root))


def _private_tmp(path: str) -> str:
    """The run's own temporary folder a path lies in (greenloop-tmp-*), else the path itself
    made unmatchable: under Landlock the rest of /tmp is not writable."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) > 2 and parts[1] == "tmp" and parts[2].startswith("greenloop-tmp-"):
        return os.sep.join(parts[:3])
    return "\0"


def denial_hint(failure: Failure, sandbox: SandboxInfo, *, language: str = "en") -> str | None:
    """A hint when a failure shows the sandbox stopping it, naming the mode that would allow it.

    Writes: EROFS anywhere, or EACCES on an absolute path outside the workspace and /tmp (under
    Landlock, which answers EACCES and leaves only the run's own temporary folder writable: any
    absolute path outside the workspace and that folder). A write inside the workspace under
    read-only needs workspace-write; anything else needs full-access. Network (bubblewrap only:
    Landlock leaves it alone): unreachable addresses and failed name lookups need full-access.
    """
    if sandbox.mode == "full-access" or sandbox.enforced_by is None:
        return None
    landlocked = sandbox.enforced_by.startswith("landlock")
    label = "auto: workspace-write" if sandbox.mode == "auto" else sandbox.mode
    text = "\n".join(p for p in (failure.message, failure.stack, failure.got or "") if p)
    ws = sandbox.workspace_root or ""
    stopped = False
    pattern = _denials()
    path = _denied_path(text, pattern.erofs)
    if path is not None or pattern.erofs_bare.search(text):
        stopped = True
    else:
        path = _denied_path(text, pattern.eacces)
        # EACCES inside the workspace or /tmp is an ordinary permission problem, not the sandbox.
        stopped = (
            path is not None
            and os.path.isabs(path)
            and not ((ws and _inside(path, ws)) or _inside(path, _private_tmp(path) if landlocked else _TMP))
        )
    if stopped:
        inside_ws = bool(path) and (not os.path.isabs(path or "") or (ws != "" and _inside(path or "", ws)))
        needed = "workspace-write" if sandbox.mode == "read-only" and inside_ws else "full-access"
        where = f" to {path}" if path else ""
        if language == "zh":
            return (
                f"沙箱（{label}）阻止了写入{where}：此模式下只有"
                f"{'私有 /tmp' if sandbox.mode == 'read-only' else '工作区和私有 /tmp'}可写。"
                f"请改为写入工作区或临时目录；若确实需要，使用 {needed} 模式（--sandbox {needed}）。"
            )
        tmp_name = "the run's private temporary folder ($TMPDIR)" if landlocked else "a private /tmp"
        allowed = f"only {tmp_name}" if sandbox.mode == "read-only" else f"only the workspace and {tmp_name}"
        return (
            f"The sandbox ({label}) stopped a write{where}: {allowed} are writable in this mode. "
            f"Write under the workspace or a temporary folder instead, or, if the test really needs it, "
            f"run with --sandbox {needed} (tool argument sandbox='{needed}'), which allows it."
        )
    if pattern.net.search(text) and not landlocked:
        if language == "zh":
            return (
                f"沙箱（{label}）切断了网络：只有沙箱内的回环地址可用。"
                "请在测试中使用本地桩服务；若确实需要外网，使用 full-access 模式（--sandbox full-access）。"
            )
        return (
            f"The sandbox ({label}) cut the network: only loopback inside the sandbox is reachable. "
            "Use a local stub server in the test, or, if it really needs the outside network, "
            "run with --sandbox full-access (tool argument sandbox='full-access'), which allows it."
        )
    return None


def apply_denial_hints(
    failures: Iterable[Failure], sandbox: SandboxInfo, *, language: str = "en"
) -> tuple[Failure, ...]:
    """Put the sandbox hint first on each failure the sandbox caused (keeping any other hint)."""

    out: list[Failure] = []
    for f in failures:
        hint = denial_hint(f, sandbox, language=language)
        if hint and hint not in f.hint:
            f = f._replace(hint=f"{hint} {f.hint}".strip() if f.hint else hint)
        out.append(f)
    return tuple(out)
