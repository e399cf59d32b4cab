"""The shared backend: the closure state in a PostgreSQL database, through psycopg 3.

Many working copies (and machines) of one project can point `GREENLOOP_STATE_URL` at one
database and share one gate. The connection runs in autocommit mode, and the store opens
its own transactions (`begin`), which run READ COMMITTED: a gate transaction upserts its
session's row first and keeps that row's lock to its end, so decisions for one session are
serialised while other sessions go on in parallel (greenloop.state.backend explains why that
keeps the per-turn budget exact). Waiting for that lock is bounded by `LOCK_TIMEOUT`, as
SQLite's busy timeout bounds its own.

psycopg is imported only here, and only when a postgresql:// URL is configured: the SQLite
path (and its hooks) never pays for it. A missing psycopg, a refused connection, a bad
password, a database that went away mid-transaction: each raises `StateUnavailable` with the
URL shown without its password.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from greenloop.state import migrations
from greenloop.state.backend import Cursor, StateError, StateUnavailable
from greenloop.state.url import BackendKind, redact

if TYPE_CHECKING:
    import psycopg

__all__ = ["CONNECT_TIMEOUT_S", "LOCK_TIMEOUT", "PostgresBackend", "connect", "to_pyformat"]

CONNECT_TIMEOUT_S = 5
LOCK_TIMEOUT = "15s"
# pg_advisory_xact_lock key that serialises migrations (the bytes of "greenloop" as a number).
_MIGRATION_LOCK = 0x677265656E6C6F6F


@functools.lru_cache(maxsize=256)
def to_pyformat(sql: str) -> str:
    """A statement with `?` placeholders in psycopg's `%s` spelling (a literal % doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _reason(exc: BaseException, url: str) -> str:
    """The first line of a driver error, with the URL's password (if it appears) redacted."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text.replace(url, redact(url))


def _import_psycopg() -> None:
    """Import psycopg, also from a hook started without `site` (greenloop.hooks.install.hook_command
    puts only greenloop's own folder on sys.path; an editable install keeps psycopg apart)."""
    try:
        import psycopg
    except ImportError:
        if not sys.flags.no_site:
            raise
        import site

        # This interpreter's site-packages, without running their .pth files (a third of the
        # cost of `site.main()`); then, for an install only a .pth file points at, all of it.
        sys.path.extend(p for p in site.getsitepackages() if p not in sys.path)
        try:
            import psycopg
        except ImportError:
            site.main()
            import psycopg  # noqa: F401


def connect(url: str) -> psycopg.Connection[Any]:
    """An autocommit connection to `url`; StateUnavailable (URL redacted) when there is none."""
    shown = redact(url)
    try:
        _import_psycopg()
        import psycopg
    except ImportError:
        raise StateUnavailable(
            f"the state URL {shown} needs psycopg, which is not installed: "
            "pip install 'greenloop[postgres]' (or psycopg[binary])"
        ) from None
    options: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in url:
        options["connect_timeout"] = CONNECT_TIMEOUT_S
    try:
        conn = psycopg.connect(url, **options)
    except psycopg.Error as exc:
        raise StateUnavailable(
            f"cannot reach the state database {shown}: {_reason(exc, url)}. Check that the server "
            f"runs and the URL in $GREENLOOP_STATE_URL or the config field state_url is right"
        ) from None
    return conn


def _installed_version(conn: psycopg.Connection[Any]) -> int:
    import psycopg

    try:
        row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {migrations.SCHEMA_TABLE}").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


def _migrate(conn: psycopg.Connection[Any], where: str) -> int:
    version = _installed_version(conn)
    if version == migrations.LATEST:
        return version
    if version < migrations.LATEST:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {migrations.SCHEMA_TABLE} (version INTEGER PRIMARY KEY, "
                "what TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL)"
            )
            version = _installed_version(conn)  # another process may have migrated meanwhile
            for migration in migrations.pending(version):
                for statement in migration.statements:
                    conn.execute(migrations.for_backend(statement, "postgres").encode())
                conn.execute(
                    f"INSERT INTO {migrations.SCHEMA_TABLE} (version, what, applied_at) VALUES (%s, %s, %s)",
                    (migration.version, migration.what, time.time()),
                )
                version = migration.version
    if version > migrations.LATEST:
        raise StateError(
            f"the state database {where} has schema version {version}; this greenloop knows "
            f"{migrations.LATEST}: upgrade greenloop to the version that wrote it"
        )
    return version


# One idle connection per process: `close` keeps it for the process's next store. A new
# connection costs a server process and cold catalog caches (most of a decision's time), and
# long-lived callers (the MCP server, a harness using the Gate API) open a store per decision.
# Keyed by pid, so a forked child never talks on its parent's socket; closed at exit.
_idle: dict[tuple[int, str], psycopg.Connection[Any]] = {}


def _close_idle() -> None:
    """Close this process's idle connection (a forked parent's stays untouched: closing it
    here would end the parent's session on their shared socket)."""
    for key in [k for k in _idle if k[0] == os.getpid()]:
        with contextlib.suppress(Exception):
            _idle.pop(key).close()


atexit.register(_close_idle)


class PostgresBackend:
    """A connection to the PostgreSQL state database at `url` (migrated on first use)."""

    kind: BackendKind = "postgres"

    def __init__(self, url: str) -> None:
        self.url = url
        self.where = redact(url)
        idle = _idle.pop((os.getpid(), url), None)
        if idle is not None:
            import psycopg

            try:
                self.version = _migrate(idle, self.where)  # also proves the connection still works
                self.conn = idle
                return
            except psycopg.OperationalError:  # the server restarted meanwhile: connect again
                idle.close()
            except BaseException:
                idle.close()
                raise
        self.conn = connect(url)
        try:
            self.conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
            self.version = _migrate(self.conn, self.where)
        except BaseException:
            self.conn.close()
            raise

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement, `?` placeholders turned into psycopg's `%s`."""
        import psycopg

        try:
            if params:
                return self.conn.execute(to_pyformat(sql).encode(), params)
            return self.conn.execute(sql.encode())
        except psycopg.OperationalError as exc:
            if self.conn.broken:
                raise StateUnavailable(
                    f"lost the state database {self.where}: {_reason(exc, self.url)}"
                ) from None
            raise

    def begin(self) -> None:
        """Start a transaction."""
        self.execute("BEGIN")

    def commit(self) -> None:
        """Commit the open transaction."""
        self.execute("COMMIT")

    def rollback(self) -> None:
        """Roll the open transaction back."""
        import psycopg

        with contextlib.suppress(psycopg.Error, StateError):
            self.execute("ROLLBACK")

    def close(self) -> None:
        """Keep the connection for this process's next store when it is clean, else close it."""
        from psycopg.pq import TransactionStatus

        key = (os.getpid(), self.url)
        clean = not self.conn.broken and self.conn.info.transaction_status == TransactionStatus.IDLE
        if clean and key not in _idle:
            _close_idle()  # one idle connection per process: a process that moves on to
            _idle[key] = self.conn  # another database does not hold the old one open
        else:
            self.conn.close()

    def schema_version(self) -> int:
        """The highest migration recorded in `greenloop_schema`."""
        return _installed_version(self.conn)


class Row(tuple[Any, ...]):
    """A result row read by position or by column name, as sqlite3.Row is (`dict(row)` too)."""

    _names: tuple[str, ...]

    def __new__(cls, values: Sequence[Any], names: tuple[str, ...]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self._names.index(key))
        return super().__getitem__(key)

    def keys(self) -> list[str]:
        return list(self._names)


class ReadOnlyView:
    """A read-only session on the state database that answers like a sqlite3 connection with
    `row_factory = sqlite3.Row`: `execute` takes `?` placeholders and returns `Row`s (the
    dashboard's queries run on either backend unchanged)."""

    def __init__(self, url: str) -> None:
        self.conn = connect(url)
        self.conn.execute("SET default_transaction_read_only = on")
        # 0: nothing has written the state yet (the tables are created by the first writer)
        self.version = _installed_version(self.conn)
        self.conn.row_factory = _row_factory

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        if parameters:
            return self.conn.execute(to_pyformat(sql).encode(), parameters)
        return self.conn.execute(sql.encode())

    def close(self) -> None:
        self.conn.close()


def _row_factory(cursor: Any) -> Any:
    names = tuple(c.name for c in cursor.description or ())
    return lambda values: Row(values, names)
