"""The store's record tables: runs, jobs and sandbox mode events (SQL both backends run)."""

from __future__ import annotations

from greenloop import lite as json  # json's own C codec, without importing json
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.state.backend import column_names
from greenloop.state.evidence import WORKSPACE, EvidenceTables

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from greenloop.closure.evidence import RunEvidence

__all__ = ["MAX_FAILING_NAMES", "JobRow", "RecordTables", "run_from_row"]

MAX_FAILING_NAMES = 50
_RUN_COLUMNS = (
    "run_id",
    "session_id",
    "at",
    "ok",
    "outcome",
    "total",
    "passed",
    "failed",
    "skipped",
    "failing",
    "fingerprint",
    "framework",
    "command",
    "source",
    "exit_code",
    "result_ref",
    "reason",
    "selection",
    "marks",
)
# Recording a run id again replaces its row (an upsert both SQLite and PostgreSQL accept).
_RECORD_RUN = (
    f"INSERT INTO runs ({', '.join(_RUN_COLUMNS)}) VALUES ({', '.join('?' * len(_RUN_COLUMNS))}) "
    "ON CONFLICT(run_id) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _RUN_COLUMNS[1:])
)
_JOB_FIELDS = frozenset(
    {"status", "pid", "token", "ended_at", "run_id", "ok", "result", "error", "log_path", "host"}
)


if TYPE_CHECKING:
    _JobBase = dict[str, Any]
else:
    _JobBase = dict


class JobRow(_JobBase):
    """A row of the jobs table (a plain dict with attribute-free access; see jobs.py)."""


def run_from_row(d: dict[str, Any]) -> RunRecord:
    """A RunRecord from one `runs` row."""
    try:
        failing = tuple(str(x) for x in json.loads(d.get("failing") or "[]"))
    except ValueError:
        failing = ()
    return RunRecord(
        run_id=str(d["run_id"]),
        ok=bool(d["ok"]),
        at=float(d["at"]),
        outcome=str(d["outcome"]),
        session_id=d.get("session_id"),
        summary=Counts(
            total=int(d.get("total") or 0),
            passed=int(d.get("passed") or 0),
            failed=int(d.get("failed") or 0),
            skipped=int(d.get("skipped") or 0),
        ),
        failing=failing,
        fingerprint=d.get("fingerprint"),
        framework=d.get("framework"),
        command=str(d.get("command") or ""),
        source=str(d.get("source") or "run"),
        exit_code=d.get("exit_code"),
        result_ref=d.get("result_ref"),
        reason=d.get("reason"),
        selection=d.get("selection"),
    )


class RecordTables(EvidenceTables):
    """The queries of runs, jobs and sandbox events, written once for both backends."""
    # ------------------------------------------------------------------ runs
    def record_run(self, run: RunRecord, evidence: RunEvidence | None = None) -> None:
        """Record a run, and fold its `evidence` into its session's owed tests; a passing run
        clears the unresolved records it answers (for a session: once it owes nothing)."""
        failing = json.dumps(list(run.failing[:MAX_FAILING_NAMES]))
        marks = None
        if evidence is not None and evidence.marks is not None:
            marks = json.dumps([m.to_json() for m in evidence.marks])
        s = run.summary
        with self.transaction() as conn:
            conn.execute(
                _RECORD_RUN,
                (
                    run.run_id,
                    run.session_id,
                    run.at,
                    int(run.ok),
                    run.outcome,
                    s.total,
                    s.passed,
                    s.failed,
                    s.skipped,
                    failing,
                    run.fingerprint,
                    run.framework,
                    run.command,
                    run.source,
                    run.exit_code,
                    run.result_ref,
                    run.reason,
                    run.selection,
                    marks,
                ),
            )
            owes = 0
            if evidence is not None:
                # A run no session claimed owes for the workspace: the sessions that use it
                # (state(), effective_run) read those rows.
                key = run.session_id if run.session_id is not None else WORKSPACE
                owes = self.record_evidence(key, run.run_id, run.at, evidence)
            if not run.ok or owes:
                return
            if run.session_id is not None:
                conn.execute(
                    "UPDATE unresolved SET cleared_at = ?, cleared_by = ? "
                    "WHERE session_id = ? AND cleared_at IS NULL",
                    (run.at, run.run_id, run.session_id),
                )
            else:
                # A workspace run answers the sessions that have no run of their own.
                conn.execute(
                    "UPDATE unresolved SET cleared_at = ?, cleared_by = ? WHERE cleared_at IS NULL "
                    "AND session_id NOT IN "
                    "(SELECT DISTINCT session_id FROM runs WHERE session_id IS NOT NULL) "
                    "AND session_id IN (SELECT id FROM sessions WHERE first_seen <= ?)",
                    (run.at, run.run_id, run.at),
                )

    def attach_run(self, run_id: str, session_id: str) -> RunRecord | None:
        """Give a workspace-level run (no session) to `session_id`; returns the run as it now stands.

        A hook that watched the agent start a greenloop run (a shell `greenloop run`, an MCP
        `test_run`) knows its session even when the run could not tell it: the harness exported
        no session id and the process tree named none (greenloop.closure.session). Such a run is moved
        to the session, and a passing one clears the session's unresolved records as
        `record_run` would. A run of another session is left alone (None); an unknown id too.
        """
        with self.transaction() as conn:
            # FOR UPDATE is PostgreSQL's way to hold the row; SQLite's IMMEDIATE holds it all.
            lock = " FOR UPDATE" if conn.kind == "postgres" else ""
            cur = conn.execute("SELECT * FROM runs WHERE run_id = ?" + lock, (run_id,))
            row = cur.fetchone()
            if row is None:
                return None
            run = run_from_row(dict(zip(column_names(cur), row, strict=True)))
            if run.session_id == session_id:
                return run
            if run.session_id is not None:
                return None
            conn.execute("UPDATE runs SET session_id = ? WHERE run_id = ?", (session_id, run_id))
            if run.ok:
                conn.execute(
                    "UPDATE unresolved SET cleared_at = ?, cleared_by = ? "
                    "WHERE session_id = ? AND cleared_at IS NULL",
                    (run.at, run.run_id, session_id),
                )
            return run._replace(session_id=session_id)

    def latest_run(self, *, session_id: str | None, since: float | None = None) -> RunRecord | None:
        """The latest run of a session, or (session_id None) the latest workspace-level run."""
        params: list[Any] = []
        if session_id is None:
            sql = "SELECT * FROM runs WHERE session_id IS NULL"
        else:
            sql, params = "SELECT * FROM runs WHERE session_id = ?", [session_id]
        if since is not None:
            sql += " AND at >= ?"
            params.append(since)
        cur = self.conn.execute(sql + " ORDER BY at DESC, rowid DESC LIMIT 1", params)
        row = cur.fetchone()
        if row is None:
            return None
        return run_from_row(dict(zip(column_names(cur), row, strict=True)))

    def runs(self, *, session_id: str | None = None, limit: int = 50) -> list[RunRecord]:
        """The newest runs first, of one session or of all."""
        if session_id is None:
            cur = self.conn.execute("SELECT * FROM runs ORDER BY at DESC, rowid DESC LIMIT ?", (limit,))
        else:
            cur = self.conn.execute(
                "SELECT * FROM runs WHERE session_id = ? ORDER BY at DESC, rowid DESC LIMIT ?",
                (session_id, limit),
            )
        names = column_names(cur)
        return [run_from_row(dict(zip(names, r, strict=True))) for r in cur.fetchall()]

    # ------------------------------------------------------------------ jobs
    def add_job(self, job_id: str, workspace: str, session_id: str | None, kwargs: dict[str, Any]) -> None:
        """Record a new background job as starting."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs (job_id, workspace, session_id, status, created_at, kwargs) "
                "VALUES (?, ?, ?, 'starting', ?, ?)",
                (job_id, workspace, session_id, self.clock(), json.dumps(kwargs)),
            )

    def update_job(self, job_id: str, **fields: Any) -> None:
        """Update a job's row with the given columns."""
        bad = set(fields) - _JOB_FIELDS
        if bad:
            raise ValueError(f"unknown job fields: {sorted(bad)}")
        if not fields:
            return
        cols = ", ".join(f"{k} = ?" for k in fields)
        with self.transaction() as conn:
            conn.execute(f"UPDATE jobs SET {cols} WHERE job_id = ?", (*fields.values(), job_id))

    def finish_job_if_running(self, job_id: str, status: str, error: str) -> bool:
        """Mark a job ended unless it already ended (a race with its worker); True if marked."""
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE jobs SET status = ?, error = ?, ended_at = ? "
                "WHERE job_id = ? AND status IN ('starting', 'running')",
                (status, error, self.clock(), job_id),
            )
            return cur.rowcount > 0

    def job(self, job_id: str) -> JobRow | None:
        """One job's row, or None."""
        cur = self.conn.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        row = cur.fetchone()
        if row is None:
            return None
        return JobRow(zip(column_names(cur), row, strict=True))

    # ------------------------------------------------------------------ sandbox modes
    def record_sandbox_mode(self, session_id: str, mode: str) -> None:
        """A sandbox/mode event for a session (the sandbox policy reads the latest)."""
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO sandbox_modes (session_id, mode, at) VALUES (?, ?, ?)",
                (session_id, mode, self.clock()),
            )

    def latest_sandbox_mode(self, session_id: str) -> str | None:
        """The sandbox mode the session asked for last, or None."""
        row = self.conn.execute(
            "SELECT mode FROM sandbox_modes WHERE session_id = ? ORDER BY id DESC LIMIT 1", (session_id,)
        ).fetchone()
        return None if row is None else str(row[0])
