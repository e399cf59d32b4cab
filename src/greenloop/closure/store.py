"""The embedded closure state: one SQLite database, `.greenloop/state.db`.

Tables: sessions, turns, runs, interceptions, unresolved, jobs, sandbox_modes, bindings. Several hook
processes, runs and jobs touch the database at once, so it runs in WAL mode with a busy
timeout, and every read-modify-write happens inside `BEGIN IMMEDIATE`. A missing database
is created; a corrupt one is moved aside and rebuilt with a warning: state is a convenience
for the gate, and losing it must never block an agent.

The database lives in the *state root*: the nearest folder, walking up from the workspace,
that already has `.greenloop/state.db`, else the nearest that holds `.git`, else the
workspace itself. So a run started in a sub-package and a hook whose `cwd` is the project
root meet in one database.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from greenloop.closure.transitions import ClosureState, Counts, RunRecord, effective_run
from greenloop.layout import STATE_DIR

if TYPE_CHECKING:
    from greenloop.model import Failure, RunResult

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "TABLES",
    "JobRow",
    "Store",
    "db_path",
    "failing_names",
    "move_aside",
    "record_result",
    "run_record",
    "state_root",
]

DB_NAME = "state.db"
SCHEMA_VERSION = 2  # 2: the bindings table
BUSY_TIMEOUT_MS = 15_000
MAX_FAILING_NAMES = 50

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    harness TEXT
);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn_id TEXT,
    started_at REAL NOT NULL,
    released_at REAL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    session_id TEXT,
    at REAL NOT NULL,
    ok INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    total INTEGER NOT NULL DEFAULT 0,
    passed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    failing TEXT NOT NULL DEFAULT '[]',
    fingerprint TEXT,
    framework TEXT,
    command TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT 'run',
    exit_code INTEGER,
    result_ref TEXT,
    reason TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_session ON runs (session_id, at);
CREATE TABLE IF NOT EXISTS interceptions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_seq INTEGER NOT NULL,
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT,
    harness TEXT,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS interceptions_by_turn ON interceptions (session_id, turn_seq);
CREATE TABLE IF NOT EXISTS unresolved (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    turn_seq INTEGER NOT NULL,
    run_id TEXT,
    at REAL NOT NULL,
    cleared_at REAL,
    cleared_by TEXT
);
CREATE INDEX IF NOT EXISTS unresolved_by_session ON unresolved (session_id, cleared_at);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    session_id TEXT,
    status TEXT NOT NULL,
    pid INTEGER,
    token TEXT,
    created_at REAL NOT NULL,
    ended_at REAL,
    kwargs TEXT NOT NULL DEFAULT '{}',
    run_id TEXT,
    ok INTEGER,
    result TEXT,
    error TEXT,
    log_path TEXT
);
CREATE TABLE IF NOT EXISTS sandbox_modes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sandbox_modes_by_session ON sandbox_modes (session_id, id);
CREATE TABLE IF NOT EXISTS bindings (
    harness_proc TEXT NOT NULL,
    session_id TEXT NOT NULL,
    harness TEXT,
    workspace TEXT NOT NULL,
    chain TEXT NOT NULL DEFAULT '[]',
    at REAL NOT NULL,
    PRIMARY KEY (harness_proc, session_id)
);
CREATE INDEX IF NOT EXISTS bindings_by_at ON bindings (at);
"""
# The tables a complete database has (greenloop doctor checks them).
TABLES: tuple[str, ...] = tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))


def state_root(workspace: str | os.PathLike[str]) -> str:
    """Where the state database lives for a workspace (module docstring)."""
    start = os.path.abspath(os.fspath(workspace))
    folder = start
    git_root: str | None = None
    while True:
        if os.path.isfile(os.path.join(folder, STATE_DIR, DB_NAME)):
            return folder
        if git_root is None and os.path.exists(os.path.join(folder, ".git")):
            git_root = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return git_root or start
        folder = parent


def db_path(workspace: str | os.PathLike[str]) -> str:
    return os.path.join(state_root(workspace), STATE_DIR, DB_NAME)


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return False  # locked, busy, read-only: not corruption
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _stderr_warn(message: str) -> None:
    print(f"greenloop: warning: {message}", file=sys.stderr)


def move_aside(
    path: str, why: str, *, clock: Callable[[], float], warn: Callable[[str], None] = _stderr_warn
) -> None:
    """Move a corrupt database to `<path>.corrupt-<time>` (dropping its -wal/-shm/-journal) and warn."""
    aside = f"{path}.corrupt-{int(clock())}"
    with contextlib.suppress(OSError):
        os.replace(path, aside)
    for suffix in ("-wal", "-shm", "-journal"):
        with contextlib.suppress(OSError):
            os.remove(path + suffix)
    warn(f"the state database {path} was unreadable ({why}); moved it to {aside} and started afresh")


class JobRow(dict[str, Any]):
    """A row of the jobs table (a plain dict with attribute-free access; see jobs.py)."""


class Store:
    """A connection to one workspace's state database.

    `clock` is a seam (epoch seconds); `warn` receives warnings such as a rebuilt database.
    Use as a context manager, or call close().
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] = _stderr_warn,
        path: str | None = None,
    ) -> None:
        self.path = path or db_path(workspace)
        self.clock = clock
        self.warn = warn
        self.conn = self._open()

    # ------------------------------------------------------------------ opening, rebuilding
    def _connect(self) -> sqlite3.Connection:
        folder = os.path.dirname(self.path)
        if not os.path.isdir(folder):
            from greenloop.layout import make_state_dir

            make_state_dir(folder)
        # connect()'s timeout is SQLite's busy timeout (PRAGMA busy_timeout reads 15000).
        return sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            for _ in range(50):  # switching modes needs a moment with no other writer
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    break
                except sqlite3.OperationalError:
                    time.sleep(0.05)
        conn.execute("BEGIN IMMEDIATE")
        try:
            # One statement at a time: executescript() would commit the IMMEDIATE transaction.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise

    def _open(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            self._prepare(conn)
            # No fsync: an application crash still never corrupts a WAL database; an OS crash may
            # lose the last few writes (or, rarely, corrupt the file, which is then rebuilt).
            # For the gate's bookkeeping that beats paying fsyncs on every agent turn.
            conn.execute("PRAGMA synchronous = OFF")
            return conn
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not _is_corruption(exc):
                raise
            return self._rebuild(str(exc))

    def _rebuild(self, why: str) -> sqlite3.Connection:
        move_aside(self.path, why, clock=self.clock, warn=self.warn)
        conn = self._connect()
        self._prepare(conn)
        return conn

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """An IMMEDIATE transaction: the write lock is taken up front, so read-modify-write is safe."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # ------------------------------------------------------------------ sessions and turns
    def touch_session(self, session_id: str, harness: str | None = None) -> float:
        """Record a hook event for the session; returns its first_seen time."""
        now = self.clock()
        self.conn.execute(
            "INSERT INTO sessions (id, first_seen, last_seen, harness) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET last_seen = excluded.last_seen, "
            "harness = COALESCE(excluded.harness, sessions.harness)",
            (session_id, now, now, harness),
        )
        row = self.conn.execute("SELECT first_seen FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return float(row[0])

    def current_turn(self, session_id: str) -> tuple[int, str | None, float | None]:
        row = self.conn.execute(
            "SELECT seq, turn_id, released_at FROM turns WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return 0, None, None
        return int(row[0]), row[1], row[2]

    def begin_turn(self, session_id: str, turn_id: str | None = None) -> int:
        """Start a new turn (a new budget); returns its sequence number."""
        seq = self.current_turn(session_id)[0] + 1
        self.conn.execute(
            "INSERT INTO turns (session_id, seq, turn_id, started_at) VALUES (?, ?, ?, ?)",
            (session_id, seq, turn_id, self.clock()),
        )
        return seq

    def add_interception(
        self, session_id: str, turn_seq: int, kind: str, run_id: str | None, message: str, harness: str | None
    ) -> None:
        self.conn.execute(
            "INSERT INTO interceptions (session_id, turn_seq, at, kind, run_id, harness, message) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, turn_seq, self.clock(), kind, run_id, harness, message),
        )

    def mark_released(self, session_id: str, turn_seq: int, run_id: str | None) -> None:
        """The turn ended red after its budget: record the session unresolved."""
        now = self.clock()
        if turn_seq == 0:
            # A stop with no turn seen: give it a turn row so the release is remembered.
            self.conn.execute(
                "INSERT OR IGNORE INTO turns (session_id, seq, turn_id, started_at) VALUES (?, 0, NULL, ?)",
                (session_id, now),
            )
        self.conn.execute(
            "UPDATE turns SET released_at = ? WHERE session_id = ? AND seq = ?", (now, session_id, turn_seq)
        )
        self.conn.execute(
            "INSERT INTO unresolved (session_id, turn_seq, run_id, at) VALUES (?, ?, ?, ?)",
            (session_id, turn_seq, run_id, now),
        )

    def last_steer(self, session_id: str, turn_seq: int) -> str:
        """The message of the turn's latest steer ("" when the turn has none)."""
        row = self.conn.execute(
            "SELECT message FROM interceptions WHERE session_id = ? AND turn_seq = ? AND kind = 'steer' "
            "ORDER BY id DESC LIMIT 1",
            (session_id, turn_seq),
        ).fetchone()
        return "" if row is None else str(row[0])

    def interceptions(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT turn_seq, at, kind, run_id, harness, message FROM interceptions "
            "WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
        keys = ("turn_seq", "at", "kind", "run_id", "harness", "message")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def unresolved_records(self, session_id: str, *, open_only: bool = True) -> list[dict[str, Any]]:
        sql = "SELECT turn_seq, run_id, at, cleared_at, cleared_by FROM unresolved WHERE session_id = ?"
        if open_only:
            sql += " AND cleared_at IS NULL"
        rows = self.conn.execute(sql + " ORDER BY id", (session_id,)).fetchall()
        keys = ("turn_seq", "run_id", "at", "cleared_at", "cleared_by")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def state(self, session_id: str, *, first_seen: float | None = None) -> ClosureState:
        """The closure state of a session as the gate sees it (no writes)."""
        if first_seen is None:
            row = self.conn.execute("SELECT first_seen FROM sessions WHERE id = ?", (session_id,)).fetchone()
            first_seen = None if row is None else float(row[0])
        seq, turn_id, released_at = self.current_turn(session_id)
        (count,) = self.conn.execute(
            "SELECT COUNT(*) FROM interceptions WHERE session_id = ? AND turn_seq = ? AND kind = 'steer'",
            (session_id, seq),
        ).fetchone()
        (open_unresolved,) = self.conn.execute(
            "SELECT COUNT(*) FROM unresolved WHERE session_id = ? AND cleared_at IS NULL", (session_id,)
        ).fetchone()
        run = effective_run(
            self.latest_run(session_id=session_id),
            self.latest_run(session_id=None, since=first_seen) if first_seen is not None else None,
            first_seen,
        )
        return ClosureState(
            session_id=session_id,
            turn_seq=seq,
            turn_id=turn_id,
            intercepts_this_turn=int(count),
            released_this_turn=released_at is not None,
            unresolved=bool(open_unresolved) and not (run is not None and run.ok),
            last_run=run,
            first_seen=first_seen,
        )

    # ------------------------------------------------------------------ process-tree bindings
    def bind(
        self, harness_proc: str, session_id: str, harness: str | None, workspace: str, chain: str
    ) -> None:
        """A hook of `session_id` ran under the harness process `harness_proc` (ptree.proc_key).

        One row per (harness process, session), refreshed on every hook event; `chain` keeps
        the hook's ancestors (JSON) for diagnosis. Callers run it inside their transaction or
        alone (one statement is atomic by itself)."""
        self.conn.execute(
            "INSERT INTO bindings (harness_proc, session_id, harness, workspace, chain, at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(harness_proc, session_id) DO UPDATE SET "
            "harness = excluded.harness, workspace = excluded.workspace, chain = excluded.chain, "
            "at = excluded.at",
            (harness_proc, session_id, harness, workspace, chain, self.clock()),
        )

    def bound_session(self, procs: list[str]) -> tuple[str, str | None, str] | None:
        """The session bound to the nearest of `procs` (ptree keys, nearest first) that any hook
        recorded as its harness: (session_id, harness, harness_proc); the most recently
        recorded session wins when one harness process served several. None: no binding."""
        return Store.bound_session_in(self.conn, procs)

    @staticmethod
    def bound_session_in(conn: sqlite3.Connection, procs: list[str]) -> tuple[str, str | None, str] | None:
        """`bound_session` on any connection to a state database (a read-only one, say)."""
        if not procs:
            return None
        marks = ", ".join("?" * len(procs))
        rows = conn.execute(
            f"SELECT harness_proc, session_id, harness, at FROM bindings WHERE harness_proc IN ({marks})",
            procs,
        ).fetchall()
        if not rows:
            return None
        rank = {key: i for i, key in enumerate(procs)}
        best = min(rows, key=lambda r: (rank[r[0]], -float(r[3])))
        return str(best[1]), best[2], str(best[0])

    def forget_bindings(self, before: float) -> None:
        """Drop bindings not refreshed since `before` (their harness processes are long gone)."""
        self.conn.execute("DELETE FROM bindings WHERE at < ?", (before,))

    # ------------------------------------------------------------------ runs
    def record_run(self, run: RunRecord) -> None:
        """Record a run; a passing run clears the unresolved records it answers."""
        failing = json.dumps(list(run.failing[:MAX_FAILING_NAMES]))
        with self.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO runs (run_id, session_id, at, ok, outcome, total, passed, failed, "
                "skipped, failing, fingerprint, framework, command, source, exit_code, result_ref, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.run_id,
                    run.session_id,
                    run.at,
                    int(run.ok),
                    run.outcome,
                    run.summary.total,
                    run.summary.passed,
                    run.summary.failed,
                    run.summary.skipped,
                    failing,
                    run.fingerprint,
                    run.framework,
                    run.command,
                    run.source,
                    run.exit_code,
                    run.result_ref,
                    run.reason,
                ),
            )
            if not run.ok:
                return
            if run.session_id is not None:
                conn.execute(
                    "UPDATE unresolved SET cleared_at = ?, cleared_by = ? "
                    "WHERE session_id = ? AND cleared_at IS NULL",
                    (run.at, run.run_id, run.session_id),
                )
            else:
                # A workspace run answers the sessions that have no run of their own.
                conn.execute(
                    "UPDATE unresolved SET cleared_at = ?, cleared_by = ? WHERE cleared_at IS NULL "
                    "AND session_id NOT IN "
                    "(SELECT DISTINCT session_id FROM runs WHERE session_id IS NOT NULL) "
                    "AND session_id IN (SELECT id FROM sessions WHERE first_seen <= ?)",
                    (run.at, run.run_id, run.at),
                )

    def attach_run(self, run_id: str, session_id: str) -> RunRecord | None:
        """Give a workspace-level run (no session) to `session_id`; returns the run as it now stands.

        A hook that watched the agent start a greenloop run (a shell `greenloop run`, an MCP
        `test_run`) knows its session even when the run could not tell it: the harness exported
        no session id and the process tree named none (greenloop.closure.session). Such a run is moved
        to the session, and a passing one clears the session's unresolved records as
        `record_run` would. A run of another session is left alone (None); an unknown id too.
        """
        with self.transaction() as conn:
            cur = conn.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,))
            row = cur.fetchone()
            if row is None:
                return None
            run = _run_from_row(dict(zip([d[0] for d in cur.description], row, strict=True)))
            if run.session_id == session_id:
                return run
            if run.session_id is not None:
                return None
            conn.execute("UPDATE runs SET session_id = ? WHERE run_id = ?", (session_id, run_id))
            if run.ok:
                conn.execute(
                    "UPDATE unresolved SET cleared_at = ?, cleared_by = ? "
                    "WHERE session_id = ? AND cleared_at IS NULL",
                    (run.at, run.run_id, session_id),
                )
            return run._replace(session_id=session_id)

    def latest_run(self, *, session_id: str | None, since: float | None = None) -> RunRecord | None:
        """The latest run of a session, or (session_id None) the latest workspace-level run."""
        if session_id is None:
            sql, params = "SELECT * FROM runs WHERE session_id IS NULL", list[Any]()
        else:
            sql, params = "SELECT * FROM runs WHERE session_id = ?", list[Any]([session_id])
        if since is not None:
            sql += " AND at >= ?"
            params.append(since)
        cur = self.conn.execute(sql + " ORDER BY at DESC, rowid DESC LIMIT 1", params)
        row = cur.fetchone()
        if row is None:
            return None
        return _run_from_row(dict(zip([d[0] for d in cur.description], row, strict=True)))

    def runs(self, *, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        if session_id is None:
            cur = self.conn.execute("SELECT * FROM runs ORDER BY at DESC, rowid DESC LIMIT ?", (limit,))
        else:
            cur = self.conn.execute(
                "SELECT * FROM runs WHERE session_id = ? ORDER BY at DESC, rowid DESC LIMIT ?",
                (session_id, limit),
            )
        names = [d[0] for d in cur.description]
        return [_run_from_row(dict(zip(names, r, strict=True))) for r in cur.fetchall()]

    # ------------------------------------------------------------------ jobs
    def add_job(self, job_id: str, workspace: str, session_id: str | None, kwargs: dict[str, Any]) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs (job_id, workspace, session_id, status, created_at, kwargs) "
                "VALUES (?, ?, ?, 'starting', ?, ?)",
                (job_id, workspace, session_id, self.clock(), json.dumps(kwargs)),
            )

    def update_job(self, job_id: str, **fields: Any) -> None:
        allowed = {"status", "pid", "token", "ended_at", "run_id", "ok", "result", "error", "log_path"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown job fields: {sorted(bad)}")
        if not fields:
            return
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as conn:
            conn.execute(f"UPDATE jobs SET {cols} WHERE job_id = ?", (*fields.values(), job_id))

    def finish_job_if_running(self, job_id: str, status: str, error: str) -> bool:
        """Mark a job ended unless it already ended (a race with its worker); True if marked."""
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = ?, error = ?, ended_at = ? "
                "WHERE job_id = ? AND status IN ('starting', 'running')",
                (status, error, self.clock(), job_id),
            )
            return cur.rowcount > 0

    def job(self, job_id: str) -> JobRow | None:
        cur = self.conn.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        row = cur.fetchone()
        if row is None:
            return None
        return JobRow(zip([d[0] for d in cur.description], row, strict=True))

    # ------------------------------------------------------------------ sandbox modes
    def record_sandbox_mode(self, session_id: str, mode: str) -> None:
        """A sandbox/mode event for a session (the sandbox policy reads the latest)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO sandbox_modes (session_id, mode, at) VALUES (?, ?, ?)",
                (session_id, mode, self.clock()),
            )

    def latest_sandbox_mode(self, session_id: str) -> str | None:
        row = self.conn.execute(
            "SELECT mode FROM sandbox_modes WHERE session_id = ? ORDER BY id DESC LIMIT 1", (session_id,)
        ).fetchone()
        return None if row is None else str(row[0])


def _run_from_row(d: dict[str, Any]) -> RunRecord:
    try:
        failing = tuple(str(x) for x in json.loads(d.get("failing") or "[]"))
    except ValueError:
        failing = ()
    return RunRecord(
        run_id=str(d["run_id"]),
        ok=bool(d["ok"]),
        at=float(d["at"]),
        outcome=str(d["outcome"]),
        session_id=d.get("session_id"),
        summary=Counts(
            total=int(d.get("total") or 0),
            passed=int(d.get("passed") or 0),
            failed=int(d.get("failed") or 0),
            skipped=int(d.get("skipped") or 0),
        ),
        failing=failing,
        fingerprint=d.get("fingerprint"),
        framework=d.get("framework"),
        command=str(d.get("command") or ""),
        source=str(d.get("source") or "run"),
        exit_code=d.get("exit_code"),
        result_ref=d.get("result_ref"),
        reason=d.get("reason"),
    )


def failing_names(failures: Iterable[Failure]) -> tuple[str, ...]:
    """The failing tests' names, each once, in order, at most MAX_FAILING_NAMES."""
    seen: dict[str, None] = {}
    for failure in failures:
        seen.setdefault(failure.test, None)
    return tuple(seen)[:MAX_FAILING_NAMES]


def run_record(
    result: RunResult,
    *,
    at: float,
    session_id: str | None = None,
    fingerprint: str | None = None,
    source: str = "run",
) -> RunRecord:
    """What the closure state keeps of a RunResult."""
    reason: str | None = None
    if result.timed_out:
        reason = "timed out"
    elif result.aborted:
        reason = "aborted"
    elif result.crashed:
        reason = result.crash_reason or "the runner crashed"
    elif result.outcome == "broken":
        reason = result.crash_reason or ("no tests ran" if result.summary.total == 0 else "broken")
    return RunRecord(
        run_id=result.run_id,
        ok=result.ok,
        at=at,
        outcome=result.outcome,
        session_id=session_id if session_id is not None else result.session_id,
        summary=Counts.of(result.summary),
        failing=failing_names(result.failures),
        fingerprint=fingerprint,
        framework=result.framework,
        command=result.command,
        source=source,
        exit_code=result.exit_code,
        result_ref=result.result_ref,
        reason=reason,
    )


def record_result(
    workspace: str | os.PathLike[str],
    result: RunResult,
    *,
    session_id: str | None = None,
    source: str = "run",
    clock: Callable[[], float] = time.time,
    warn: Callable[[str], None] = _stderr_warn,
    fingerprint: Callable[[], str | None] | None = None,
) -> RunRecord:
    """Record a finished run for its session (or the workspace) with a working-tree fingerprint.

    This is what `greenloop.api.test_run` calls after every run. A failure to record is a
    warning, never an error: the run itself happened and its result stands. `fingerprint`
    gives the fingerprint when the caller started taking it earlier (api.test_run starts it
    when the runner exits); without it, the working tree is fingerprinted here. It is asked
    for once the database is open, so the two overlap.
    """
    ws = result.workspace or os.fspath(workspace)
    at = clock()

    def make() -> RunRecord:
        try:
            if fingerprint is not None:
                fp = fingerprint()
            else:
                from greenloop.system.fingerprint import working_tree

                fp = working_tree(ws)
        except Exception as exc:  # the fingerprint only feeds a note; never lose the run over it
            warn(f"could not fingerprint the working tree: {exc}")
            fp = None
        return run_record(result, at=at, session_id=session_id, fingerprint=fp, source=source)

    record: RunRecord | None = None
    try:
        with Store(workspace, clock=clock, warn=warn) as store:
            record = make()
            store.record_run(record)
    except (sqlite3.Error, OSError) as exc:
        warn(f"could not record run {result.run_id} in the state database: {exc}")
    return record if record is not None else make()
