"""The base of the store's query classes: a backend connection, a clock, and transactions."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from greenloop.state.backend import Backend

__all__ = ["Tables"]


class Tables:
    """What every query class needs: `conn` (the backend) and `clock` (epoch seconds)."""

    conn: Backend
    clock: Callable[[], float]

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Backend]:
        """A transaction whose read-modify-write is safe against every other process
        (greenloop.state.backend says how each backend makes it so)."""
        self.conn.begin()
        try:
            yield self.conn
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()
