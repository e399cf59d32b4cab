"""Which agent session a run or a check belongs to (docs/closure-gate.md, "Which session a run
belongs to").

In order:

1. an explicit id (`--session S`, a tool's `session_id` argument);
2. a session variable in the environment: `GREENLOOP_SESSION`, then each harness's own
   (`ENV_VARS`: Claude Code's `CLAUDE_CODE_SESSION_ID`, Codex's `CODEX_THREAD_ID`, Cursor's
   `CURSOR_CONVERSATION_ID`, Gemini CLI's `GEMINI_SESSION_ID`, which it gives its hooks only);
3. what the MCP client says in a request's `_meta` (the MCP server passes it in);
4. the process tree: every hook invocation records its harness process (`record_binding`);
   a caller that has that process among its ancestors belongs to the session its hooks
   named last (`bound_session`);
5. none: the run belongs to the workspace, and every session's gate that started before it
   sees it.

Everything here is standard library only: the hooks import it on every agent turn.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, NamedTuple

    from greenloop.config import Config
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "BINDING_MAX_AGE_S",
    "ENV_VARS",
    "META_KEYS",
    "Resolved",
    "bound_session",
    "from_meta",
    "record_binding",
    "resolve",
    "resolve_with_source",
]

# GREENLOOP_SESSION first (the user's word), then the harnesses' own variables. Each is set by
# its harness for the commands the agent runs (Gemini CLI sets its variable for hooks only).
ENV_VARS = (
    "GREENLOOP_SESSION",
    "CLAUDE_CODE_SESSION_ID",
    "CODEX_THREAD_ID",
    "CURSOR_CONVERSATION_ID",
    "GEMINI_SESSION_ID",
)
# Keys of an MCP request's `_meta` (or the client's info) that may name the agent's session.
META_KEYS = ("sessionId", "session_id", "greenloop/session", "threadId", "thread_id", "conversationId")
BINDING_MAX_AGE_S = 30 * 24 * 3600  # bindings older than this are dropped when a session starts


class Resolved(NamedTuple):
    """A session id (None: the workspace) and where it came from: explicit, env:NAME, meta,
    process-tree, or none."""

    session_id: str | None
    source: str


def _clean(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    return value or None


def from_meta(meta: Mapping[str, Any] | None) -> str | None:
    """The session an MCP request's `_meta` names, if any (`META_KEYS`)."""
    from collections.abc import Mapping

    if not isinstance(meta, Mapping):
        return None
    for key in META_KEYS:
        if cleaned := _clean(meta.get(key)):
            return cleaned
    return None


def resolve_with_source(
    explicit: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    mcp_context: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
    config: Config | None = None,
) -> Resolved:
    """The session id and its source (module docstring). The process tree is consulted only
    when `workspace` is given (its state database holds the bindings); `config` is the
    workspace's, when the caller has loaded it (`bound_session`)."""
    if cleaned := _clean(explicit):
        return Resolved(cleaned, "explicit")
    env = os.environ if env is None else env
    for name in ENV_VARS:
        if cleaned := _clean(env.get(name)):
            return Resolved(cleaned, f"env:{name}")
    if cleaned := _clean(mcp_context):
        return Resolved(cleaned, "meta")
    if workspace is not None:
        bound = bound_session(workspace, config=config)
        if bound is not None:
            return Resolved(bound, "process-tree")
    return Resolved(None, "none")


def resolve(
    explicit: str | None = None,
    *,
    env: Mapping[str, str] | None = None,
    mcp_context: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
    config: Config | None = None,
) -> str | None:
    """The session id, or None for a workspace-level run (`resolve_with_source`)."""
    found = resolve_with_source(explicit, env=env, mcp_context=mcp_context, workspace=workspace,
                                config=config)
    return found.session_id


def bound_session(
    workspace: str | os.PathLike[str], pid: int | None = None, *, config: Config | None = None
) -> str | None:
    """The session whose hooks ran under the nearest ancestor of `pid` (default: this process)
    that a hook recorded as its harness, in `workspace`'s state database; None when there is
    no such ancestor, no database, or it cannot be read (a lookup never fails a run).

    This runs before every run starts, so the SQLite case reads the bindings table through a
    read-only connection with one query (greenloop.state.bindings), without the store, its
    schema check or its backends; `config`, when the caller has loaded it, spares reading the
    config files again for the state URL."""
    from greenloop import layout
    from greenloop.state.url import configured, has_state
    from greenloop.system import ptree

    try:
        location = configured(workspace, config=config)
        if not has_state(workspace, location):
            return None  # no state yet: no hook has bound anything
        keys = [ptree.proc_key(p) for p in ptree.ancestors(pid)]
        if not keys:
            return None
        if location.kind != "sqlite":
            from greenloop.closure import store

            with store.Store(workspace, location=location) as st:
                found = st.bound_session(keys)
            return None if found is None else found[0]
        import sqlite3

        from greenloop.state.bindings import BUSY_TIMEOUT_S, bound_session_in

        path = layout.db_path(workspace)
        uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            found = bound_session_in(conn, keys)
        finally:
            conn.close()
    except Exception:  # the binding is a convenience; without it the run is the workspace's
        return None
    return None if found is None else found[0]


def record_binding(
    workspace: str,
    session_id: str,
    harness: str,
    *,
    clock: Callable[[], float] = time.time,
    forget_old: bool = False,
    pid: int | None = None,
    config: Config | None = None,
) -> str:
    """Record that a hook of `session_id` runs under its harness process (the nearest ancestor
    that is not a shell or launcher). `forget_old` (a session's start) also drops bindings not
    refreshed for BINDING_MAX_AGE_S. Nothing is written in a workspace without state where
    greenloop is disabled. Returns a line for stderr ("" when all went well or there
    is no /proc); never raises: a hook must not fail over bookkeeping. `config`: the
    workspace's, when the caller has loaded it already (the files are not read again)."""
    from greenloop.system import ptree

    try:
        chain = ptree.ancestors(pid)
        harness_proc = ptree.harness_of(chain)
        if harness_proc is None:
            return ""
        from greenloop.closure import store
        from greenloop.state.url import configured

        location = configured(workspace, config=config)  # once: has_state and Store both need it
        if not store.has_state(workspace, location):
            # No state yet: create it only where greenloop is enabled (a disabled workspace
            # gets no .greenloop folder).
            from greenloop.config import load

            if not (config or load(workspace)).enabled:
                return ""
        from greenloop.lite import dumps

        shown = dumps([[p.pid, p.start, p.comm] for p in chain[:12]])
        with store.Store(workspace, clock=clock, location=location) as st, st.transaction():
            st.bind(ptree.proc_key(harness_proc), session_id, harness, os.path.abspath(workspace), shown)
            if st.session_start(session_id) is None:
                # The session's first event: what the tree looked like before the agent acted
                # (the gate's no-run rule and the marks baseline compare against it).
                from greenloop.closure.run_evidence import ensure_start

                ensure_start(st, workspace, session_id)
            if forget_old:
                st.forget_bindings(clock() - BINDING_MAX_AGE_S)
    except Exception as exc:
        return f"greenloop: could not record the session's process binding ({type(exc).__name__}: {exc})\n"
    return ""
