"""What `greenloop doctor` says about a PostgreSQL state database: reachable, which server,
which schema version, which tables. It looks only: it never creates, migrates or writes."""

from __future__ import annotations

from typing import Literal, NamedTuple

from greenloop.state import migrations
from greenloop.state.backend import StateError
from greenloop.state.url import redact

__all__ = ["Finding", "check_postgres"]


class Finding(NamedTuple):
    """One doctor finding about the PostgreSQL state: status, detail, fix."""
    status: Literal["ok", "warn", "fail"]
    detail: str
    fix: str | None = None


def check_postgres(url: str) -> Finding:
    """The doctor's finding for the PostgreSQL database at `url` (its password never shown)."""
    from greenloop.state.postgres import connect

    shown = redact(url)
    try:
        conn = connect(url)
    except StateError as exc:
        return Finding("fail", str(exc), "start the server, or fix $GREENLOOP_STATE_URL or config state_url")
    with conn:
        server = str(conn.execute("SHOW server_version").fetchone()[0]).split()[0]  # type: ignore[index]
        present = {
            str(r[0])
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
            ).fetchall()
        }
        version = 0
        if migrations.SCHEMA_TABLE in present:
            row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {migrations.SCHEMA_TABLE}").fetchone()
            version = int(row[0]) if row else 0
    head = f"{shown}: reachable (PostgreSQL {server})"
    if version > migrations.LATEST:
        return Finding(
            "fail",
            f"{head}, schema version {version}; this greenloop knows {migrations.LATEST}",
            "upgrade greenloop to the version that wrote it",
        )
    missing = [t for t in migrations.TABLES if t not in present]
    if version < migrations.LATEST or missing:
        detail = f"{head}, schema version {version}"
        if missing:
            detail += f", lacks table(s) {', '.join(missing)}"
        return Finding("warn", detail, "none needed: the next greenloop run applies the migrations")
    return Finding("ok", f"{head}, schema version {version}")
