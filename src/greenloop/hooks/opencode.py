"""OpenCode (`opencode-ai` 1.18): greenloop's plugin `.opencode/plugin/greenloop.js` calls
`greenloop hook opencode` with one JSON object on stdin per event, and acts on the answer.

OpenCode has no hook that can refuse a stop: a plugin sees the session go idle (its `event`
hook, `session.idle`) after the agent's loop has ended. So the plugin sends the agent back
itself: on `{"action": "continue", "message": …}` it posts the message to the session
(`client.session.promptAsync`), which starts the agent's loop again with greenloop's reason
as the next user message. On `{"action": "release", "message": …}` it shows the message
(a TUI toast, and the log); `{}` allows. The events the plugin sends (greenloop.hooks.
opencode_plugin writes it):

- `session.idle` (session_id, cwd): the turn is ending; the gate decides.
- `chat.message` (session_id, message_id, agent, prompt): a user message reaches the agent;
  a new turn (a new budget) unless it is greenloop's own reason coming back (`Gate.on_prompt`).
- `tool.execute.after` (session_id, tool, args, output, exit): the bash tool's command, its
  output and exit code record a test run the agent made itself; a shell `greenloop run` and
  greenloop's MCP `test_run` / `test_job` (`greenloop_test_run`) give their run to the session.
- `session.created` (session_id): binds the session before its first tool runs.

Every event binds the session to this hook's harness process (`base.bind`): the plugin runs
inside the opencode process, so the hook's parent is opencode, and so are the agent's shell
commands and MCP servers (its shell gets `OPENCODE=1`, no session id). A sub-agent's session
(the task tool's, with a parent) is skipped by the plugin: its parent's turn is the one gated.
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
)

__all__ = ["HARNESS", "handle"]

HARNESS = "opencode"
ALLOW = "{}\n"
SHELL_TOOLS = ("bash",)
# greenloop's MCP tools, as OpenCode names an MCP server's tools: <server>_<tool>.
_MCP_RUN_TOOL = re.compile(r"^greenloop_test_(run|job)$")


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one event of greenloop's OpenCode plugin."""
    event = payload.get("hook_event_name")
    session_id = payload.get("session_id")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(ALLOW, f"greenloop: {event or 'hook'} input has no session_id; allowing.\n")
    workspace = ctx.workspace(payload)
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "session.created")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event == "session.idle":
        decision = ctx.gate(workspace, HARNESS).on_turn_stopping(session_id)
        if decision.kind == "steer":
            return HookAnswer(json_line({"action": "continue", "message": decision.message}))
        if decision.kind == "release":
            return HookAnswer(json_line({"action": "release", "message": decision.message}))
        return HookAnswer(ALLOW)
    if event == "chat.message":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return HookAnswer(ALLOW, "greenloop: chat.message input has no prompt text; allowing.\n")
        ctx.gate(workspace, HARNESS).on_prompt(session_id, prompt)
        return HookAnswer(ALLOW)
    if event == "session.created":
        return HookAnswer(ALLOW)
    if event == "tool.execute.after":
        return _tool(payload, ctx, workspace, session_id)
    return HookAnswer(ALLOW, f"greenloop: ignoring OpenCode event {event!r}; allowing.\n")


def _tool(payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str) -> HookAnswer:
    tool = payload.get("tool")
    output = payload.get("output")
    if isinstance(tool, str) and _MCP_RUN_TOOL.match(tool):
        text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
        return HookAnswer(ALLOW, attach_run_ids(ctx, workspace, session_id, text))
    args = payload.get("args")
    command = args.get("command") if isinstance(args, dict) else None
    if tool not in SHELL_TOOLS or not isinstance(command, str) or not isinstance(output, str):
        return HookAnswer(ALLOW)
    code = payload.get("exit")
    exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
    note = attach_greenloop_run(ctx, workspace, session_id, command, output)
    return HookAnswer(ALLOW, note + record_shell_run(ctx, workspace, session_id, command, output, exit_code))
