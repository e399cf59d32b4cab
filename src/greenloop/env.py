"""The child environment of a test run, built in one place (house style 6).

What a runner sees is: the inherited environment, minus the variables that make runners
change their output behind greenloop's back, plus a few that make output predictable.

- Dropped: the agent markers (CLAUDECODE, AI_AGENT, CURSOR_AGENT, …) that make vitest 4
  switch to its minimal "agent" reporter, GITHUB_ACTIONS (vitest and jest add `::error`
  annotations), colour forcing (FORCE_COLOR, PY_COLORS), and the marker variables of a
  runner that may be running greenloop itself (VITEST, JEST_WORKER_ID, PYTEST_CURRENT_TEST),
  which would otherwise leak into the child's own runner.
- Added: CI=1 (no watch mode, no interactive prompts), NO_COLOR=1 (greenloop stores the
  output on disk and shows its own progress; colour codes there only cost bytes), and
  PYTHONUNBUFFERED=1 so a Python runner's lines reach the file as tests finish.

Sandboxed and MCP-started runs start from an allow-list instead (sandbox.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["ADDED", "DROPPED", "child_env"]

DROPPED: tuple[str, ...] = (
    # agent markers that std-env (vitest 4) and other tools read to pick an "agent" reporter
    "AI_AGENT",
    "CLAUDECODE",
    "CLAUDE_CODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CURSOR_AGENT",
    "CURSOR_TRACE_ID",
    "GEMINI_CLI",
    "CODEX_SANDBOX",
    "CODEX_THREAD_ID",
    "OPENCODE",
    "AUGMENT_AGENT",
    "GOOSE_PROVIDER",
    "JUNIE_DATA",
    "JUNIE_SHIM_PATH",
    "COPILOT_AGENT",
    "COPILOT_CLI",
    "REPL_ID",
    # CI annotation modes
    "GITHUB_ACTIONS",
    # colour forcing: Node warns when FORCE_COLOR and NO_COLOR are both set
    "FORCE_COLOR",
    "PY_COLORS",
    "CLICOLOR_FORCE",
    # a runner running greenloop must not leak its worker identity into the child's runner
    "VITEST",
    "VITEST_MODE",
    "VITEST_POOL_ID",
    "VITEST_WORKER_ID",
    "JEST_WORKER_ID",
    "PYTEST_CURRENT_TEST",
    "PYTEST_VERSION",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "NODE_TEST_CONTEXT",
)

ADDED: tuple[tuple[str, str], ...] = (
    ("CI", "1"),
    ("NO_COLOR", "1"),
    ("PYTHONUNBUFFERED", "1"),
)


def child_env(
    base: Mapping[str, str],
    *,
    add: Iterable[tuple[str, str]] = (),
    drop: Iterable[str] = (),
) -> dict[str, str]:
    """The environment for a runner: `base` minus DROPPED and `drop`, plus ADDED and `add`.

    `add` wins over ADDED (a plan may set its own values); nothing is read from os.environ
    here: the caller passes the base in.
    """
    dropped = set(DROPPED)
    dropped.update(drop)
    env = {k: v for k, v in base.items() if k not in dropped}
    env.update(ADDED)
    env.update(add)
    return env
