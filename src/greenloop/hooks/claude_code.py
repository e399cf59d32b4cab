"""Claude Code hooks (`.claude/settings.json`): Stop, SubagentStop, UserPromptSubmit, PostToolUse.

- Stop / SubagentStop (input: session_id, transcript_path, cwd, hook_event_name,
  stop_hook_active, last_assistant_message): steer with exit 0 and
  `{"decision": "block", "reason": "…"}`; on release a `systemMessage` telling the user the
  session is unresolved; allow prints nothing. Never `continue: false`.
- UserPromptSubmit starts a new turn (a new interception budget); it prints nothing, since
  this event's stdout would be added to the model's context.
- PostToolUse on Bash records a test run the agent made itself, parsed from its output.
- Every event's `permission_mode` is recorded, on change, as the session's sandbox mode event
  (`plan` -> read-only; the others leave the configured default: `base.record_permission_mode`).
"""

from __future__ import annotations

from typing import Any

from greenloop.hooks.base import HookAnswer, HookContext, answer_shell_run, answer_stop, answer_turn_start

__all__ = ["HARNESS", "handle"]

HARNESS = "claude-code"


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(stderr=f"greenloop: {event or 'hook'} input has no session_id; allowing.\n")
    if event in ("Stop", "SubagentStop"):
        workspace = ctx.workspace(payload, "CLAUDE_PROJECT_DIR")
        return answer_stop(ctx, workspace, session_id, HARNESS, payload)
    if event == "UserPromptSubmit":
        workspace = ctx.workspace(payload, "CLAUDE_PROJECT_DIR")
        return answer_turn_start(ctx, workspace, session_id, HARNESS, payload)
    if event == "PostToolUse":
        if payload.get("tool_name") != "Bash":
            return HookAnswer()
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if not isinstance(command, str):
            return HookAnswer(stderr="greenloop: PostToolUse(Bash) input has no tool_input.command.\n")
        workspace = ctx.workspace(payload, "CLAUDE_PROJECT_DIR")
        return answer_shell_run(ctx, workspace, session_id, HARNESS, payload, command)
    return HookAnswer(stderr=f"greenloop: ignoring Claude Code event {event!r}; allowing.\n")
