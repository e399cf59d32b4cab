"""`greenloop check` and the tool `test_closure_check`: the verdict the gate would give now,
what the session owes and why, and notes.

`satisfied` is false while the session owes a test (failed and not since passed, or taken
away), its last run is red, files changed since its last green run (`stale_green = "steer"`),
or it changed files and ran nothing (`require_run`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any, NamedTuple

from greenloop.closure.config_guard import loosening_layers, session_config
from greenloop.closure.gate import _rule, needs_coverage, needs_fingerprint
from greenloop.closure.messages import MAX_NAMED, why_owed
from greenloop.closure.owed import OwedTest
from greenloop.closure.store import Store
from greenloop.closure.transitions import ClosureState, RunRecord, iso
from greenloop.config import Config, Layer
from greenloop.state.evidence import WORKSPACE, Acceptance
from greenloop.state.url import configured

__all__ = ["ClosureCheck", "closure_check"]


class ClosureCheck(NamedTuple):
    """`test_closure_check`: may this session end its turn, and if not, what does it owe?"""

    session_id: str | None
    satisfied: bool
    last_run: RunRecord | None
    intercepts_this_turn: int
    budget: int
    unresolved: bool
    notes: tuple[str, ...] = ()
    owed: tuple[OwedTest, ...] = ()  # the first few, failures first
    owed_count: int = 0
    # the rule that holds the turn: owed, taken_away, red, stale, not_run, uncovered; "" when none
    holding: str = ""
    unresolved_reason: str | None = None  # why the open unresolved record was made (owed, stale, …)
    # The taken-away tests the session would owe but a person accepted, with who, when and why.
    accepted: tuple[tuple[OwedTest, Acceptance], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The closure check as JSON (what `greenloop check --json` and the MCP tool return)."""
        run = self.last_run
        return {
            "session_id": self.session_id,
            "satisfied": self.satisfied,
            "last_run": None
            if run is None
            else {
                "run_id": run.run_id,
                "ok": run.ok,
                "at": iso(run.at),
                "outcome": run.outcome,
                "summary": run.summary.to_json(),
                "failing": list(run.failing),
                "source": run.source,
                "session_id": run.session_id,
            },
            "intercepts_this_turn": self.intercepts_this_turn,
            "budget": self.budget,
            "unresolved": self.unresolved,
            "notes": list(self.notes),
            "owed": [{**o.to_json(), "at": iso(o.at), "why": why_owed(o)} for o in self.owed],
            "owed_count": self.owed_count,
            "holding": self.holding,
            "unresolved_reason": self.unresolved_reason,
            "accepted": [
                {
                    **o.to_json(),
                    "at": iso(o.at),
                    "why": why_owed(o),
                    "accepted_by": a.by,
                    "accepted_at": iso(a.at),
                    "accepted_reason": a.reason,
                    "accepted_for": a.session_id,
                }
                for o, a in self.accepted
            ],
        }


def _sandbox_note(result_ref: str | None) -> str | None:
    """The note of a run whose sandbox was asked for (auto) but not enforced, from its result.json."""
    if not result_ref:
        return None
    try:
        with open(result_ref, encoding="utf-8") as fh:
            data = json.load(fh)
        note = data.get("sandbox", {}).get("note")
    except (OSError, ValueError, AttributeError):
        return None
    return str(note) if note else None


def _run_notes(run: RunRecord, session_id: str | None, now: str | None, config: Config,
               holding: str | None) -> list[str]:
    """What `check` says about the run the gate reads: whose it is, where it came from, its
    outcome, its sandbox, and whether the files changed or a covering run is missing since."""
    notes = []
    if session_id is not None and run.session_id is None:
        notes.append(f"using the workspace-level run {run.run_id} (this session has no run of its own)")
    if run.source == "hook":
        notes.append(f"run {run.run_id} was parsed from a test command the agent ran itself")
    if not run.ok:
        failing = ", ".join(run.failing[:MAX_NAMED]) or run.reason or "see the run's result"
        notes.append(f"the last run is {run.outcome}: {failing}")
    unenforced = _sandbox_note(run.result_ref)
    if unenforced:
        notes.append(f"run {run.run_id}: {unenforced}")
    if run.fingerprint and now and now != run.fingerprint:
        notes.append(
            f"files changed since the last run ({run.run_id} at {iso(run.at)}); run the tests again"
            + ("" if config.stale_green == "steer" or not run.ok else ' (stale_green = "note": not held)')
        )
    if holding == "uncovered":
        wanted = "whole-suite" if config.release == "full" else "--affected or whole-suite"
        command = "greenloop run" + ("" if config.release == "full" else " --affected")
        notes.append(f"release = {config.release!r}: no green {wanted} run has tested the files as "
                     f"they are now (run `{command}`)")
    return notes


def closure_check(
    workspace: str | os.PathLike[str],
    session_id: str | None,
    *,
    config: Config | None = None,
    fingerprint: Callable[[str], str | None] | None = None,
) -> ClosureCheck:
    """The verdict the gate would give now, plus notes (tree changed, no run, source of the run).

    With no session, the latest run of the workspace (any session) is reported.
    """
    ws = os.fspath(workspace)
    loosening: tuple[Layer, ...] = ()
    if config is None:
        from greenloop.config import load_layers

        loaded = load_layers(ws)
        config = loaded.config
        loosening = loosening_layers(loaded.layers)
    if fingerprint is None:
        from greenloop.system.fingerprint import working_tree

        fingerprint = working_tree
    notes: list[str] = []
    reason: str | None = None
    accepted: list[tuple[OwedTest, Acceptance]] = []
    with Store(ws, location=configured(ws, config=config)) as store:
        if session_id is None:
            run = store.latest_run(session_id=None)
            latest_any = store.runs(limit=1)
            if latest_any and (run is None or latest_any[0].at > run.at):
                run = latest_any[0]
            state = ClosureState(session_id="", last_run=run)
            notes.append("no session given: reporting the workspace's latest run (--session scopes it)")
        else:
            state = store.state(session_id)
            if loosening:  # a gate key this session loosened keeps its default (config_guard)
                start = store.session_start(session_id)
                config, guard_note = session_config(config, loosening, start.at if start else None)
                if guard_note:
                    notes.append(guard_note.strip("()"))
            if state.first_seen is None and state.last_run is None:
                notes.append(f"session {session_id} has no recorded run and no hook event yet")
            if state.unresolved:
                records = store.unresolved_records(session_id)
                reason = records[-1].get("reason") if records else None
            # Read where the state's owed rows came from (SessionTables.state).
            last = state.last_run
            if last is not None and last.session_id is None and state.first_seen is not None:
                accepted = store.accepted_owed(WORKSPACE, since=state.first_seen)
            else:
                accepted = store.accepted_owed(session_id)
    run = state.last_run
    now: str | None = None
    if (run is not None and run.fingerprint) or needs_fingerprint(state, config):
        now = fingerprint(ws)
    state = state._replace(fingerprint_now=now)
    if session_id is not None and needs_coverage(state, config):  # release = "affected" | "full"
        kinds = ("whole",) if config.release == "full" else ("whole", "affected")
        with Store(ws, location=configured(ws, config=config)) as store:
            covered = store.green_run_of_tree(session_id, now or "", kinds, since=state.first_seen)
        state = state._replace(release=config.release, covered=covered)
    holding = _rule(state, config)[0] if config.enabled else None
    if not config.enabled:
        notes.append("greenloop is disabled (enabled = false): no gate applies")
    if run is None:
        if holding == "not_run":
            notes.append("files changed in this session and no run was recorded: run the tests")
        else:
            notes.append("no recorded run: the gate allows the turn to end, but nothing is verified; run it")
    else:
        notes += _run_notes(run, session_id, now, config, holding)
    for o in state.owed[:MAX_NAMED]:
        notes.append(f"owed: {o.test} ({why_owed(o)})")
    if state.owed_count > MAX_NAMED:
        notes.append(f"owed: +{state.owed_count - MAX_NAMED} more")
    for o, a in accepted[:MAX_NAMED]:
        notes.append(f"accepted: {o.test} ({why_owed(o)}): by {a.by} at {iso(a.at)}, {a.reason!r}")
    if len(accepted) > MAX_NAMED:
        notes.append(f"accepted: +{len(accepted) - MAX_NAMED} more")
    if state.unresolved:
        notes.append(
            f"a turn ended unresolved ({reason or 'red'}) after its interception budget; "
            "a passing run that leaves nothing owed clears this record"
        )
    satisfied = (not config.enabled) or holding is None
    return ClosureCheck(
        session_id=session_id,
        satisfied=satisfied,
        last_run=run,
        intercepts_this_turn=state.intercepts_this_turn,
        budget=config.max_intercept_rounds,
        unresolved=state.unresolved,
        notes=tuple(notes),
        owed=state.owed,
        owed_count=state.owed_count,
        holding=holding or "",
        unresolved_reason=reason if state.unresolved else None,
        accepted=tuple(accepted),
    )
