"""`greenloop init HARNESS`: hook config and MCP registration, merged idempotently."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop.errors import UsageError
from greenloop.hooks.config_merge import hook_command
from greenloop.hooks.install import HARNESSES, init

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib


def commands(groups: list[dict[str, Any]]) -> list[str]:
    return [h["command"] for g in groups for h in g["hooks"]]


def test_claude_code_fresh(tmp_path: Path) -> None:
    report = init("claude-code", tmp_path)
    assert [c.action for c in report.files] == ["created", "created"]
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    hooks = settings["hooks"]
    for event in ("SessionStart", "Stop", "SubagentStop", "UserPromptSubmit", "PostToolUse"):
        assert commands(hooks[event]) == [hook_command("claude-code")], event
    assert hooks["PostToolUse"][0]["matcher"] == "Bash"
    assert hooks["Stop"][0]["hooks"][0]["type"] == "command"
    mcp = json.loads((tmp_path / ".mcp.json").read_text())
    assert mcp["mcpServers"]["greenloop"] == {"command": "greenloop", "args": ["mcp"]}


def test_claude_code_merge_keeps_user_hooks_and_is_idempotent(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    user = {
        "permissions": {"allow": ["Bash(npm test)"]},
        "hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            "PreToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "lint.sh"}]}],
        },
    }
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(user))
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"db": {"command": "dbmcp"}}}))
    init("claude-code", tmp_path)
    first = (tmp_path / ".claude" / "settings.json").read_text()
    settings = json.loads(first)
    assert settings["permissions"] == user["permissions"]
    assert commands(settings["hooks"]["Stop"]) == ["notify-send done", hook_command("claude-code")]
    assert commands(settings["hooks"]["PreToolUse"]) == ["lint.sh"]
    mcp = json.loads((tmp_path / ".mcp.json").read_text())
    assert set(mcp["mcpServers"]) == {"db", "greenloop"}
    again = init("claude-code", tmp_path)
    assert [c.action for c in again.files] == ["unchanged", "unchanged"]
    assert (tmp_path / ".claude" / "settings.json").read_text() == first


def test_claude_code_refreshes_an_old_entry_in_place(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    old = {
        "hooks": {
            "Stop": [
                {
                    "hooks": [
                        {
                            "type": "command",
                            "command": "/old/venv/bin/greenloop hook claude-code",
                            "timeout": 5,
                        }
                    ]
                },
                {"hooks": [{"type": "command", "command": "greenloop hook claude-code"}]},
            ]
        }
    }
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(old))
    init("claude-code", tmp_path)
    stop = json.loads((tmp_path / ".claude" / "settings.json").read_text())["hooks"]["Stop"]
    assert commands(stop) == [hook_command("claude-code")]  # replaced in place, the duplicate dropped


def test_codex_hooks_and_toml(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    toml_text = 'model = "gpt-5-codex"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
    (tmp_path / ".codex" / "config.toml").write_text(toml_text)
    report = init("codex", tmp_path)
    assert [c.action for c in report.files] == ["created", "updated"]
    hooks = json.loads((tmp_path / ".codex" / "hooks.json").read_text())["hooks"]
    assert commands(hooks["Stop"]) == [hook_command("codex")]
    assert commands(hooks["UserPromptSubmit"]) == [hook_command("codex")]
    assert hooks["PostToolUse"][0]["matcher"] == "Bash"
    text = (tmp_path / ".codex" / "config.toml").read_text()
    assert toml_text in text  # the user's lines are kept byte for byte, after the top-level grace
    config = tomllib.loads(text)
    expected = {"command": "greenloop", "args": ["mcp"], "startup_timeout_sec": 30}
    assert config["mcp_servers"]["greenloop"] == expected
    # `codex exec` leaves out an optional MCP server still starting; this makes it wait
    assert config["mcp_optional_startup_grace_ms"] == 15000
    assert config["model"] == "gpt-5-codex"
    assert config["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    assert [c.action for c in init("codex", tmp_path).files] == ["unchanged", "unchanged"]
    notes = " ".join(report.notes)
    assert "--trust" in notes and "/hooks" in notes and "allow_login_shell = false" in notes
    assert f'[projects."{tmp_path}"] trust_level = "trusted"' in notes  # ready to paste


def test_codex_rewrites_a_stale_server_table_only(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text(
        '[mcp_servers.greenloop]\ncommand = "old"\nargs = []\n\n[profiles.fast]\nmodel = "o4-mini"\n'
    )
    init("codex", tmp_path)
    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    expected = {"command": "greenloop", "args": ["mcp"], "startup_timeout_sec": 30}
    assert config["mcp_servers"]["greenloop"] == expected
    assert config["profiles"]["fast"] == {"model": "o4-mini"}


def test_codex_keeps_the_users_server_settings_and_grace(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    path = tmp_path / ".codex" / "config.toml"
    path.write_text(
        "mcp_optional_startup_grace_ms = 4000\n\n"
        '[mcp_servers.greenloop]\ncommand = "old"\nargs = [\n  "x",\n]\n'
        'startup_timeout_sec = 90\nenv = { GREENLOOP_CONFIG_HOME = "/etc/gl" }\n'
    )
    init("codex", tmp_path)
    config = tomllib.loads(path.read_text())
    assert config["mcp_optional_startup_grace_ms"] == 4000  # the user's choice stands
    assert config["mcp_servers"]["greenloop"] == {
        "command": "greenloop",
        "args": ["mcp"],  # the multi-line array was replaced whole
        "startup_timeout_sec": 90,
        "env": {"GREENLOOP_CONFIG_HOME": "/etc/gl"},
    }
    assert [c.action for c in init("codex", tmp_path).files] == ["unchanged", "unchanged"]


def test_gemini_settings(tmp_path: Path) -> None:
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(json.dumps({"theme": "dark"}))
    init("gemini", tmp_path)
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["theme"] == "dark"
    for event in ("SessionStart", "BeforeAgent", "AfterAgent", "AfterTool"):
        assert commands(settings["hooks"][event]) == [hook_command("gemini")]
    matcher = re.compile(settings["hooks"]["AfterTool"][0]["matcher"])  # Gemini: a regex on the name
    ours = ("run_shell_command", "mcp_greenloop_test_run", "mcp_greenloop_test_job")
    assert all(matcher.search(tool) for tool in ours)
    assert not any(matcher.search(t) for t in ("read_file", "mcp_greenloop_test_probe", "mcp_other_test_run"))
    assert settings["mcpServers"]["greenloop"]["args"] == ["mcp"]
    assert [c.action for c in init("gemini", tmp_path).files] == ["unchanged"]


def test_gemini_refreshes_an_older_init_and_says_what_trust_it_needs(tmp_path: Path) -> None:
    old = {"type": "command", "command": "greenloop hook gemini", "name": "greenloop", "timeout": 30000}
    before = {
        "hooks": {
            "AfterAgent": [{"hooks": [old]}],
            "AfterTool": [{"matcher": "run_shell_command", "hooks": [old]}],
        }
    }
    (tmp_path / ".gemini").mkdir()
    (tmp_path / ".gemini" / "settings.json").write_text(json.dumps(before))
    report = init("gemini", tmp_path)
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert commands(settings["hooks"]["BeforeAgent"]) == [hook_command("gemini")]
    assert len(settings["hooks"]["AfterTool"]) == 1
    assert "mcp_greenloop_test_run" in settings["hooks"]["AfterTool"][0]["matcher"]
    assert any("trusted folder" in note and "trustedFolders.json" in note for note in report.notes)


def test_cursor_hooks_and_mcp(tmp_path: Path) -> None:
    (tmp_path / ".cursor").mkdir()
    (tmp_path / ".cursor" / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"stop": [{"command": "./audit.sh"}]}})
    )
    init("cursor", tmp_path)
    data = json.loads((tmp_path / ".cursor" / "hooks.json").read_text())
    assert data["version"] == 1
    assert data["hooks"]["stop"] == [{"command": "./audit.sh"}, {"command": hook_command("cursor")}]
    for event in ("beforeSubmitPrompt", "afterShellExecution", "afterMCPExecution"):
        assert data["hooks"][event] == [{"command": hook_command("cursor")}]
    assert json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["greenloop"]
    assert [c.action for c in init("cursor", tmp_path).files] == ["unchanged", "unchanged"]


def test_malformed_file_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"\.mcp\.json is not valid JSON"):
        init("claude-code", tmp_path)
    assert not (tmp_path / ".claude").exists()  # settings.json was not written either
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "config.toml").write_text("model = \n")
    with pytest.raises(UsageError, match=r"config\.toml"):
        init("codex", tmp_path)
    assert not (tmp_path / ".codex" / "hooks.json").exists()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown harness 'vim'"):
        init("vim", tmp_path)
    with pytest.raises(UsageError, match="not a folder"):
        init("codex", tmp_path / "missing")


def test_cli_init_json_and_exit_codes(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "greenloop", "init", "claude-code", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["harness"] == "claude-code" and {f["action"] for f in data["files"]} == {"created"}
    p = subprocess.run(
        [sys.executable, "-m", "greenloop", "init", "emacs", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "unknown harness" in p.stderr


def test_the_written_hook_command_runs_without_site_and_ignores_the_project_folder(tmp_path: Path) -> None:
    """The command init writes, run as a harness runs it (`sh -c`), from a project whose own
    modules are named like standard ones: it steers on a red run and records a pytest run."""
    import os
    import time

    from greenloop.closure.store import Store
    from greenloop.closure.transitions import Counts, RunRecord

    init("claude-code", tmp_path)
    settings = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    command = commands(settings["hooks"]["Stop"])[0]
    assert " -I -S -c " in command and command.endswith(" hook claude-code")
    for shadow in ("json.py", "sqlite3.py", "typing.py", "greenloop.py"):
        (tmp_path / shadow).write_text("raise SystemExit('the project folder was on sys.path')\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_PROJECT_DIR", "PYTHONPATH")}
    env["GREENLOOP_CONFIG_HOME"] = str(tmp_path / "no-user-config")
    with Store(tmp_path) as store:
        store.record_run(
            RunRecord("run-red", ok=False, at=time.time(), session_id="s1", summary=Counts(2, 1, 1, 0),
                      failing=("test_a.py::test_one",))
        )  # fmt: skip

    def run(payload: dict[str, object]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["sh", "-c", command], input=json.dumps(payload), capture_output=True, text=True,
            cwd=tmp_path, env=env, timeout=60, check=False,
        )  # fmt: skip

    stop = run({"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "Stop"})
    assert stop.returncode == 0, stop.stderr
    assert json.loads(stop.stdout)["decision"] == "block" and "test_one" in stop.stdout
    output = "test_a.py::test_one PASSED\ntest_a.py::test_two PASSED\n==== 2 passed in 0.01s ====\n"
    post = run(
        {
            "session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "PostToolUse", "tool_name": "Bash",
            "tool_input": {"command": "python -m pytest -q"},
            "tool_response": {"stdout": output, "stderr": "", "interrupted": False},
        }
    )  # fmt: skip
    assert post.returncode == 0 and "recorded" in post.stderr, post.stderr
    with Store(tmp_path) as store:
        assert store.state("s1").last_run.ok is True  # type: ignore[union-attr]


@pytest.mark.parametrize("harness", HARNESSES)
def test_dry_run_prints_the_change_as_a_diff_and_writes_nothing(tmp_path: Path, harness: str) -> None:
    dry = init(harness, tmp_path, dry_run=True)
    assert dry.dry_run and [f.name for f in tmp_path.iterdir()] == []  # not even a folder
    assert {c.action for c in dry.files} == {"created"}
    for change in dry.files:
        assert change.diff is not None and change.diff.startswith("--- /dev/null\n+++ b/")
        assert "hook" in change.diff or "greenloop" in change.diff
    # The diff is exactly what a real init then writes.
    real = init(harness, tmp_path)
    for change, written in zip(dry.files, real.files, strict=True):
        added = [line[1:] for line in (change.diff or "").splitlines(keepends=True)[3:]]
        assert "".join(added) == Path(written.path).read_text()
    # Nothing to change: no diff. An entry of an older install, refreshed: a diff against it.
    again = init(harness, tmp_path, dry_run=True)
    assert [(c.action, c.diff) for c in again.files] == [("unchanged", None)] * len(real.files)
    first = Path(real.files[0].path)
    before = first.read_text()
    assert sys.executable in before
    first.write_text(before.replace(sys.executable, "/old/venv/bin/python"))
    stale = init(harness, tmp_path, dry_run=True).files[0]
    assert stale.action == "updated" and stale.diff is not None
    lines = stale.diff.splitlines()
    assert any(line.startswith("-") and "/old/venv/bin/python" in line for line in lines)
    assert any(line.startswith("+") and sys.executable in line for line in lines)
    assert "/old/venv/bin/python" in first.read_text()  # still not written


def test_cli_init_dry_run(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "greenloop", "init", "qwen", str(tmp_path), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "+++ b/.qwen/settings.json" in p.stdout and '+  "hooks": {' in p.stdout
    assert "dry run: nothing written (1 of 1 file(s) would change)" in p.stdout
    assert "would create" in p.stdout and not (tmp_path / ".qwen").exists()
    p = subprocess.run(
        [sys.executable, "-m", "greenloop", "init", "codex", str(tmp_path), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    data = json.loads(p.stdout)
    assert data["dry_run"] is True and all(f["diff"].startswith("--- /dev/null") for f in data["files"])
    assert not (tmp_path / ".codex").exists()


def test_every_list_of_harnesses_is_the_one_list() -> None:
    import greenloop
    from greenloop import cli, hooks

    assert HARNESSES == greenloop.HARNESSES == cli.HARNESSES
    assert tuple(hooks.HARNESSES) == greenloop.HARNESSES
    for name, module in hooks.HARNESSES.items():
        assert name == __import__(module, fromlist=["handle"]).HARNESS
