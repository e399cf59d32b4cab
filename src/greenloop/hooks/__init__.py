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

import importlib
import json
import os
import time
from collections.abc import Callable, Mapping

from greenloop.hooks.base import HookAnswer, HookContext

__all__ = ["ALLOW_STDOUT", "HARNESSES", "HookAnswer", "HookContext", "handle"]

HARNESSES = {
    "claude-code": "greenloop.hooks.claude_code",
    "codex": "greenloop.hooks.codex",
    "gemini": "greenloop.hooks.gemini",
    "cursor": "greenloop.hooks.cursor",
    "qwen": "greenloop.hooks.qwen",
    "opencode": "greenloop.hooks.opencode",
    "copilot": "greenloop.hooks.copilot",
}


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
    ctx = HookContext(env=os.environ if env is None else env, cwd=cwd or os.getcwd(), clock=clock)
    try:
        module = importlib.import_module(module_name)
        answer: HookAnswer = module.handle(payload, ctx)
    except Exception as exc:  # a broken gate must never trap an agent
        return _allow(harness, f"the {harness} hook failed ({type(exc).__name__}: {exc})")
    return answer
