"""Cursor hooks (`.cursor/hooks.json`, version 1): beforeSubmitPrompt, stop, afterShellExecution,
afterMCPExecution.

- stop (input: conversation_id, generation_id, status, loop_count, hook_event_name,
  workspace_roots): steer with `{"followup_message":"…"}`, which Cursor submits as the next
  message; allow and release print `{}` (Cursor's stop has no user-facing message field; the
  release is recorded and shown by `greenloop check`). `loop_count` 0 means the stop ends a
  fresh user turn, so a new budget starts; a stop that was aborted or errored is allowed.
- afterShellExecution (command, cwd, output, duration; no exit code) records a test run the
  agent made itself; on a shell `greenloop run` it gives the run named in the output to the
  conversation (`base.attach_greenloop_run`), in case the process tree did not.
- afterMCPExecution (tool_name, tool_input, result_json, duration) of greenloop's own
  `test_run` / `test_job` does the same with the run named in the tool's result.
- Every event binds the conversation to this hook's harness process (`base.bind`), so the MCP
  server Cursor spawned finds it; beforeSubmitPrompt exists for that (it fires before the
  model's first tool call) and answers `{"continue": true}`.
"""

from __future__ import annotations

import json
import re
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

__all__ = ["HARNESS", "handle"]

HARNESS = "cursor"
ALLOW = "{}\n"
# greenloop's MCP tools whose result names a run, however Cursor prefixes a server's tool name.
_MCP_RUN_TOOL = re.compile(r"(^|[:_.-])test_(run|job)$")


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one Cursor hook event (stop, afterShellExecution, …) in its shape."""
    event = payload.get("hook_event_name") or "stop"
    session_id = payload.get("conversation_id") or payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(ALLOW, f"greenloop: {event} input has no conversation_id; allowing.\n")
    workspace = ctx.workspace(payload, "CURSOR_PROJECT_DIR")
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "sessionStart")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event == "beforeSubmitPrompt":
        return HookAnswer(json_line({"continue": True}))
    if event == "sessionStart":
        return HookAnswer(ALLOW)
    if event == "stop":
        status = payload.get("status", "completed")
        if status != "completed":
            return HookAnswer(ALLOW, f"greenloop: the agent stopped with status {status!r}; allowing.\n")
        loop_count = payload.get("loop_count", 0)
        gate = ctx.gate(workspace, HARNESS)
        if not isinstance(loop_count, int) or loop_count == 0:
            gate.on_turn_start(session_id)
        decision = gate.on_turn_stopping(session_id)
        if decision.kind == "steer":
            return HookAnswer(json_line({"followup_message": decision.message}))
        if decision.kind == "release":
            return HookAnswer(ALLOW, decision.message + "\n")
        return HookAnswer(ALLOW)
    if event == "afterShellExecution":
        command = payload.get("command")
        if not isinstance(command, str):
            return HookAnswer(ALLOW)
        output, code = text_of({"output": payload.get("output"), "exit_code": payload.get("exit_code")})
        note = attach_greenloop_run(ctx, workspace, session_id, command, output)
        return HookAnswer(ALLOW, note + record_shell_run(ctx, workspace, session_id, command, output, code))
    if event == "afterMCPExecution":
        tool = payload.get("tool_name")
        result = payload.get("result_json")
        if not isinstance(tool, str) or not _MCP_RUN_TOOL.search(tool) or result is None:
            return HookAnswer(ALLOW)
        text = result if isinstance(result, str) else json.dumps(result)
        return HookAnswer(ALLOW, attach_run_ids(ctx, workspace, session_id, text))
    return HookAnswer(ALLOW, f"greenloop: ignoring Cursor event {event!r}; allowing.\n")
