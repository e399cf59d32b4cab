"""The store's session tables: sessions, turns, interceptions, unresolved records and
process-tree bindings, and the closure state the gate reads from them (SQL both backends run)."""

from __future__ import annotations

from greenloop.closure.transitions import ClosureState, effective_run
from greenloop.state.bindings import bound_session_in
from greenloop.state.evidence import WORKSPACE
from greenloop.state.records import RecordTables

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["SessionTables"]


class SessionTables(RecordTables):
    """The queries of sessions, turns, interceptions, unresolved records and process-tree bindings."""
    # ------------------------------------------------------------------ sessions and turns
    def touch_session(self, session_id: str, harness: str | None = None) -> float:
        """Record a hook event for the session; returns its first_seen time.

        In PostgreSQL the upsert also takes the session row's lock until the transaction
        ends: every gate transaction starts here, so one session's decisions never overlap."""
        now = self.clock()
        self.conn.execute(
            "INSERT INTO sessions (id, first_seen, last_seen, harness) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET last_seen = excluded.last_seen, "
            "harness = COALESCE(excluded.harness, sessions.harness)",
            (session_id, now, now, harness),
        )
        row = self.conn.execute("SELECT first_seen FROM sessions WHERE id = ?", (session_id,)).fetchone()
        return float(row[0])

    def current_turn(self, session_id: str) -> tuple[int, str | None, float | None]:
        """(turn number, turn id, started at) of the session's current turn."""
        row = self.conn.execute(
            "SELECT seq, turn_id, released_at FROM turns WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return 0, None, None
        return int(row[0]), row[1], row[2]

    def begin_turn(self, session_id: str, turn_id: str | None = None) -> int:
        """Start a new turn (a new budget); returns its sequence number."""
        seq = self.current_turn(session_id)[0] + 1
        self.conn.execute(
            "INSERT INTO turns (session_id, seq, turn_id, started_at) VALUES (?, ?, ?, ?)",
            (session_id, seq, turn_id, self.clock()),
        )
        return seq

    def add_interception(
        self,
        session_id: str,
        turn_seq: int,
        kind: str,
        run_id: str | None,
        message: str,
        harness: str | None,
        rule: str | None = None,
    ) -> None:
        """Record that the gate sent the agent back (or released it) in this turn, and by which
        rule (owed, red, stale, not_run)."""
        self.conn.execute(
            "INSERT INTO interceptions (session_id, turn_seq, at, kind, run_id, harness, message, rule) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, turn_seq, self.clock(), kind, run_id, harness, message, rule),
        )

    def mark_released(
        self, session_id: str, turn_seq: int, run_id: str | None, reason: str | None = None
    ) -> None:
        """The turn ended red after its budget: record the session unresolved."""
        now = self.clock()
        if turn_seq == 0:
            # A stop with no turn seen: give it a turn row so the release is remembered.
            self.conn.execute(
                "INSERT INTO turns (session_id, seq, turn_id, started_at) VALUES (?, 0, NULL, ?) "
                "ON CONFLICT DO NOTHING",
                (session_id, now),
            )
        self.conn.execute(
            "UPDATE turns SET released_at = ? WHERE session_id = ? AND seq = ?", (now, session_id, turn_seq)
        )
        self.conn.execute(
            "INSERT INTO unresolved (session_id, turn_seq, run_id, at, reason) VALUES (?, ?, ?, ?, ?)",
            (session_id, turn_seq, run_id, now, reason),
        )

    def last_steer(self, session_id: str, turn_seq: int) -> str:
        """The message of the turn's latest steer ("" when the turn has none)."""
        row = self.conn.execute(
            "SELECT message FROM interceptions WHERE session_id = ? AND turn_seq = ? AND kind = 'steer' "
            "ORDER BY id DESC LIMIT 1",
            (session_id, turn_seq),
        ).fetchone()
        return "" if row is None else str(row[0])

    def interceptions(self, session_id: str) -> list[dict[str, Any]]:
        """Every interception of the session, oldest first."""
        rows = self.conn.execute(
            "SELECT turn_seq, at, kind, run_id, harness, message FROM interceptions "
            "WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
        keys = ("turn_seq", "at", "kind", "run_id", "harness", "message")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def unresolved_records(self, session_id: str, *, open_only: bool = True) -> list[dict[str, Any]]:
        """The session's unresolved records (open ones only, unless asked)."""
        sql = (
            "SELECT turn_seq, run_id, at, cleared_at, cleared_by, reason FROM unresolved WHERE session_id = ?"
        )
        if open_only:
            sql += " AND cleared_at IS NULL"
        rows = self.conn.execute(sql + " ORDER BY id", (session_id,)).fetchall()
        keys = ("turn_seq", "run_id", "at", "cleared_at", "cleared_by", "reason")
        return [dict(zip(keys, r, strict=True)) for r in rows]

    def state(self, session_id: str, *, first_seen: float | None = None) -> ClosureState:
        """The closure state of a session as the gate sees it (no writes)."""
        if first_seen is None:
            row = self.conn.execute("SELECT first_seen FROM sessions WHERE id = ?", (session_id,)).fetchone()
            first_seen = None if row is None else float(row[0])
        seq, turn_id, released_at = self.current_turn(session_id)
        steered = tuple(
            str(r[0] or "red")
            for r in self.conn.execute(
                "SELECT rule FROM interceptions WHERE session_id = ? AND turn_seq = ? AND kind = 'steer' "
                "ORDER BY id",
                (session_id, seq),
            ).fetchall()
        )
        (open_unresolved, last_unresolved) = self.conn.execute(
            "SELECT COUNT(*), MAX(at) FROM unresolved WHERE session_id = ? AND cleared_at IS NULL",
            (session_id,),
        ).fetchone()
        run = effective_run(
            self.latest_run(session_id=session_id),
            self.latest_run(session_id=None, since=first_seen) if first_seen is not None else None,
            first_seen,
        )
        if run is not None and run.session_id is None and first_seen is not None:
            owed, owed_count = self.owed(WORKSPACE, since=first_seen)  # the workspace run's evidence
        else:
            owed, owed_count = self.owed(session_id)
        start = self.session_start(session_id)
        return ClosureState(
            session_id=session_id,
            turn_seq=seq,
            turn_id=turn_id,
            intercepts_this_turn=len(steered),
            released_this_turn=released_at is not None,
            # A green run that owes nothing answers a record made before it (a workspace run, which
            # record_run could not tie to this session); a record made after it (stale) stands.
            unresolved=bool(open_unresolved)
            and not (run is not None and run.ok and not owed_count and run.at >= float(last_unresolved)),
            last_run=run,
            first_seen=first_seen,
            owed=owed,
            owed_count=owed_count,
            start_fingerprint=None if start is None else start.fingerprint,
            steered=steered,
        )

    def green_run_of_tree(self, session_id: str, fingerprint: str, kinds: tuple[str, ...],
                          since: float | None = None) -> bool:
        """Whether a green run of the session (or a workspace-level one made since `since`, its
        first event) recorded the working tree `fingerprint`, of one of `kinds`: "whole" (the
        whole suite: no selection) and "affected" (an --affected run)."""
        picked = [k for k in kinds if k != "whole"]
        wanted = " OR ".join(["selection IS NULL"] * ("whole" in kinds) + ["selection = ?"] * len(picked))
        who = "session_id = ?" if since is None else "(session_id = ? OR (session_id IS NULL AND at >= ?))"
        row = self.conn.execute(
            f"SELECT 1 FROM runs WHERE {who} AND ok = 1 AND fingerprint = ? AND ({wanted}) LIMIT 1",
            (session_id, *(() if since is None else (since,)), fingerprint, *picked),
        ).fetchone()
        return row is not None

    # ------------------------------------------------------------------ process-tree bindings
    def bind(
        self, harness_proc: str, session_id: str, harness: str | None, workspace: str, chain: str
    ) -> None:
        """A hook of `session_id` ran under the harness process `harness_proc` (ptree.proc_key).

        One row per (harness process, session), refreshed on every hook event; `chain` keeps
        the hook's ancestors (JSON) for diagnosis. Callers run it inside their transaction or
        alone (one statement is atomic by itself)."""
        self.conn.execute(
            "INSERT INTO bindings (harness_proc, session_id, harness, workspace, chain, at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(harness_proc, session_id) DO UPDATE SET "
            "harness = excluded.harness, workspace = excluded.workspace, chain = excluded.chain, "
            "at = excluded.at",
            (harness_proc, session_id, harness, workspace, chain, self.clock()),
        )

    def bound_session(self, procs: list[str]) -> tuple[str, str | None, str] | None:
        """The session bound to the nearest of `procs` (ptree keys, nearest first) that any hook
        recorded as its harness: (session_id, harness, harness_proc); the most recently
        recorded session wins when one harness process served several. None: no binding."""
        return bound_session_in(self.conn, procs)

    def forget_bindings(self, before: float) -> None:
        """Drop bindings not refreshed since `before` (their harness processes are long gone)."""
        self.conn.execute("DELETE FROM bindings WHERE at < ?", (before,))

    # ------------------------------------------------------------------ notes said once
    def first_said(self, session_id: str | None, keys: list[str]) -> set[str]:
        """Of `keys` (notes that stay true across runs), those not yet said in this session,
        now recorded as said. `session_id` None: the workspace's runs outside any session."""
        sid = session_id or ""
        new: set[str] = set()
        with self.transaction() as conn:
            for key in dict.fromkeys(keys):
                cur = conn.execute(
                    "INSERT INTO notes_said (session_id, note_key, at) VALUES (?, ?, ?) "
                    "ON CONFLICT DO NOTHING",
                    (sid, key, self.clock()),
                )
                if cur.rowcount:
                    new.add(key)
        return new
