"""The store's evidence tables: what each session owes (`owed`), its start and baseline
(`session_evidence`) and people's acceptances (`acceptances`). SQL both backends run.

A run's evidence is folded in when the run is recorded (`record_evidence`, pure rules in
greenloop.closure.evidence), in the run's own transaction, so the Stop hook only reads rows.
Writes are batched (a few statements however many tests a run names): a 2,000-test session
records a run in a few milliseconds.
"""

from __future__ import annotations

from greenloop import lite as json  # json's own C codec, without importing json
from greenloop.closure.owed import TAKEN_AWAY, OwedTest
from greenloop.state.tables import Tables

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any, NamedTuple

    from greenloop.closure.evidence import RunEvidence
else:
    from greenloop.lite import NamedTuple

__all__ = ["OWED_SHOWN", "WORKSPACE", "Acceptance", "EvidenceTables", "SessionStart"]

# The owed rows of runs no session claimed (workspace-level runs) are kept under this key.
WORKSPACE = ""
OWED_SHOWN = 20  # owed rows the gate reads (it names a few; the rest is a count)
_BATCH = 100  # rows per multi-row statement (8 parameters each: below every SQLite limit)
_OWED_COLUMNS = ("session_id", "test", "reason", "run_id", "at", "file", "line", "detail")


class Acceptance(NamedTuple):
    """A person accepted that a skipped or removed test need not run (`greenloop accept`)."""

    test: str
    reason: str
    by: str
    at: float
    session_id: str | None = None  # None: the whole workspace

    def to_json(self) -> dict[str, Any]:
        """The acceptance as JSON."""
        return {
            "test": self.test,
            "reason": self.reason,
            "by": self.by,
            "at": self.at,
            "session_id": self.session_id,
        }


class SessionStart(NamedTuple):
    """What the session looked like when it began: the working tree's fingerprint and marks
    (greenloop.closure.marks.snapshot), and the names its first whole-suite run passed."""

    at: float
    fingerprint: str | None = None
    marks: str | None = None
    baseline: tuple[str, ...] | None = None


# An owed row a person accepted does not count; only a taken-away test can be accepted.
_TAKEN_AWAY_SQL = "o.reason IN (" + ", ".join(f"'{r}'" for r in sorted(TAKEN_AWAY)) + ")"
_COVERS = "a.test = o.test AND (a.session_id IS NULL OR a.session_id = o.session_id)"
_NOT_ACCEPTED = f"NOT ({_TAKEN_AWAY_SQL} AND EXISTS (SELECT 1 FROM acceptances a WHERE {_COVERS}))"
_OWED_SELECT = "o.test, o.reason, o.run_id, o.at, o.file, o.line, o.detail"


def _owed_test(r: Sequence[Any]) -> OwedTest:
    return OwedTest(r[0], r[1], r[2], float(r[3]), r[4], r[5], r[6] or "")


def _suites(text: str | None) -> dict[str, list[str]]:
    """A {suite: [names]} column (an older flat list reads as one unnamed suite)."""
    data = json.loads(text) if text else {}
    if isinstance(data, list):
        return {"": [str(n) for n in data]}
    return {str(k): [str(n) for n in v] for k, v in data.items()} if isinstance(data, dict) else {}


def _rows(names: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(names), size):
        yield names[i : i + size]


class EvidenceTables(Tables):
    """The queries of owed tests, session starts and acceptances."""

    # ------------------------------------------------------------------ the session's start
    def session_start(self, session_id: str) -> SessionStart | None:
        """The session's start record, or None when none was taken yet."""
        row = self.conn.execute(
            "SELECT at, start_fingerprint, marks, baseline FROM session_evidence WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        suites = _suites(row[3])
        baseline = tuple(n for names in suites.values() for n in names) if suites else None
        return SessionStart(float(row[0]), row[1], row[2], baseline)

    def start_session_evidence(self, session_id: str, fingerprint: str | None, marks: str | None) -> bool:
        """Keep the session's start (the first one wins); True when this call recorded it."""
        cur = self.conn.execute(
            "INSERT INTO session_evidence (session_id, at, start_fingerprint, marks) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(session_id) DO NOTHING",
            (session_id, self.clock(), fingerprint, marks),
        )
        return cur.rowcount > 0

    # ------------------------------------------------------------------ owed tests
    def record_evidence(self, session_id: str, run_id: str, at: float, ev: RunEvidence) -> int:
        """Fold one run of the session into its owed tests (call inside the run's transaction);
        returns how many tests the session owes now (acceptances not counted out)."""
        from greenloop.closure.evidence import owed_after  # the rules: record time, never the Stop path

        conn = self.conn
        row = conn.execute(
            "SELECT guarded, baseline FROM session_evidence WHERE session_id = ?", (session_id,)
        ).fetchone()
        # Both are {suite: [names]}: what each suite's runs made the session guard, and what
        # each suite's first whole-suite run passed.
        by_suite: dict[str, list[str]] = _suites(row[0] if row is not None else None)
        baselines = _suites(row[1] if row is not None else None)
        guarded = frozenset(n for names in by_suite.values() for n in names)
        mine = frozenset(by_suite.get(ev.suite, ()))
        owed = {r.test: r for r in self._owed_rows(session_id)}
        write, clear, more = owed_after(owed, guarded, ev, run_id, at, mine)
        new = set(more) - mine
        if ev.suite not in baselines and ev.whole_suite and ev.names_complete:
            baselines[ev.suite] = list(ev.passed)  # the suite's first whole-suite run: guarded from now on
            new |= set(ev.passed) - mine
        if row is None:
            conn.execute(
                "INSERT INTO session_evidence (session_id, at) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO NOTHING",
                (session_id, at),
            )
        if new:
            by_suite[ev.suite] = sorted(mine | new)
            conn.execute(
                "UPDATE session_evidence SET guarded = ?, baseline = ? WHERE session_id = ?",
                (json.dumps(by_suite), json.dumps(baselines) if baselines else None, session_id),
            )
        for chunk in _rows(clear, _BATCH * 8):
            conn.execute(
                f"DELETE FROM owed WHERE session_id = ? AND test IN ({', '.join('?' * len(chunk))})",
                (session_id, *chunk),
            )
        for i in range(0, len(write), _BATCH):
            part = write[i : i + _BATCH]
            values = ", ".join("(?, ?, ?, ?, ?, ?, ?, ?)" for _ in part)
            params: list[Any] = []
            for o in part:
                params += [session_id, o.test, o.reason, o.run_id, o.at, o.file, o.line, o.detail]
            conn.execute(
                f"INSERT INTO owed ({', '.join(_OWED_COLUMNS)}) VALUES {values} "
                "ON CONFLICT(session_id, test) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in _OWED_COLUMNS[2:]),
                params,
            )
        return len(owed) - len(clear) + sum(1 for o in write if o.test not in owed)

    def _owed_rows(self, session_id: str) -> list[OwedTest]:
        rows = self.conn.execute(
            "SELECT test, reason, run_id, at, file, line, detail FROM owed WHERE session_id = ?",
            (session_id,),
        ).fetchall()
        return [OwedTest(r[0], r[1], r[2], float(r[3]), r[4], r[5], r[6] or "") for r in rows]

    def owed(
        self, session_id: str, *, limit: int = OWED_SHOWN, since: float | None = None
    ) -> tuple[tuple[OwedTest, ...], int]:
        """The tests the session owes (acceptances counted out), failures first then oldest
        first, at most `limit`; and how many there are in all. `since`: only rows made owed
        from then on (the workspace's rows, as a session that uses them sees them)."""
        where = f"FROM owed o WHERE o.session_id = ? AND {_NOT_ACCEPTED}"
        params: tuple[Any, ...] = (session_id,)
        if since is not None:
            where += " AND o.at >= ?"
            params = (session_id, since)
        (count,) = self.conn.execute(f"SELECT COUNT(*) {where}", params).fetchone()
        if not count:
            return (), 0
        rows = self.conn.execute(
            f"SELECT o.test, o.reason, o.run_id, o.at, o.file, o.line, o.detail {where} "
            "ORDER BY CASE o.reason WHEN 'failed' THEN 0 ELSE 1 END, o.at, o.test LIMIT ?",
            (*params, limit),
        ).fetchall()
        return tuple(OwedTest(r[0], r[1], r[2], float(r[3]), r[4], r[5], r[6] or "") for r in rows), int(
            count
        )

    # ------------------------------------------------------------------ acceptances
    def add_acceptance(self, test: str, reason: str, by: str, *, session_id: str | None = None) -> Acceptance:
        """Record that a person accepted a skipped or removed test (workspace-wide, or for one session)."""
        if not test.strip() or not reason.strip() or not by.strip():
            raise ValueError("an acceptance needs a test, a reason and who accepted it")
        at = self.clock()
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO acceptances (session_id, test, reason, accepted_by, at) VALUES (?, ?, ?, ?, ?)",
                (session_id, test, reason, by, at),
            )
        return Acceptance(test, reason, by, at, session_id)

    def acceptances(self, *, session_id: str | None = None, limit: int = 200) -> list[Acceptance]:
        """The acceptances, newest first: all of them, or those that apply to one session
        (its own and the workspace-wide ones)."""
        sql = "SELECT test, reason, accepted_by, at, session_id FROM acceptances"
        params: list[Any] = []
        if session_id is not None:
            sql += " WHERE session_id IS NULL OR session_id = ?"
            params.append(session_id)
        rows = self.conn.execute(sql + " ORDER BY at DESC, id DESC LIMIT ?", (*params, limit)).fetchall()
        return [Acceptance(r[0], r[1], r[2], float(r[3]), r[4]) for r in rows]

    def accepted_owed(
        self, session_id: str, *, since: float | None = None
    ) -> list[tuple[OwedTest, Acceptance]]:
        """The taken-away tests the session would owe but a person accepted, each with the newest
        acceptance that covers it, oldest row first (what `check` shows next to the owed ones).
        `since`: as in `owed`."""
        sql = (
            f"SELECT {_OWED_SELECT}, a.reason, a.accepted_by, a.at, a.session_id "
            f"FROM owed o JOIN acceptances a ON {_COVERS} "
            f"WHERE o.session_id = ? AND {_TAKEN_AWAY_SQL}"
        )
        params: tuple[Any, ...] = (session_id,)
        if since is not None:
            sql += " AND o.at >= ?"
            params = (session_id, since)
        rows = self.conn.execute(sql + " ORDER BY a.at DESC, a.id DESC", params).fetchall()
        found: dict[str, tuple[OwedTest, Acceptance]] = {}
        for r in rows:
            if r[0] not in found:
                found[r[0]] = (_owed_test(r), Acceptance(r[0], r[7], r[8], float(r[9]), r[10]))
        return sorted(found.values(), key=lambda pair: (pair[0].at, pair[0].test))

    def taken_away(
        self,
        *,
        test: str | None = None,
        session_id: str | None = None,
        failed: bool = False,
        limit: int = 200,
    ) -> list[tuple[str, OwedTest]]:
        """Owed rows whose reason is taken away (skipped, removed, .only), accepted or not, with
        the key they are kept under (a session id, or WORKSPACE for the workspace's runs), oldest
        first: what a person may accept. `test` and `session_id` narrow them; `failed` gives the
        rows owed because the test failed instead (which no one may accept)."""
        where = "o.reason = 'failed'" if failed else _TAKEN_AWAY_SQL
        sql = f"SELECT o.session_id, {_OWED_SELECT} FROM owed o WHERE {where}"
        params: list[Any] = []
        if test is not None:
            sql += " AND o.test = ?"
            params.append(test)
        if session_id is not None:
            sql += " AND o.session_id = ?"
            params.append(session_id)
        rows = self.conn.execute(sql + " ORDER BY o.at, o.test LIMIT ?", (*params, limit)).fetchall()
        return [(str(r[0]), _owed_test(r[1:])) for r in rows]
