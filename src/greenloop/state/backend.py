"""The one storage interface the closure state uses, whichever database holds it.

`greenloop.closure.store.Store` speaks SQL through a `Backend`: `execute` one statement (written
with `?` placeholders, in the subset both SQLite and PostgreSQL accept), and `begin` /
`commit` / `rollback` a transaction whose read-modify-write is safe against every other
process, on this machine or another:

- SQLite (`greenloop.state.sqlite`) begins `IMMEDIATE`: the database's write lock is taken
  up front, so writers run one at a time.
- PostgreSQL (`greenloop.state.postgres`) runs READ COMMITTED, where each statement sees
  what committed before it started; a transaction that first upserts its session's row
  (`Store.touch_session`, the first thing every gate transaction does) holds that row's lock
  to its end, so two gate decisions for one session run one after the other, and the
  second sees the first's interception. That is what keeps the per-turn budget exact.

A database that cannot be reached raises `StateUnavailable`: a GreenloopError (exit 2 on the
command line) whose message names the URL without its password. The hooks catch it like any
other failure and allow the stop.
"""

from __future__ import annotations

from greenloop.errors import GreenloopError
from greenloop.state.url import BackendKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any, Protocol
else:
    Protocol = object

__all__ = ["Backend", "Cursor", "Reader", "StateError", "StateUnavailable"]


class StateError(GreenloopError):
    """The state database cannot be used (its message says which one and what to do)."""


class StateUnavailable(StateError):
    """The state database cannot be reached or opened."""


class Cursor(Protocol):
    """The part of a DB-API cursor the store reads."""

    @property
    def description(self) -> Any:
        """The columns of the last query (DB-API), or None when it returned no rows."""

    @property
    def rowcount(self) -> int:
        """Rows the last statement changed (DB-API)."""

    def fetchone(self) -> Any:
        """The next row, or None."""

    def fetchall(self) -> list[Any]:
        """The remaining rows."""

    def __iter__(self) -> Iterator[Any]: ...


class Backend(Protocol):
    """A connection to the state database (module docstring)."""

    kind: BackendKind
    # what the database is, as it may be printed: a file path, or a URL without its password
    where: str

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Cursor:
        """Run one statement (`?` placeholders; the PostgreSQL backend translates them)."""

    def begin(self) -> None:
        """Start a transaction (in SQLite BEGIN IMMEDIATE, which takes the write lock at once)."""

    def commit(self) -> None:
        """Commit the open transaction."""

    def rollback(self) -> None:
        """Roll the open transaction back."""

    def close(self) -> None:
        """Close the connection (a pooled PostgreSQL one goes back to its process's pool)."""

    def schema_version(self) -> int:
        """The highest migration applied to this database."""


class Reader(Protocol):
    """A read-only connection whose rows read by position and by name: a sqlite3 connection
    with `row_factory = sqlite3.Row`, or greenloop.state.postgres.ReadOnlyView."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any:
        """Run one read-only query."""


def column_names(cursor: Cursor) -> list[str]:
    """The result columns' names (sqlite3 gives 7-tuples, psycopg Column objects; both index)."""
    return [str(d[0]) for d in cursor.description]
