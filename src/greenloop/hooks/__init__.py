"""Hook adapters: one module per agent harness (claude_code, codex, gemini, cursor, qwen,
opencode, copilot).

Each reads its harness's hook JSON (stdin) and answers in that harness's exact shape. The
shared rules live here and in base.py: malformed or unexpected input allows the stop and
says why on stderr; any failure inside greenloop (a corrupt database, a missing workspace, a
bad config) allows the stop too, because a broken gate must never trap an agent. The exit
code is always 0.

This package is on the hot path of every agent turn: it imports only the standard library
modules it needs, and the adapter module for the harness at hand.
"""

from __future__ import annotations

import os
import sys
import time

from greenloop import HARNESSES as _NAMES
from greenloop import lite as json  # json's own C codec, without importing json
from greenloop.hooks.base import HookAnswer, HookContext

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

__all__ = ["ALLOW_STDOUT", "HARNESSES", "HookAnswer", "HookContext", "handle", "hook_main"]

# harness -> its adapter module (greenloop.HARNESSES, the one list)
HARNESSES = {name: "greenloop.hooks." + name.replace("-", "_") for name in _NAMES}


# What "allow" looks like on stdout: nothing for Claude Code, Codex and Qwen Code, an empty object for
# Gemini CLI, Cursor, Copilot CLI and greenloop's OpenCode plugin (which parse stdout as JSON).
ALLOW_STDOUT = {"claude-code": "", "codex": "", "gemini": "{}\n", "cursor": "{}\n", "qwen": "",
                "opencode": "{}\n", "copilot": "{}\n"}


def _allow(harness: str, why: str) -> HookAnswer:
    return HookAnswer(stdout=ALLOW_STDOUT.get(harness, ""), stderr=f"greenloop: {why}; allowing the stop.\n")


def handle(
    harness: str,
    raw: str,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    clock: Callable[[], float] = time.time,
) -> HookAnswer:
    """Answer one hook event. Never raises; always exit code 0."""
    module_name = HARNESSES.get(harness)
    if module_name is None:
        return _allow(harness, f"unknown harness {harness!r} (expected one of: {', '.join(HARNESSES)})")
    text = raw.lstrip("\ufeff").strip()
    try:
        payload = json.loads(text) if text else None
    except ValueError as exc:
        return _allow(harness, f"the hook input is not JSON ({exc})")
    if not isinstance(payload, dict):
        return _allow(harness, "the hook input is not a JSON object")
    ctx = HookContext(env=os.environ if env is None else env, cwd=cwd or os.getcwd(), clock=clock, configs={})
    try:
        __import__(module_name)  # not importlib.import_module: importlib imports warnings
        answer: HookAnswer = sys.modules[module_name].handle(payload, ctx)
    except Exception as exc:  # a broken gate must never trap an agent
        return _allow(harness, f"the {harness} hook failed ({type(exc).__name__}: {exc})")
    return answer


def hook_main(
    harness: str,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    *,
    extra: list[str] | None = None,
) -> int:
    """Read the harness's hook JSON on stdin, answer on stdout; exit 0 whatever happens."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    if extra:
        stderr.write(f"greenloop: ignoring extra hook arguments {extra!r}\n")
    try:
        try:
            raw = stdin.read()
        except (OSError, ValueError) as exc:
            raw = ""
            stderr.write(f"greenloop: could not read the hook input ({exc})\n")
        answer = handle(harness, raw)
        if answer.stdout:
            stdout.write(answer.stdout)
            stdout.flush()
        if answer.stderr:
            stderr.write(answer.stderr)
    except BaseException as exc:  # never trap an agent, not even on an interrupt or a bug
        try:  # noqa: SIM105 (no contextlib on the hook path)
            stderr.write(f"greenloop: the hook failed ({type(exc).__name__}: {exc}); allowing the stop.\n")
        except Exception:
            pass
    return 0  # ExitCode.OK (enum is not imported on the hook path)
