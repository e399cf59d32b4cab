"""GitHub Copilot CLI hooks (`.github/hooks/greenloop.json`, version 1): SessionStart,
UserPromptSubmit, Stop, PostToolUse, PostToolUseFailure.

Copilot CLI (`@github/copilot` 1.0) takes each event in two spellings: camelCase (`agentStop`,
fields `sessionId`, `toolName`, …) and the PascalCase one of the VS Code Copilot extension
(`Stop`, fields `hook_event_name`, `session_id`, `tool_name`, `tool_input`, …), chosen by the
event name in the config. `greenloop init copilot` writes the PascalCase names, so every input
names its event, as Claude Code's do; the camelCase fields are read too (GitHub's hooks
reference, docs.github.com/en/copilot/reference/hooks-reference):

- Stop (`agentStop`; input: stop_reason, stop_hook_active, transcript_path): steer with
  `{"decision": "block", "reason": "…"}`; Copilot enqueues the reason as the next user prompt
  and the agent carries on. Copilot itself ends a chain after 8 consecutive blocks. Release
  and allow print `{}` (Copilot's Stop has no message field; the release is recorded and
  shown by `greenloop check`).
- UserPromptSubmit (`userPromptSubmitted`; input: prompt): a new turn unless the prompt is
  greenloop's own reason coming back (`Gate.on_prompt`): the enqueued reason fires it (1.0.102).
- PostToolUse (tool_name, tool_input, tool_result.text_result_for_llm) of the bash tool
  records a test run the agent made itself; PostToolUseFailure (error) reports a tool that
  failed. Neither carries an exit code: it is read from the text when the text has one
  (1.0.102's bash tool ends it with `<shellId: 0 completed with exit code N>`; its
  `tool_name` is `Bash`).
  A shell `greenloop run` and greenloop's MCP tools give their run to the session.
- Every event binds the session to this hook's harness process (`base.bind`), so a shell
  `greenloop run` or the MCP server under the same Copilot process finds the session. (Its
  shell also gets COPILOT_AGENT_SESSION_ID, which only chooses the agent format: that it equals
  the hooks' session id is not documented, so it does not name the session.)

tests/e2e/test_copilot_cli.py drives the real CLI offline (its own-provider mode,
COPILOT_PROVIDER_TYPE=anthropic against a scripted model server, COPILOT_OFFLINE=true: no
GitHub sign-in); tests/test_hooks_copilot.py feeds the adapter the payloads it sends and the
camelCase ones GitHub's reference documents.
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

__all__ = ["EVENTS", "HARNESS", "handle"]

HARNESS = "copilot"
ALLOW = "{}\n"
# camelCase event names -> the PascalCase ones (the payload's shape is told by its fields).
EVENTS = {
    "sessionStart": "SessionStart",
    "userPromptSubmitted": "UserPromptSubmit",
    "agentStop": "Stop",
    "postToolUse": "PostToolUse",
    "postToolUseFailure": "PostToolUseFailure",
}
SHELL_TOOLS = ("bash", "Bash")
_MCP_RUN_TOOL = re.compile(r"(^|[_.:/-])test_(run|job)$")
_EXIT = re.compile(r"exit(?:ed with)? code:? (-?\d+)", re.I)


def _get(payload: dict[str, Any], snake: str, camel: str) -> Any:
    value = payload.get(snake)
    return payload.get(camel) if value is None else value


def handle(payload: dict[str, Any], ctx: HookContext) -> HookAnswer:
    """Answer one Copilot CLI hook event in its shape."""
    raw_event = payload.get("hook_event_name")
    event = EVENTS.get(str(raw_event), raw_event)
    session_id = _get(payload, "session_id", "sessionId")
    if not isinstance(session_id, str) or not session_id:
        return HookAnswer(ALLOW, f"greenloop: {event or 'hook'} input has no session id; allowing.\n")
    workspace = ctx.workspace(payload)
    note = bind(ctx, workspace, session_id, HARNESS, start=event == "SessionStart")
    answer = _answer(event, payload, ctx, workspace, session_id)
    return answer._replace(stderr=note + answer.stderr) if note else answer


def _answer(
    event: Any, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    if event == "Stop":
        decision = ctx.gate(workspace, HARNESS).on_turn_stopping(session_id)
        if decision.kind == "steer":
            return HookAnswer(json_line({"decision": "block", "reason": decision.message}))
        if decision.kind == "release":
            return HookAnswer(ALLOW, decision.message + "\n")
        return HookAnswer(ALLOW)
    if event == "UserPromptSubmit":
        prompt = payload.get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            ctx.gate(workspace, HARNESS).on_prompt(session_id, prompt)
        return HookAnswer(ALLOW)
    if event == "SessionStart":
        return HookAnswer(ALLOW)
    if event in ("PostToolUse", "PostToolUseFailure"):
        return _tool(event, payload, ctx, workspace, session_id)
    return HookAnswer(ALLOW, f"greenloop: ignoring Copilot CLI event {event!r}; allowing.\n")


def _tool(
    event: str, payload: dict[str, Any], ctx: HookContext, workspace: str, session_id: str
) -> HookAnswer:
    tool = _get(payload, "tool_name", "toolName")
    if event == "PostToolUse":
        result = _get(payload, "tool_result", "toolResult")
        text = _get(result, "text_result_for_llm", "textResultForLlm") if isinstance(result, dict) else result
    else:
        text = payload.get("error")
    if not isinstance(text, str):
        text = json.dumps(text, ensure_ascii=False) if text is not None else ""
    if isinstance(tool, str) and "greenloop" in tool and _MCP_RUN_TOOL.search(tool):
        return HookAnswer(ALLOW, attach_run_ids(ctx, workspace, session_id, text))
    args = _get(payload, "tool_input", "toolArgs")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = None
    command = args.get("command") if isinstance(args, dict) else None
    if tool not in SHELL_TOOLS or not isinstance(command, str):
        return HookAnswer(ALLOW)
    codes = _EXIT.findall(text)
    code = int(codes[-1]) if codes else (1 if event == "PostToolUseFailure" else None)
    note = attach_greenloop_run(ctx, workspace, session_id, command, text)
    return HookAnswer(ALLOW, note + record_shell_run(ctx, workspace, session_id, command, text, code))
