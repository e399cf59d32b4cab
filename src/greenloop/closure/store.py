"""The closure state: one storage interface over two databases.

Tables: sessions, turns, runs, interceptions, unresolved, jobs, sandbox_modes, bindings,
owed, session_evidence, acceptances (greenloop.state.migrations). `Store(workspace)` opens
the backend the state URL names (greenloop.state.url): by default the embedded SQLite
database `.greenloop/state.db` (greenloop.state.sqlite); with
`GREENLOOP_STATE_URL=postgresql://…` (or the config field `state_url`) a PostgreSQL database
that several working copies share (greenloop.state.postgres). The queries are written once
(greenloop.state.sessions, greenloop.state.records, greenloop.state.evidence) and every
read-modify-write runs in `Store.transaction()`.

The SQLite database lives in the *state root*: the nearest folder, walking up from the
workspace, that already has `.greenloop/state.db`, else the nearest that holds `.git`, else
the workspace itself. So a run started in a sub-package and a hook whose `cwd` is the
project root meet in one database.
"""

from __future__ import annotations

import _sqlite3 as sqlite3  # not `sqlite3`: its dbapi2 imports datetime (greenloop.state.sqlite)
import os
import sys
import time

from greenloop.closure.transitions import Counts, RunRecord
from greenloop.layout import DB_NAME, db_path, state_root
from greenloop.state import migrations
from greenloop.state.backend import Backend, StateError
from greenloop.state.records import MAX_FAILING_NAMES, JobRow
from greenloop.state.sessions import SessionTables
from greenloop.state.sqlite import BUSY_TIMEOUT_MS, SqliteBackend, is_corruption
from greenloop.state.sqlite import move_aside as _move_aside
from greenloop.state.url import StateUrl, configured, has_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from greenloop.model import Failure
    from greenloop.result import RunResult

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DB_NAME",
    "SCHEMA_VERSION",
    "TABLES",
    "JobRow",
    "StateError",
    "Store",
    "db_path",
    "failing_names",
    "has_state",
    "move_aside",
    "record_result",
    "run_record",
    "state_errors",
    "state_root",
]

SCHEMA_VERSION = migrations.LATEST
TABLES = migrations.TABLES


def state_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a state database raises when it cannot be used: SQLite's, the file
    system's, greenloop's own, and psycopg's when the PostgreSQL backend is in use."""
    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError, StateError)
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        errors += (psycopg.Error,)
    return errors


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """Whether a SQLite error means a corrupt file (the gate moves it aside and goes on)."""
    return is_corruption(exc)


def _stderr_warn(message: str) -> None:
    print(f"greenloop: warning: {message}", file=sys.stderr)


def move_aside(
    path: str, why: str, *, clock: Callable[[], float], warn: Callable[[str], None] = _stderr_warn
) -> None:
    """Move a corrupt SQLite database aside and warn (greenloop.state.sqlite.move_aside)."""
    _move_aside(path, why, clock=clock, warn=warn)


class Store(SessionTables):
    """A connection to one workspace's state database (module docstring).

    `clock` is a seam (epoch seconds); `warn` receives warnings such as a rebuilt database.
    `path` names a SQLite file outright; `location` a backend (default: the configured one).
    Use as a context manager, or call close(). `path` is None for a PostgreSQL backend.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] = _stderr_warn,
        path: str | None = None,
        location: StateUrl | None = None,
    ) -> None:
        self.clock = clock
        self.warn = warn
        self.path: str | None = None
        if path is None:
            location = location or configured(workspace)
        backend: Backend
        if path is None and location is not None and location.kind == "postgres":
            from greenloop.state.postgres import PostgresBackend

            backend = PostgresBackend(location.url)
        else:
            self.path = path or db_path(workspace)
            backend = SqliteBackend(self.path, clock=clock, warn=warn)
        self.conn = backend

    @property
    def where(self) -> str:
        """The database as it may be printed: the SQLite path, or the URL without its password."""
        return self.conn.where

    def close(self) -> None:
        """Close the backend connection (a `with Store(...)` block does it)."""
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        selection=result.selection if result.shard is None else "shard",
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
            evidence = None
            from greenloop.closure import run_evidence

            if record.session_id is not None:
                fp = record.fingerprint
                baseline = run_evidence.ensure_start(store, ws, record.session_id, lambda: fp)
                evidence = run_evidence.evidence_of(result, run_evidence.marks_now(ws, baseline))
            else:  # a workspace run: its names still count; no session start to read marks against
                evidence = run_evidence.evidence_of(result, None)
            store.record_run(record, evidence)
    except state_errors() as exc:
        warn(f"could not record run {result.run_id} in the state database: {exc}")
    return record if record is not None else make()
