"""State backends: the state URL, PostgreSQL's migrations, an exact per-turn budget under
concurrent Stop hooks from two working copies, and an unreachable database (fail safe, exit 2)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure.gate import Gate
from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.config import validate
from greenloop.errors import ConfigError
from greenloop.state.backend import StateError, StateUnavailable
from greenloop.state.url import STATE_URL_ENV, parse, redact

BUDGET = 3
STOP_HOOKS = 16

# ------------------------------------------------------------------ the state URL


def test_urls_name_their_backend_and_never_show_a_password() -> None:
    assert parse("").kind == "sqlite" and parse("sqlite:").kind == "sqlite"
    assert parse("postgresql://u@h/db").kind == "postgres" and parse("postgres://h/db").kind == "postgres"
    assert (
        redact("postgresql://u:s3cret@h:5432/db?sslmode=require")
        == "postgresql://u:***@h:5432/db?sslmode=require"
    )
    assert redact("postgresql://u@h/db?password=s3cret&x=1") == "postgresql://u@h/db?password=***&x=1"
    assert redact("postgresql://h/db") == "postgresql://h/db"
    with pytest.raises(ConfigError, match=r"GREENLOOP_STATE_URL.*'mysql://u:\*\*\*@h/db'"):
        parse("mysql://u:s3cret@h/db")


def test_the_config_field_is_checked_where_it_is_read() -> None:
    assert validate({"state_url": "postgresql://h/db"}, "x") == {"state_url": "postgresql://h/db"}
    assert validate({"stateUrl": ""}, "x") == {"state_url": ""}
    with pytest.raises(ConfigError, match=r"'state_url' must be empty .* postgresql:// URL"):
        validate({"state_url": "redis://h"}, "greenloop.toml")
    with pytest.raises(ConfigError, match="'state_url' must be a string"):
        validate({"state_url": 5}, "greenloop.toml")


def test_the_config_file_can_name_the_database(
    tmp_path: Path, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(STATE_URL_ENV, raising=False)
    (tmp_path / "greenloop.toml").write_text(f'state_url = "{pg_server.fresh_schema()}"\n')
    with Store(tmp_path) as store:
        assert store.conn.kind == "postgres" and store.path is None
    assert not (tmp_path / ".greenloop").exists()


# ------------------------------------------------------------------ migrations


def test_migrations_apply_once_even_when_many_processes_start_together(pg_server: Any) -> None:
    url = pg_server.fresh_schema()
    opener = "import sys\nfrom greenloop.closure.store import Store\nStore('.').close()\n"
    env = {**os.environ, STATE_URL_ENV: url}
    procs = [
        subprocess.Popen([sys.executable, "-c", opener], env=env, stderr=subprocess.PIPE) for _ in range(6)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    with Store(".", location=parse(url)) as store:
        rows = store.conn.execute("SELECT version FROM greenloop_schema ORDER BY version").fetchall()
        assert [r[0] for r in rows] == [1, 2, 3, 4] and store.conn.schema_version() == 4


def test_a_database_newer_than_this_greenloop_is_refused(
    pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from greenloop.doctor import state as doctor

    url = pg_server.fresh_schema()
    with Store(tmp_path, location=parse(url)) as store:
        store.conn.execute("INSERT INTO greenloop_schema (version, what, applied_at) VALUES (9, 'later', 0)")
    with pytest.raises(StateError, match="schema version 9; this greenloop knows 4"):
        Store(tmp_path, location=parse(url))
    monkeypatch.setenv(STATE_URL_ENV, url)
    (check,) = doctor.state_checks(str(tmp_path))
    assert check.status == "fail" and "schema version 9" in check.detail


def test_doctor_reports_the_backend(pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from greenloop.doctor import state as doctor

    url = pg_server.fresh_schema()
    monkeypatch.setenv(STATE_URL_ENV, url)
    (check,) = doctor.state_checks(str(tmp_path))
    assert check.status == "warn" and "schema version 0" in check.detail  # nothing created by looking
    Store(tmp_path).close()
    (check,) = doctor.state_checks(str(tmp_path))
    assert check.status == "ok", check
    assert check.name == "postgresql" and check.detail.startswith(f"{url}: reachable (PostgreSQL ")
    assert check.detail.endswith("schema version 4")


# ------------------------------------------------------------------ the budget under concurrency

STOP_HOOK = r"""
import json, os, sys, time
from greenloop.hooks import handle
import greenloop.closure.gate, greenloop.closure.store, greenloop.hooks.claude_code  # warm before the barrier
if os.environ.get("GREENLOOP_STATE_URL"):
    import psycopg
ws, session, barrier, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
payload = {"session_id": session, "cwd": ws, "hook_event_name": "Stop", "transcript_path": ws + "/t.jsonl",
           "stop_hook_active": False, "last_assistant_message": "done"}
open(os.path.join(barrier, "ready-" + n), "w").close()  # imported: wait for the others
while not os.path.exists(os.path.join(barrier, "go")):
    time.sleep(0.002)
answer = handle("claude-code", json.dumps(payload), cwd=ws)
print(json.dumps({"stdout": answer.stdout, "stderr": answer.stderr}))
"""


def working_copy(folder: Path) -> Path:
    (folder / ".git").mkdir(parents=True)
    (folder / "greenloop.toml").write_text(f"max_intercept_rounds = {BUDGET}\n")
    return folder


@pytest.mark.slow
def test_concurrent_stop_hooks_on_two_hosts_never_exceed_the_budget(
    tmp_path: Path, state_backend: str
) -> None:
    """16 Stop hooks for one session at once, half from each of two working copies of the
    project (two "hosts": with PostgreSQL they share the database; SQLite has one file, so
    there both halves use one copy). Exactly BUDGET of them steer; the rest release."""
    first = working_copy(tmp_path / "host-a")
    hosts = [first, working_copy(tmp_path / "host-b") if state_backend == "postgres" else first]
    session = "shared-session"
    Gate(first).on_turn_start(session)
    with Store(first) as store:
        failing = ("tests/test_a.py::test_x",)
        store.record_run(
            RunRecord(
                "run-red",
                ok=False,
                at=time.time(),
                outcome="red",
                session_id=session,
                summary=Counts(2, 1, 1, 0),
                failing=failing,
            )
        )
    env = {**os.environ, "GREENLOOP_CONFIG_HOME": str(tmp_path / "no-user-config")}
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STOP_HOOK, str(hosts[n % 2]), session, str(barrier), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(STOP_HOOKS)
    ]
    deadline = time.monotonic() + 120
    while len(list(barrier.glob("ready-*"))) < STOP_HOOKS and time.monotonic() < deadline:
        time.sleep(0.01)
    (barrier / "go").touch()  # all 16 have imported greenloop: they decide at once
    answers = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        answers.append(json.loads(out))
    blocks = [a for a in answers if '"decision": "block"' in a["stdout"]]
    releases = [a for a in answers if "systemMessage" in a["stdout"]]
    assert len(blocks) == BUDGET, answers
    assert len(releases) == STOP_HOOKS - BUDGET, answers
    with Store(hosts[1]) as store:
        kinds = [i["kind"] for i in store.interceptions(session)]
        assert kinds.count("steer") == BUDGET and kinds.count("release") == 1
        assert len(store.unresolved_records(session)) == 1


# ------------------------------------------------------------------ an unreachable database


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket closes


def test_an_unreachable_database_fails_safe_and_names_the_url_without_its_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"postgresql://greenloop:s3cret@127.0.0.1:{closed_port()}/greenloop"
    shown = url.replace("s3cret", "***")
    with pytest.raises(StateUnavailable, match="cannot reach the state database") as caught:
        Store(tmp_path, location=parse(url))
    assert shown in str(caught.value) and "s3cret" not in str(caught.value)
    env = {**os.environ, STATE_URL_ENV: url, "GREENLOOP_CONFIG_HOME": str(tmp_path / "no-user-config")}
    stop = {"session_id": "s1", "cwd": str(tmp_path), "hook_event_name": "Stop", "stop_hook_active": False}
    hook = subprocess.run(
        [sys.executable, "-m", "greenloop", "hook", "claude-code"],
        input=json.dumps(stop),
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert hook.returncode == 0 and hook.stdout == "", hook  # the stop is allowed
    assert "allowing the stop" in hook.stderr and shown in hook.stderr and "s3cret" not in hook.stderr
    check = subprocess.run(
        [sys.executable, "-m", "greenloop", "check", "--session", "s1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert check.returncode == 2, check
    assert shown in check.stderr and "s3cret" not in check.stderr + check.stdout
    from greenloop.doctor import state as doctor

    monkeypatch.setenv(STATE_URL_ENV, url)
    (finding,) = doctor.state_checks(str(tmp_path))
    assert finding.status == "fail" and shown in finding.detail and "s3cret" not in finding.detail


def test_the_hook_command_init_writes_reaches_postgresql(tmp_path: Path, pg_server: Any) -> None:
    """The hook starts without `site` (`-I -S`, `config_merge.hook_command`), yet finds psycopg."""
    import shlex

    from greenloop.hooks.config_merge import hook_command

    url = pg_server.fresh_schema()
    ws = working_copy(tmp_path / "ws")
    with Store(ws, location=parse(url)) as store:
        store.record_run(RunRecord("run-red", ok=False, at=time.time(), outcome="red", session_id="s1"))
    env = {**os.environ, STATE_URL_ENV: url, "GREENLOOP_CONFIG_HOME": str(tmp_path / "no-user-config")}
    stop = {"session_id": "s1", "cwd": str(ws), "hook_event_name": "Stop", "stop_hook_active": False}
    hook = subprocess.run(
        shlex.split(hook_command("claude-code")),
        input=json.dumps(stop),
        capture_output=True,
        text=True,
        env=env,
        cwd=ws,
        timeout=60,
    )
    assert hook.returncode == 0 and '"decision": "block"' in hook.stdout, hook
    with Store(ws, location=parse(url)) as store:
        assert [i["kind"] for i in store.interceptions("s1")] == ["steer"]


def test_a_sqlite_database_of_the_previous_schema_gains_the_job_host(tmp_path: Path) -> None:
    """A state.db written before jobs recorded their host (schema 2) is brought to the latest
    schema when opened; opening it again changes nothing."""
    import sqlite3

    from greenloop.closure.store import Store, db_path
    from greenloop.state import migrations

    (tmp_path / ".git").mkdir()
    (tmp_path / ".greenloop").mkdir()
    conn = sqlite3.connect(db_path(tmp_path))
    for m in migrations.MIGRATIONS[:2]:
        for statement in m.statements:
            conn.execute(migrations.for_backend(statement, "sqlite"))
    conn.execute("PRAGMA user_version = 2")
    conn.commit()
    conn.close()
    for _ in range(2):
        with Store(tmp_path) as store:
            assert store.conn.schema_version() == migrations.LATEST == 4
            store.add_job("job-1", str(tmp_path), None, {})
            store.update_job("job-1", host="build-7")
            row = store.job("job-1")
            assert row is not None and row["host"] == "build-7"
            store.conn.execute("DELETE FROM jobs")
