"""`greenloop accept`: a person accepts that a skipped or removed test need not run
(docs/closure-gate.md, "Accepting a taken-away test").

It is a way out for people, never for the agent, so it is refused (`refusal`) when anything
says an agent is running it: a harness's variable in the environment (cli.AGENT_ENV and the
session variables of greenloop.closure.session), an agent harness among the caller's
ancestors (a process a hook bound to a session in this workspace, or one named like a
harness), or no terminal on stdin. It is no MCP tool either.

`accept` records who (git's user.name and the login), when and why, after checking that the
test is owed for a taken-away reason; a failure cannot be accepted. `who` and `refusal` read
the machine; `accept` and `listing` read and write the state database.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from typing import Any, NamedTuple

from greenloop.closure.owed import OwedTest
from greenloop.closure.store import Store
from greenloop.errors import UsageError
from greenloop.state.evidence import WORKSPACE, Acceptance

__all__ = ["HARNESS_PROCS", "HARNESS_VARS", "Listing", "accept", "listing", "refusal", "who"]

# Variables set by an agent harness for the commands its agent runs, beyond cli.AGENT_ENV and
# the session variables (GREENLOOP_SESSION is a person's word and is not one of them).
HARNESS_VARS = ("CLAUDE_CODE_ENTRYPOINT", "QWEN_CODE", "GEMINI_SESSION_ID", "CURSOR_CONVERSATION_ID")
# Process names (/proc/PID/comm) of agent harnesses: a caller under one is an agent's command.
HARNESS_PROCS = frozenset(
    {"claude", "codex", "gemini", "cursor-agent", "opencode", "qwen", "copilot", "aider", "goose"}
)
_PERSON = "a person must run it from their own terminal"


def _agent_variable(env: Mapping[str, str]) -> str | None:
    from greenloop.cli import AGENT_ENV
    from greenloop.closure.session import ENV_VARS

    names = [n for _, n in AGENT_ENV] + [n for n in ENV_VARS if n != "GREENLOOP_SESSION"]
    for name in (*names, *HARNESS_VARS):
        if env.get(name, "").strip():
            return name
    return None


def _agent_ancestor(workspace: str) -> str | None:
    """Which ancestor of this process is an agent harness, in words; None when none is."""
    from greenloop.closure.session import bound_session
    from greenloop.system import ptree

    for proc in ptree.ancestors():
        if proc.comm in HARNESS_PROCS:
            return f"it runs under {proc.comm} (pid {proc.pid}), an agent harness"
    bound = bound_session(workspace)
    if bound is not None:
        return f"it runs under the harness process of agent session {bound}"
    return None


def refusal(workspace: str, *, env: Mapping[str, str] | None = None, stdin_fd: int = 0) -> str | None:
    """Why `greenloop accept` must not run here (an agent's session, or no terminal), or None."""
    env = os.environ if env is None else env
    name = _agent_variable(env)
    if name is not None:
        return f"accept is refused inside an agent's session ({name} is set): {_PERSON}"
    where = _agent_ancestor(workspace)
    if where is not None:
        return f"accept is refused inside an agent's session ({where}): {_PERSON}"
    if not os.isatty(stdin_fd):
        return f"accept is refused without a terminal (stdin is not a TTY): {_PERSON}"
    return None


def who(workspace: str) -> str:
    """Who is accepting: git's user.name and the login name ("Ana Lima (ana)"), or either alone."""
    login = ""
    try:
        import pwd

        login = pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError, OSError):
        import getpass

        try:
            login = getpass.getuser()
        except (OSError, KeyError):
            login = ""
    name = ""
    try:
        done = subprocess.run(
            ["git", "config", "user.name"], cwd=workspace, capture_output=True, text=True, timeout=10
        )
        name = done.stdout.strip() if done.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        name = ""
    if name and login and name != login:
        return f"{name} ({login})"
    return name or login or f"uid {os.getuid()}"


def _scope(session_id: str | None) -> str:
    return f"session {session_id}" if session_id else "any session of this workspace"


def accept(workspace: str, test: str, reason: str, by: str, *, session_id: str | None = None) -> Acceptance:
    """Record that `by` accepted the taken-away `test` (for one session, or workspace-wide when
    `session_id` is None). UsageError (exit 2) when the test is not owed as taken away there."""
    test, reason = test.strip(), reason.strip()
    if not test:
        raise UsageError("TEST is empty: name the owed test as `greenloop check` lists it")
    if not reason:
        raise UsageError('--reason is empty: say why the test may stay skipped or removed (--reason "…")')
    with Store(workspace) as store:
        rows = store.taken_away(test=test, session_id=session_id)
        if not rows:
            raise UsageError(_not_owed(store, test, session_id))
        return store.add_acceptance(test, reason, by, session_id=session_id)


def _not_owed(store: Store, test: str, session_id: str | None) -> str:
    """Why `test` cannot be accepted, and what can be."""
    if session_id is not None and store.taken_away(test=test, session_id=WORKSPACE):
        return (
            f"{test} is owed through the workspace's runs, not session {session_id}'s own: "
            "accept it without --session (it then holds for every session)"
        )
    if store.taken_away(test=test, session_id=session_id, failed=True, limit=1):
        return f"{test} is owed because it failed: a failure cannot be accepted; fix it and run it"
    others = sorted({o.test for _, o in store.taken_away(session_id=session_id)})
    listed = ", ".join(others[:5]) + (f" (+{len(others) - 5} more)" if len(others) > 5 else "")
    return (
        f"{test} is not owed as skipped, removed or .only in {_scope(session_id)}: "
        + (f"pass one of: {listed}" if others else "nothing there is taken away (`greenloop accepted`)")
    )


class Listing(NamedTuple):
    """What `greenloop accepted` shows: the acceptances, and the taken-away tests still owed."""

    acceptances: tuple[Acceptance, ...]
    open: tuple[tuple[str, OwedTest], ...]  # (session key, row) a person may still accept

    def to_json(self) -> dict[str, Any]:
        """The listing as JSON (`greenloop accepted --json`)."""
        from greenloop.closure.messages import why_owed

        return {
            "acceptances": [a.to_json() for a in self.acceptances],
            "taken_away": [
                {**o.to_json(), "session_id": key or None, "why": why_owed(o)} for key, o in self.open
            ],
        }


def listing(workspace: str, *, session_id: str | None = None) -> Listing:
    """The acceptances that apply (all, or one session's and the workspace-wide ones), newest
    first, and the taken-away owed tests no acceptance covers yet."""
    with Store(workspace) as store:
        accepted = store.acceptances(session_id=session_id)
        rows = store.taken_away(session_id=session_id)
    covered = {(a.test, a.session_id) for a in accepted}
    still = tuple(
        (key, o) for key, o in rows if (o.test, None) not in covered and (o.test, key) not in covered
    )
    return Listing(tuple(accepted), still)
