"""The base of the store's query classes: a backend connection, a clock, and transactions."""

from __future__ import annotations

from greenloop.state.backend import Backend

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["Tables"]


class Tables:
    """What every query class needs: `conn` (the backend) and `clock` (epoch seconds)."""

    conn: Backend
    clock: Callable[[], float]

    def transaction(self) -> _Transaction:
        """A transaction whose read-modify-write is safe against every other process
        (greenloop.state.backend says how each backend makes it so): `with t.transaction():`
        commits when the block ends, rolls back when it raises."""
        return _Transaction(self.conn)


class _Transaction:
    """`Tables.transaction()` (a class, not contextlib's decorator: the hook path does not
    import contextlib)."""

    def __init__(self, conn: Backend) -> None:
        self.conn = conn

    def __enter__(self) -> Backend:
        self.conn.begin()
        return self.conn

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.conn.commit()
        else:
            self.conn.rollback()
