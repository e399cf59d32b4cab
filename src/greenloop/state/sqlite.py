"""The embedded backend: one SQLite file, `.greenloop/state.db` under the state root.

Several hook processes, runs and jobs touch the database at once, so it runs in WAL mode
with a busy timeout, and every transaction begins `IMMEDIATE` (the write lock up front). A
missing database is created; a corrupt one is moved aside and rebuilt with a warning: state
is a convenience for the gate, and losing it must never block an agent.
"""

from __future__ import annotations

# The C module itself: `sqlite3` (its dbapi2) imports datetime and registers adapters the state
# never uses, a cost on every hook. The classes are the same objects.
import _sqlite3 as sqlite3
import os
import time

from greenloop.state import migrations
from greenloop.state.backend import Cursor
from greenloop.state.bindings import BUSY_TIMEOUT_S
from greenloop.state.url import BackendKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

__all__ = ["BUSY_TIMEOUT_MS", "SqliteBackend", "is_corruption", "move_aside"]

BUSY_TIMEOUT_MS = int(BUSY_TIMEOUT_S * 1000)


def is_corruption(exc: sqlite3.DatabaseError) -> bool:
    """Whether a SQLite error means the file is corrupt (it is then moved aside and rebuilt)."""
    if isinstance(exc, sqlite3.OperationalError):
        return False  # locked, busy, read-only: not corruption
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return int(code) & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def move_aside(path: str, why: str, *, clock: Callable[[], float], warn: Callable[[str], None]) -> None:
    """Move a corrupt database to `<path>.corrupt-<time>` (dropping its -wal/-shm/-journal) and warn."""
    aside = f"{path}.corrupt-{int(clock())}"
    try:  # noqa: SIM105 (no contextlib on the hook path)
        os.replace(path, aside)
    except OSError:
        pass
    for suffix in ("-wal", "-shm", "-journal"):
        try:  # noqa: SIM105 (no contextlib on the hook path)
            os.remove(path + suffix)
        except OSError:
            pass
    warn(f"the state database {path} was unreadable ({why}); moved it to {aside} and started afresh")


_ADD_COLUMN = r"ALTER TABLE (\w+) ADD COLUMN (\w+)"


def _apply(conn: sqlite3.Connection, statement: str) -> None:
    """One migration statement; an added column already there is skipped (SQLite has no
    `ADD COLUMN IF NOT EXISTS`, and every statement runs again when the database is behind).
    Runs only when the database is behind, so `re` is imported here."""
    import re

    added = re.match(_ADD_COLUMN, statement)
    if added:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({added.group(1)})")}
        if added.group(2) in columns:
            return
    conn.execute(statement)


def _migrate(conn: sqlite3.Connection) -> None:
    if conn.execute("PRAGMA user_version").fetchone()[0] == migrations.LATEST:
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
        for migration in migrations.MIGRATIONS:
            for statement in migration.statements:
                _apply(conn, migrations.for_backend(statement, "sqlite"))
        conn.execute(f"PRAGMA user_version = {migrations.LATEST}")
        conn.execute("COMMIT")
    except BaseException:
        try:  # noqa: SIM105 (no contextlib on the hook path)
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        raise


class SqliteBackend:
    """A connection to the SQLite state database at `path` (created, migrated or rebuilt)."""

    kind: BackendKind = "sqlite"

    def __init__(self, path: str, *, clock: Callable[[], float], warn: Callable[[str], None]) -> None:
        self.path = self.where = path
        self.clock = clock
        self.warn = warn
        self.conn = self._open()

    def _connect(self) -> sqlite3.Connection:
        folder = os.path.dirname(self.path)
        if not os.path.isdir(folder):
            from greenloop.layout import make_state_dir

            make_state_dir(folder)
        # connect()'s timeout is SQLite's busy timeout (PRAGMA busy_timeout reads 15000).
        return sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)

    def _open(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            _migrate(conn)
            # No fsync: an application crash still never corrupts a WAL database; an OS crash may
            # lose the last few writes (or, rarely, corrupt the file, which is then rebuilt).
            # For the gate's bookkeeping that beats paying fsyncs on every agent turn.
            conn.execute("PRAGMA synchronous = OFF")
            return conn
        except sqlite3.DatabaseError as exc:
            conn.close()
            if not is_corruption(exc):
                raise
            move_aside(self.path, str(exc), clock=self.clock, warn=self.warn)
            conn = self._connect()
            _migrate(conn)
            return conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement."""
        return self.conn.execute(sql, params)

    def begin(self) -> None:
        """Start a transaction that takes the write lock at once (BEGIN IMMEDIATE)."""
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        """Commit the open transaction."""
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        """Roll the open transaction back."""
        try:  # noqa: SIM105 (no contextlib on the hook path)
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def schema_version(self) -> int:
        """`PRAGMA user_version`: the highest migration applied."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])
