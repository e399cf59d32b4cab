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

The events that fire before the model's first tool call (SessionStart, UserPromptSubmit,
BeforeAgent, beforeSubmitPrompt) are registered so that the hook has bound the session to
its harness process before the agent's first `greenloop run` or `test_run` (greenloop.closure.session).

Each hook runs `hook_command(harness)`: this interpreter without `site`, greenloop's install
folder on sys.path, then `greenloop hook HARNESS` (the hooks' start-up time is most of their
cost). Idempotent: greenloop's own entries are recognised by their command (`greenloop hook
HARNESS` or that interpreter form, `_is_ours`) and replaced in place, never duplicated; every
other hook, server and key is kept as it was. A file that is not valid JSON (or TOML) is
refused with a message naming it, and nothing is written. Writes are atomic.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from greenloop.errors import UsageError

__all__ = ["HARNESSES", "FileChange", "InitReport", "hook_command", "init", "is_greenloop_hook"]

SERVER_NAME = "greenloop"
MCP_COMMAND = "greenloop"
MCP_ARGS = ("mcp",)


@dataclass(frozen=True)
class FileChange:
    path: str
    action: str  # "created" | "updated" | "unchanged"
    what: str

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "action": self.action, "what": self.what}


@dataclass(frozen=True)
class InitReport:
    harness: str
    root: str
    files: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "harness": self.harness,
            "root": self.root,
            "files": [f.to_json() for f in self.files],
            "notes": list(self.notes),
        }


def hook_command(harness: str) -> str:
    """The hook command: this interpreter, started without `site` and isolated (`-I -S`), with
    greenloop's install folder put on sys.path by hand, then `greenloop hook HARNESS`.

    The hooks run on every agent turn and every shell call. Processing site-packages (its
    .pth files, which may import whole packages) costs more than the hook's own work, and
    the hook needs only the standard library and greenloop. `-I` also keeps the project
    folder (the hook's cwd) off sys.path, so a project module named like a standard one
    cannot shadow it. The paths are this installation's, taken at init time: run init again
    after moving or reinstalling greenloop elsewhere.
    """
    import greenloop

    root = os.path.dirname(os.path.dirname(os.path.abspath(greenloop.__file__)))
    code = f"import sys;sys.path.insert(0,{json.dumps(root)});from greenloop.cli import entry;entry()"
    return f"{shlex.quote(sys.executable)} -I -S -c {shlex.quote(code)} hook {harness}"


def _is_ours(command: Any, harness: str) -> bool:
    """greenloop's own hook entry for `harness`: `greenloop hook HARNESS` (any path to the
    script), or the interpreter form `hook_command` writes."""
    return (
        isinstance(command, str)
        and "greenloop" in command
        and bool(re.search(rf"(^|\s)hook\s+{re.escape(harness)}(\s|$)", command))
    )


def is_greenloop_hook(command: Any, harness: str) -> bool:
    """Whether a hook command is greenloop's own for `harness` (how init recognises its entries)."""
    return _is_ours(command, harness)


def _read_json(path: str) -> dict[str, Any]:
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


def _write_atomic(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".greenloop-", suffix=".tmp", dir=os.path.dirname(path) or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# A pending write: the change to report and the new text (None: leave the file as it is).
Pending = tuple[FileChange, str | None]


def _save_json(path: str, before: dict[str, Any], after: dict[str, Any], what: str) -> Pending:
    existed = os.path.exists(path)
    if existed and before == after:
        return FileChange(path, "unchanged", what), None
    text = json.dumps(after, indent=2, ensure_ascii=False) + "\n"
    return FileChange(path, "updated" if existed else "created", what), text


def _section(hooks: dict[str, Any], event: str, path: str) -> list[Any]:
    entries = hooks.setdefault(event, [])
    if not isinstance(entries, list):
        raise UsageError(f"{path}: hooks.{event} must be a list; fix it by hand, then run init again")
    return entries


def _merge_matcher_hooks(
    data: dict[str, Any], path: str, harness: str, events: dict[str, str | None], extra: dict[str, Any]
) -> None:
    """Claude Code / Codex / Gemini shape: hooks.EVENT = [{matcher?, hooks: [{type, command, …}]}]."""
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: 'hooks' must be an object; fix it by hand, then run init again")
    command = hook_command(harness)
    for event, matcher in events.items():
        groups = _section(hooks, event, path)
        placed = False
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            kept = []
            for handler in group["hooks"]:
                if isinstance(handler, dict) and _is_ours(handler.get("command"), harness):
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


def _merge_mcp_json(data: dict[str, Any], path: str) -> None:
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


def _edit_json(path: str, what: str, edit: Callable[[dict[str, Any]], None]) -> Pending:
    """Apply `edit` to a copy of the JSON object at `path` ({} when missing) and say what changes."""
    before = _read_json(path)
    after = json.loads(json.dumps(before))
    edit(after)
    return _save_json(path, before, after, what)


def _mcp_json(path: str) -> Pending:
    """The `mcpServers.greenloop` entry of an MCP JSON file (.mcp.json, .cursor/mcp.json)."""
    return _edit_json(
        path, "MCP server 'greenloop' (greenloop mcp)", lambda data: _merge_mcp_json(data, path)
    )


def _claude(root: str) -> list[Pending]:
    settings = os.path.join(root, ".claude", "settings.json")
    events: dict[str, str | None] = {
        "SessionStart": None, "Stop": None, "SubagentStop": None, "UserPromptSubmit": None,
        "PostToolUse": "Bash",
    }  # fmt: skip
    return [
        _edit_json(
            settings,
            "hooks: SessionStart, Stop, SubagentStop, UserPromptSubmit, PostToolUse(Bash)",
            lambda data: _merge_matcher_hooks(data, settings, "claude-code", events, {"timeout": 30}),
        ),
        _mcp_json(os.path.join(root, ".mcp.json")),
    ]


def _codex(root: str) -> list[Pending]:
    hooks_path = os.path.join(root, ".codex", "hooks.json")
    events: dict[str, str | None] = {
        "SessionStart": None, "Stop": None, "UserPromptSubmit": None, "PostToolUse": "Bash"
    }  # fmt: skip
    return [
        _edit_json(
            hooks_path,
            "hooks: SessionStart, Stop, UserPromptSubmit, PostToolUse(Bash)",
            lambda data: _merge_matcher_hooks(data, hooks_path, "codex", events, {"timeout": 30}),
        ),
        _codex_mcp(os.path.join(root, ".codex", "config.toml")),
    ]


_TOML_TABLE = f"[mcp_servers.{SERVER_NAME}]"
_TOML_OWNED = {"command": MCP_COMMAND, "args": list(MCP_ARGS)}  # always ours: refreshed on every init
# Written when absent, then the user's to change. Codex gives an MCP server 10 s to answer its
# handshake by default; a Python server on a loaded machine can need more.
_TOML_DEFAULTS: dict[str, Any] = {"startup_timeout_sec": 30}
# A top-level key, written when absent. `codex exec` starts the model's first turn without any
# optional MCP server still starting (it logs "omitting pending optional MCP server"), so the
# agent would have no test_run at all; this grace makes it wait for them, at most this long.
# (`required = true` in the server's table waits too, but then Codex refuses to start at all
# when `greenloop` is missing or broken, and a broken gate must never lock the user out.)
_GRACE_KEY = "mcp_optional_startup_grace_ms"
_GRACE_MS = 15000
_GRACE_LINES = (
    "# greenloop: let `codex exec` wait for MCP servers that are still starting before its first\n"
    "# turn (otherwise it leaves them out, and the agent has no test_run tool).\n"
    f"{_GRACE_KEY} = {_GRACE_MS}\n"
)
_KEY_LINE = re.compile(r"\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


def _toml_line(key: str, value: Any) -> str:
    # Strings, integers and lists of strings: JSON spells them as TOML does.
    return f"{key} = {json.dumps(value)}\n"


def _server_table(text: str, keep: dict[str, Any]) -> str | None:
    """`text` with greenloop's server table rewritten: our keys first, then the user's other
    lines of the table as they were (None when the table is not a `[header]` table)."""
    body = "".join(_toml_line(k, v) for k, v in {**_TOML_OWNED, **keep}.items())
    out: list[str] = []
    inside = found = False
    skipping_array = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("[") and not skipping_array:
            inside = stripped.replace(" ", "") == _TOML_TABLE
            if inside:
                found = True
                out.append(_TOML_TABLE + "\n" + body)
                continue
        if inside:
            if skipping_array:  # the rest of a multi-line `args = [` … `]` we replace
                skipping_array = "]" not in stripped
                continue
            match = _KEY_LINE.match(line)
            if match and match.group(1).strip('"') in {*_TOML_OWNED, *keep}:
                skipping_array = "[" in line and "]" not in line
                continue
        out.append(line)
    return "".join(out) if found else None


def _codex_mcp(path: str) -> Pending:
    """Add or refresh `[mcp_servers.greenloop]` in config.toml (and the start-up grace that makes
    `codex exec` wait for it), leaving every other line as it is."""
    from greenloop.config import read_toml

    what = f"MCP server 'greenloop' ([mcp_servers.greenloop], {_GRACE_KEY})"
    text = ""
    data: dict[str, Any] = {}
    if os.path.exists(path):
        try:
            data, raw = read_toml(path)
        except Exception as exc:
            raise UsageError(f"{exc}; fix {path} by hand, then run init again") from None
        text = raw.decode().replace("\r\n", "\n").replace("\r", "\n")  # as open(path).read() reads it
    servers = data.get("mcp_servers")
    server = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    has_grace = _GRACE_KEY in data
    if isinstance(server, dict):
        keep = {k: server.get(k, v) for k, v in _TOML_DEFAULTS.items()}
        if has_grace and all(server.get(k) == v for k, v in {**_TOML_OWNED, **keep}.items()):
            return FileChange(path, "unchanged", what), None
        new_text = _server_table(text, keep)
        if new_text is None:
            raise UsageError(
                f"{path} defines mcp_servers.{SERVER_NAME} inline; replace it with a "
                f"{_TOML_TABLE} table by hand, then run init again"
            )
    else:
        body = "".join(_toml_line(k, v) for k, v in {**_TOML_OWNED, **_TOML_DEFAULTS}.items())
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        new_text = text + sep + _TOML_TABLE + "\n" + body
    if not has_grace:
        # A top-level key must come before the first table, so it goes first; the user's
        # lines follow as they were.
        new_text = _GRACE_LINES + ("\n" if new_text and not new_text.startswith("\n") else "") + new_text
    return FileChange(path, "updated" if text else "created", what), new_text


# Gemini matches a tool hook's `matcher` as a regular expression against the tool's name; MCP
# tools are named mcp_<server>_<tool>. The shell records runs the agent made itself; the two
# MCP tools name the runs the hook gives to the session (hooks/gemini.py).
GEMINI_AFTER_TOOL = "^(run_shell_command|mcp_greenloop_test_run|mcp_greenloop_test_job)$"


def _gemini(root: str) -> list[Pending]:
    settings = os.path.join(root, ".gemini", "settings.json")

    def edit(data: dict[str, Any]) -> None:
        _merge_matcher_hooks(
            data,
            settings,
            "gemini",
            {"SessionStart": None, "BeforeAgent": None, "AfterAgent": None, "AfterTool": GEMINI_AFTER_TOOL},
            {"name": "greenloop", "timeout": 30000},
        )
        _merge_mcp_json(data, settings)

    what = "hooks: SessionStart, BeforeAgent, AfterAgent, AfterTool(shell, greenloop MCP runs); MCP server"
    return [_edit_json(settings, what, edit)]


def _merge_cursor_hooks(data: dict[str, Any], path: str) -> None:
    data.setdefault("version", 1)
    hooks = data.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise UsageError(f"{path}: 'hooks' must be an object; fix it by hand, then run init again")
    command = hook_command("cursor")
    for event in ("beforeSubmitPrompt", "stop", "afterShellExecution", "afterMCPExecution"):
        entries = _section(hooks, event, path)
        ours = [
            i for i, e in enumerate(entries) if isinstance(e, dict) and _is_ours(e.get("command"), "cursor")
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
        _edit_json(
            hooks_path,
            "hooks: beforeSubmitPrompt, stop, afterShellExecution, afterMCPExecution",
            lambda data: _merge_cursor_hooks(data, hooks_path)
        ),
        _mcp_json(os.path.join(root, ".cursor", "mcp.json")),
    ]


_WRITERS = {"claude-code": _claude, "codex": _codex, "gemini": _gemini, "cursor": _cursor}
HARNESSES = tuple(_WRITERS)  # claude-code, codex, gemini, cursor
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
}


def init(harness: str, path: str | os.PathLike[str] = ".") -> InitReport:
    """Write or merge `harness`'s hook configuration and MCP registration under `path`."""
    if harness not in _WRITERS:
        raise UsageError(f"unknown harness {harness!r}: use one of {', '.join(HARNESSES)}")
    root = os.path.abspath(os.fspath(path))
    if not os.path.isdir(root):
        raise UsageError(f"{root} is not a folder; pass the project folder to init")
    pending = _WRITERS[harness](root)  # every file is read and checked before any is written
    for change, text in pending:
        if text is not None:
            _write_atomic(change.path, text)
    # <root>: the project folder as a TOML key, so the trust note can be pasted as it is.
    notes: tuple[str, ...] = tuple(note.replace("<root>", json.dumps(root)) for note in _NOTES[harness])
    if shutil.which(MCP_COMMAND) is None:
        notes += (
            f"`{MCP_COMMAND}` is not on PATH here: the MCP server is called by name, so install "
            "greenloop where the harness runs (e.g. `pipx install greenloop`); the hooks call "
            f"{sys.executable} directly",
        )
    return InitReport(harness, root, tuple(change for change, _ in pending), notes)
