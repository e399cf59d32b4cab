"""Which session a process belongs to, read from the bindings table: one query with no
imports, so the lookup every run makes before its runner starts (greenloop.closure.session)
loads neither the store nor its backends."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = ["BUSY_TIMEOUT_S", "bound_session_in"]

BUSY_TIMEOUT_S = 15.0  # how long a connection waits for another writer (both backends' SQLite)


def bound_session_in(conn: Any, procs: list[str]) -> tuple[str, str | None, str] | None:
    """`SessionTables.bound_session` on any connection with `execute` (a read-only sqlite3 one, say)."""
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
