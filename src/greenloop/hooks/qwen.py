"""Qwen Code hooks (`.qwen/settings.json`): SessionStart, UserPromptSubmit, Stop, PostToolUse,
PostToolUseFailure.

Qwen Code (`@qwen-code/qwen-code` 0.24) descends from Gemini CLI, but its hooks speak Claude
Code's protocol. Every event's input has session_id, transcript_path, cwd, hook_event_name,
timestamp and permission_mode, and `prompt_id` when the event belongs to a prompt (the
id of the user's prompt, kept through every model call it leads to). What it does between
the events shapes the rules:

- Stop (input: stop_hook_active, last_assistant_message) is the turn-stopping event: steer
  with `{"decision": "block", "reason": "…"}` (Qwen sends the reason to the model as the next
  message of the same prompt, same prompt_id); on release a `systemMessage`; allow prints
  nothing. Qwen itself ends a chain of blocks after `stopHookBlockingCap` (8 by default,
  QWEN_CODE_STOP_HOOK_BLOCK_CAP) consecutive ones, above greenloop's default budget.
- UserPromptSubmit fires for a user's prompt and again for every tool result and for a
  Stop hook's continuation, all with the prompt's own prompt_id. So the turn is keyed by
  prompt_id (`turn_key`): a new prompt_id is a new turn (a new budget), the same one is the
  turn going on. An event without prompt_id (none was seen in 0.24, but its base input
  adds the key only when set) falls back to the prompt's text: a tool result's prompt is
  empty and starts nothing, and greenloop's own reason coming back is recognised
  (`Gate.on_prompt`).
- PostToolUse fires only for a tool that succeeded; a shell command that exits non-zero (a
  red test run) is a failure, reported by PostToolUseFailure with `error` = what the model
  read (`Command:`, `Output:`, `Error:`, `Exit Code:` lines). Both record a test run the agent
  made itself, from run_shell_command's `Output:` section; on a shell `greenloop run` and on
  greenloop's MCP `test_run` / `test_job` (`mcp__greenloop__test_run`) they give the run named
  in the output to the session (`base.attach_greenloop_run`, `base.attach_run_ids`).
- Every event binds the session to this hook's harness process (`base.bind`): Qwen gives its
  shell commands `QWEN_CODE=1` but no session id. SessionStart exists for that (it fires
  before the first prompt) and prints nothing. Every event's `permission_mode` (Claude Code's
  vocabulary: `plan` is read-only) is recorded as the session's sandbox mode on change.
"""

from __future__ import annotations

import json
import re
from typing import Any

from greenloop.hooks.base import (
    HookAnswer,
    HookContext,
    answer_stop,
    attach_greenloop_run,
    attach_run_ids,
    bind,
    record_permission_mode,
    record_shell_run,
)

__all__ = ["HARNESS", "handle", "shell_output", "turn_key"]

HARNESS = "qwen"
SHELL_TOOLS = ("run_shell_command",)
# greenloop's MCP tools whose result names a run (Qwen calls them mcp__<server>__<tool>).
_MCP_RUN_TOOL = re.compile(r"^mcp__greenloop__test_(run|job)$")
_EXIT_CODE = re.compile(r"^Exit Code: (-?\d+)\s*$", re.M)


def turn_key(payload: dict[str, Any]) -> str | None:
    """The turn id greenloop keeps for a Qwen turn: its prompt_id, or None when it has none."""
    prompt_id = payload.get("prompt_id")
    return f"prompt:{prompt_id}" if isinstance(prompt_id, str) and prompt_id else None


def shell_output(text: str) -> tuple[str, int | None]:
    """The command's output and exit code in run_shell_command's answer to the model:
    `Command: …`, `Directory: …`, `Output: <output>`, `Error: …`, `Exit Code: N`, `Signal: …`.
    Text in another shape (a timeout's note, a cancelled command) is returned whole."""
    start = text.find("Output: ")
    end = text.rfind("\nError: ")
    codes = _EXIT_CODE.findall(text)  # the last one: the tool's own line comes after the output
    code = int(codes[-1]) if codes else None
    if start == -1 or end < start:
        return text, code
    output = text[start + len("Output: ") : end]
    return ("" if output == "(empty)" else output), code


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one Qwen Code hook event (Stop, UserPromptSubmit, PostToolUse, …) in its shape."""
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(stderr=f"greenloop: {event or 'hook'} input has no session_id; allowing.\n")
    workspace = ctx.workspace(payload, "QWEN_PROJECT_DIR")
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "SessionStart")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event == "Stop":
        return answer_stop(ctx, workspace, session_id, HARNESS, payload, turn_key(payload))
    if event == "UserPromptSubmit":
        gate = ctx.gate(workspace, HARNESS)
        key = turn_key(payload)
        prompt = payload.get("prompt")
        if key is not None:
            gate.on_turn_start(session_id, key)  # the same prompt_id again: the same turn
        elif isinstance(prompt, str) and prompt.strip():
            gate.on_prompt(session_id, prompt)
        return HookAnswer(stderr=record_permission_mode(ctx, workspace, session_id, HARNESS, payload))
    if event == "SessionStart":
        return HookAnswer(stderr=record_permission_mode(ctx, workspace, session_id, HARNESS, payload))
    if event in ("PostToolUse", "PostToolUseFailure"):
        return _tool(event, payload, ctx, workspace, session_id)
    return HookAnswer(stderr=f"greenloop: ignoring Qwen Code event {event!r}; allowing.\n")


def _tool(
    event: str, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    tool = payload.get("tool_name")
    if event == "PostToolUse":
        response = payload.get("tool_response")
        text = response.get("llmContent") if isinstance(response, dict) else response
    else:
        if payload.get("is_interrupt") is True:
            return HookAnswer()  # cancelled: no run to read
        text = payload.get("error")
    if isinstance(tool, str) and _MCP_RUN_TOOL.match(tool):
        shown = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
        return HookAnswer(stderr=attach_run_ids(ctx, workspace, session_id, shown))
    tool_input = payload.get("tool_input")
    command = tool_input.get("command") if isinstance(tool_input, dict) else None
    if tool not in SHELL_TOOLS or not isinstance(command, str) or not isinstance(text, str):
        return HookAnswer()
    output, code = shell_output(text)
    note = record_permission_mode(ctx, workspace, session_id, HARNESS, payload)
    note += attach_greenloop_run(ctx, workspace, session_id, command, output)
    return HookAnswer(stderr=note + record_shell_run(ctx, workspace, session_id, command, output, code))
