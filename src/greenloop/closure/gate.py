"""The closure gate and its Python API for custom harnesses.

`decide(state, config)` is pure: a session that owes tests (failed and not since passed, or
taken away: greenloop.closure.evidence) or whose last run is red is steered back with a
message that names them and the command that reruns exactly them, at most
`max_intercept_rounds` times per turn; files changed since the last green run, or changed
with no run at all, are asked about once. After that the turn is released and the session
recorded unresolved, with the reason. Nothing owed and nothing changed, or `enabled = false`:
allow. The gate reads state and, when the answer depends on it, one fingerprint of the
working tree: it never runs a test and never watches files.

`Gate(workspace)` wraps `decide` with the state database:

    gate = Gate("/path/to/project")
    gate.on_turn_start(session_id)              # a new user turn: a new budget
    decision = gate.on_turn_stopping(session_id)
    if decision.kind == "steer": send(decision.message)

`closure_check(workspace, session_id)` is `greenloop check` / the `test_closure_check` tool.
"""

from __future__ import annotations

import _sqlite3 as sqlite3  # not `sqlite3`: its dbapi2 imports datetime (greenloop.state.sqlite)
import os
import time

from greenloop.closure.owed import OwedTest
from greenloop.closure.store import Store, _is_corruption, _stderr_warn, db_path, move_aside
from greenloop.closure.transitions import ClosureState
from greenloop.config import Config, Layer
from greenloop.state.url import configured

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Literal, NamedTuple, TypeVar
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "ClosureCheck",  # noqa: F822 (greenloop.closure.check, through __getattr__)
    "Decision",
    "DecisionKind",
    "Gate",
    "closure_check",  # noqa: F822
    "decide",
    "needs_fingerprint",
]

if TYPE_CHECKING:
    DecisionKind = Literal["allow", "steer", "release"]
    T = TypeVar("T")
else:
    DecisionKind = str


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
    rule: str = ""  # the rule that held the turn: owed, taken_away, red, stale, not_run ("" on allow)
    owed: tuple[OwedTest, ...] = ()

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
            "rule": self.rule,
            "owed": [o.to_json() for o in self.owed],
        }


def _rule(state: ClosureState, config: Config) -> tuple[str | None, str]:
    """Which rule holds the turn, and why in a few words; (None, why) when nothing does."""
    run = state.last_run
    if state.owed_count:
        taken = all(o.reason != "failed" for o in state.owed)
        return ("taken_away" if taken else "owed"), f"the session owes {state.owed_count} test(s)"
    if run is not None and not run.ok:
        return "red", f"the last run ({run.run_id}) is red"
    now = state.fingerprint_now
    if run is not None:
        if config.stale_green == "steer" and run.fingerprint and now and now != run.fingerprint:
            return "stale", f"files changed since the last run ({run.run_id})"
        if state.covered is False:
            kind = "whole-suite" if config.release == "full" else "--affected or whole-suite"
            return "uncovered", f"no green {kind} run has tested the files as they are now"
        return None, f"the last run ({run.run_id}) is green and nothing is owed"
    if config.require_run and state.start_fingerprint and now and now != state.start_fingerprint:
        return "not_run", "the session changed files and recorded no run"
    return None, "no recorded run for this session and nothing changed: nothing to hold on"


def needs_fingerprint(state: ClosureState, config: Config) -> bool:
    """Whether `decide` needs the working tree's fingerprint now (the stale-green and no-run
    rules): only when nothing else holds the turn, so a red session costs no `git status`."""
    if not config.enabled or state.owed_count:
        return False
    run = state.last_run
    if run is not None:
        return run.ok and (
            (bool(run.fingerprint) and config.stale_green == "steer")
            or (config.release != "owed" and bool(state.start_fingerprint))
        )
    return config.require_run and bool(state.start_fingerprint)


def needs_coverage(state: ClosureState, config: Config) -> bool:
    """Whether `decide` needs `state.covered` (`release = "affected"|"full"`): the last run is
    green and current, nothing is owed, and the session changed files since its start."""
    run, now = state.last_run, state.fingerprint_now
    if config.release == "owed" or state.owed_count or run is None or not run.ok or not now:
        return False
    if run.fingerprint and now != run.fingerprint:
        return False  # the stale rule holds the turn first
    return bool(state.start_fingerprint) and now != state.start_fingerprint


def decide(state: ClosureState, config: Config) -> Decision:
    """The pure gate: allow | steer(message) | release(unresolved). Never runs anything.

    Rules, first that applies: the session owes tests (failed and not since passed, or taken
    away) or its last run is red: steer up to `max_intercept_rounds` times this turn; files
    changed since the last (green) run (`stale_green = "steer"`): steer once; files changed
    and no run at all (`require_run`): steer once. Past that, release: the turn
    ends and the session is recorded unresolved with the rule's reason. `fingerprint_now` is
    the caller's (Gate takes one only when `needs_fingerprint`)."""
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
    if run is not None:
        base["run_id"] = run.run_id
        base["failing"] = run.failing
    base["owed"] = state.owed
    rule, why = _rule(state, config)
    if rule is None:
        return Decision("allow", reason=why, **base)
    base["rule"] = rule
    once = rule in ("stale", "not_run", "uncovered")
    from greenloop.closure.messages import release_message, steer_message  # only a hold has words

    if state.released_this_turn or state.intercepts_this_turn >= budget or (once and rule in state.steered):
        base["unresolved"] = True
        return Decision(
            "release",
            message=release_message(
                run, state.session_id, budget, config.hint_language, rule=rule, state=state
            ),
            reason=f"{why}, and this turn's budget ({budget}) is spent"
            if not once else f"{why}, and the gate asked once already this turn",
            **base,
        )
    base["intercepts_this_turn"] = state.intercepts_this_turn + 1
    return Decision(
        "steer",
        message=steer_message(run, state.intercepts_this_turn + 1, budget, config.hint_language, rule=rule,
                              state=state),
        reason=why,
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
        layers: Sequence[Layer] = (),
        clock: Callable[[], float] = time.time,
        warn: Callable[[str], None] | None = None,
        harness: str | None = None,
    ) -> None:
        """`config` with the `layers` it was merged from (`greenloop.config.load_layers`), or
        neither: then the workspace's config is loaded here. A caller that gives a config
        without its layers opts out of the session's config guard (config_guard)."""
        self.workspace = os.fspath(workspace)
        self._loosening: tuple[Layer, ...] = ()  # config files that loosen the gate (config_guard)
        if config is None:
            from greenloop.config import load_layers

            loaded = load_layers(self.workspace)
            config, layers = loaded.config, loaded.layers
        if layers:
            from greenloop.closure.config_guard import loosening_layers

            self._loosening = loosening_layers(layers)
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

    def _session_config(self, store: Store, session_id: str) -> tuple[Config, str]:
        """The config this session is judged by (greenloop.closure.config_guard: a gate key a
        config file loosened during the session keeps its default), and the note saying so."""
        if not self._loosening:
            return self.config, ""
        from greenloop.closure.config_guard import session_config

        start = store.session_start(session_id)
        return session_config(self.config, self._loosening, start.at if start is not None else None)

    def _off(self, session_id: str) -> bool:
        """Whether the gate is off for this session: `enabled = false`, unless a config file
        written during the session (after its first hook event) is what turned it off."""
        if self.config.enabled:
            return False
        if not self._loosening:
            return True
        from greenloop.state.url import has_state

        if not has_state(self.workspace, configured(self.workspace, config=self.config)):
            return True
        return self._with_store(lambda store: self._session_config(store, session_id)[0]).enabled is False

    def _start(self, store: Store, session_id: str) -> str | None:
        """The session's start record (fingerprint, marks snapshot) at its first event; a read
        after that. Returns the fingerprint it took (None when the session had its start)."""
        if store.session_start(session_id) is not None:
            return None
        from greenloop.closure.run_evidence import ensure_start
        from greenloop.system.tree_digest import now

        fp = now(self.workspace)
        ensure_start(store, self.workspace, session_id, lambda: fp)
        return fp

    def on_turn_start(self, session_id: str, turn_id: str | None = None) -> int:
        """A new turn for the session (a user prompt): a new interception budget. Returns its number."""
        if self._off(session_id):
            return 0

        def go(store: Store) -> int:
            with store.transaction():
                store.touch_session(session_id, self.harness)
                self._start(store, session_id)
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
        if self._off(session_id):
            return 0
        said = prompt.strip()

        def go(store: Store) -> int:
            with store.transaction():
                store.touch_session(session_id, self.harness)
                self._start(store, session_id)
                seq, _, _ = store.current_turn(session_id)
                if seq > 0 and said and said == store.last_steer(session_id, seq).strip():
                    return seq  # our own steer message, re-entering the agent: the same turn
                return store.begin_turn(session_id, turn_id)

        return self._with_store(go)

    def on_turn_stopping(self, session_id: str, turn_id: str | None = None) -> Decision:
        """The agent wants to end its turn: allow, steer back, or release as unresolved.

        `turn_id`, when the harness has one (Codex), starts a new turn whenever it changes.
        """
        if self._off(session_id):
            return decide(ClosureState(session_id=session_id), self.config)

        def go(store: Store) -> Decision:
            with store.transaction():
                first_seen = store.touch_session(session_id, self.harness)
                seq, current_id, _ = store.current_turn(session_id)
                if seq == 0 or (turn_id is not None and turn_id != current_id):
                    store.begin_turn(session_id, turn_id)
                taken = self._start(store, session_id)
                config, note = self._session_config(store, session_id)
                state = store.state(session_id, first_seen=first_seen)
                if needs_fingerprint(state, config):
                    from greenloop.system.tree_digest import now

                    # a session whose first event this is: the tree was fingerprinted just now
                    state = state._replace(fingerprint_now=taken or now(self.workspace))
                if needs_coverage(state, config):
                    kinds = ("whole",) if config.release == "full" else ("whole", "affected")
                    state = state._replace(release=config.release, covered=store.green_run_of_tree(
                        session_id, state.fingerprint_now or "", kinds, since=first_seen))
                decision = decide(state, config)
                if note and decision.kind != "allow":
                    decision = decision._replace(message=f"{decision.message} {note}")
                if decision.kind == "steer":
                    store.add_interception(session_id, state.turn_seq, "steer", decision.run_id,
                                           decision.message, self.harness, decision.rule)
                elif decision.kind == "release" and not state.released_this_turn:
                    store.add_interception(session_id, state.turn_seq, "release", decision.run_id,
                                           decision.message, self.harness, decision.rule)
                    from greenloop.closure.messages import RULE_REASONS

                    store.mark_released(session_id, state.turn_seq, decision.run_id,
                                        RULE_REASONS.get(decision.rule, decision.rule))
                return decision

        return self._with_store(go)

    def state(self, session_id: str) -> ClosureState:
        """The session's closure state as the store holds it now."""
        return self._with_store(lambda store: store.state(session_id))


def __getattr__(name: str) -> Any:
    # The closure check lives in greenloop.closure.check (it imports this module); these names
    # stay importable from here, as they always were.
    if name in ("ClosureCheck", "closure_check"):
        from greenloop.closure import check

        return getattr(check, name)
    raise AttributeError(name)
