"""The state schema as numbered migrations, written once for both backends.

Each migration is a list of statements in a portable spelling with three placeholders that
`for_backend` fills in: `{serial}` (an auto-numbered key), `{float}` (an 8-byte float: the
epoch times) and `{runs_rowid}` (PostgreSQL has no implicit rowid, and the runs table is
ordered by it, so there it is a column of its own).

How each backend applies them: SQLite keeps its version in `PRAGMA user_version` and, being
behind, runs every statement again (they are all `IF NOT EXISTS`, and an added column that is
already there is skipped, so a half-built database is completed too). PostgreSQL keeps one
row per applied migration in `greenloop_schema` and runs the missing ones in one transaction
under an advisory lock, so the first hooks of a new database do not race to create it. A
database newer than this greenloop is refused.
"""

from __future__ import annotations

from greenloop.state.url import BackendKind

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple
else:
    from greenloop.lite import NamedTuple

__all__ = ["LATEST", "MIGRATIONS", "SCHEMA_TABLE", "TABLES", "Migration", "for_backend", "pending"]


class Migration(NamedTuple):
    """One numbered schema step, written once for both databases."""
    version: int
    what: str
    statements: tuple[str, ...]


_CLOSURE_TABLES = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    first_seen {float} NOT NULL,
    last_seen {float} NOT NULL,
    harness TEXT
);
CREATE TABLE IF NOT EXISTS turns (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    turn_id TEXT,
    started_at {float} NOT NULL,
    released_at {float},
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS runs (
    {runs_rowid}run_id TEXT PRIMARY KEY,
    session_id TEXT,
    at {float} NOT NULL,
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
    id {serial},
    session_id TEXT NOT NULL,
    turn_seq INTEGER NOT NULL,
    at {float} NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT,
    harness TEXT,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS interceptions_by_turn ON interceptions (session_id, turn_seq);
CREATE TABLE IF NOT EXISTS unresolved (
    id {serial},
    session_id TEXT NOT NULL,
    turn_seq INTEGER NOT NULL,
    run_id TEXT,
    at {float} NOT NULL,
    cleared_at {float},
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
    created_at {float} NOT NULL,
    ended_at {float},
    kwargs TEXT NOT NULL DEFAULT '{{}}',
    run_id TEXT,
    ok INTEGER,
    result TEXT,
    error TEXT,
    log_path TEXT
);
CREATE TABLE IF NOT EXISTS sandbox_modes (
    id {serial},
    session_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    at {float} NOT NULL
);
CREATE INDEX IF NOT EXISTS sandbox_modes_by_session ON sandbox_modes (session_id, id)
"""

_BINDINGS = """
CREATE TABLE IF NOT EXISTS bindings (
    harness_proc TEXT NOT NULL,
    session_id TEXT NOT NULL,
    harness TEXT,
    workspace TEXT NOT NULL,
    chain TEXT NOT NULL DEFAULT '[]',
    at {float} NOT NULL,
    PRIMARY KEY (harness_proc, session_id)
);
CREATE INDEX IF NOT EXISTS bindings_by_at ON bindings (at)
"""


_EVIDENCE = """
CREATE TABLE IF NOT EXISTS owed (
    session_id TEXT NOT NULL,
    test TEXT NOT NULL,
    reason TEXT NOT NULL,
    run_id TEXT NOT NULL,
    at {float} NOT NULL,
    file TEXT,
    line INTEGER,
    detail TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (session_id, test)
);
CREATE TABLE IF NOT EXISTS session_evidence (
    session_id TEXT PRIMARY KEY,
    at {float} NOT NULL,
    start_fingerprint TEXT,
    marks TEXT,
    baseline TEXT,
    guarded TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE IF NOT EXISTS acceptances (
    id {serial},
    session_id TEXT,
    test TEXT NOT NULL,
    reason TEXT NOT NULL,
    accepted_by TEXT NOT NULL,
    at {float} NOT NULL
);
CREATE INDEX IF NOT EXISTS acceptances_by_test ON acceptances (test);
ALTER TABLE runs ADD COLUMN selection TEXT;
ALTER TABLE runs ADD COLUMN marks TEXT;
ALTER TABLE interceptions ADD COLUMN rule TEXT;
ALTER TABLE unresolved ADD COLUMN reason TEXT
"""


_NOTES_SAID = """
CREATE TABLE IF NOT EXISTS notes_said (
    session_id TEXT NOT NULL,
    note_key TEXT NOT NULL,
    at {float} NOT NULL,
    PRIMARY KEY (session_id, note_key)
)
"""


def _statements(script: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in script.split(";") if s.strip())


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "the closure tables: sessions, turns, runs, interceptions, unresolved, jobs, sandbox modes",
        _statements(_CLOSURE_TABLES),
    ),
    Migration(2, "process-tree bindings", _statements(_BINDINGS)),
    # A job's pid means something only on the machine that started it: with a database several
    # machines share, the others must not judge the job by a pid of theirs.
    Migration(3, "the host a background job runs on", ("ALTER TABLE jobs ADD COLUMN host TEXT",)),
    # The gate judges the session's evidence, not only its last run (docs/closure-gate.md).
    Migration(
        4,
        "the session's evidence: owed tests, its start and baseline, people's acceptances; "
        "each run's selection and marks, each interception's rule, each unresolved record's reason",
        _statements(_EVIDENCE),
    ),
    # The agent format says a note that stays true across runs (the tests' environment, the
    # virtualenv) once per session: this is where it remembers having said it.
    Migration(5, "notes said once per session", _statements(_NOTES_SAID)),
)
LATEST = MIGRATIONS[-1].version
# The tables a complete database has (greenloop doctor checks them).
def _created(statement: str, marker: str = "CREATE TABLE IF NOT EXISTS ") -> list[str]:
    r"""The names after each `marker` (what `re.findall(marker + r"(\w+)")` finds, without `re`
    on the hook path)."""
    names = []
    at = statement.find(marker)
    while at >= 0:
        start = end = at + len(marker)
        while end < len(statement) and (statement[end].isalnum() or statement[end] == "_"):
            end += 1
        if end > start:
            names.append(statement[start:end])
        at = statement.find(marker, end)
    return names


TABLES: tuple[str, ...] = tuple(name for m in MIGRATIONS for s in m.statements for name in _created(s))
# PostgreSQL's record of applied migrations (SQLite uses PRAGMA user_version instead).
SCHEMA_TABLE = "greenloop_schema"

_SPELLINGS: dict[BackendKind, dict[str, str]] = {
    "sqlite": {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "float": "REAL", "runs_rowid": ""},
    # REAL is a 4-byte float in PostgreSQL: epoch seconds need DOUBLE PRECISION.
    "postgres": {
        "serial": "BIGSERIAL PRIMARY KEY",
        "float": "DOUBLE PRECISION",
        "runs_rowid": "rowid BIGSERIAL, ",
    },
}


def for_backend(statement: str, kind: BackendKind) -> str:
    """A migration statement in the backend's own spelling."""
    return statement.format(**_SPELLINGS[kind])


def pending(version: int) -> tuple[Migration, ...]:
    """The migrations a database at `version` has yet to apply, oldest first."""
    return tuple(m for m in MIGRATIONS if m.version > version)
