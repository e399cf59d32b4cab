"""Read-only queries for the dashboard: the state database (runs, sessions, turns,
interceptions, unresolved records), run folders, the bug log and integration run folders.

Nothing here writes: the database is opened read-only (`mode=ro`), so a page view cannot
change the state an agent's gate reads. Lists are paginated in SQL; a run's own files are read
only for the run shown (and the durations of the rows on a page).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from greenloop import layout
from greenloop.dashboard import live
from greenloop.state.backend import Reader

__all__ = [
    "PAGE_SIZE",
    "BugCard",
    "RunRow",
    "Source",
    "Verdict",
    "bug_board",
    "bug_detail",
    "framework_of",
    "integration_run",
    "integration_runs",
    "live_runs",
    "read_run",
    "runs",
    "session_detail",
    "sessions",
    "trend",
    "verdict",
]

PAGE_SIZE = 50
RUNS_ON_SESSION = 50
TREND_RUNS = 60


class Source(NamedTuple):
    """Where one dashboard reads from: the state root (its `.greenloop/state.db`) and, for a
    DevLoop project, the project root (bug log, integration runs). `bugs` is one BugLog kept for
    the dashboard's life: it folds the log once, then reads only what was appended since."""

    root: str
    project: str
    bugs: Any = None

    @classmethod
    def of(cls, path: str) -> Source:
        """The read-only data source of the workspace or project at `path`."""
        from greenloop.bugs.log import BugLog, bug_log_path
        from greenloop.closure.store import state_root

        root = state_root(path)
        found = layout.find_project_root(path)
        project = str(found) if found is not None else os.path.abspath(path)
        return cls(root, project, BugLog(bug_log_path(project)))

    @property
    def db(self) -> str:
        """The state database's path."""
        return os.path.join(self.root, layout.STATE_DIR, "state.db")


@contextmanager
def connect(src: Source) -> Iterator[Reader | None]:
    """A read-only connection, or None when no database exists yet (nothing has run). With a
    PostgreSQL state URL (greenloop.state.url) a read-only session there, with the same rows."""
    from greenloop.state.url import configured

    location = configured(src.root)
    if location.kind == "postgres":
        from greenloop.state.postgres import ReadOnlyView

        view = ReadOnlyView(location.url)
        try:
            yield view if view.version else None
        finally:
            view.close()
        return
    if not os.path.isfile(src.db):
        yield None
        return
    conn = sqlite3.connect(f"file:{src.db}?mode=ro", uri=True, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


class RunRow(NamedTuple):
    """One run as the runs page lists it."""
    run_id: str
    session_id: str | None
    at: float
    outcome: str
    total: int
    passed: int
    failed: int
    skipped: int
    framework: str | None
    command: str
    result_ref: str | None
    duration_ms: int | None


def _duration(ref: str | None) -> int | None:
    """A finished run's duration, from its result.json (read for the rows on one page only)."""
    if not ref:
        return None
    try:
        with open(ref, "rb") as fh:
            head = fh.read()
        value = json.loads(head).get("duration_ms")
        return int(value) if isinstance(value, int) else None
    except (OSError, ValueError, AttributeError):
        return None


def runs(
    conn: Reader | None, *, outcome: str | None = None, session: str | None = None,
    page: int = 0, size: int = PAGE_SIZE,
) -> tuple[list[RunRow], bool]:
    """One page of runs, newest first, and whether there are more."""
    if conn is None:
        return [], False
    where: list[str] = []
    args: list[Any] = []
    if outcome:
        where.append("outcome = ?")
        args.append(outcome)
    if session:
        where.append("session_id = ?")
        args.append(session)
    sql = ("SELECT run_id, session_id, at, outcome, total, passed, failed, skipped, framework, command, "
           "result_ref FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY at DESC LIMIT ? OFFSET ?")
    rows = conn.execute(sql, (*args, size + 1, max(page, 0) * size)).fetchall()
    out = [RunRow._make((*r, _duration(r["result_ref"]))) for r in rows[:size]]
    return out, len(rows) > size


def trend(conn: Reader | None, n: int = TREND_RUNS) -> list[tuple[str, int, int, str]]:
    """The last `n` runs, oldest first: (run_id, passed, failed, outcome)."""
    if conn is None:
        return []
    rows = conn.execute("SELECT run_id, passed, failed, outcome FROM runs ORDER BY at DESC LIMIT ?",
                        (n,)).fetchall()
    return [(r[0], int(r[1]), int(r[2]), str(r[3])) for r in reversed(rows)]


def live_runs(src: Source) -> list[tuple[str, str, str | None]]:
    """Runs in progress that announced themselves: (run_id, run folder, framework), newest first."""
    folder = os.path.join(src.root, layout.STATE_DIR, live.LIVE_DIR)
    try:
        names = sorted((n for n in os.listdir(folder) if not n.endswith(".tmp")), reverse=True)
    except OSError:
        return []
    out = []
    for name in names:
        found = live.announced(os.path.join(folder, name))
        if found is None:
            continue
        run_dir, framework = found
        if os.path.exists(os.path.join(run_dir, "result.json")):
            continue  # ended: the store has it (its announcement is about to go)
        out.append((name, run_dir, framework))
    return out


def framework_of(src: Source, run_id: str, result: dict[str, Any] | None) -> str | None:
    """The framework of a run: from its result, else from its announcement (while it runs)."""
    if result is not None and isinstance(result.get("framework"), str):
        return str(result["framework"])
    found = live.announced(os.path.join(src.root, layout.STATE_DIR, live.LIVE_DIR, run_id))
    return found[1] if found is not None else None


def read_run(
    src: Source, conn: Reader | None, run_id: str
) -> tuple[dict[str, Any] | None, str | None]:
    """A run's result.json (or None while it runs) and its run folder (None if unknown)."""
    ref: str | None = None
    if conn is not None:
        row = conn.execute("SELECT result_ref FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        ref = row[0] if row else None
    run_dir = os.path.dirname(ref) if ref else None
    if run_dir is None:
        for rid, folder, _ in live_runs(src):
            if rid == run_id:
                run_dir = folder
        if run_dir is None:
            candidate = os.path.join(src.root, layout.STATE_DIR, "runs", run_id)
            run_dir = candidate if os.path.isdir(candidate) else None
    if run_dir is None:
        return None, None
    result_file = ref or os.path.join(run_dir, "result.json")
    try:
        with open(result_file, encoding="utf-8") as fh:
            data = json.load(fh)
        return (data if isinstance(data, dict) else None), run_dir
    except (OSError, ValueError):
        return None, run_dir


# The sessions the dashboard knows: those a hook event recorded (the sessions table) and those
# that only recorded runs (GREENLOOP_SESSION set, the MCP tools, scripts), one row each.
_KNOWN_SESSIONS = (
    "SELECT k.id AS id, MIN(k.first_seen) AS first_seen, MAX(k.last_seen) AS last_seen, "
    "MAX(k.harness) AS harness FROM ("
    " SELECT id, first_seen, last_seen, harness FROM sessions"
    " UNION ALL"
    " SELECT session_id, MIN(at), MAX(at), NULL FROM runs WHERE session_id IS NOT NULL GROUP BY session_id"
    ") k"
)


def sessions(
    conn: Reader | None, *, page: int = 0, size: int = PAGE_SIZE
) -> tuple[list[dict[str, Any]], bool]:
    """Sessions, most recently seen first (a hook event or a run), each with its run count and
    last run, its turn, interception and unresolved counts and the gate's last decision."""
    if conn is None:
        return [], False
    rows = conn.execute(
        "SELECT s.id, s.first_seen, s.last_seen, s.harness, "
        "(SELECT COUNT(*) FROM runs r WHERE r.session_id = s.id) AS runs, "
        "(SELECT r.run_id || ? || r.outcome FROM runs r WHERE r.session_id = s.id "
        " ORDER BY r.at DESC LIMIT 1) AS last_run, "
        "(SELECT COUNT(*) FROM turns t WHERE t.session_id = s.id) AS turns, "
        "(SELECT COUNT(*) FROM interceptions i WHERE i.session_id = s.id) AS interceptions, "
        "(SELECT COUNT(*) FROM unresolved u WHERE u.session_id = s.id AND u.cleared_at IS NULL) "
        "AS unresolved, "
        "(SELECT kind || ? || message FROM interceptions i WHERE i.session_id = s.id "
        " ORDER BY i.id DESC LIMIT 1) AS last_decision "
        f"FROM ({_KNOWN_SESSIONS} GROUP BY k.id) s ORDER BY s.last_seen DESC, s.id LIMIT ? OFFSET ?",
        ("\x1f", "\x1f", size + 1, max(page, 0) * size),
    ).fetchall()
    out = []
    for r in rows[:size]:
        d = dict(r)
        kind, _, message = (d.pop("last_decision") or "").partition("\x1f")
        d["last_kind"], d["last_message"] = kind or None, message
        run_id, _, run_outcome = (d.pop("last_run") or "").partition("\x1f")
        d["last_run_id"], d["last_run_outcome"] = run_id or None, run_outcome or None
        out.append(d)
    return out, len(rows) > size


class Verdict(NamedTuple):
    """The gate's verdict for one session as the store holds it (read, never decided here):
    whether it is unresolved and why, what it owes (with the run that made each test owed) and
    the acceptances a person recorded that apply to it."""

    unresolved: bool
    reason: str | None  # the open unresolved record's reason: owed, taken away, stale, not run, red
    holding: str | None  # the rule that holds the session's turn now (owed, taken away, red), if any
    why: str  # the gate's few words on it
    last_run: Any  # greenloop.closure.transitions.RunRecord | None: the run the gate judges
    owed_count: int  # owed tests the gate counts (acceptances counted out)
    owed: tuple[Any, ...]  # greenloop.closure.owed.OwedTest rows, failures first
    accepted: frozenset[str]  # owed tests a person's acceptance counts out
    acceptances: tuple[Any, ...]  # greenloop.state.evidence.Acceptance, newest first


def _schema_version(conn: Reader) -> int:
    version = getattr(conn, "version", None)  # a PostgreSQL ReadOnlyView knows its own
    if isinstance(version, int):
        return version
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _tables(conn: Reader) -> Any:
    """The store's own queries (greenloop.state.sessions) over the dashboard's read-only
    connection: the verdict is read the way the gate reads it, and only reads run on it."""
    from greenloop.state.sessions import SessionTables

    view = SessionTables()
    view.conn = conn  # type: ignore[assignment]
    view.clock = time.time
    return view


OWED_LISTED = 200
# Migration 4 added owed tests, acceptances and each unresolved record's reason.
EVIDENCE_SCHEMA = 4


def verdict(conn: Reader | None, session_id: str) -> Verdict | None:
    """The session's verdict, or None when the database predates the session evidence
    (schema 4: owed tests, acceptances, unresolved reasons)."""
    from greenloop.closure.owed import TAKEN_AWAY, OwedTest

    if conn is None or _schema_version(conn) < EVIDENCE_SCHEMA:
        return None
    tables = _tables(conn)
    state = tables.state(session_id)
    open_records = tables.unresolved_records(session_id)
    reason = next((r["reason"] for r in reversed(open_records) if r.get("reason")), None)
    rows = conn.execute(
        "SELECT test, reason, run_id, at, file, line, detail FROM owed WHERE session_id = ? "
        "ORDER BY CASE reason WHEN 'failed' THEN 0 ELSE 1 END, at, test LIMIT ?",
        (session_id, OWED_LISTED),
    ).fetchall()
    owed = tuple(OwedTest(str(r[0]), str(r[1]), str(r[2]), float(r[3]), r[4], r[5], r[6] or "") for r in rows)
    if not owed and state.owed:
        owed = tuple(state.owed)  # the workspace's runs' evidence, which this session uses
    acceptances = tuple(tables.acceptances(session_id=session_id))
    accepted_names = {a.test for a in acceptances}
    accepted = frozenset(o.test for o in owed if o.reason in TAKEN_AWAY and o.test in accepted_names)
    # The rules that need no look at the working tree (owed, taken away, red); whether files
    # changed since (stale, not run) is `greenloop check`'s to say: a page view reads no tree.
    from greenloop.closure.gate import _rule
    from greenloop.closure.messages import RULE_REASONS
    from greenloop.config import Config

    rule, why = _rule(state, Config())
    return Verdict(bool(state.unresolved), reason if state.unresolved else None,
                   RULE_REASONS.get(rule, rule) if rule else None, why, state.last_run,
                   int(state.owed_count), owed, accepted, acceptances)


def session_detail(conn: Reader | None, session_id: str) -> dict[str, Any] | None:
    """One session: its turns (each with its interceptions), unresolved records, the gate's
    verdict and its last runs. A session that only recorded runs (no hook event) has them."""
    if conn is None:
        return None
    row = conn.execute(f"{_KNOWN_SESSIONS} WHERE k.id = ? GROUP BY k.id", (session_id,)).fetchone()
    if row is None or row["id"] is None:
        return None
    turns = [dict(t) for t in conn.execute(
        "SELECT seq, turn_id, started_at, released_at FROM turns WHERE session_id = ? "
        "ORDER BY seq DESC LIMIT 200",
        (session_id,))]
    decisions: dict[int, list[dict[str, Any]]] = {}
    for i in conn.execute(
        "SELECT turn_seq, at, kind, run_id, harness, message FROM interceptions WHERE session_id = ? "
        "ORDER BY id", (session_id,)):
        decisions.setdefault(int(i["turn_seq"]), []).append(dict(i))
    for t in turns:
        t["decisions"] = decisions.get(int(t["seq"]), [])
    reason = ", reason" if _schema_version(conn) >= EVIDENCE_SCHEMA else ", NULL AS reason"
    unresolved = [dict(u) for u in conn.execute(
        f"SELECT turn_seq, run_id, at, cleared_at, cleared_by{reason} FROM unresolved WHERE session_id = ? "
        "ORDER BY id DESC LIMIT 200", (session_id,))]
    recent, _ = runs(conn, session=session_id, size=RUNS_ON_SESSION)
    (count,) = conn.execute("SELECT COUNT(*) FROM runs WHERE session_id = ?", (session_id,)).fetchone()
    return {"session": dict(row), "turns": turns, "unresolved": unresolved, "runs": recent,
            "run_count": int(count), "verdict": verdict(conn, session_id)}


# --------------------------------------------------------------------------------- bugs


class BugCard(NamedTuple):
    """One bug as the bug board shows it."""
    bug: Any  # greenloop.bugs.record.Bug
    seen: int  # runs that reported this bug's failure (its dedup count)


def _bug_log(src: Source) -> Any:
    if src.bugs is not None:
        return src.bugs
    from greenloop.bugs.log import BugLog, bug_log_path

    return BugLog(bug_log_path(src.project))


def _seen_counts(conn: Reader | None, names: set[str]) -> dict[str, int]:
    """How many stored runs failed each of `names` (one pass over the runs' failing lists)."""
    counts: dict[str, int] = {}
    if conn is None or not names:
        return counts
    for (failing,) in conn.execute("SELECT failing FROM runs WHERE failed > 0"):
        if not failing or failing == "[]":
            continue
        try:
            listed = json.loads(failing)
        except ValueError:
            continue
        for name in listed:
            if name in names:
                counts[name] = counts.get(name, 0) + 1
    return counts


def bug_board(src: Source, conn: Reader | None, per_status: int = PAGE_SIZE) -> dict[str, Any]:
    """Bugs by status, most recently updated first, `per_status` each, with dedup counts."""
    from greenloop.bugs.record import STATUSES

    if not os.path.isfile(_bug_log(src).path):
        return {"columns": {s: [] for s in STATUSES}, "totals": dict.fromkeys(STATUSES, 0), "warnings": []}
    fold = _bug_log(src).fold()
    columns: dict[str, list[Any]] = {s: [] for s in STATUSES}
    for b in fold.bugs:
        columns.setdefault(b.status, []).append(b)
    totals = {s: len(v) for s, v in columns.items()}
    shown = {s: sorted(v, key=lambda b: b.updated_at, reverse=True)[:per_status] for s, v in columns.items()}
    seen = _seen_counts(conn, {b.test_name for v in shown.values() for b in v})
    cards = {s: [BugCard(b, seen.get(b.test_name, 0)) for b in v] for s, v in shown.items()}
    return {"columns": cards, "totals": totals, "warnings": list(fold.warnings)}


def bug_detail(src: Source, conn: Reader | None, bug_id: str) -> Any:
    """A bug's whole history (greenloop.bugs.record.BugHistory) and its dedup count, or None."""
    from greenloop.bugs.record import BugNotFound

    try:
        history = _bug_log(src).show(bug_id)
    except (BugNotFound, OSError):
        return None
    return history, _seen_counts(conn, {history.bug.test_name}).get(history.bug.test_name, 0)


# ---------------------------------------------------------------------- integration runs


def _integration_dir(src: Source) -> Path:
    return Path(src.project) / "integration" / "runs"


def integration_runs(
    src: Source, *, page: int = 0, size: int = PAGE_SIZE
) -> tuple[list[dict[str, Any]], bool]:
    """Integration runs, newest first (their folder names sort by time)."""
    folder = _integration_dir(src)
    try:
        names = sorted((n for n in os.listdir(folder) if not n.startswith(".")), reverse=True)
    except OSError:
        return [], False
    out = []
    for name in names[page * size:(page + 1) * size]:
        try:
            data = json.loads((folder / name / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {"run_id": name, "ok": None}
        out.append(data if isinstance(data, dict) else {"run_id": name})
    return out, len(names) > (page + 1) * size


def integration_run(src: Source, run_id: str) -> dict[str, Any] | None:
    """One integration run: result, env, the HTTP trace by case, the process log's tail and the
    browser screenshots (paths relative to the run folder)."""
    folder = _integration_dir(src) / run_id
    if not folder.is_dir() or "/" in run_id or run_id.startswith("."):
        return None

    def load(name: str) -> Any:
        try:
            return json.loads((folder / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    trace: list[dict[str, Any]] = []
    try:
        with open(folder / "http-trace.ndjson", encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    trace.append(entry)
                if len(trace) >= 2000:
                    break
    except OSError:
        pass
    try:
        log_text = (folder / "process.log").read_text(encoding="utf-8", errors="replace")[-60_000:]
    except OSError:
        log_text = ""
    shots = sorted(str(p.relative_to(folder)) for p in folder.rglob("*.png"))
    return {"result": load("result.json") or {"run_id": run_id}, "env": load("env.json"),
            "trace": trace, "process_log": log_text, "screenshots": shots, "folder": str(folder)}
