"""Which form a command answers in (`--json`, `--format agent|human`, or the agent format when
an agent harness runs greenloop), and the agent-format text of a run with its once-per-session
notes looked up in the state."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any, Literal

from greenloop.errors import UsageError
from greenloop.result import RunResult

__all__ = ["agent_harness", "chosen", "rerun_command", "run_agent_text"]

Form = Literal["json", "agent", "human"]


def agent_harness(env: Mapping[str, str] | None = None) -> str | None:
    """The harness whose variable (cli.AGENT_ENV) is set in `env`, or None: a person's shell."""
    from greenloop.cli import AGENT_ENV

    env = os.environ if env is None else env
    for harness, name in AGENT_ENV:
        if env.get(name, "").strip():
            return harness
    return None


def chosen(args: Any, env: Mapping[str, str] | None = None) -> Form:
    """`--json`, else `--format`, else the agent format under an agent harness, else human."""
    fmt = getattr(args, "format", None)
    if getattr(args, "json", False):
        if fmt is not None:
            raise UsageError(f"--json and --format {fmt} ask for two forms: pass one of them")
        return "json"
    if fmt in ("agent", "human"):
        return "agent" if fmt == "agent" else "human"
    return "agent" if agent_harness(env) else "human"


def rerun_command(path: str = ".") -> str:
    """The command that reruns just the failures of the run in `path` (as the caller named it)."""
    where = "" if os.path.normpath(path) == "." else " " + shlex.quote(path)
    return f"greenloop run{where} --last-failed"


def run_agent_text(
    result: RunResult, *, rerun: str, cwd: str | None = None, with_run_id: bool | None = None
) -> str:
    """The run in the agent format, its long-lived notes said once in the run's session (the
    state records them as said). A run recorded without a session names its id: the hooks of
    a harness that gives its shell no session id (Gemini CLI, Cursor) read it in the output
    to give the run to the session (hooks.base.attach_greenloop_run)."""
    from greenloop import agent_format, api

    if with_run_id is None:
        with_run_id = result.session_id is None
    keys = agent_format.once_keys([*result.notes, result.sandbox.note or ""], green=result.outcome == "green")
    new = api.first_said(result.workspace or ".", result.session_id, keys) if keys else set()
    return agent_format.run_text(result, new_once=new, rerun=rerun, cwd=cwd, run_id=with_run_id)
