"""`greenloop init HARNESS [PATH]`: write or merge a harness's hook config and register the MCP server.

| harness     | hooks                                                  | MCP server                         |
|-------------|--------------------------------------------------------|------------------------------------|
| claude-code | `.claude/settings.json`: SessionStart, Stop,           | `.mcp.json` `mcpServers.greenloop` |
|             | SubagentStop, UserPromptSubmit, PostToolUse (Bash)     |                                    |
| codex       | `.codex/hooks.json`: SessionStart, Stop,               | `.codex/config.toml`               |
|             | UserPromptSubmit, PostToolUse (Bash)                   | `[mcp_servers.greenloop]`,         |
|             |                                                        | `mcp_optional_startup_grace_ms`    |
| gemini      | `.gemini/settings.json`: SessionStart, BeforeAgent,    | `.gemini/settings.json`            |
|             | AfterAgent, AfterTool (run_shell_command, greenloop's  | `mcpServers.greenloop`             |
|             | MCP test_run / test_job)                               |                                    |
| cursor      | `.cursor/hooks.json`: beforeSubmitPrompt, stop,        | `.cursor/mcp.json`                 |
|             | afterShellExecution, afterMCPExecution                 |                                    |
| opencode    | `.opencode/plugin/greenloop.js` (a plugin: session     | `opencode.json` `mcp.greenloop`    |
|             | idle, chat.message, tool.execute.after)                |                                    |
| copilot     | `.github/hooks/greenloop.json`: SessionStart,          | `.mcp.json` `mcpServers.greenloop` |
|             | UserPromptSubmit, Stop, PostToolUse (bash),            |                                    |
|             | PostToolUseFailure                                     |                                    |
| qwen        | `.qwen/settings.json`: SessionStart, UserPromptSubmit, | `.qwen/settings.json`              |
|             | Stop, PostToolUse and PostToolUseFailure (shell,       | `mcpServers.greenloop`             |
|             | greenloop's MCP test_run / test_job)                   |                                    |

The events that fire before the model's first tool call (SessionStart, UserPromptSubmit,
BeforeAgent, beforeSubmitPrompt) are registered so that the hook has bound the session to
its harness process before the agent's first `greenloop run` or `test_run` (greenloop.closure.session).

Each hook runs `config_merge.hook_command(harness)`: this interpreter without `site`,
greenloop's install folder on sys.path, then `greenloop hook HARNESS` (the hooks' start-up
time is most of their cost). Idempotent: greenloop's own entries are recognised by their
command (`greenloop hook HARNESS` or that interpreter form, `config_merge.is_greenloop_hook`)
and replaced in place, never duplicated; every other hook, server and key is kept as it was.
A file that is not valid JSON (or TOML) is refused with a message naming it, and nothing is
written (every file is read and checked before any is written). Writes are atomic.
`dry_run` (`greenloop init --dry-run`) computes the same changes and writes nothing: each
file's change is reported as a unified diff (`FileChange.diff`).

This module holds each harness's writer and `init`; greenloop.hooks.config_merge the merge
logic they share, greenloop.hooks.codex_toml Codex's config.toml.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
from dataclasses import dataclass, replace
from typing import Any

from greenloop.errors import UsageError
from greenloop.hooks.codex_toml import codex_mcp
from greenloop.hooks.config_merge import (
    MCP_ARGS,
    MCP_COMMAND,
    FileChange,
    Pending,
    edit_json,
    hook_command,
    hook_list,
    is_greenloop_hook,
    mcp_json,
    merge_matcher_hooks,
    merge_mcp_json,
    save_text,
    write_atomic,
)
from greenloop.hooks.opencode_plugin import PLUGIN_PATH, plugin_source

__all__ = ["HARNESSES", "InitReport", "init"]


@dataclass(frozen=True)
class InitReport:
    """What `greenloop init` did: every file it wrote or left, and what to do next."""

    harness: str
    root: str
    files: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()
    dry_run: bool = False  # nothing was written; each change's diff is in its FileChange

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (`greenloop init --json`)."""
        return {
            "harness": self.harness,
            "root": self.root,
            "dry_run": self.dry_run,
            "files": [f.to_json() for f in self.files],
            "notes": list(self.notes),
        }


def _claude(root: str) -> list[Pending]:
    settings = os.path.join(root, ".claude", "settings.json")
    events: dict[str, str | None] = {
        "SessionStart": None, "Stop": None, "SubagentStop": None, "UserPromptSubmit": None,
        "PostToolUse": "Bash",
    }  # fmt: skip
    return [
        edit_json(
            settings,
            "hooks: SessionStart, Stop, SubagentStop, UserPromptSubmit, PostToolUse(Bash)",
            lambda data: merge_matcher_hooks(data, settings, "claude-code", events, {"timeout": 30}),
        ),
        mcp_json(os.path.join(root, ".mcp.json")),
    ]


def _codex(root: str) -> list[Pending]:
    hooks_path = os.path.join(root, ".codex", "hooks.json")
    events: dict[str, str | None] = {
        "SessionStart": None, "Stop": None, "UserPromptSubmit": None, "PostToolUse": "Bash"
    }  # fmt: skip
    return [
        edit_json(
            hooks_path,
            "hooks: SessionStart, Stop, UserPromptSubmit, PostToolUse(Bash)",
            lambda data: merge_matcher_hooks(data, hooks_path, "codex", events, {"timeout": 30}),
        ),
        codex_mcp(os.path.join(root, ".codex", "config.toml")),
    ]


# Gemini matches a tool hook's `matcher` as a regular expression against the tool's name; MCP
# tools are named mcp_<server>_<tool>. The shell records runs the agent made itself; the two
# MCP tools name the runs the hook gives to the session (hooks/gemini.py).
GEMINI_AFTER_TOOL = "^(run_shell_command|mcp_greenloop_test_run|mcp_greenloop_test_job)$"


def _gemini(root: str) -> list[Pending]:
    settings = os.path.join(root, ".gemini", "settings.json")

    def edit(data: dict[str, Any]) -> None:
        merge_matcher_hooks(
            data,
            settings,
            "gemini",
            {"SessionStart": None, "BeforeAgent": None, "AfterAgent": None, "AfterTool": GEMINI_AFTER_TOOL},
            {"name": "greenloop", "timeout": 30000},
        )
        merge_mcp_json(data, settings)

    what = "hooks: SessionStart, BeforeAgent, AfterAgent, AfterTool(shell, greenloop MCP runs); MCP server"
    return [edit_json(settings, what, edit)]


def _merge_cursor_hooks(data: dict[str, Any], path: str) -> None:
    data.setdefault("version", 1)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: 'hooks' must be an object; fix it by hand, then run init again")
    command = hook_command("cursor")
    for event in ("beforeSubmitPrompt", "stop", "afterShellExecution", "afterMCPExecution"):
        entries = hook_list(hooks, event, path)
        ours = [
            i
            for i, e in enumerate(entries)
            if isinstance(e, dict) and is_greenloop_hook(e.get("command"), "cursor")
        ]
        if ours:
            entries[ours[0]]["command"] = command
            for i in reversed(ours[1:]):
                del entries[i]
        else:
            entries.append({"command": command})


def _cursor(root: str) -> list[Pending]:
    hooks_path = os.path.join(root, ".cursor", "hooks.json")
    return [
        edit_json(
            hooks_path,
            "hooks: beforeSubmitPrompt, stop, afterShellExecution, afterMCPExecution",
            lambda data: _merge_cursor_hooks(data, hooks_path)
        ),
        mcp_json(os.path.join(root, ".cursor", "mcp.json")),
    ]


# Qwen matches a tool hook's `matcher` as a regular expression against the tool's name (and
# its aliases); MCP tools are named mcp__<server>__<tool>. A shell command that exits non-zero
# (a red test run) is reported by PostToolUseFailure, not PostToolUse (hooks/qwen.py).
QWEN_TOOLS = "^(run_shell_command|mcp__greenloop__test_run|mcp__greenloop__test_job)$"


def _qwen(root: str) -> list[Pending]:
    settings = os.path.join(root, ".qwen", "settings.json")

    def edit(data: dict[str, Any]) -> None:
        events: dict[str, str | None] = {
            "SessionStart": None, "UserPromptSubmit": None, "Stop": None,
            "PostToolUse": QWEN_TOOLS, "PostToolUseFailure": QWEN_TOOLS,
        }  # fmt: skip
        # Qwen's hook timeouts are seconds (1000 or more is read as the old milliseconds).
        merge_matcher_hooks(data, settings, "qwen", events, {"name": "greenloop", "timeout": 30})
        merge_mcp_json(data, settings)

    what = (
        "hooks: SessionStart, UserPromptSubmit, Stop, PostToolUse and PostToolUseFailure (shell, "
        "greenloop MCP runs); MCP server"
    )
    return [edit_json(settings, what, edit)]


def _merge_opencode_mcp(data: dict[str, Any], path: str) -> None:
    """OpenCode's `mcp.greenloop` (a local server: the command and its arguments in one list)."""
    if not data:
        data["$schema"] = "https://opencode.ai/config.json"
    servers = data.setdefault("mcp", {})
    if not isinstance(servers, dict):
        raise UsageError(f"{path}: 'mcp' must be an object; fix it by hand, then run init again")
    current = servers.get("greenloop")
    wanted = {"type": "local", "command": [MCP_COMMAND, *MCP_ARGS]}
    servers["greenloop"] = {**current, **wanted} if isinstance(current, dict) else {**wanted, "enabled": True}


def _opencode(root: str) -> list[Pending]:
    plugin = os.path.join(root, *PLUGIN_PATH.split("/"))
    config = os.path.join(root, "opencode.json")
    if not os.path.exists(config) and os.path.exists(os.path.join(root, "opencode.jsonc")):
        config = os.path.join(root, "opencode.jsonc")  # read as JSON: one with comments is refused
    what = "plugin: session.idle, chat.message, tool.execute.after (bash, greenloop MCP runs)"
    return [
        save_text(plugin, plugin_source(hook_command("opencode")), what),
        edit_json(config, "MCP server 'greenloop' (greenloop mcp)", lambda d: _merge_opencode_mcp(d, config)),
    ]


# Copilot CLI's PascalCase event names (the VS Code-compatible payloads, which name their event);
# the matcher is a regex on the tool's name, Claude-style in this spelling (`Bash` is bash).
COPILOT_EVENTS: dict[str, str | None] = {
    "SessionStart": None, "UserPromptSubmit": None, "Stop": None, "PostToolUse": None,
    "PostToolUseFailure": None,
}  # fmt: skip


def _merge_copilot_hooks(data: dict[str, Any], path: str) -> None:
    """Copilot's shape: {"version": 1, "hooks": {EVENT: [{type, bash, timeoutSec, matcher?}]}}."""
    data.setdefault("version", 1)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: 'hooks' must be an object; fix it by hand, then run init again")
    name = "copilot"
    command = hook_command(name)
    for event, matcher in COPILOT_EVENTS.items():
        entries = hook_list(hooks, event, path)
        wanted: dict[str, Any] = {"type": "command", "bash": command, "timeoutSec": 30}
        if matcher is not None:
            wanted["matcher"] = matcher
        ours = [
            i
            for i, e in enumerate(entries)
            if isinstance(e, dict) and is_greenloop_hook(e.get("bash"), name)
        ]
        if ours:
            entries[ours[0]].update(wanted)
            for i in reversed(ours[1:]):
                del entries[i]
        else:
            entries.append(wanted)


def _copilot(root: str) -> list[Pending]:
    hooks_path = os.path.join(root, ".github", "hooks", "greenloop.json")
    return [
        edit_json(
            hooks_path,
            "hooks: SessionStart, UserPromptSubmit, Stop, PostToolUse, PostToolUseFailure",
            lambda data: _merge_copilot_hooks(data, hooks_path),
        ),
        mcp_json(os.path.join(root, ".mcp.json")),
    ]


_WRITERS = {
    "claude-code": _claude, "codex": _codex, "gemini": _gemini, "cursor": _cursor, "qwen": _qwen,
    "opencode": _opencode, "copilot": _copilot,
}  # fmt: skip
HARNESSES = tuple(_WRITERS)  # greenloop.HARNESSES, in its order (tests/test_init.py checks)
_NOTES = {
    "claude-code": ("restart Claude Code (or run /hooks) so it loads the new hooks; approve the MCP server",),
    "codex": (
        "Codex reads .codex/ only in a trusted project: accept its trust prompt, or run "
        "`codex exec --trust` once (trust is user config: ~/.codex/config.toml "
        '[projects.<root>] trust_level = "trusted"; init does not edit it)',
        "review and trust the new hooks with /hooks in the Codex TUI: `codex exec` silently skips "
        "hooks that are not trusted, so nothing is gated (automation that vets hooks itself can "
        "pass --dangerously-bypass-hook-trust)",
        "Codex runs the agent's commands in a login shell, whose profile resets PATH: if `greenloop` "
        "is found only through your interactive PATH (a virtualenv, ~/.local/bin), the agent's "
        "`greenloop run` fails; set allow_login_shell = false in ~/.codex/config.toml or install it "
        "where /etc/profile looks",
    ),
    "gemini": (
        "restart Gemini CLI so it loads the new hooks and the MCP server",
        "Gemini CLI runs a project's hooks and starts its stdio MCP servers only in a trusted folder: "
        "trust this one (`/permissions trust` in the CLI, or `\"<folder>\": \"TRUST_FOLDER\"` in "
        "~/.gemini/trustedFolders.json; `gemini -p` also takes --skip-trust or "
        "GEMINI_CLI_TRUST_WORKSPACE=true)",
    ),
    "cursor": ("Cursor reloads .cursor/hooks.json on save; enable the MCP server in its settings",),
    "qwen": (
        "restart Qwen Code so it loads the new hooks and the MCP server (it needs Node.js 22 or later)",
        "with folder trust on (security.folderTrust.enabled in ~/.qwen/settings.json), Qwen Code "
        "ignores an untrusted folder's .qwen/settings.json: trust this one (`/trust`, or "
        '`"<folder>": "TRUST_FOLDER"` in ~/.qwen/trustedFolders.json)',
        "Qwen Code ends a chain of Stop-hook blocks itself after stopHookBlockingCap (8) in a row: "
        "keep max_intercept_rounds below it",
    ),
    "copilot": (
        "Copilot CLI loads .github/hooks/*.json and a project's .mcp.json only in a folder you "
        "trust (its start-up prompt); restart it so it loads them",
        "Copilot CLI ends a chain of Stop blocks itself after 8 in a row: keep max_intercept_rounds below it",
    ),
    "opencode": (
        "restart OpenCode so it loads the plugin and the MCP server",
        "OpenCode cannot refuse a stop: the plugin sends the agent back when the session goes idle, "
        "so a turn is held where OpenCode keeps running (its TUI, `opencode serve`, `opencode run "
        "--attach`); a standalone `opencode run` exits at idle, before the plugin can send it back",
    ),
}


def _diff(path: str, root: str, new_text: str) -> str:
    """A unified diff of `path` from what it holds to `new_text`, named relative to `root`."""
    try:
        with open(path, encoding="utf-8") as fh:
            old_text = fh.read()
    except FileNotFoundError:
        old_text, before = "", "/dev/null"
    else:
        before = "a/" + os.path.relpath(path, root)
    lines = difflib.unified_diff(
        old_text.splitlines(keepends=True),
        new_text.splitlines(keepends=True),
        fromfile=before,
        tofile="b/" + os.path.relpath(path, root),
    )
    no_newline = "\n\\ No newline at end of file\n"
    return "".join(line if line.endswith("\n") else line + no_newline for line in lines)


def init(harness: str, path: str | os.PathLike[str] = ".", *, dry_run: bool = False) -> InitReport:
    """Write or merge `harness`'s hook configuration and MCP registration under `path`
    (`dry_run`: write nothing, and give each change as a diff)."""
    if harness not in _WRITERS:
        raise UsageError(f"unknown harness {harness!r}: use one of {', '.join(HARNESSES)}")
    root = os.path.abspath(os.fspath(path))
    if not os.path.isdir(root):
        raise UsageError(f"{root} is not a folder; pass the project folder to init")
    pending = _WRITERS[harness](root)  # every file is read and checked before any is written
    if dry_run:
        pending = [
            (replace(change, diff=_diff(change.path, root, text)) if text is not None else change, None)
            for change, text in pending
        ]
    for change, text in pending:
        if text is not None:
            write_atomic(change.path, text)
    # <root>: the project folder as a TOML key, so the trust note can be pasted as it is.
    notes: tuple[str, ...] = tuple(note.replace("<root>", json.dumps(root)) for note in _NOTES[harness])
    if shutil.which(MCP_COMMAND) is None:
        notes += (
            f"`{MCP_COMMAND}` is not on PATH here: the MCP server is called by name, so install "
            "greenloop where the harness runs (e.g. `pipx install greenloop`); the hooks call "
            f"{sys.executable} directly",
        )
    return InitReport(harness, root, tuple(change for change, _ in pending), notes, dry_run)
