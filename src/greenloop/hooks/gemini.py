"""Gemini CLI hooks (`.gemini/settings.json`): SessionStart, BeforeAgent, AfterAgent, AfterTool.

Every event's input has session_id, transcript_path, cwd, hook_event_name and timestamp;
there is no prompt or turn id. What Gemini CLI (0.61) does between them shapes the rules:

- BeforeAgent (input: prompt) fires once per user prompt, before the model is first called
  and before any tool runs. After an AfterAgent `deny`, Gemini feeds the deny's reason back
  as the next prompt and fires BeforeAgent again with that reason as `prompt`. So a
  BeforeAgent starts a new turn (a new budget) unless its prompt is the steer message greenloop
  sent in the current turn (`Gate.on_prompt`). It also makes the session known before the
  first tool runs, so a workspace-level run made in the first turn counts for it.
- AfterAgent (input: prompt, prompt_response, stop_hook_active) is the turn-stopping event:
  steer with `{"decision":"deny","reason":"…"}` (Gemini sends the reason back to the agent
  and it carries on); on release a `systemMessage`; allow prints `{}`. `prompt` is the
  user's original request on every corrective round of a turn, while `stop_hook_active` is
  true only when the model answered the deny without calling a tool: after a tool call
  Gemini reports false again. So the turn is keyed by the prompt (`turn_key`), never by
  `stop_hook_active`: the budget spans every corrective round of one user turn, whatever
  tools they call. Without the BeforeAgent hook (settings from an older `greenloop init`) a
  new prompt text still starts a new turn at AfterAgent; a repeated identical prompt then
  shares its budget with the turn before it.
- AfterTool on run_shell_command records a test run the agent made itself; on a shell
  `greenloop run` (which Gemini runs without any session id in its environment) and on the
  MCP tools `test_run` / `test_job` it gives the run named in the tool's output to the
  session (`base.attach_greenloop_run`, `Store.attach_run`), in case the process tree did
  not (below).
- Every event binds the session to this hook's harness process (`base.bind`): Gemini CLI
  gives its shell commands and MCP servers no session id, so a `greenloop run` from its
  shell, or its MCP server, finds the session through the process tree. SessionStart
  exists for that alone (it fires before the first prompt) and only allows.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from greenloop.hooks.base import (
    HookAnswer,
    HookContext,
    attach_greenloop_run,
    attach_run_ids,
    bind,
    json_line,
    record_shell_run,
    text_of,
)

__all__ = ["HARNESS", "MCP_RUN_TOOLS", "handle", "turn_key"]

HARNESS = "gemini"
ALLOW = "{}\n"
SHELL_TOOLS = ("run_shell_command", "shell")
# greenloop's MCP tools whose result names a run (Gemini calls them mcp_<server>_<tool>).
MCP_RUN_TOOLS = ("test_run", "test_job")


def turn_key(prompt: Any) -> str | None:
    """The turn id greenloop keeps for a Gemini turn: the prompt's length and CRC-32 (cheap on
    the hot path; it only has to tell this turn's prompt from the next one's)."""
    if not isinstance(prompt, str):
        return None
    data = prompt.strip().encode("utf-8", "replace")
    return f"prompt:{len(data)}:{zlib.crc32(data):08x}"


def _mcp_run_tool(payload: dict[str, Any]) -> bool:
    """Is this AfterTool a call of greenloop's own MCP test_run / test_job?"""
    mcp = payload.get("mcp_context")
    if not isinstance(mcp, dict) or mcp.get("tool_name") not in MCP_RUN_TOOLS:
        return False
    launch = " ".join(str(part) for part in [mcp.get("command"), *(mcp.get("args") or [])])
    return mcp.get("server_name") == "greenloop" or "greenloop" in launch


def _response_text(response: Any) -> str:
    """The text of a tool response, whatever its shape (a string, parts, nested objects)."""
    return response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one Gemini CLI hook event (AfterAgent, AfterTool, BeforeAgent) in its shape."""
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(ALLOW, f"greenloop: {event or 'hook'} input has no session_id; allowing.\n")
    workspace = ctx.workspace(payload, "GEMINI_PROJECT_DIR")
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "SessionStart")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event == "SessionStart":
        return HookAnswer(ALLOW)
    if event == "AfterAgent":
        decision = ctx.gate(workspace, HARNESS).on_turn_stopping(session_id, turn_key(payload.get("prompt")))
        if decision.kind == "steer":
            return HookAnswer(json_line({"decision": "deny", "reason": decision.message}))
        if decision.kind == "release":
            return HookAnswer(json_line({"systemMessage": decision.message}))
        return HookAnswer(ALLOW)
    if event == "BeforeAgent":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str):
            return HookAnswer(ALLOW, "greenloop: BeforeAgent input has no prompt; allowing.\n")
        ctx.gate(workspace, HARNESS).on_prompt(session_id, prompt, turn_key(prompt))
        return HookAnswer(ALLOW)
    if event == "AfterTool":
        tool_input = payload.get("tool_input")
        if _mcp_run_tool(payload):
            text = _response_text(payload.get("tool_response"))
            return HookAnswer(ALLOW, attach_run_ids(ctx, workspace, session_id, text))
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if payload.get("tool_name") not in SHELL_TOOLS or not isinstance(command, str):
            return HookAnswer(ALLOW)
        output, code = text_of(payload.get("tool_response"))
        note = attach_greenloop_run(ctx, workspace, session_id, command, output)
        return HookAnswer(ALLOW, note + record_shell_run(ctx, workspace, session_id, command, output, code))
    return HookAnswer(ALLOW, f"greenloop: ignoring Gemini CLI event {event!r}; allowing.\n")
