"""Sandbox policy: which mode a run gets and where that choice came from.

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

The rest of the sandbox lives beside this module: which enforcer a run gets and whether the
machine offers one (enforcers.py), bubblewrap's command line (bwrap_command.py), the
allow-listed child environment (env.py), starting a planned run under its policy (launch.py)
and the hints that name a denial (denials.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, get_args

from greenloop.errors import ConfigError, ExitCode, GreenloopError, UsageError
from greenloop.result import SandboxInfo

if TYPE_CHECKING:
    from greenloop.config import Config

__all__ = [
    "DEFAULT_MODE",
    "DENIED_PREFIX",
    "MODES",
    "Mode",
    "Policy",
    "SandboxUnavailable",
    "Source",
    "parse_mode",
    "resolve",
    "resolve_for",
]

Mode = Literal["auto", "read-only", "workspace-write", "full-access"]
MODES: tuple[Mode, ...] = get_args(Mode)
# The deployment default: workspace-write with the strongest enforcer the machine offers, and
# a plain "not enforced" when it offers none (a mode asked for by name is refused instead).
DEFAULT_MODE: Mode = "auto"
Source = Literal["explicit", "session", "config"]

# How a refused start shows in RunResult.crash_reason (outcome "broken").
DENIED_PREFIX = "sandbox_denied: "


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
        """Any mode but full-access confines the run."""
        return self.mode != "full-access"

    @property
    def strict(self) -> bool:
        """A mode asked for by name is enforced or refused; `auto` runs unconfined rather than not at all."""
        return self.mode in ("read-only", "workspace-write")

    @property
    def workspace_writable(self) -> bool:
        """Every mode but read-only lets the run write its workspace."""
        return self.mode != "read-only"

    @property
    def network(self) -> Literal["loopback", "host"]:
        """What the run can reach: only its own loopback when sandboxed, else the host's network."""
        return "host" if self.mode == "full-access" else "loopback"

    def info(self, enforced_by: str | None) -> SandboxInfo:
        """What a run's result says about its sandbox, once the enforcer is known."""
        return SandboxInfo(mode=self.mode, enforced_by=enforced_by, workspace_root=self.workspace_root)

    def to_json(self) -> dict[str, Any]:
        """The policy as `greenloop sandbox show --json` prints it."""
        return {
            "mode": self.mode,
            "workspace_root": self.workspace_root,
            "source": self.source,
            "network": self.network,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Policy:
        """Read a policy back; an unknown source reads as the config's."""
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
    config: Config | None = None,
) -> Policy:
    """`resolve` fed from the real sources: the session's recorded events in the workspace's
    store and the workspace's config (`greenloop.config.load(workspace, env=env).sandbox`, or
    `config` when the caller has loaded it)."""
    if explicit:
        return resolve(workspace, explicit=explicit)  # nothing else is read when the call decides
    session_mode: str | None = None
    if session_id:
        session_mode = _recorded_mode(workspace, session_id, config)
    if default is None:
        if config is None:
            from greenloop import config as config_mod

            config = config_mod.load(workspace, env=env)
        default = config.sandbox
    return resolve(workspace, session_mode=session_mode, default=default)


def _recorded_mode(workspace: str | os.PathLike[str], session_id: str, config: Config | None) -> str | None:
    """The session's latest sandbox mode event, or None (no state yet: nothing is created)."""
    from greenloop.closure import store
    from greenloop.state.url import configured

    location = configured(workspace, config=config)
    if not store.has_state(workspace, location):
        return None
    with store.Store(workspace, location=location) as st:
        return st.latest_sandbox_mode(session_id)
