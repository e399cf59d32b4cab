"""Hook adapters, each run as a real `greenloop hook HARNESS` process fed the JSON its harness sends."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord

FAILING = ("tests/test_calc.py::test_add", "tests/test_calc.py::test_div")


def hook(
    harness: str, payload: Any, *, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    data = payload if isinstance(payload, str) else json.dumps(payload)
    full_env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR")}
    full_env["GREENLOOP_CONFIG_HOME"] = str(cwd / ".no-user-config")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "greenloop", "hook", harness],
        input=data,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=60,
    )


def record(ws: Path, session: str | None, ok: bool, run_id: str) -> None:
    import time

    with Store(ws) as store:
        store.record_run(
            RunRecord(
                run_id,
                ok=ok,
                at=time.time(),
                outcome="green" if ok else "red",
                session_id=session,
                summary=Counts(3, 3 if ok else 1, 0 if ok else 2, 0),
                failing=() if ok else FAILING,
            )
        )


def claude(event: str, session: str, ws: Path, **extra: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "session_id": session,
        "transcript_path": str(ws / "t.jsonl"),
        "cwd": str(ws),
        "hook_event_name": event,
    }
    if event in ("Stop", "SubagentStop"):
        payload.update(stop_hook_active=False, last_assistant_message="done")
    payload.update(extra)
    return payload


# ------------------------------------------------------------------ Claude Code


def test_claude_code_stop_steers_then_releases(tmp_path: Path) -> None:
    hook("claude-code", claude("UserPromptSubmit", "s1", tmp_path, prompt="fix it"), cwd=tmp_path)
    record(tmp_path, "s1", False, "run-red")
    for n in (1, 2):
        p = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
        assert p.returncode == 0
        out = json.loads(p.stdout)
        assert set(out) == {"decision", "reason"} and out["decision"] == "block"
        assert FAILING[0] in out["reason"] and "run test_run again" in out["reason"]
        assert f"Intercept {n} of 2" in out["reason"]
    p = hook("claude-code", claude("Stop", "s1", tmp_path, stop_hook_active=True), cwd=tmp_path)
    out = json.loads(p.stdout)
    assert set(out) == {"systemMessage"} and "unresolved" in out["systemMessage"]
    assert "continue" not in p.stdout


def test_claude_code_prompt_submit_gives_a_new_budget_and_prints_nothing(tmp_path: Path) -> None:
    record(tmp_path, "s1", False, "run-red")
    for _ in range(3):
        hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    p = hook("claude-code", claude("UserPromptSubmit", "s1", tmp_path, prompt="again"), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""
    p = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    assert json.loads(p.stdout)["decision"] == "block"


def test_claude_code_subagent_stop_and_green(tmp_path: Path) -> None:
    record(tmp_path, "s1", False, "run-red")
    p = hook("claude-code", claude("SubagentStop", "s1", tmp_path, agent_id="a1"), cwd=tmp_path)
    assert json.loads(p.stdout)["decision"] == "block"
    record(tmp_path, "s1", True, "run-green")
    p = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""


def test_claude_code_no_run_allows_silently(tmp_path: Path) -> None:
    p = hook("claude-code", claude("Stop", "s-new", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""


def test_claude_code_project_dir_variable_wins(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    record(project, "s1", False, "run-red")
    payload = claude("Stop", "s1", project / "sub")
    p = hook("claude-code", payload, cwd=tmp_path, env={"CLAUDE_PROJECT_DIR": str(project)})
    assert json.loads(p.stdout)["decision"] == "block"


# ------------------------------------------------------------------ Codex


def codex_stop(session: str, turn: str, ws: Path) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": None,
        "cwd": str(ws),
        "hook_event_name": "Stop",
        "model": "gpt-5-codex",
        "permission_mode": "default",
        "turn_id": turn,
        "stop_hook_active": False,
        "last_assistant_message": "done",
    }


def test_codex_stop_exact_shape_and_turn_ids(tmp_path: Path) -> None:
    record(tmp_path, "c1", False, "run-red")
    outs = [hook("codex", codex_stop("c1", "turn-1", tmp_path), cwd=tmp_path) for _ in range(3)]
    first = outs[0].stdout
    assert list(json.loads(first)) == ["decision", "reason"]  # exactly these keys, nothing else
    assert json.loads(first)["decision"] == "block"
    assert json.loads(outs[1].stdout)["decision"] == "block"
    assert set(json.loads(outs[2].stdout)) == {"systemMessage"}
    p = hook("codex", codex_stop("c1", "turn-2", tmp_path), cwd=tmp_path)  # a new turn: a new budget
    assert list(json.loads(p.stdout)) == ["decision", "reason"]


def test_codex_green_allows_with_no_output(tmp_path: Path) -> None:
    record(tmp_path, "c1", True, "run-green")
    p = hook("codex", codex_stop("c1", "turn-1", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""


# ------------------------------------------------------------------ Gemini CLI


def gemini_after_agent(session: str, ws: Path, active: bool) -> dict[str, Any]:
    return {
        "session_id": session,
        "transcript_path": str(ws / "t.json"),
        "cwd": str(ws),
        "hook_event_name": "AfterAgent",
        "timestamp": "2026-11-29T10:00:00Z",
        "prompt": "make the tests pass",
        "prompt_response": "done",
        "stop_hook_active": active,
    }


def test_gemini_after_agent_deny_then_release(tmp_path: Path) -> None:
    record(tmp_path, "g1", False, "run-red")
    p = hook("gemini", gemini_after_agent("g1", tmp_path, False), cwd=tmp_path)
    out = json.loads(p.stdout)
    assert out["decision"] == "deny" and FAILING[1] in out["reason"]
    p = hook("gemini", gemini_after_agent("g1", tmp_path, True), cwd=tmp_path)
    assert json.loads(p.stdout)["decision"] == "deny"
    p = hook("gemini", gemini_after_agent("g1", tmp_path, True), cwd=tmp_path)
    assert "unresolved" in json.loads(p.stdout)["systemMessage"]
    # The budget is per user turn, whatever stop_hook_active says: Gemini reports false on a
    # corrective round in which the model called a tool (tests/test_hooks_gemini.py).
    p = hook("gemini", gemini_after_agent("g1", tmp_path, False), cwd=tmp_path)
    assert "unresolved" in json.loads(p.stdout)["systemMessage"]
    record(tmp_path, "g1", True, "run-green")
    p = hook("gemini", gemini_after_agent("g1", tmp_path, True), cwd=tmp_path)
    assert json.loads(p.stdout) == {}


# ------------------------------------------------------------------ Cursor


def cursor_stop(conv: str, ws: Path, loop_count: int, status: str = "completed") -> dict[str, Any]:
    return {
        "conversation_id": conv,
        "generation_id": f"gen-{loop_count}",
        "hook_event_name": "stop",
        "workspace_roots": [str(ws)],
        "status": status,
        "loop_count": loop_count,
    }


def test_cursor_stop_followup_then_release(tmp_path: Path) -> None:
    record(tmp_path, "k1", False, "run-red")
    p = hook("cursor", cursor_stop("k1", tmp_path, 0), cwd=tmp_path)
    out = json.loads(p.stdout)
    assert set(out) == {"followup_message"} and FAILING[0] in out["followup_message"]
    assert set(json.loads(hook("cursor", cursor_stop("k1", tmp_path, 1), cwd=tmp_path).stdout)) == {
        "followup_message"
    }
    p = hook("cursor", cursor_stop("k1", tmp_path, 2), cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "unresolved" in p.stderr
    p = hook("cursor", cursor_stop("k1", tmp_path, 0), cwd=tmp_path)  # the next user turn
    assert "followup_message" in json.loads(p.stdout)


def test_cursor_aborted_stop_is_allowed(tmp_path: Path) -> None:
    record(tmp_path, "k1", False, "run-red")
    p = hook("cursor", cursor_stop("k1", tmp_path, 0, status="aborted"), cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "aborted" in p.stderr


# ------------------------------------------------------------------ never trap an agent


@pytest.mark.parametrize(
    ("harness", "allow_out"), [("claude-code", ""), ("codex", ""), ("gemini", "{}"), ("cursor", "{}")]
)
@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ("this is not json", "not JSON"),
        ("[1, 2, 3]", "not a JSON object"),
        ("", "not a JSON object"),
        ('{"hook_event_name": "Stop", "cwd": "/"}', "no "),
    ],
)
def test_malformed_input_allows_and_says_why(
    tmp_path: Path, harness: str, allow_out: str, payload: str, why: str
) -> None:
    p = hook(harness, payload, cwd=tmp_path)
    assert p.returncode == 0
    assert p.stdout.strip() == allow_out
    assert why in p.stderr


def test_a_bad_hook_command_line_never_exits_2(tmp_path: Path) -> None:
    # To Claude Code, exit 2 from a Stop hook means "block": a typo in the config must not trap.
    for argv in (["hook"], ["hook", "claude-code", "--bogus"]):
        p = subprocess.run(
            [sys.executable, "-m", "greenloop", *argv],
            input="{}",
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert p.returncode == 0 and p.stdout == "", p.stderr


def test_unknown_harness_and_missing_workspace_allow(tmp_path: Path) -> None:
    p = hook("vim", {"session_id": "x"}, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "unknown harness" in p.stderr
    p = hook("claude-code", claude("Stop", "s1", tmp_path / "gone"), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "does not exist" in p.stderr


def test_corrupt_database_never_blocks(tmp_path: Path) -> None:
    (tmp_path / ".greenloop").mkdir()
    (tmp_path / ".greenloop" / "state.db").write_bytes(b"garbage" * 1000)
    p = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""
    assert "moved it to" in p.stderr


def test_state_folder_that_is_a_file_never_blocks(tmp_path: Path) -> None:
    (tmp_path / ".greenloop").write_text("not a folder")
    p = hook("codex", codex_stop("c1", "t", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "allowing" in p.stderr


def test_bad_config_never_blocks(tmp_path: Path) -> None:
    record(tmp_path, "s1", False, "run-red")
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = -4\n")
    p = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "max_intercept_rounds" in p.stderr


def test_disabled_contributes_no_gate(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("enabled = false\n")
    p = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""
    assert not (tmp_path / ".greenloop").exists()


# ------------------------------------------------------------------ concurrency


def test_ten_hook_processes_at_once_lose_nothing(tmp_path: Path) -> None:
    record(tmp_path, "same", False, "run-red")
    for n in range(10):
        record(tmp_path, f"s{n}", False, f"run-red-{n}")

    def stop(session: str) -> subprocess.CompletedProcess[str]:
        return hook("claude-code", claude("Stop", session, tmp_path), cwd=tmp_path)

    with ThreadPoolExecutor(max_workers=10) as pool:
        distinct = list(pool.map(stop, [f"s{n}" for n in range(10)]))
    with ThreadPoolExecutor(max_workers=10) as pool:
        same = list(pool.map(stop, ["same"] * 10))
    assert all(p.returncode == 0 for p in distinct + same)
    assert all(json.loads(p.stdout)["decision"] == "block" for p in distinct)
    kinds = sorted(next(iter(json.loads(p.stdout))) for p in same)
    assert kinds == ["decision"] * 2 + ["systemMessage"] * 8  # exactly the budget, then released
    conn = sqlite3.connect(tmp_path / ".greenloop" / "state.db")
    assert conn.execute("SELECT COUNT(*) FROM interceptions WHERE kind='steer'").fetchone()[0] == 12
    assert conn.execute("SELECT COUNT(*) FROM unresolved").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 11
    conn.close()


# ------------------------------------------------------------------ the agent's own test commands


def _pytest_output(ws: Path, body: str) -> tuple[str, int]:
    (ws / "test_calc.py").write_text(body)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_calc.py"],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return p.stdout + p.stderr, p.returncode


RED = "def test_add():\n    assert 1 + 1 == 3\n\ndef test_ok():\n    assert True\n"
GREEN = "def test_add():\n    assert 1 + 1 == 2\n\ndef test_ok():\n    assert True\n"


def test_claude_post_tool_use_records_the_agents_own_pytest_run(tmp_path: Path) -> None:
    out, _ = _pytest_output(tmp_path, RED)
    payload = claude(
        "PostToolUse",
        "s1",
        tmp_path,
        tool_name="Bash",
        tool_input={"command": "python -m pytest test_calc.py", "description": "run tests"},
        tool_response={"stdout": out, "stderr": "", "interrupted": False, "isImage": False},
    )
    p = hook("claude-code", payload, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and "recorded" in p.stderr, p.stderr
    stop = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    reason = json.loads(stop.stdout)["reason"]
    assert "test_add" in reason and "run the tests again" in reason
    out, _ = _pytest_output(tmp_path, GREEN)
    payload["tool_response"] = {"stdout": out, "stderr": "", "interrupted": False, "isImage": False}
    hook("claude-code", payload, cwd=tmp_path)
    assert hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path).stdout == ""


def test_post_tool_use_ignores_other_commands_and_greenloop_itself(tmp_path: Path) -> None:
    for command in ("ls -la", "greenloop run --json", "git status"):
        payload = claude(
            "PostToolUse",
            "s1",
            tmp_path,
            tool_name="Bash",
            tool_input={"command": command},
            tool_response={"stdout": "1 failed, 1 passed in 0.1s", "stderr": ""},
        )
        p = hook("claude-code", payload, cwd=tmp_path)
        assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    assert hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path).stdout == ""


def test_gemini_and_cursor_shell_hooks_record_runs(tmp_path: Path) -> None:
    out, code = _pytest_output(tmp_path, RED)
    gemini = {
        "session_id": "g1",
        "cwd": str(tmp_path),
        "hook_event_name": "AfterTool",
        "tool_name": "run_shell_command",
        "tool_input": {"command": "pytest -q"},
        "tool_response": {"llmContent": f"Command: pytest -q\nOutput: {out}\nExit Code: {code}"},
    }
    p = hook("gemini", gemini, cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "recorded" in p.stderr, p.stderr
    cursor = {
        "conversation_id": "k1",
        "hook_event_name": "afterShellExecution",
        "workspace_roots": [str(tmp_path)],
        "command": "pytest",
        "output": out,
    }
    p = hook("cursor", cursor, cwd=tmp_path)
    assert json.loads(p.stdout) == {} and "recorded" in p.stderr, p.stderr
    with Store(tmp_path) as store:
        assert store.latest_run(session_id="g1").source == "hook"  # type: ignore[union-attr]
        assert not store.latest_run(session_id="k1").ok  # type: ignore[union-attr]


def test_detect_test_command() -> None:
    from greenloop.hooks.base import detect_test_command

    assert detect_test_command("python -m pytest -q tests/") == "pytest"
    assert detect_test_command("cd app && pytest") == "pytest"
    assert detect_test_command("npx vitest run") == "vitest"
    assert detect_test_command("npx jest --ci") == "jest"
    assert detect_test_command("node --test test/") == "node:test"
    assert detect_test_command("npm test") == "npm-test"
    assert detect_test_command("pnpm run test") == "npm-test"
    assert detect_test_command("npx mocha test/") == "mocha"
    assert detect_test_command("python -m unittest -v") == "unittest"
    assert detect_test_command("bun test ./a.test.ts") == "bun"
    assert detect_test_command("bun run test") == "npm-test"
    assert detect_test_command("greenloop run") is None
    assert detect_test_command("cat pytest.ini") is None
    assert detect_test_command("ls") is None


RUNNERS = Path(__file__).parent / "runners" / "node_modules"


@pytest.mark.e2e
@pytest.mark.skipif(not (RUNNERS / ".bin" / "vitest").exists(), reason="npm ci in tests/runners first")
def test_post_tool_use_records_a_real_vitest_run(tmp_path: Path) -> None:
    (tmp_path / "node_modules").symlink_to(RUNNERS, target_is_directory=True)
    (tmp_path / "calc.js").write_text("export const add = (a, b) => a - b;\n")
    (tmp_path / "calc.test.js").write_text(
        "import { test, expect } from 'vitest';\nimport { add } from './calc.js';\n"
        "test('adds two numbers', () => { expect(add(2, 3)).toBe(5); });\n"
        "test('is stable', () => { expect(1).toBe(1); });\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VITEST", "CI"))}
    env["FORCE_COLOR"] = "1"  # what an agent's terminal tool often gets: coloured output
    run = subprocess.run(
        ["./node_modules/.bin/vitest", "run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    payload = claude(
        "PostToolUse",
        "s-vitest",
        tmp_path,
        tool_name="Bash",
        tool_input={"command": "npx vitest run"},
        tool_response={"stdout": run.stdout, "stderr": run.stderr, "interrupted": False},
    )
    p = hook("claude-code", payload, cwd=tmp_path)
    assert "recorded" in p.stderr, p.stderr
    stop = hook("claude-code", claude("Stop", "s-vitest", tmp_path), cwd=tmp_path)
    reason = json.loads(stop.stdout)["reason"]
    assert "adds two numbers" in reason and "1 failed, 1 passed of 2" in reason


# ------------------------------------------------------------------ permission modes -> sandbox mode events


def _policy(ws: Path, session: str) -> tuple[str, str]:
    from greenloop.system import sandbox

    env = {"GREENLOOP_CONFIG_HOME": str(ws / ".no-user-config")}
    p = sandbox.resolve_for(ws, session_id=session, env=env)
    return p.mode, p.source


def _mode_rows(ws: Path, session: str) -> list[str]:
    from greenloop.closure.store import db_path

    with sqlite3.connect(db_path(ws)) as conn:
        rows = conn.execute("SELECT mode FROM sandbox_modes WHERE session_id = ? ORDER BY id", (session,))
        return [str(r[0]) for r in rows]


def test_claude_code_plan_mode_makes_the_sessions_runs_read_only_until_it_ends(tmp_path: Path) -> None:
    p = hook("claude-code", claude("UserPromptSubmit", "s1", tmp_path, permission_mode="plan"), cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == ""  # UserPromptSubmit stdout would reach the model
    assert "sandbox read-only" in p.stderr
    assert _policy(tmp_path, "s1") == ("read-only", "session")
    assert _policy(tmp_path, "other") == ("auto", "config")  # per session
    # the same mode again writes nothing
    hook("claude-code", claude("Stop", "s1", tmp_path, permission_mode="plan"), cwd=tmp_path)
    assert _mode_rows(tmp_path, "s1") == ["claude-code:plan", "read-only"]
    # leaving plan mode: an unmapped mode, so the configured default applies again
    edits = claude("UserPromptSubmit", "s1", tmp_path, permission_mode="acceptEdits")
    p = hook("claude-code", edits, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    assert _policy(tmp_path, "s1") == ("auto", "config")
    bypass = claude("UserPromptSubmit", "s1", tmp_path, permission_mode="bypassPermissions")
    hook("claude-code", bypass, cwd=tmp_path)
    assert _policy(tmp_path, "s1") == ("auto", "config")  # never loosened by a hook
    assert _mode_rows(tmp_path, "s1")[-1] == "claude-code:bypassPermissions"


def test_an_explicit_sandbox_set_stands_until_the_harness_mode_changes(tmp_path: Path) -> None:
    hook("claude-code", claude("UserPromptSubmit", "s1", tmp_path, permission_mode="default"), cwd=tmp_path)
    set_cmd = [sys.executable, "-m", "greenloop", "sandbox", "set", "--session", "s1", "full-access"]
    subprocess.run(set_cmd, cwd=tmp_path, check=True, capture_output=True, timeout=60)
    assert _policy(tmp_path, "s1") == ("full-access", "session")
    for event in ("Stop", "UserPromptSubmit"):  # unchanged harness mode: nothing written
        hook("claude-code", claude(event, "s1", tmp_path, permission_mode="default"), cwd=tmp_path)
    assert _policy(tmp_path, "s1") == ("full-access", "session")
    hook("claude-code", claude("UserPromptSubmit", "s1", tmp_path, permission_mode="plan"), cwd=tmp_path)
    assert _policy(tmp_path, "s1") == ("read-only", "session")


def test_codex_permission_mode_keeps_the_stop_answer_exact(tmp_path: Path) -> None:
    hook("codex", {**codex_stop("c1", "t1", tmp_path), "hook_event_name": "UserPromptSubmit"}, cwd=tmp_path)
    record(tmp_path, "c1", False, "run-red")
    p = hook("codex", {**codex_stop("c1", "t1", tmp_path), "permission_mode": "plan"}, cwd=tmp_path)
    assert p.returncode == 0
    assert set(json.loads(p.stdout)) == {"decision", "reason"}  # Codex rejects unknown keys
    assert "sandbox read-only" in p.stderr
    assert _policy(tmp_path, "c1") == ("read-only", "session")
    # Codex's own sandbox names map to their equals
    hook("codex", {**codex_stop("c1", "t2", tmp_path), "permission_mode": "danger-full-access"}, cwd=tmp_path)
    assert _policy(tmp_path, "c1") == ("full-access", "session")
    hook("codex", {**codex_stop("c1", "t3", tmp_path), "permission_mode": "default"}, cwd=tmp_path)
    assert _policy(tmp_path, "c1") == ("auto", "config")


def test_permission_mode_is_never_written_without_state_or_from_garbage(tmp_path: Path) -> None:
    off, other = tmp_path / "off", tmp_path / "on"
    off.mkdir()
    other.mkdir()
    (off / "greenloop.toml").write_text("enabled = false\n")
    p = hook("claude-code", claude("UserPromptSubmit", "s1", off, permission_mode="plan"), cwd=off)
    assert p.returncode == 0 and not (off / ".greenloop").exists()
    for bad in ("plan'; DROP TABLE runs; --", 7, "", "x" * 100):
        p = hook("claude-code", claude("UserPromptSubmit", "s1", other, permission_mode=bad), cwd=other)
        assert p.returncode == 0 and p.stdout == ""
    assert _mode_rows(other, "s1") == []


# ------------------------------------------------------------------ the session's evidence (issue 31)


def test_claude_code_a_narrowed_shell_run_does_not_clear_what_it_did_not_run(tmp_path: Path) -> None:
    out, _ = _pytest_output(tmp_path, RED)
    bash = {"command": "python -m pytest test_calc.py", "description": "run tests"}
    payload = claude("PostToolUse", "s1", tmp_path, tool_name="Bash", tool_input=bash,
                     tool_response={"stdout": out, "stderr": ""})
    assert "recorded" in hook("claude-code", payload, cwd=tmp_path).stderr
    narrowed = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_calc.py", "-k", "test_ok"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert narrowed.returncode == 0, narrowed.stdout
    payload.update(tool_input={"command": "python -m pytest test_calc.py -k test_ok"},
                   tool_response={"stdout": narrowed.stdout, "stderr": ""})
    assert "(green" in hook("claude-code", payload, cwd=tmp_path).stderr
    stop = hook("claude-code", claude("Stop", "s1", tmp_path), cwd=tmp_path)
    reason = json.loads(stop.stdout)["reason"]
    assert "test_calc.py::test_add (failed in run-" in reason and "--target test_calc.py::test_add" in reason


def test_codex_files_changed_after_green_are_asked_about_once(tmp_path: Path) -> None:
    from greenloop.system.fingerprint import working_tree

    (tmp_path / "calc.py").write_text("x = 1\n")
    with Store(tmp_path) as store:
        store.record_run(RunRecord("run-green", ok=True, at=1.0, outcome="green", session_id="c1",
                                   fingerprint=working_tree(tmp_path)))
    assert hook("codex", codex_stop("c1", "turn-1", tmp_path), cwd=tmp_path).stdout == ""
    (tmp_path / "calc.py").write_text("x = 2\n")
    p = hook("codex", codex_stop("c1", "turn-2", tmp_path), cwd=tmp_path)
    steer = json.loads(p.stdout)
    assert list(steer) == ["decision", "reason"] and "files changed since the last run" in steer["reason"]
    p = hook("codex", codex_stop("c1", "turn-2", tmp_path), cwd=tmp_path)
    assert "unresolved (stale)" in json.loads(p.stdout)["systemMessage"]
