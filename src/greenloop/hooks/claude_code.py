"""Claude Code hooks (`.claude/settings.json`): SessionStart, Stop, SubagentStop, UserPromptSubmit,
PostToolUse.

- Stop / SubagentStop (input: session_id, transcript_path, cwd, hook_event_name,
  stop_hook_active, last_assistant_message): steer with exit 0 and
  `{"decision": "block", "reason": "…"}`; on release a `systemMessage` telling the user the
  session is unresolved; allow prints nothing. Never `continue: false`.
- UserPromptSubmit starts a new turn (a new interception budget); it prints nothing, since
  this event's stdout would be added to the model's context.
- PostToolUse on Bash records a test run the agent made itself, parsed from its output.
- Every event binds the session to this hook's harness process (`base.bind`), so a run whose
  environment names no session (the MCP server) still lands in it; SessionStart exists for
  that: it fires before the model's first tool call. It prints nothing (its stdout would be
  added to the model's context).
- Every event's `permission_mode` is recorded, on change, as the session's sandbox mode event
  (`plan` -> read-only; the others leave the configured default: `base.record_permission_mode`).
"""

from __future__ import annotations

from greenloop.hooks.base import (
    HookAnswer,
    HookContext,
    answer_shell_run,
    answer_stop,
    answer_turn_start,
    bind,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["HARNESS", "handle"]

HARNESS = "claude-code"


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one Claude Code hook event (Stop, SubagentStop, PostToolUse, …) in its shape."""
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(stderr=f"greenloop: {event or 'hook'} input has no session_id; allowing.\n")
    workspace = ctx.workspace(payload, "CLAUDE_PROJECT_DIR")
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "SessionStart")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event in ("Stop", "SubagentStop"):
        return answer_stop(ctx, workspace, session_id, HARNESS, payload)
    if event == "UserPromptSubmit":
        return answer_turn_start(ctx, workspace, session_id, HARNESS, payload)
    if event == "SessionStart":
        return HookAnswer()
    if event == "PostToolUse":
        if payload.get("tool_name") != "Bash":
            return HookAnswer()
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(command, str):
            return HookAnswer(stderr="greenloop: PostToolUse(Bash) input has no tool_input.command.\n")
        return answer_shell_run(ctx, workspace, session_id, HARNESS, payload, command)
    return HookAnswer(stderr=f"greenloop: ignoring Claude Code event {event!r}; allowing.\n")
