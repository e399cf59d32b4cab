"""Closure state of one agent session and its pure transitions.

A session has a current turn, a count of interceptions in that turn (and the rule of each),
an unresolved record (set when a turn was released, cleared by a later passing run that
leaves nothing owed), a last recorded run, and its evidence: the tests it owes and the
working tree's fingerprint at its start (greenloop.closure.evidence).
Nothing here touches the disk: store.py loads a `ClosureState` and gate.py decides on it.
The transitions below (new_turn, after_steer, after_release, after_run) state the rules in
pure form; store.py does not call them but writes the same changes as SQL rows (turns,
interceptions, unresolved, runs), and the tests hold both to the same rules.

The records here (and the gate's, config's and the hook adapters') are immutable typed
NamedTuples rather than dataclasses: they sit on the Stop hook's import path, which must stay
within 1.5x a bare interpreter start (docs/closure-gate.md, Speed), and `dataclasses` alone (with `inspect`)
costs a noticeable share of that budget.
"""

from __future__ import annotations

from greenloop.closure.owed import OwedTest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "ClosureState",
    "Counts",
    "RunRecord",
    "after_release",
    "after_run",
    "after_steer",
    "effective_run",
    "iso",
    "new_turn",
]


def iso(t: float) -> str:
    """An epoch time as an ISO 8601 UTC string with milliseconds (greenloop.timefmt.iso; loaded
    on first use: the Stop hook's path writes no timestamp)."""
    from greenloop.timefmt import iso as to_iso

    return to_iso(t)


class Counts(NamedTuple):
    """A run's test counts (the same four numbers as model.Summary)."""

    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, summary: Any) -> Counts:
        """From any record with the four count attributes (model.Summary, ParseResult.summary)."""
        return cls(int(summary.total), int(summary.passed), int(summary.failed), int(summary.skipped))

    def to_json(self) -> dict[str, Any]:
        """The run record as JSON."""
        return {"total": self.total, "passed": self.passed, "failed": self.failed, "skipped": self.skipped}


class RunRecord(NamedTuple):
    """What the closure state keeps of one run: enough to decide and to explain."""

    run_id: str
    ok: bool
    at: float  # epoch seconds when the run was recorded
    outcome: str = "red"  # green | red | broken
    session_id: str | None = None
    summary: Counts = Counts()
    failing: tuple[str, ...] = ()  # names of failing tests (bounded)
    fingerprint: str | None = None  # the working tree when the run was recorded
    framework: str | None = None
    command: str = ""
    source: str = "run"  # run | job | hook (a run the agent made itself, parsed from its output)
    exit_code: int | None = None
    result_ref: str | None = None
    reason: str | None = None  # for broken runs: timed out, crashed, no tests ran
    # None: the whole suite; else how it was narrowed (target, last_failed, command, shard)
    selection: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The closure state as JSON."""
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "at": iso(self.at),
            "outcome": self.outcome,
            "session_id": self.session_id,
            "summary": self.summary.to_json(),
            "failing": list(self.failing),
            "fingerprint": self.fingerprint,
            "framework": self.framework,
            "command": self.command,
            "source": self.source,
            "exit_code": self.exit_code,
            "result_ref": self.result_ref,
            "reason": self.reason,
            "selection": self.selection,
        }


class ClosureState(NamedTuple):
    """Everything the gate reads for one session."""

    session_id: str
    turn_seq: int = 0  # 0 = no turn seen yet; each new turn adds one
    turn_id: str | None = None  # the harness's own turn id, when it has one
    intercepts_this_turn: int = 0
    released_this_turn: bool = False
    unresolved: bool = False
    last_run: RunRecord | None = None
    first_seen: float | None = None
    # The session's evidence (greenloop.closure.evidence): the tests it owes (the first few)
    # and how many; the working tree's fingerprint at its start; the rule of each steer of
    # this turn (owed, red, stale, not_run); the fingerprint now, when the gate took one.
    owed: tuple[OwedTest, ...] = ()
    owed_count: int = 0
    start_fingerprint: str | None = None
    steered: tuple[str, ...] = ()
    fingerprint_now: str | None = None
    # `release = "affected"|"full"`: whether a green run of the kind it needs recorded the tree
    # as it is now (None: not asked, the session changed nothing, or the release needs no more)
    covered: bool | None = None
    release: str = ""  # the release that was asked about ("affected" or "full"), with `covered`


def effective_run(
    session_run: RunRecord | None, workspace_run: RunRecord | None, first_seen: float | None
) -> RunRecord | None:
    """The run a session's gate uses: its own latest run; when there is none, or when a *red*
    workspace-level run (one no session claimed) came after it, the latest workspace-level run
    made since the session's first hook event.

    A red run the agent made where greenloop could not tell its session must still hold the
    turn (the gate never fails open on a recorded red run); a green workspace run does not
    outrank the session's own red, since nothing says it was this agent's.
    """
    if workspace_run is None or first_seen is None or workspace_run.at < first_seen:
        return session_run
    if session_run is None or (not workspace_run.ok and workspace_run.at > session_run.at):
        return workspace_run
    return session_run


def new_turn(state: ClosureState, turn_id: str | None = None) -> ClosureState:
    """A new turn gets a new budget; the unresolved record survives (it is a record, not a switch)."""
    return state._replace(
        turn_seq=state.turn_seq + 1, turn_id=turn_id, intercepts_this_turn=0, released_this_turn=False
    )


def after_steer(state: ClosureState) -> ClosureState:
    """The state after the gate sent the agent back: one more interception used in this turn."""
    return state._replace(intercepts_this_turn=state.intercepts_this_turn + 1)


def after_release(state: ClosureState) -> ClosureState:
    """The state after the gate let a red turn end: the session is recorded as unresolved."""
    return state._replace(released_this_turn=True, unresolved=True)


def after_run(state: ClosureState, run: RunRecord) -> ClosureState:
    """A recorded run becomes the last run; a passing one clears the unresolved record."""
    return state._replace(last_run=run, unresolved=state.unresolved and not run.ok)
