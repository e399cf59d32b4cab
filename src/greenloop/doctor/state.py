"""Doctor checks of the state database: `.greenloop/state.db` opens (read-only), is intact, has the schema."""

from __future__ import annotations

import contextlib
import os
import shlex
import sqlite3

from greenloop.doctor.report import Check

__all__ = ["state_checks"]

def state_checks(workspace: str) -> list[Check]:
    """The workspace's state database, looked at without changing it."""
    from greenloop.closure.store import SCHEMA_VERSION, TABLES, db_path
    from greenloop.errors import ConfigError
    from greenloop.state.url import configured

    try:
        location = configured(workspace)
    except ConfigError as exc:
        return [Check("state", "state URL", "fail", str(exc), "fix the state URL it names")]
    if location.kind == "postgres":
        from greenloop.state.health import check_postgres

        return [Check("state", "postgresql", *check_postgres(location.url))]
    path = db_path(workspace)
    if not os.path.isfile(path):
        return [Check("state", "state.db", "ok", f"no state yet ({path} is created by the first run)")]
    aside = (
        f"move it aside (`mv {shlex.quote(path)} {shlex.quote(path + '.bad')}`); greenloop starts a "
        "fresh one on the next run (the gate's history for this workspace is lost)"
    )
    try:
        # mode=ro: the doctor looks, it never creates, migrates or rebuilds.
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    except sqlite3.Error as exc:
        return [Check("state", "state.db", "fail", f"{path} does not open: {exc}", aside)]
    try:
        with contextlib.closing(conn):
            rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
            if rows != ["ok"]:
                shown = "; ".join(str(r) for r in rows[:3])
                return [Check("state", "state.db", "fail", f"{path} fails integrity_check: {shown}", aside)]
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return [
                Check("state", "state.db", "warn", f"{path} is busy: {exc}", "run greenloop doctor again")
            ]
        return [Check("state", "state.db", "fail", f"{path} cannot be read: {exc}", aside)]
    except sqlite3.DatabaseError as exc:
        return [Check("state", "state.db", "fail", f"{path} is not a usable database: {exc}", aside)]
    if version > SCHEMA_VERSION:
        return [
            Check(
                "state",
                "state.db",
                "fail",
                f"{path} has schema version {version}; this greenloop knows {SCHEMA_VERSION}",
                "upgrade greenloop to the version that wrote it, or " + aside,
            )
        ]
    missing = [t for t in TABLES if t not in tables]
    if version < SCHEMA_VERSION or missing:
        detail = f"{path} has schema version {version}"
        if missing:
            detail += f" and lacks table(s) {', '.join(missing)}"
        return [
            Check(
                "state",
                "state.db",
                "warn",
                detail,
                "none needed: the next greenloop run completes the schema",
            )
        ]
    return [Check("state", "state.db", "ok", f"{path}: integrity ok, schema version {version}")]
