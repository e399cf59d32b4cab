"""Doctor checks of the harness configurations `greenloop init` wrote (Claude Code, Codex, Gemini, Cursor,
Qwen Code, OpenCode, Copilot CLI).

For each: do its hook and MCP commands still point at an existing greenloop, and is every
hook event init writes still there? A configuration greenloop did not write is not judged."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from greenloop.doctor.report import Check

__all__ = ["HARNESS_FILES", "HarnessFile", "harness_checks"]

class HarnessFile(NamedTuple):
    """One file `greenloop init` writes for a harness, and what greenloop keeps in it."""

    harness: str
    path: str  # relative to the project folder
    kind: Literal[
        "hooks", "mcp-json", "mcp-toml", "cursor-hooks", "opencode-plugin", "opencode-mcp", "copilot-hooks"
    ]
    events: tuple[str, ...] = ()  # the hook events `greenloop init` writes there


# What `greenloop init` writes (greenloop.hooks.install); tests/test_doctor.py checks that a
# fresh init reads as ok.
HARNESS_FILES: tuple[HarnessFile, ...] = (
    HarnessFile(
        "claude-code",
        ".claude/settings.json",
        "hooks",
        ("SessionStart", "Stop", "SubagentStop", "UserPromptSubmit", "PostToolUse"),
    ),
    HarnessFile("claude-code", ".mcp.json", "mcp-json"),
    HarnessFile(
        "codex", ".codex/hooks.json", "hooks", ("SessionStart", "Stop", "UserPromptSubmit", "PostToolUse")
    ),
    HarnessFile("codex", ".codex/config.toml", "mcp-toml"),
    HarnessFile(
        "gemini", ".gemini/settings.json", "hooks", ("SessionStart", "BeforeAgent", "AfterAgent", "AfterTool")
    ),
    HarnessFile("gemini", ".gemini/settings.json", "mcp-json"),
    HarnessFile(
        "cursor",
        ".cursor/hooks.json",
        "cursor-hooks",
        ("beforeSubmitPrompt", "stop", "afterShellExecution", "afterMCPExecution"),
    ),
    HarnessFile("cursor", ".cursor/mcp.json", "mcp-json"),
    HarnessFile(
        "qwen",
        ".qwen/settings.json",
        "hooks",
        ("SessionStart", "UserPromptSubmit", "Stop", "PostToolUse", "PostToolUseFailure"),
    ),
    HarnessFile("qwen", ".qwen/settings.json", "mcp-json"),
    HarnessFile(
        "opencode",
        ".opencode/plugin/greenloop.js",
        "opencode-plugin",
        ("session.idle", "chat.message", "tool.execute.after"),
    ),
    HarnessFile("opencode", "opencode.json", "opencode-mcp"),
    HarnessFile(
        "copilot",
        ".github/hooks/greenloop.json",
        "copilot-hooks",
        ("SessionStart", "UserPromptSubmit", "Stop", "PostToolUse", "PostToolUseFailure"),
    ),
    HarnessFile("copilot", ".mcp.json", "mcp-json"),
)

# The interpreter form of a hook command (greenloop.hooks.config_merge.hook_command):
# `PYTHON -I -S -c CODE hook H`, where CODE puts greenloop's install folder on sys.path by hand.
_SYS_PATH_ROOT = re.compile(r"sys\.path\.insert\(0,\s*(\"(?:[^\"\\]|\\.)*\")\)")


def _project_folders(workspace: str) -> list[str]:
    """The workspace and its parents up to the repository root: where init may have been run."""
    out = [workspace]
    here = workspace
    for _ in range(8):
        if os.path.exists(os.path.join(here, ".git")) or os.path.dirname(here) == here:
            break
        here = os.path.dirname(here)
        out.append(here)
    return out


def _hook_commands(data: dict[str, Any], harness: str, cursor: bool) -> dict[str, list[str]]:
    """{event: [greenloop hook commands]} in a hooks file of either shape."""
    from greenloop.hooks.config_merge import is_greenloop_hook

    hooks = data.get("hooks")
    found: dict[str, list[str]] = {}
    if not isinstance(hooks, dict):
        return found
    for event, entries in hooks.items():
        if not isinstance(entries, list):
            continue
        handlers: list[Any] = []
        for entry in entries:
            if cursor:
                handlers.append(entry)
            elif isinstance(entry, dict) and isinstance(entry.get("hooks"), list):
                handlers += entry["hooks"]
        for h in handlers:
            if isinstance(h, dict) and is_greenloop_hook(h.get("command"), harness):
                found.setdefault(str(event), []).append(str(h["command"]))
    return found


def _program(path: str, base: str, command: str) -> tuple[str, str | None]:
    full = path if os.path.isabs(path) else os.path.join(base, path)
    if not os.path.isfile(full):
        return full, f"`{command}` runs {full}, which does not exist"
    if not os.access(full, os.X_OK):
        return full, f"`{command}` runs {full}, which is not executable"
    return full, None


def _executable_problem(command: str, base: str, env: Mapping[str, str]) -> tuple[str, str | None]:
    """(what the command runs, the problem or None when it still points at a working greenloop).

    Two forms: `greenloop …` (by name on PATH, or a path to the script) and the interpreter form
    `hook_command` writes, whose interpreter and greenloop install folder were taken at
    init time and vanish when greenloop is reinstalled elsewhere.
    """
    try:
        words = shlex.split(command)
        program = words[0]
    except (ValueError, IndexError):
        return command, f"`{command}` cannot be read as a command line"
    shown = command if len(command) <= 120 else f"{program} … {' '.join(words[-2:])}"
    if "-c" in words[1:]:
        code = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else ""
        python, problem = _program(program, base, shown)
        if problem:
            return python, problem
        m = _SYS_PATH_ROOT.search(code)
        if m is None:
            return python, None  # greenloop comes from the interpreter's own site-packages
        root = json.loads(m.group(1))
        if not os.path.isfile(os.path.join(root, "greenloop", "__init__.py")):
            return python, f"`{shown}` loads greenloop from {root}, which no longer holds it"
        return f"{python} with greenloop from {root}", None
    if "/" in program:
        return _program(program, base, shown)
    found = shutil.which(program, path=env.get("PATH") or os.defpath)
    if found is None:
        return program, f"`{shown}` calls `{program}` by name, and it is not on PATH"
    return found, None


def _read_config(path: str, kind: str) -> dict[str, Any]:
    """The file's data; raises ValueError with what is wrong."""
    if kind == "opencode-plugin":
        from greenloop.hooks.opencode_plugin import hook_command_of

        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        command = hook_command_of(text)
        # the plugin's events, each with the one command it calls: the hooks check's shape
        events = [e for e in ("session.idle", "chat.message", "tool.execute.after") if f'"{e}"' in text]
        return {"hooks": {e: [{"hooks": [{"command": command}]}] for e in events}} if command else {}
    if kind == "copilot-hooks":  # {EVENT: [{bash: …}]}: the hooks check's shape, `bash` as the command
        data = _read_config(path, "hooks")
        hooks = data.get("hooks")
        if not isinstance(hooks, dict):
            return {}
        shaped = {
            event: [{"hooks": [{"command": e.get("bash")} for e in entries if isinstance(e, dict)]}]
            for event, entries in hooks.items()
            if isinstance(entries, list)
        }
        return {"hooks": shaped}
    if kind == "mcp-toml":
        from greenloop.config import read_toml

        try:
            data, _ = read_toml(path)
        except Exception as exc:
            raise ValueError(str(exc)) from None
        return data
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if not text.strip():
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("it must hold a JSON object")
    return data


def _harness_file_check(spec: HarnessFile, folder: str, shown: str, env: Mapping[str, str]) -> Check | None:
    path = os.path.join(folder, spec.path)
    where = spec.path if shown == "." else f"{shown}/{spec.path}"
    what = "MCP server" if spec.kind.startswith("mcp") or spec.kind == "opencode-mcp" else "hooks"
    name = f"{spec.harness} {what}"
    redo = f"`greenloop init {spec.harness} {shown}`"
    try:
        data = _read_config(path, spec.kind)
    except (OSError, ValueError) as exc:
        return Check("harness", name, "fail", f"{where} cannot be read: {exc}",
                     f"fix {where} by hand, then run {redo} again")  # fmt: skip
    commands: list[str] = []
    missing_events: list[str] = []
    if spec.kind in ("hooks", "cursor-hooks", "opencode-plugin", "copilot-hooks"):
        by_event = _hook_commands(data, spec.harness, spec.kind == "cursor-hooks")
        if not by_event:
            return None  # not written by greenloop init: not ours to judge
        commands = [c for cs in by_event.values() for c in cs]
        missing_events = [e for e in spec.events if e not in by_event]
    else:
        key = {"mcp-toml": "mcp_servers", "opencode-mcp": "mcp"}.get(spec.kind, "mcpServers")
        servers = data.get(key)
        server = servers.get("greenloop") if isinstance(servers, dict) else None
        if not isinstance(server, dict):
            return None
        command = server.get("command")
        args = server.get("args")
        if isinstance(command, list):  # OpenCode: the command and its arguments in one list
            command, args = (command[0] if command else ""), command[1:]
        words = [str(a) for a in args] if isinstance(args, list) else []
        commands = [shlex.join([str(command or ""), *words])]
    problems: list[str] = []
    resolved: list[str] = []
    for command in dict.fromkeys(commands):
        target, problem = _executable_problem(command, folder, env)
        if problem:
            problems.append(problem)
        elif target not in resolved:
            resolved.append(target)
    if problems:
        return Check(
            "harness",
            name,
            "fail",
            f"{where}: {'; '.join(problems)}",
            "install greenloop where the harness runs (`pipx install greenloop`), then run "
            f"{redo} again so the command points at it",
        )
    if missing_events:
        return Check(
            "harness",
            name,
            "warn",
            f"{where}: no greenloop hook for {', '.join(missing_events)}",
            f"run {redo} again to restore them",
        )
    events = f" ({len(commands)} hook(s))" if what == "hooks" else ""
    return Check("harness", name, "ok", f"{where}{events} → {', '.join(resolved)}")


def harness_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    """Each harness configuration in the workspace or a parent up to the repository root."""
    checks: list[Check] = []
    for folder in _project_folders(workspace):
        shown = os.path.relpath(folder, workspace)
        shown = "." if shown == "." else shown
        for spec in HARNESS_FILES:
            if not os.path.isfile(os.path.join(folder, spec.path)):
                continue
            check = _harness_file_check(spec, folder, shown, env)
            if check is not None:
                checks.append(check)
    if not checks:
        checks.append(
            Check(
                "harness",
                "configured",
                "ok",
                "no harness configured here "
                "(`greenloop init claude-code|codex|gemini|cursor|qwen|opencode|copilot` adds one)",
            )
        )
    return checks
