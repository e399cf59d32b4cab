"""The closure gate and its Python API for custom harnesses.

`decide(state, config)` is pure: a red (or broken) last run steers the agent back with a
message that names the failing tests and says to re-run, at most `max_intercept_rounds`
times per turn; after that the turn is released and the session recorded unresolved. No
recorded run, a green one, or `enabled = false`: allow. The gate reads state only: it never
runs a test and never watches files.

`Gate(workspace)` wraps `decide` with the state database:

    gate = Gate("/path/to/project")
    gate.on_turn_start(session_id)              # a new user turn: a new budget
    decision = gate.on_turn_stopping(session_id)
    if decision.kind == "steer": send(decision.message)

`closure_check(workspace, session_id)` is `greenloop check` / the `test_closure_check` tool.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar

from greenloop.closure.store import Store, _is_corruption, _stderr_warn, db_path, move_aside
from greenloop.closure.transitions import ClosureState, RunRecord, iso
from greenloop.config import Config
from greenloop.state.url import configured

__all__ = [
    "ClosureCheck",
    "Decision",
    "DecisionKind",
    "Gate",
    "closure_check",
    "decide",
    "release_message",
    "steer_message",
]

DecisionKind = Literal["allow", "steer", "release"]
MAX_NAMED = 5
T = TypeVar("T")


class Decision(NamedTuple):
    """What the gate says at a turn-stopping event.

    `kind`: allow (let the turn end), steer (send `message` back to the agent and keep going),
    release (let the turn end red; the session is recorded unresolved; `message` tells the user).
    """

    kind: DecisionKind
    message: str = ""
    reason: str = ""
    session_id: str | None = None
    run_id: str | None = None
    intercepts_this_turn: int = 0
    budget: int = 0
    unresolved: bool = False
    failing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The decision as JSON (what `greenloop gate --json` prints)."""
        return {
            "decision": self.kind,
            "message": self.message,
            "reason": self.reason,
            "session_id": self.session_id,
            "run_id": self.run_id,
            "intercepts_this_turn": self.intercepts_this_turn,
            "budget": self.budget,
            "unresolved": self.unresolved,
            "failing": list(self.failing),
        }


def _what_failed(run: RunRecord, zh: bool) -> str:
    s = run.summary
    if run.outcome == "broken" or (not run.ok and s.failed == 0):
        why = run.reason or ("没有完成" if zh else "did not complete")
        return (
            f"最近一次测试运行 {run.run_id} 未能完成（{why}）"
            if zh
            else (f"the last test run ({run.run_id}) did not complete: {why}")
        )
    counts = (
        f"{s.failed} 个失败，{s.passed} 个通过，共 {s.total} 个"
        if zh
        else f"{s.failed} failed, {s.passed} passed of {s.total}"
    )
    return (
        f"最近一次测试运行 {run.run_id} 仍为红色：{counts}"
        if zh
        else (f"the last test run ({run.run_id}) is red: {counts}")
    )


def _named(failing: tuple[str, ...], zh: bool) -> str:
    if not failing:
        return ""
    shown = ", ".join(failing[:MAX_NAMED])
    more = len(failing) - MAX_NAMED
    if more > 0:
        shown += f"（另有 {more} 个）" if zh else f" (+{more} more)"
    return f"失败的测试：{shown}。" if zh else f" Failing: {shown}."


def steer_message(run: RunRecord, round_no: int, budget: int, language: str = "en") -> str:
    """The corrective message: names the failing tests and says to re-run."""
    zh = language == "zh"
    again = "test_run" if run.source != "hook" else ("测试" if zh else "the tests")
    if zh:
        return (
            f"greenloop：{_what_failed(run, True)}。{_named(run.failing, True)}"
            f"请修复后重新运行 {again} 验证。（本回合第 {round_no}/{budget} 次拦截）"
            + (f"详情：{run.result_ref}" if run.result_ref else "")
        )
    return (
        f"greenloop: {_what_failed(run, False)}.{_named(run.failing, False)} "
        f"Fix it, then run {again} again to verify (`greenloop run` from a shell). "
        f"(Intercept {round_no} of {budget} this turn.)"
        + (f" Details: {run.result_ref}" if run.result_ref else "")
    )


def release_message(run: RunRecord, session_id: str, budget: int, language: str = "en") -> str:
    """The message of a release: the turn may end red, recorded as unresolved, and what is still failing."""
    zh = language == "zh"
    if zh:
        return (
            f"greenloop：{_what_failed(run, True)}，已拦截 {budget} 次仍未修复；本回合结束，"
            f"会话 {session_id} 记录为未解决（unresolved）。之后一次通过的运行会清除该记录。"
        )
    return (
        f"greenloop: {_what_failed(run, False)}, still red after {budget} corrective round"
        f"{'s' if budget != 1 else ''}; the turn ends and session {session_id} is recorded as unresolved. "
        "A later passing run clears it."
    )


def decide(state: ClosureState, config: Config) -> Decision:
    """The pure gate: allow | steer(message) | release(unresolved). Never runs anything."""
    budget = config.max_intercept_rounds
    base: dict[str, Any] = {
        "session_id": state.session_id,
        "budget": budget,
        "intercepts_this_turn": state.intercepts_this_turn,
        "unresolved": state.unresolved,
    }
    if not config.enabled:
        return Decision("allow", reason="greenloop is disabled (enabled = false)", **base)
    run = state.last_run
    if run is None:
        return Decision("allow", reason="no recorded run for this session: nothing to hold on", **base)
    base["run_id"] = run.run_id
    base["failing"] = run.failing
    if run.ok:
        return Decision("allow", reason=f"the last run ({run.run_id}) is green", **base)
    if state.released_this_turn or state.intercepts_this_turn >= budget:
        base["unresolved"] = True
        return Decision(
            "release",
            message=release_message(run, state.session_id, budget, config.hint_language),
            reason=f"the last run is red and this turn's budget ({budget}) is spent",
            **base,
        )
    base["intercepts_this_turn"] = state.intercepts_this_turn + 1
    return Decision(
        "steer",
        message=steer_message(run, state.intercepts_this_turn + 1, budget, config.hint_language),
        reason=f"the last run ({run.run_id}) is red",
        **base,
    )


class Gate:
    """The gate over one workspace's state database (module docstring).

    Seams: `config` (default: loaded from the workspace), `clock` (epoch seconds), `warn` (default: stderr).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] = ".",
        *,
        config: Config | None = None,
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] | None = None,
        harness: str | None = None,
    ) -> None:
        self.workspace = os.fspath(workspace)
        if config is None:
            from greenloop.config import load

            config = load(self.workspace)
        self.config = config
        self.clock = clock
        self.warn = warn
        self.harness = harness

    def _with_store(self, fn: Callable[[Store], T]) -> T:
        warn = self.warn or _stderr_warn
        location = configured(self.workspace, config=self.config)  # the config is loaded already
        try:
            with Store(self.workspace, clock=self.clock, warn=warn, location=location) as store:
                return fn(store)
        except sqlite3.DatabaseError as exc:
            if not _is_corruption(exc):
                raise
            # Corruption found past the header: move the database aside and try once more.
            move_aside(db_path(self.workspace), str(exc), clock=self.clock, warn=warn)
            with Store(self.workspace, clock=self.clock, warn=warn, location=location) as store:
                return fn(store)

    def on_turn_start(self, session_id: str, turn_id: str | None = None) -> int:
        """A new turn for the session (a user prompt): a new interception budget. Returns its number."""
        if not self.config.enabled:
            return 0

        def go(store: Store) -> int:
            with store.transaction():
                store.touch_session(session_id, self.harness)
                seq, current_id, _ = store.current_turn(session_id)
                if turn_id is not None and current_id == turn_id and seq > 0:
                    return seq  # the same turn announced twice
                return store.begin_turn(session_id, turn_id)

        return self._with_store(go)

    def on_prompt(self, session_id: str, prompt: str, turn_id: str | None = None) -> int:
        """A prompt reaches the agent: a new turn (a new budget), unless the prompt is the steer
        message the gate sent in the current turn coming back.

        Some harnesses (Gemini CLI's AfterAgent `deny`, Cursor's `followup_message`) feed the
        gate's reason to the agent as the next prompt, and announce it through the same event
        as a user's prompt; counting it as a new turn would reset the budget on every
        corrective round and the loop would never end. A user prompt always starts a turn,
        even with the same text as the last one; `turn_id` is kept on the turn (it is what
        `on_turn_stopping` compares). Returns the current turn's number.
        """
        if not self.config.enabled:
            return 0
        said = prompt.strip()

        def go(store: Store) -> int:
            with store.transaction():
                store.touch_session(session_id, self.harness)
                seq, _, _ = store.current_turn(session_id)
                if seq > 0 and said and said == store.last_steer(session_id, seq).strip():
                    return seq  # our own steer message, re-entering the agent: the same turn
                return store.begin_turn(session_id, turn_id)

        return self._with_store(go)

    def on_turn_stopping(self, session_id: str, turn_id: str | None = None) -> Decision:
        """The agent wants to end its turn: allow, steer back, or release as unresolved.

        `turn_id`, when the harness has one (Codex), starts a new turn whenever it changes.
        """
        if not self.config.enabled:
            return decide(ClosureState(session_id=session_id), self.config)

        def go(store: Store) -> Decision:
            with store.transaction():
                first_seen = store.touch_session(session_id, self.harness)
                seq, current_id, _ = store.current_turn(session_id)
                if seq == 0 or (turn_id is not None and turn_id != current_id):
                    store.begin_turn(session_id, turn_id)
                state = store.state(session_id, first_seen=first_seen)
                decision = decide(state, self.config)
                if decision.kind == "steer":
                    store.add_interception(
                        session_id, state.turn_seq, "steer", decision.run_id, decision.message, self.harness
                    )
                elif decision.kind == "release" and not state.released_this_turn:
                    store.add_interception(
                        session_id, state.turn_seq, "release", decision.run_id, decision.message, self.harness
                    )
                    store.mark_released(session_id, state.turn_seq, decision.run_id)
                return decision

        return self._with_store(go)

    def state(self, session_id: str) -> ClosureState:
        """The session's closure state as the store holds it now."""
        return self._with_store(lambda store: store.state(session_id))


class ClosureCheck(NamedTuple):
    """`test_closure_check`: is this session's last recorded run green?"""

    session_id: str | None
    satisfied: bool
    last_run: RunRecord | None
    intercepts_this_turn: int
    budget: int
    unresolved: bool
    notes: tuple[str, ...] = ()

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
    if config is None:
        from greenloop.config import load

        config = load(ws)
    if fingerprint is None:
        from greenloop.system.fingerprint import working_tree

        fingerprint = working_tree
    notes: list[str] = []
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
            if state.first_seen is None and state.last_run is None:
                notes.append(f"session {session_id} has no recorded run and no hook event yet")
    run = state.last_run
    if not config.enabled:
        notes.append("greenloop is disabled (enabled = false): no gate applies")
    if run is None:
        notes.append("no recorded run: the gate allows the turn to end, but nothing is verified; run it")
    else:
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
        now = fingerprint(ws) if run.fingerprint else None
        if run.fingerprint and now and now != run.fingerprint:
            notes.append(
                f"the working tree changed after the last recorded run ({run.run_id} at {iso(run.at)}); "
                "the verdict stands until the tests run again"
            )
    if state.unresolved:
        notes.append("a turn ended red after its interception budget; a passing run clears this record")
    satisfied = (not config.enabled) or run is None or run.ok
    return ClosureCheck(
        session_id=session_id,
        satisfied=satisfied,
        last_run=run,
        intercepts_this_turn=state.intercepts_this_turn,
        budget=config.max_intercept_rounds,
        unresolved=state.unresolved,
        notes=tuple(notes),
    )
