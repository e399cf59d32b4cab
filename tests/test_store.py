"""The state database: real SQLite files in tmp_path, a real PostgreSQL server, real concurrent processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from greenloop.closure.store import Store, db_path, record_result, run_record, state_root
from greenloop.closure.transitions import RunRecord
from greenloop.model import Failure, Summary
from greenloop.result import RunResult

pytestmark = pytest.mark.usefixtures("state_backend")


class Clock:
    def __init__(self, t: float = 1_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def tick(self, s: float = 1.0) -> float:
        self.t += s
        return self.t


def red(run_id: str, session: str | None = None, at: float = 0.0) -> RunRecord:
    return RunRecord(run_id, ok=False, at=at, outcome="red", session_id=session, failing=("test_x",))


def green(run_id: str, session: str | None = None, at: float = 0.0) -> RunRecord:
    return RunRecord(run_id, ok=True, at=at, outcome="green", session_id=session)


@pytest.mark.sqlite_only
def test_created_in_wal_mode_with_schema(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        mode = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
        busy_ms = store.conn.execute("PRAGMA busy_timeout").fetchone()[0]
        tables = {r[0] for r in store.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert mode == "wal"
    assert busy_ms == 15_000
    assert {"sessions", "turns", "runs", "interceptions", "unresolved", "jobs", "sandbox_modes"} <= tables
    assert Path(db_path(tmp_path)) == tmp_path / ".greenloop" / "state.db"


@pytest.mark.sqlite_only
def test_state_root_walks_up_to_existing_db_or_git(tmp_path: Path) -> None:
    sub = tmp_path / "pkg" / "inner"
    sub.mkdir(parents=True)
    assert state_root(sub) == str(sub)  # nothing above: the workspace itself
    (tmp_path / ".git").mkdir()
    assert state_root(sub) == str(tmp_path)  # the git work tree
    Store(tmp_path / "pkg", path=str(tmp_path / "pkg" / ".greenloop" / "state.db")).close()
    assert state_root(sub) == str(tmp_path / "pkg")  # an existing database wins


def test_session_runs_and_workspace_runs(tmp_path: Path) -> None:
    clock = Clock()
    with Store(tmp_path, clock=clock) as store:
        store.record_run(red("r0", None, at=clock()))  # before the session was seen
        clock.tick()
        with store.transaction():
            first = store.touch_session("s1")
        assert store.state("s1").last_run is None  # the old workspace run predates the session
        store.record_run(red("r1", None, at=clock.tick()))
        assert store.state("s1").last_run is not None
        assert store.state("s1").last_run.run_id == "r1"  # type: ignore[union-attr]
        store.record_run(green("r2", "s2", at=clock.tick()))  # another session's run is not ours
        assert store.state("s1").last_run.run_id == "r1"  # type: ignore[union-attr]
        store.record_run(red("r3", "s1", at=clock.tick()))
        store.record_run(green("r4", None, at=clock.tick()))  # the session's own run takes precedence
        assert store.state("s1").last_run.run_id == "r3"  # type: ignore[union-attr]
        assert first == 1001.0


def test_passing_run_clears_unresolved(tmp_path: Path) -> None:
    clock = Clock()
    with Store(tmp_path, clock=clock) as store:
        with store.transaction():
            store.touch_session("s1")
            seq = store.begin_turn("s1")
        store.record_run(red("r1", "s1", at=clock.tick()))
        with store.transaction():
            store.mark_released("s1", seq, "r1")
        assert store.state("s1").unresolved
        store.record_run(red("r2", "s1", at=clock.tick()))
        assert store.state("s1").unresolved
        store.record_run(green("r3", "s1", at=clock.tick()))
        assert not store.state("s1").unresolved
        assert store.unresolved_records("s1") == []
        [rec] = store.unresolved_records("s1", open_only=False)
        assert rec["cleared_by"] == "r3"


def test_workspace_green_run_clears_sessions_without_own_runs(tmp_path: Path) -> None:
    clock = Clock()
    with Store(tmp_path, clock=clock) as store:
        with store.transaction():
            store.touch_session("s1")
            store.touch_session("s2")
            store.mark_released("s1", 0, None)
            store.mark_released("s2", 0, None)
        store.record_run(red("r-own", "s2", at=clock.tick()))
        store.record_run(green("r-ws", None, at=clock.tick()))
        assert store.unresolved_records("s1") == []  # answered by the workspace run
        assert len(store.unresolved_records("s2")) == 1  # s2 has its own (red) run


def test_sandbox_mode_events(tmp_path: Path) -> None:
    with Store(tmp_path) as store:
        assert store.latest_sandbox_mode("s1") is None
        store.record_sandbox_mode("s1", "read-only")
        store.record_sandbox_mode("s1", "full-access")
        store.record_sandbox_mode("s2", "workspace-write")
        assert store.latest_sandbox_mode("s1") == "full-access"
        assert store.latest_sandbox_mode("s2") == "workspace-write"


@pytest.mark.sqlite_only
def test_corrupt_database_is_rebuilt_with_a_warning(tmp_path: Path) -> None:
    path = Path(db_path(tmp_path))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is not a database at all" * 100)
    warnings: list[str] = []
    with Store(tmp_path, warn=warnings.append) as store:
        store.record_run(green("r1", "s1", at=1.0))
        assert store.latest_run(session_id="s1") is not None
    assert len(warnings) == 1 and "moved it to" in warnings[0]
    assert list(path.parent.glob("state.db.corrupt-*"))


def test_record_result_from_run_result(tmp_path: Path) -> None:
    result = RunResult(
        run_id="run-a",
        ok=False,
        outcome="red",
        framework="pytest",
        command="pytest",
        exit_code=1,
        summary=Summary(3, 1, 2, 0),
        failures=(Failure("t::a"), Failure("t::b"), Failure("t::a")),
        session_id="s9",
    )
    (tmp_path / "code.py").write_text("x = 1\n")
    rec = record_result(tmp_path, result, clock=lambda: 5.0)
    assert rec.session_id == "s9" and rec.failing == ("t::a", "t::b") and rec.at == 5.0
    assert rec.fingerprint and rec.fingerprint.startswith("walk:")
    with Store(tmp_path) as store:
        got = store.latest_run(session_id="s9")
    assert got is not None and got.failing == ("t::a", "t::b") and got.summary.failed == 2
    broken = run_record(
        RunResult(run_id="b", ok=False, outcome="broken", framework=None, command="x", exit_code=0), at=1.0
    )
    assert broken.reason == "no tests ran"
    timed = run_record(
        RunResult(
            run_id="t",
            ok=False,
            outcome="broken",
            framework=None,
            command="x",
            exit_code=None,
            timed_out=True,
        ),
        at=1.0,
    )
    assert timed.reason == "timed out"


@pytest.mark.sqlite_only
def test_record_result_takes_a_fingerprint_started_earlier(tmp_path: Path) -> None:
    result = RunResult(run_id="r", ok=True, outcome="green", framework=None, command="x", exit_code=0)
    unwritable = tmp_path / "unwritable"
    unwritable.mkdir()
    (unwritable / ".greenloop").write_text("a file where the state folder should be")
    warnings: list[str] = []
    rec = record_result(unwritable, result, fingerprint=lambda: "walk:given", warn=warnings.append)
    assert rec.fingerprint == "walk:given" and warnings  # no database: the record still comes back
    asked: list[bool] = []

    def given() -> str:
        assert Path(db_path(tmp_path)).exists()  # asked for once the database is open
        asked.append(True)
        return "git:given"

    assert record_result(tmp_path, result, fingerprint=given).fingerprint == "git:given"
    assert asked == [True]
    with Store(tmp_path) as store:
        got = store.latest_run(session_id=None)
    assert got is not None and got.fingerprint == "git:given"

    def fails() -> str:
        raise RuntimeError("git went away")

    warnings.clear()
    rec = record_result(tmp_path, result._replace(run_id="r2"), fingerprint=fails, warn=warnings.append)
    assert rec.fingerprint is None and any("git went away" in w for w in warnings)


@pytest.mark.sqlite_only
def test_record_result_survives_an_unwritable_state_folder(tmp_path: Path) -> None:
    (tmp_path / ".greenloop").write_text("a file where the state folder should be")
    warnings: list[str] = []
    result = RunResult(run_id="r", ok=True, outcome="green", framework=None, command="x", exit_code=0)
    record_result(tmp_path, result, warn=warnings.append)
    assert warnings


WRITER = r"""
import sys
from greenloop.closure.transitions import RunRecord
from greenloop.closure.store import Store
ws, who = sys.argv[1], sys.argv[2]
with Store(ws) as store:
    for i in range(20):
        store.record_run(RunRecord(f"{who}-{i}", ok=bool(i % 2), at=float(i), session_id=who))
        with store.transaction():
            store.touch_session(who)
            store.add_interception(who, 1, "steer", None, "m", None)
"""


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"w{n}"], stderr=subprocess.PIPE)
        for n in range(8)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    with Store(tmp_path) as store:
        tables = ("runs", "interceptions", "sessions")
        count = {t: store.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables}
    assert count == {"runs": 160, "interceptions": 160, "sessions": 8}


def test_a_later_red_workspace_run_outranks_the_sessions_own_green(tmp_path: Path) -> None:
    """A red run whose session greenloop could not tell still holds the turn; a green one
    does not clear the session's own red."""
    clock = Clock()
    with Store(tmp_path, clock=clock) as store:
        with store.transaction():
            store.touch_session("s1")
        store.record_run(green("g1", "s1", at=clock.tick()))
        store.record_run(red("w1", None, at=clock.tick()))
        assert store.state("s1").last_run.run_id == "w1"  # type: ignore[union-attr]
        store.record_run(red("r2", "s1", at=clock.tick()))
        store.record_run(green("w2", None, at=clock.tick()))
        assert store.state("s1").last_run.run_id == "r2"  # type: ignore[union-attr]
