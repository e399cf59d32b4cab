"""Merging greenloop's entries into a harness's configuration files, shared by every harness's writer.

The hook command (`hook_command`) and how greenloop's own entries are recognised
(`is_greenloop_hook`: replaced in place, never duplicated), the two JSON shapes of hook
lists (`merge_matcher_hooks`: Claude Code, Codex, Gemini CLI, Qwen Code; the flat lists of
Cursor and Copilot CLI are their writers'), the `mcpServers` entry, and reading and atomically
writing a JSON file, or a file greenloop owns whole (`save_text`: the OpenCode plugin).
A file that is not valid JSON is refused with a message naming it (greenloop.hooks.install
writes nothing then).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greenloop.errors import UsageError

__all__ = [
    "MCP_ARGS",
    "MCP_COMMAND",
    "SERVER_NAME",
    "FileChange",
    "Pending",
    "edit_json",
    "hook_command",
    "hook_list",
    "is_greenloop_hook",
    "mcp_json",
    "merge_matcher_hooks",
    "merge_mcp_json",
    "read_json",
    "save_json",
    "save_text",
    "write_atomic",
]

SERVER_NAME = "greenloop"
MCP_COMMAND = "greenloop"
MCP_ARGS = ("mcp",)


@dataclass(frozen=True)
class FileChange:
    """One file init wrote, or left as it was."""

    path: str
    action: str  # "created" | "updated" | "unchanged" (in a dry run: what would be done)
    what: str
    diff: str | None = None  # a dry run's unified diff of the change (None: not a dry run, or unchanged)

    def to_json(self) -> dict[str, Any]:
        """The change as JSON (`greenloop init --json`)."""
        out = {"path": self.path, "action": self.action, "what": self.what}
        if self.diff is not None:
            out["diff"] = self.diff
        return out


def hook_command(harness: str) -> str:
    """The hook command: this interpreter, started without `site` and isolated (`-I -S`), with
    greenloop's install folder put on sys.path by hand, then `greenloop hook HARNESS`.

    The hooks run on every agent turn and every shell call. Processing site-packages (its
    .pth files, which may import whole packages) costs more than the hook's own work, and
    the hook needs only the standard library and greenloop. `-I` also keeps the project
    folder (the hook's cwd) off sys.path, so a project module named like a standard one
    cannot shadow it. The paths are this installation's, taken at init time: run init again
    after moving or reinstalling greenloop elsewhere.

    The code is the hook client (greenloop.hook_client): it hands the event to the warm hook
    server (greenloop.hooks.server) and answers in process when there is none.
    """
    import greenloop

    root = os.path.dirname(os.path.dirname(os.path.abspath(greenloop.__file__)))
    code = f"import sys;sys.path.insert(0,{json.dumps(root)});from greenloop.hook_client import main;main()"
    return f"{shlex.quote(sys.executable)} -I -S -c {shlex.quote(code)} hook {harness}"


def is_greenloop_hook(command: Any, harness: str) -> bool:
    """Whether a hook command is greenloop's own for `harness` (how init recognises its entries):
    `greenloop hook HARNESS` (any path to the script), or the interpreter form `hook_command`
    writes."""
    return (
        isinstance(command, str)
        and "greenloop" in command
        and bool(re.search(rf"(^|\s)hook\s+{re.escape(harness)}(\s|$)", command))
    )


def read_json(path: str) -> dict[str, Any]:
    """The JSON object at `path` ({} when missing or empty); a clear UsageError when it is none."""
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}; fix its permissions") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{path} is not valid JSON ({exc}); fix it by hand, then run init again") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path} must hold a JSON object; fix it by hand, then run init again")
    return data


def write_atomic(path: str, text: str) -> None:
    """Replace `path` with `text` at once (its mode kept), so a harness never reads half a file."""
    from greenloop.system.atomic import write_text

    write_text(path, text, keep_mode=True)


# A pending write: the change to report and the new text (None: leave the file as it is).
Pending = tuple[FileChange, str | None]


def save_json(path: str, before: dict[str, Any], after: dict[str, Any], what: str) -> Pending:
    """The pending write of `after` to `path` (none when nothing changes)."""
    existed = os.path.exists(path)
    if existed and before == after:
        return FileChange(path, "unchanged", what), None
    text = json.dumps(after, indent=2, ensure_ascii=False) + "\n"
    return FileChange(path, "updated" if existed else "created", what), text


def save_text(path: str, text: str, what: str) -> Pending:
    """The pending write of a file greenloop owns whole (none when it already reads `text`)."""
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return FileChange(path, "unchanged", what), None
        action = "updated"
    except FileNotFoundError:
        action = "created"
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}; fix its permissions") from None
    return FileChange(path, action, what), text


def hook_list(hooks: dict[str, Any], event: str, path: str) -> list[Any]:
    """The list of `event`'s hook entries (created when missing); a UsageError when it is no list."""
    entries = hooks.setdefault(event, [])
    if not isinstance(entries, list):
        raise UsageError(f"{path}: hooks.{event} must be a list; fix it by hand, then run init again")
    return entries


def merge_matcher_hooks(
    data: dict[str, Any], path: str, harness: str, events: dict[str, str | None], extra: dict[str, Any]
) -> None:
    """Claude Code / Codex / Gemini shape: hooks.EVENT = [{matcher?, hooks: [{type, command, …}]}]."""
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: 'hooks' must be an object; fix it by hand, then run init again")
    command = hook_command(harness)
    for event, matcher in events.items():
        groups = hook_list(hooks, event, path)
        placed = False
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            kept = []
            for handler in group["hooks"]:
                if isinstance(handler, dict) and is_greenloop_hook(handler.get("command"), harness):
                    if placed:
                        continue  # a duplicate from an older init: drop it
                    handler.update({"type": "command", "command": command, **extra})
                    placed = True
                kept.append(handler)
            group["hooks"] = kept
            if placed and matcher is not None and group.get("matcher") != matcher and len(kept) == 1:
                group["matcher"] = matcher
        groups[:] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not placed:
            group_new: dict[str, Any] = {}
            if matcher is not None:
                group_new["matcher"] = matcher
            group_new["hooks"] = [{"type": "command", "command": command, **extra}]
            groups.append(group_new)


def merge_mcp_json(data: dict[str, Any], path: str) -> None:
    """Add or refresh `mcpServers.greenloop`, keeping the user's additions to it."""
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise UsageError(f"{path}: 'mcpServers' must be an object; fix it by hand, then run init again")
    current = servers.get(SERVER_NAME)
    wanted = {"command": MCP_COMMAND, "args": list(MCP_ARGS)}
    if isinstance(current, dict):
        merged = {**current, **wanted}  # keep the user's env / cwd / timeout additions
        servers[SERVER_NAME] = merged
    else:
        servers[SERVER_NAME] = wanted


def edit_json(path: str, what: str, edit: Callable[[dict[str, Any]], None]) -> Pending:
    """Apply `edit` to a copy of the JSON object at `path` ({} when missing) and say what changes."""
    before = read_json(path)
    after = json.loads(json.dumps(before))
    edit(after)
    return save_json(path, before, after, what)


def mcp_json(path: str) -> Pending:
    """The `mcpServers.greenloop` entry of an MCP JSON file (.mcp.json, .cursor/mcp.json)."""
    return edit_json(
        path, "MCP server 'greenloop' (greenloop mcp)", lambda data: merge_mcp_json(data, path)
    )
