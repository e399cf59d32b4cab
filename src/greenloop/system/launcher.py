"""Start one planned run under its sandbox policy: argv, environment and what to report.

The enforcer comes from enforcers.enforce; under bubblewrap the argv is bwrap_command's, under
Landlock the ruleset is applied in the child between fork and exec, with a private temporary
folder of its own. The child environment is env.child_env's. Starting the process is proc.py's
job.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from greenloop.layout import cache_dir
from greenloop.model import Plan
from greenloop.result import SandboxInfo
from greenloop.system.bwrap_command import wrap_argv
from greenloop.system.enforcers import BwrapStatus, enforce
from greenloop.system.env import allowed_env, changes, child_env
from greenloop.system.sandbox import Policy, SandboxUnavailable

__all__ = ["Launch", "launch"]


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
        """The child environment as a dict."""
        return dict(self.env)

    def close(self) -> None:
        """Release the Landlock ruleset and remove the run's private temporary folder."""
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
            (cache_dir(policy.workspace_root) / sub).mkdir(parents=True, exist_ok=True)
    if chosen.enforcer == "bwrap":
        assert chosen.bwrap_path is not None
        env = child_env(base_env, policy, add=plan.env)
        argv: list[str] = ["/bin/sh", "-c", plan.argv[0]] if plan.shell else list(plan.argv)
        wrapped = wrap_argv(argv, policy, cwd=plan.cwd, writable=writable, bwrap=chosen.bwrap_path, env=env)
        note = changes(allowed_env(base_env, policy), env)
        info = policy.info(chosen.enforced_by)
        return Launch(tuple(wrapped), tuple(env.items()), False, info, env_note=note)
    import tempfile  # (loads random and hashlib: not before a full-access run starts)

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
