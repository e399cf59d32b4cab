"""Codex hooks (`.codex/hooks.json`): SessionStart, Stop, UserPromptSubmit, PostToolUse.

- Stop (input: session_id, transcript_path, cwd, hook_event_name, turn_id, model,
  permission_mode, stop_hook_active, last_assistant_message): the turn is `turn_id`, so a
  new turn id starts a new budget. Steer with exactly `{"decision":"block","reason":"…"}`
  and no other key (Codex rejects unknown keys); on release a `systemMessage` (one of its
  universal output fields); allow prints nothing.
- UserPromptSubmit (with turn_id) starts that turn.
- PostToolUse on Bash records a test run the agent made itself, parsed from its output.
- Every event binds the session to this hook's harness process (`base.bind`); SessionStart
  exists for that and prints nothing. (Codex's shell commands also carry `CODEX_THREAD_ID`,
  the same id as the hooks' `session_id`.)
- Every event's `permission_mode` (Codex sends Claude Code's vocabulary) is recorded, on
  change, as the session's sandbox mode event (`base.record_permission_mode`).
"""

from __future__ import annotations

from typing import Any

from greenloop.hooks.base import (
    HookAnswer,
    HookContext,
    answer_shell_run,
    answer_stop,
    answer_turn_start,
    bind,
)

__all__ = ["HARNESS", "handle"]

HARNESS = "codex"


def _turn(payload: dict[str, Any]) -> str | None:
    turn = payload.get("turn_id")
    return turn if isinstance(turn, str) and turn else None


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one Codex hook event in its shape."""
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(stderr=f"greenloop: {event or 'hook'} input has no session_id; allowing.\n")
    workspace = ctx.workspace(payload)
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "SessionStart")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event in ("Stop", "SubagentStop"):
        return answer_stop(ctx, workspace, session_id, HARNESS, payload, _turn(payload))
    if event == "UserPromptSubmit":
        return answer_turn_start(ctx, workspace, session_id, HARNESS, payload, _turn(payload))
    if event == "SessionStart":
        return HookAnswer()
    if event == "PostToolUse":
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        if payload.get("tool_name") not in ("Bash", "shell", "exec_command") or not isinstance(command, str):
            return HookAnswer()
        return answer_shell_run(ctx, workspace, session_id, HARNESS, payload, command)
    return HookAnswer(stderr=f"greenloop: ignoring Codex event {event!r}; allowing.\n")
