"""A unit's start command: the argv, folder and environment it is started with, plain or
wrapped in the run's sandbox (bubblewrap, Landlock, or only the environment allow-list)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greenloop.integration.ports import HOST
from greenloop.integration.spec.records import Unit, env_var_name
from greenloop.system import bwrap_command, proc, sandbox
from greenloop.system.env import child_env

__all__ = ["StartCommand", "confine", "start_command"]


@dataclass(frozen=True)
class StartCommand:
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


def start_command(
    unit: Unit, port: int, dep_urls: Mapping[str, str], base_env: Mapping[str, str]
) -> StartCommand:
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
    return StartCommand(tuple(unit.start), unit.path, env, added)


def confine(
    command: StartCommand,
    policy: sandbox.Policy | None,
    *,
    base_env: Mapping[str, str],
    scratch: Path,
    bwrap: str,
    landlock_abi: int,
    unconfined: bool,
) -> StartCommand:
    """A unit's start wrapped in the run's sandbox (the same bubblewrap argv as a test run).

    The filesystem is confined per the mode and each unit gets its own pid namespace that
    dies with it, but the units share the host's network namespace (`share_net`): a
    namespace per unit would cut the loopback they use to reach each other. The child
    environment starts from the sandbox allow-list plus what units.json and the run add.
    `landlock_abi` > 0 confines with Landlock instead of bubblewrap; `unconfined` (mode `auto`
    with no enforcer here) applies only the environment allow-list.
    """
    if policy is None or not policy.sandboxed:
        return command
    if unconfined:
        env = child_env(base_env, policy, add=command.added)
        env.pop(proc.TOKEN_VAR, None)
        return StartCommand(command.argv, command.cwd, env, command.added)
    if landlock_abi:
        return _landlocked(command, policy, base_env=base_env, scratch=scratch, landlock_abi=landlock_abi)
    env = child_env(base_env, policy, add=command.added)
    env.pop(proc.TOKEN_VAR, None)
    readable = bwrap_command.tmp_roots(command.argv[0] if command.argv else None, env, command.cwd)
    argv = bwrap_command.wrap_argv(
        command.argv, policy, share_net=True, cwd=command.cwd, readable=readable, bwrap=bwrap
    )
    return StartCommand(tuple(argv), command.cwd, env, command.added)


def _landlocked(
    command: StartCommand,
    policy: sandbox.Policy,
    *,
    base_env: Mapping[str, str],
    scratch: Path,
    landlock_abi: int,
) -> StartCommand:
    """A unit's start under Landlock (no bubblewrap here): the same argv, a temporary folder
    of its own in the run's scratch folder, writes confined to it and the project (in
    workspace-write), the ruleset applied in the child before exec."""
    from greenloop.system import landlock

    tmp = Path(tempfile.mkdtemp(prefix="tmp-", dir=scratch))
    env = child_env(base_env, policy, add=command.added, tmp=str(tmp))
    env.pop(proc.TOKEN_VAR, None)
    if not policy.workspace_writable:
        (tmp / "cache").mkdir()
    writable = [str(tmp), *([policy.workspace_root] if policy.workspace_writable else [])]
    ruleset = landlock.Ruleset.build(landlock_abi, writable=writable)
    return StartCommand(command.argv, command.cwd, env, command.added, ruleset.restrict_child(), ruleset)
