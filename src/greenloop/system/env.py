"""The child environment of a test run, built in one place.

A test sees the environment it would see in the shell that started greenloop, changed only
where greenloop must change it to read the runner's results, and every such change is said
in the run's `notes` (`changes`).

- Dropped: the agent markers (CLAUDECODE, AI_AGENT, CURSOR_AGENT, …) that make vitest 4
  switch to its minimal "agent" reporter, GITHUB_ACTIONS (vitest and jest add `::error`
  annotations), and the marker variables of a runner that may be running greenloop itself
  (VITEST, JEST_WORKER_ID, PYTEST_CURRENT_TEST, NODE_TEST_CONTEXT), which would otherwise
  leak into the child's own runner. A shell without them is unchanged.
- Added: nothing for every run. A pytest run gets PYTHONUNBUFFERED=1 (plan.py), so its lines
  reach the output file as tests finish (live progress, and what a run stopped at its
  deadline had seen), and PYTHONPATH gains the folder of greenloop's report plugin.
- Left alone: colour (NO_COLOR, FORCE_COLOR, PY_COLORS, CLICOLOR_FORCE) and CI. A test may
  read them (commander.js asserts on its colour output under NO_COLOR), and CI changes
  behaviour (jest does not write new snapshots under CI). greenloop needs neither: the
  output goes to a file, not a terminal, so runners print no colour unless the shell
  forces it; the machine reports are colour-free; the text parsers strip ANSI codes. No
  runner needs CI=1 to finish: stdin is closed, so none starts a watch mode or a prompt.

Sandboxed and MCP-started runs start from an allow-list instead (sandbox.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["ADDED", "DROPPED", "changes", "child_env"]

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

ADDED: tuple[tuple[str, str], ...] = ()  # nothing for every run (plan.py adds per runner)

# greenloop's own bookkeeping variables (report paths, the process token): no test reads them
_OWN_PREFIX = "GREENLOOP_"


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


def changes(base: Mapping[str, str], env: Mapping[str, str]) -> str | None:
    """One note saying how `env` differs from `base` (the shell's environment, or what a
    sandbox's allow-list lets through), or None when a test sees it unchanged."""
    removed = sorted(k for k in base if k not in env and not k.startswith(_OWN_PREFIX))
    set_: list[str] = []
    for k in sorted(env):
        if k.startswith(_OWN_PREFIX) or base.get(k) == env[k]:
            continue
        old = base.get(k)
        if old is not None and env[k].endswith(old) and len(env[k]) > len(old):
            set_.append(f"{k} (prefixed)")  # PYTHONPATH gains greenloop's pytest plugin folder
        elif len(env[k]) <= 8:
            set_.append(f"{k}={env[k]}")
        else:
            set_.append(k)
    if not removed and not set_:
        return None
    parts: list[str] = []
    if removed:
        parts.append("removed " + ", ".join(removed))
    if set_:
        parts.append("set " + ", ".join(set_))
    return ("the runner's environment differs from the one greenloop was given: " + "; ".join(parts)
            + " (why: src/greenloop/system/env.py, docs/sandbox.md); nothing else was changed")
