"""`greenloop doctor`: what greenloop sees on this machine and for one workspace, each problem with its fix.

Checks, by area (one `Check` each, status ok | warn | fail):

- greenloop: the `greenloop` executable the hooks and the MCP server call by name;
- runner: the framework probe finds and the runner the plan would start, with its version
  (asked without running the suite: `<python> -m pytest --version`, `node --version`, or read
  from node_modules/<runner>/package.json), and Node for JavaScript workspaces;
- sandbox: the mode a run would get, and each enforcer (`sandbox.available_enforcers()`:
  bubblewrap, Landlock): available, or why not and how to make it so;
- browser: Debian's Chromium and Playwright for Python, which browser steps of integration
  runs need (a failure only when the project's integration spec has browser steps);
- harness: each configuration `greenloop init` wrote (Claude Code, Codex, Gemini CLI,
  Cursor), whether its hook and MCP commands still point at an existing executable and whether
  every hook event init writes is still there;
- state: `.greenloop/state.db` opens, passes `PRAGMA integrity_check` and has the schema.

A warning is advice (the workspace works without it); a failure needs a fix. Nothing is
changed: the state database is opened read-only (never migrated or rebuilt, unlike a run's
Store), version queries go through proc.py in an empty temporary folder, and the test suite is
never run.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shlex
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

__all__ = [
    "HARNESS_FILES",
    "STATUSES",
    "Check",
    "Report",
    "browser_checks",
    "diagnose",
    "greenloop_checks",
    "harness_checks",
    "runner_checks",
    "sandbox_checks",
    "state_checks",
]

Status = Literal["ok", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail")
VERSION_TIMEOUT_S = 30.0  # a version query starts an interpreter or node once; generous on a busy machine
MIN_NODE_MAJOR = 20
JS_FRAMEWORKS = ("vitest", "jest", "node:test", "npm-test")


class Check(NamedTuple):
    """One finding: `fix` says what to do when `status` is not ok."""

    area: str
    name: str
    status: Status
    detail: str
    fix: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "area": self.area,
            "name": self.name,
            "status": self.status,
            "detail": self.detail,
            "fix": self.fix,
        }


class Report(NamedTuple):
    workspace: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """True when nothing needs a fix (warnings are advice)."""
        return all(c.status != "fail" for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "workspace": self.workspace, "checks": [c.to_json() for c in self.checks]}


# --------------------------------------------------------------------------- version queries


def _query(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int | None, str]:
    """(exit code, stdout + stderr) of a version query, through proc.py (the one process module).

    It runs in an empty temporary folder, so `pytest --version` loads none of the workspace's
    conftest.py files: the question is which runner is installed, not whether the suite imports.
    """
    from greenloop.system import proc

    with tempfile.TemporaryDirectory(prefix="greenloop-doctor-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        raw = proc.run_to_completion(
            list(argv), cwd=tmp, env=env, timeout_s=VERSION_TIMEOUT_S, stdout_path=out, stderr_path=err
        )
        text = Path(out).read_text(errors="replace") + Path(err).read_text(errors="replace")
    if raw.spawn_error:
        return None, raw.spawn_error
    if raw.timed_out:
        return None, f"no answer within {VERSION_TIMEOUT_S:.0f}s"
    return raw.exit_code, text.strip()


def _query_env(env: Mapping[str, str]) -> dict[str, str]:
    from greenloop.system.env import child_env

    return child_env(env)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


# --------------------------------------------------------------------------- greenloop itself


def greenloop_checks(env: Mapping[str, str]) -> list[Check]:
    from greenloop import __version__

    here = f"greenloop {__version__} (Python {sys.version.split()[0]} at {sys.executable})"
    found = shutil.which("greenloop", path=env.get("PATH") or os.defpath)
    if found is None:
        return [
            Check(
                "greenloop",
                "executable",
                "warn",
                f"{here}; `greenloop` is not on PATH, and harness hooks and the MCP server call it by name",
                "install greenloop as a tool (`pipx install greenloop` or `uv tool install greenloop`) "
                "or put its virtualenv's bin/ on PATH",
            )
        ]
    return [Check("greenloop", "executable", "ok", f"{here}; `greenloop` on PATH is {found}")]


# --------------------------------------------------------------------------- runner


def _js_version(tool_path: str, package: str) -> str | None:
    """The version in node_modules/<package>/package.json beside node_modules/.bin/<tool>."""
    bin_dir = os.path.dirname(tool_path)
    if os.path.basename(bin_dir) != ".bin":
        return None
    try:
        with open(os.path.join(os.path.dirname(bin_dir), package, "package.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return str(version) if version else None


def _node_check(env: Mapping[str, str]) -> Check:
    node = shutil.which("node", path=env.get("PATH") or os.defpath)
    if node is None:
        return Check(
            "runner", "node", "fail", "node is not on PATH", f"install Node.js {MIN_NODE_MAJOR} or later"
        )
    code, text = _query([node, "--version"], _query_env(env))
    m = re.search(r"v(\d+)\.\d+\.\d+", text)
    if code != 0 or m is None:
        return Check(
            "runner",
            "node",
            "fail",
            f"`{node} --version` failed: {_last_line(text)}",
            f"reinstall Node.js {MIN_NODE_MAJOR} or later",
        )
    if int(m.group(1)) < MIN_NODE_MAJOR:
        return Check(
            "runner",
            "node",
            "fail",
            f"node {m.group(0)} at {node} is too old",
            f"install Node.js {MIN_NODE_MAJOR} or later",
        )
    return Check("runner", "node", "ok", f"node {m.group(0)} at {node}")


def _pytest_check(root: str, env: Mapping[str, str]) -> Check:
    from greenloop.runner.plan import python_runner

    argv, notes, unavailable = python_runner(root, env)
    where = "; ".join(notes)
    if unavailable:
        return Check("runner", "pytest", "fail", unavailable.split(": run ")[0], _fix_of(unavailable))
    if argv[0] in ("uv", "poetry"):
        # `uv run` / `poetry run` would sync the environment first: not a question to ask here.
        return Check("runner", "pytest", "ok", f"{shlex.join(argv)} ({where}; version not asked)")
    code, text = _query([*argv, "--version"], _query_env(env))
    m = re.search(r"pytest (\d+\.\d+\S*)", text)
    if code != 0 or m is None:
        return Check(
            "runner",
            "pytest",
            "fail",
            f"`{shlex.join([*argv, '--version'])}` failed: {_last_line(text)}",
            f"reinstall it: `{argv[0]} -m pip install --force-reinstall pytest`",
        )
    suffix = f" ({where})" if where else ""
    return Check("runner", "pytest", "ok", f"pytest {m.group(1)}: {shlex.join(argv)}{suffix}")


def _fix_of(unavailable: str) -> str:
    """The fix half of a plan's 'X is not installed: run `…`' message."""
    _, sep, rest = unavailable.partition(": run ")
    return ("run " + rest) if sep else unavailable


def _js_check(framework: str, root: str, manager: str | None) -> Check:
    from greenloop.runner.plan import js_runner

    tool = js_runner(root, framework, manager)
    if tool.unavailable:
        return Check(
            "runner", framework, "fail", tool.unavailable.split(": run ")[0], _fix_of(tool.unavailable)
        )
    version = _js_version(tool.argv[0], framework)
    shown = f"{framework} {version}" if version else framework
    extra = f" ({'; '.join(tool.notes)})" if tool.notes else ""
    return Check("runner", framework, "ok", f"{shown}: {tool.argv[0]}{extra}")


def _npm_test_check(manager: str | None, env: Mapping[str, str]) -> Check:
    pm = manager or "npm"
    found = shutil.which(pm, path=env.get("PATH") or os.defpath)
    if found is None:
        return Check(
            "runner",
            "npm-test",
            "fail",
            f"{pm} is not on PATH",
            f"install {pm} (npm comes with Node.js; pnpm, yarn and bun install with `npm install -g {pm}`)",
        )
    code, text = _query([found, "--version"], _query_env(env))
    version = _last_line(text) if code == 0 else "version unknown"
    return Check(
        "runner", "npm-test", "ok", f"the package.json test script runs with {pm} {version} ({found})"
    )


def runner_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    from greenloop.runner.probe import probe

    detection = probe(workspace, files=False)
    if detection.framework is None:
        if detection.suites:
            roots = ", ".join(s.root for s in detection.suites[:5])
            return [
                Check(
                    "runner",
                    "framework",
                    "ok",
                    f"no runner at the root; {len(detection.suites)} test roots: {roots}",
                    None,
                )
            ]
        return [
            Check(
                "runner",
                "framework",
                "warn",
                f"no test framework found in {workspace}",
                "add tests (or a runner to package.json / pytest to pyproject.toml), "
                "or pass --framework NAME or --command CMD to greenloop run",
            )
        ]
    config = f" ({detection.config_path})" if detection.config_path else ""
    checks = [Check("runner", "framework", "ok", f"{detection.framework}{config}")]
    fw = detection.framework
    if fw in JS_FRAMEWORKS:
        checks.append(_node_check(env))
    if fw == "pytest":
        checks.append(_pytest_check(detection.root, env))
    elif fw in ("vitest", "jest"):
        checks.append(_js_check(fw, detection.root, detection.package_manager))
    elif fw == "npm-test":
        checks.append(_npm_test_check(detection.package_manager, env))
    return checks


# --------------------------------------------------------------------------- sandbox


def sandbox_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    """The mode a run gets, and each enforcer (`sandbox.available_enforcers`, strongest first).

    An unavailable enforcer is a failure only when it leaves a named mode (read-only,
    workspace-write) unenforceable, since such runs are refused; under `auto` runs go on
    unconfined and say so (a warning); with a stronger enforcer working it is only information.
    """
    from greenloop.errors import GreenloopError
    from greenloop.system.sandbox import available_enforcers, resolve_for

    checks: list[Check] = []
    mode: str | None = None
    try:
        policy = resolve_for(workspace, env=env)
        mode = policy.mode
        checks.append(Check("sandbox", "mode", "ok", f"{policy.mode} (from {policy.source})"))
    except GreenloopError as exc:
        checks.append(
            Check(
                "sandbox",
                "mode",
                "fail",
                exc.message,
                "correct the config field it names (greenloop config show)",
            )
        )
    found = available_enforcers(env)
    used = next((e.name for e in found if e.available), None)
    for e in found:
        if e.available:
            verdict = "used by sandboxed runs" if e.name == used else f"available (after {used})"
            checks.append(Check("sandbox", e.name, "ok", f"{e.detail}; {verdict}"))
        elif used is not None:
            checks.append(
                Check(
                    "sandbox", e.name, "ok", f"unavailable, not needed ({used} enforces): {e.detail}", e.fix
                )
            )
        elif mode == "full-access":
            checks.append(
                Check("sandbox", e.name, "ok", f"unavailable, not needed (full-access): {e.detail}", e.fix)
            )
        elif mode == "auto":
            why = f"{e.detail}; no enforcer works here, so auto runs are not sandboxed"
            checks.append(Check("sandbox", e.name, "warn", why, e.fix))
        else:
            why = f"{e.detail}; no enforcer works here, so {mode} runs are refused"
            checks.append(Check("sandbox", e.name, "fail", why, e.fix))
    return checks


# --------------------------------------------------------------------------- browser


def _has_browser_steps(workspace: str) -> bool:
    from greenloop.errors import GreenloopError
    from greenloop.layout import find_project_root

    project = find_project_root(workspace)
    if project is None or not (project / "integration" / "spec.json").is_file():
        return False
    try:
        from greenloop.integration.spec import load_spec

        return load_spec(project).has_browser_steps
    except (GreenloopError, OSError, ValueError):
        return False  # a broken spec is `greenloop integrate`'s to report, with its own fix


def browser_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    from greenloop.integration.browser import find_chromium

    needed = _has_browser_steps(workspace)
    missing: Status = "fail" if needed else "warn"
    why = "the project's integration spec has browser steps" if needed else "needed only for browser steps"
    checks: list[Check] = []
    chromium = find_chromium(env)
    if chromium:
        checks.append(Check("browser", "chromium", "ok", chromium))
    else:
        checks.append(
            Check(
                "browser",
                "chromium",
                missing,
                f"Chromium not found (/usr/bin/chromium, PATH, $GREENLOOP_CHROMIUM); {why}",
                "install Debian's chromium (apt-get install chromium); Playwright's own browser "
                "download is never used",
            )
        )
    if importlib.util.find_spec("playwright") is None:
        checks.append(
            Check(
                "browser",
                "playwright",
                missing,
                f"Playwright for Python is not importable by {sys.executable}; {why}",
                "install it beside greenloop: `pip install 'greenloop[browser]'` "
                "(as a tool: `pipx inject greenloop playwright`)",
            )
        )
    else:
        try:
            version = importlib.metadata.version("playwright")
        except importlib.metadata.PackageNotFoundError:
            version = "version unknown"
        checks.append(Check("browser", "playwright", "ok", f"playwright {version}"))
    return checks


# --------------------------------------------------------------------------- harness configurations


class HarnessFile(NamedTuple):
    harness: str
    path: str  # relative to the project folder
    kind: Literal["hooks", "mcp-json", "mcp-toml", "cursor-hooks"]
    events: tuple[str, ...] = ()  # the hook events `greenloop init` writes there


# What `greenloop init` writes (init.py); tests/test_doctor.py checks a fresh init reads as ok.
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
)

# The interpreter form of a hook command (init.hook_command): `PYTHON -I -S -c CODE hook H`, where
# CODE puts greenloop's install folder on sys.path by hand.
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
    from greenloop.hooks.install import is_greenloop_hook

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
    `init.hook_command` writes, whose interpreter and greenloop install folder were taken at
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
    what = "MCP server" if spec.kind.startswith("mcp") else "hooks"
    name = f"{spec.harness} {what}"
    redo = f"`greenloop init {spec.harness} {shown}`"
    try:
        data = _read_config(path, spec.kind)
    except (OSError, ValueError) as exc:
        return Check("harness", name, "fail", f"{where} cannot be read: {exc}",
                     f"fix {where} by hand, then run {redo} again")  # fmt: skip
    commands: list[str] = []
    missing_events: list[str] = []
    if spec.kind in ("hooks", "cursor-hooks"):
        by_event = _hook_commands(data, spec.harness, spec.kind == "cursor-hooks")
        if not by_event:
            return None  # not written by greenloop init: not ours to judge
        commands = [c for cs in by_event.values() for c in cs]
        missing_events = [e for e in spec.events if e not in by_event]
    else:
        key = "mcp_servers" if spec.kind == "mcp-toml" else "mcpServers"
        servers = data.get(key)
        server = servers.get("greenloop") if isinstance(servers, dict) else None
        if not isinstance(server, dict):
            return None
        command = server.get("command")
        args = server.get("args")
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
                "no harness configured here (`greenloop init claude-code|codex|gemini|cursor` adds one)",
            )
        )
    return checks


# --------------------------------------------------------------------------- state database


def state_checks(workspace: str) -> list[Check]:
    from greenloop.closure.store import SCHEMA_VERSION, TABLES, db_path
    from greenloop.errors import ConfigError
    from greenloop.state.url import configured

    try:
        location = configured(workspace)
    except ConfigError as exc:
        return [Check("state", "state URL", "fail", str(exc), "fix the state URL it names")]
    if location.kind == "postgres":
        from greenloop.state.health import check_postgres

        return [Check("state", "postgresql", *check_postgres(location.url))]
    path = db_path(workspace)
    if not os.path.isfile(path):
        return [Check("state", "state.db", "ok", f"no state yet ({path} is created by the first run)")]
    aside = (
        f"move it aside (`mv {shlex.quote(path)} {shlex.quote(path + '.bad')}`); greenloop starts a "
        "fresh one on the next run (the gate's history for this workspace is lost)"
    )
    try:
        # mode=ro: the doctor looks, it never creates, migrates or rebuilds.
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return [Check("state", "state.db", "fail", f"{path} does not open: {exc}", aside)]
    try:
        with contextlib.closing(conn):
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
            if rows != ["ok"]:
                shown = "; ".join(str(r) for r in rows[:3])
                return [Check("state", "state.db", "fail", f"{path} fails integrity_check: {shown}", aside)]
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return [
                Check("state", "state.db", "warn", f"{path} is busy: {exc}", "run greenloop doctor again")
            ]
        return [Check("state", "state.db", "fail", f"{path} cannot be read: {exc}", aside)]
    except sqlite3.DatabaseError as exc:
        return [Check("state", "state.db", "fail", f"{path} is not a usable database: {exc}", aside)]
    if version > SCHEMA_VERSION:
        return [
            Check(
                "state",
                "state.db",
                "fail",
                f"{path} has schema version {version}; this greenloop knows {SCHEMA_VERSION}",
                "upgrade greenloop to the version that wrote it, or " + aside,
            )
        ]
    missing = [t for t in TABLES if t not in tables]
    if version < SCHEMA_VERSION or missing:
        detail = f"{path} has schema version {version}"
        if missing:
            detail += f" and lacks table(s) {', '.join(missing)}"
        return [
            Check(
                "state",
                "state.db",
                "warn",
                detail,
                "none needed: the next greenloop run completes the schema",
            )
        ]
    return [Check("state", "state.db", "ok", f"{path}: integrity ok, schema version {version}")]


# --------------------------------------------------------------------------- all of it


def diagnose(workspace: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Report:
    """Every check for this machine and `workspace` (an existing folder; the caller checks)."""
    env = os.environ if env is None else env
    root = os.path.realpath(os.fspath(workspace))
    checks = [
        *greenloop_checks(env),
        *runner_checks(root, env),
        *sandbox_checks(root, env),
        *browser_checks(root, env),
        *harness_checks(root, env),
        *state_checks(root),
    ]
    return Report(root, tuple(checks))
