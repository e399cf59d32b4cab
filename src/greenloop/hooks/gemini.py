"""Gemini CLI hooks (`.gemini/settings.json`): SessionStart, BeforeAgent, AfterAgent, AfterTool.

- AfterAgent (input: session_id, transcript_path, cwd, hook_event_name, timestamp, prompt,
  prompt_response, stop_hook_active): steer with `{"decision":"deny","reason":"…"}` (Gemini
  sends the reason back to the agent and it carries on); on release a `systemMessage`;
  allow prints `{}`. An AfterAgent that is not itself a hook-driven continuation
  (`stop_hook_active` false) ends a fresh user turn, so it starts a new budget first:
  Gemini's retry re-enters the agent loop, so counting turns from BeforeAgent would reset
  the budget on every retry.
- AfterTool on run_shell_command records a test run the agent made itself.
- Every event binds the session to this hook's harness process (`base.bind`): Gemini CLI
  gives its shell commands and MCP servers no session id, so a `greenloop run` from its
  shell, or its MCP server, finds the session through the process tree. SessionStart and
  BeforeAgent exist for that (they fire before the model's first tool call) and only allow.
"""

from __future__ import annotations

from typing import Any

from greenloop.hooks.base import HookAnswer, HookContext, bind, json_line, record_shell_run, text_of

__all__ = ["HARNESS", "handle"]

HARNESS = "gemini"
ALLOW = "{}\n"


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
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
    if event in ("SessionStart", "BeforeAgent"):
        return HookAnswer(ALLOW)
    if event == "AfterAgent":
        gate = ctx.gate(workspace, HARNESS)
        if payload.get("stop_hook_active") is not True:
            gate.on_turn_start(session_id)
        decision = gate.on_turn_stopping(session_id)
        if decision.kind == "steer":
            return HookAnswer(json_line({"decision": "deny", "reason": decision.message}))
        if decision.kind == "release":
            return HookAnswer(json_line({"systemMessage": decision.message}))
        return HookAnswer(ALLOW)
    if event == "AfterTool":
        tool_input = payload.get("tool_input")
        command = tool_input.get("command") if isinstance(tool_input, dict) else None
        if payload.get("tool_name") not in ("run_shell_command", "shell") or not isinstance(command, str):
            return HookAnswer(ALLOW)
        output, code = text_of(payload.get("tool_response"))
        return HookAnswer(ALLOW, record_shell_run(ctx, workspace, session_id, command, output, code))
    return HookAnswer(ALLOW, f"greenloop: ignoring Gemini CLI event {event!r}; allowing.\n")
