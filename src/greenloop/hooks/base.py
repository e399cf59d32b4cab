"""What the hook adapters share: the context, the answer, the workspace, and recording a test
command the agent ran itself (parsed from its output with the framework parsers).
"""

from __future__ import annotations

import os
import time

from greenloop import lite as json  # json's own C codec, without importing json

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Callable, Mapping
    from typing import Any, NamedTuple

    from greenloop.config import Config, Loaded
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "PERMISSION_MODES",
    "HookAnswer",
    "HookContext",
    "answer_shell_run",
    "answer_stop",
    "answer_turn_start",
    "attach_greenloop_run",
    "attach_run_ids",
    "bind",
    "detect_test_command",
    "json_line",
    "record_permission_mode",
    "record_shell_run",
    "text_of",
]

# A harness's `permission_mode` (hook input) -> greenloop's sandbox mode, where the two clearly
# mean the same confinement. Claude Code and Codex send Claude Code's vocabulary (default,
# acceptEdits, plan, dontAsk, bypassPermissions; Claude Code also auto): those are approval
# policies, not filesystem sandboxes, so only `plan` (read and plan, no edits) is mapped, to
# read-only. Codex's own sandbox names are mapped to their equals, in case a harness sends them.
# Anything else is unmapped: the session falls back to the configured default. See
# docs/sandbox.md, "Mode events from hooks".
PERMISSION_MODES: Mapping[str, str] = {
    "plan": "read-only",
    "read-only": "read-only",
    "workspace-write": "workspace-write",
    "danger-full-access": "full-access",
}
_MODE_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _mode_name(raw: str) -> bool:
    """Whether `raw` looks like a mode name: an ASCII letter, then up to 39 letters or hyphens
    (`^[A-Za-z][A-Za-z-]{0,39}$`, without `re` on the hook path)."""
    return 0 < len(raw) <= 40 and raw[0] in _MODE_LETTERS and all(c in _MODE_LETTERS or c == "-" for c in raw)


class HookAnswer(NamedTuple):
    """What the hook process prints (stdout is the harness's JSON, stderr is for people)."""

    stdout: str = ""
    stderr: str = ""
    exit_code: int = 0


def json_line(obj: Mapping[str, Any]) -> str:
    """`obj` as one compact JSON line (what a harness reads from a hook's stdout)."""
    return json.dumps(obj, ensure_ascii=False) + "\n"


class HookContext(NamedTuple):
    """Seams for an adapter: the environment, the process's cwd and a clock. `configs`, when
    given (`handle` gives each event a fresh one), keeps each workspace's config once loaded,
    so the binding, the gate and the mode record of one event read the files once."""

    env: Mapping[str, str]
    cwd: str = "."
    clock: Callable[[], float] = time.time
    configs: dict[str, Loaded] | None = None

    def loaded(self, workspace: str) -> Loaded:
        """The workspace's config with its layers (`greenloop.config.load_layers`), loaded once
        per event."""
        from greenloop.config import load_layers

        if self.configs is None:
            return load_layers(workspace)
        if workspace not in self.configs:
            self.configs[workspace] = load_layers(workspace)  # an error is raised again next call
        return self.configs[workspace]

    def config(self, workspace: str) -> Config:
        """The workspace's config (`greenloop.config.load`), loaded once per event."""
        return self.loaded(workspace).config

    def workspace(self, payload: Mapping[str, Any], project_var: str | None = None) -> str:
        """The folder the agent works in: the harness's project variable, the payload's cwd
        (or Cursor's workspace_roots), else this process's cwd. Raises if it does not exist."""
        candidates: list[Any] = []
        if project_var:
            candidates.append(self.env.get(project_var))
        candidates.append(payload.get("cwd"))
        roots = payload.get("workspace_roots")
        if isinstance(roots, list) and roots:
            candidates.append(roots[0])
        candidates.append(self.cwd)
        for candidate in candidates:
            if isinstance(candidate, str) and candidate:
                if not os.path.isdir(candidate):
                    raise FileNotFoundError(f"the workspace {candidate} does not exist")
                return candidate
        raise FileNotFoundError("no workspace folder in the hook input")

    def gate(self, workspace: str, harness: str) -> Any:
        """The Gate of `workspace`, opened on first use (kept light until a decision is needed)."""
        from greenloop.closure.gate import Gate

        loaded = self.loaded(workspace)
        return Gate(workspace, config=loaded.config, layers=loaded.layers, clock=self.clock, harness=harness)


def bind(ctx: HookContext, workspace: str, session_id: str, harness: str, *, start: bool = False) -> str:
    """Record this hook's harness process for the session (every event, every harness), so a
    shell run or the MCP server under the same harness process finds the session even when
    nothing in its environment names it (greenloop.closure.session, the process tree). `start` (a
    session's first event) also drops long-dead bindings. Returns a line for stderr."""
    from greenloop.closure.session import record_binding

    try:
        config = ctx.config(workspace)
    except Exception:  # record_binding loads it again and says what is wrong
        config = None
    return record_binding(workspace, session_id, harness, clock=ctx.clock, forget_old=start, config=config)


def record_permission_mode(
    ctx: HookContext, workspace: str, session_id: str, harness: str, payload: Mapping[str, Any]
) -> str:
    """Record the harness's permission mode as the session's sandbox mode event, on change.

    Each change of the harness's reported mode is recorded as a marker `<harness>:<mode>` (not
    a sandbox mode: resolution skips it, so the configured default applies), followed by the
    mapped greenloop mode when there is one (`PERMISSION_MODES`). An unchanged mode writes
    nothing, so a `greenloop sandbox set` made after it stands until the harness reports a
    different mode; leaving `plan` ends its read-only. Nothing is written for a workspace
    without state (greenloop disabled, or never used there). Returns a line for stderr.
    """
    raw = payload.get("permission_mode")
    if not isinstance(raw, str) or not _mode_name(raw):
        return ""
    try:
        mode = _record_mode(ctx, workspace, session_id, harness, raw)
    except Exception as exc:  # the mode is a hint for later runs; never the reason a hook fails
        return f"greenloop: could not record the permission mode {raw!r} ({type(exc).__name__}: {exc})\n"
    if mode is None:
        return ""
    return f"greenloop: {harness} permission mode {raw}: test runs of this session use sandbox {mode}\n"


def answer_stop(
    ctx: HookContext,
    workspace: str,
    session_id: str,
    harness: str,
    payload: Mapping[str, Any],
    turn_id: str | None = None,
) -> HookAnswer:
    """A Stop in the protocol Claude Code and Codex share: steer with exactly
    `{"decision": "block", "reason": …}`, release with a `systemMessage`, allow prints nothing.
    The event's permission mode is recorded (the note goes to stderr)."""
    decision = ctx.gate(workspace, harness).on_turn_stopping(session_id, turn_id)
    note = record_permission_mode(ctx, workspace, session_id, harness, payload)
    if decision.kind == "steer":
        steer = {"decision": "block", "reason": decision.message}
        return HookAnswer(stdout=json_line(steer), stderr=note)
    if decision.kind == "release":
        return HookAnswer(stdout=json_line({"systemMessage": decision.message}), stderr=note)
    return HookAnswer(stderr=note)


def answer_turn_start(
    ctx: HookContext,
    workspace: str,
    session_id: str,
    harness: str,
    payload: Mapping[str, Any],
    turn_id: str | None = None,
) -> HookAnswer:
    """A UserPromptSubmit (Claude Code, Codex): a new turn; stdout stays empty, since it would be
    added to the model's context. The event's permission mode is recorded."""
    ctx.gate(workspace, harness).on_turn_start(session_id, turn_id)
    return HookAnswer(stderr=record_permission_mode(ctx, workspace, session_id, harness, payload))


def answer_shell_run(
    ctx: HookContext,
    workspace: str,
    session_id: str,
    harness: str,
    payload: Mapping[str, Any],
    command: str,
) -> HookAnswer:
    """A PostToolUse of a shell command (Claude Code, Codex): record the permission mode, and
    the command's run when it is a test command (`record_shell_run`)."""
    output, code = text_of(payload.get("tool_response"))
    note = record_permission_mode(ctx, workspace, session_id, harness, payload)
    return HookAnswer(stderr=note + record_shell_run(ctx, workspace, session_id, command, output, code))


def _record_mode(ctx: HookContext, workspace: str, session_id: str, harness: str, raw: str) -> str | None:
    """The greenloop mode recorded for `raw` now, or None (unmapped, unchanged or no state)."""
    from greenloop.closure import store as store_mod
    from greenloop.state.url import configured

    location = configured(workspace, config=ctx.config(workspace))
    if not store_mod.has_state(workspace, location):
        return None
    marker = f"{harness}:{raw}"
    mode = PERMISSION_MODES.get(raw)
    with store_mod.Store(workspace, clock=ctx.clock, warn=store_mod._stderr_warn, location=location) as st:
        row = st.conn.execute(
            "SELECT mode FROM sandbox_modes WHERE session_id = ? AND substr(mode, 1, ?) = ? "
            "ORDER BY id DESC LIMIT 1",
            (session_id, len(harness) + 1, f"{harness}:"),
        ).fetchone()
        if row is not None and row[0] == marker:
            return None
        st.record_sandbox_mode(session_id, marker)
        if mode is not None:
            st.record_sandbox_mode(session_id, mode)
    return mode


# Which runner a shell command runs (first match wins). Compiled on first use: a Stop hook
# never needs them, and it is the hot path.
_PATTERNS = (
    ("pytest", r"(^|[\s;&|(/])(py\.test|pytest)(\s|$)|-m\s+pytest\b"),
    ("vitest", r"(^|[\s;&|(/])vitest(\s|$)"),
    ("jest", r"(^|[\s;&|(/])jest(\s|$)"),
    ("node:test", r"(^|[\s;&|(])node\s+(.*\s)?--test(\s|$|=)"),
    ("mocha", r"(^|[\s;&|(/])mocha(\s|$)"),
    ("unittest", r"-m\s+unittest\b"),
    ("bun", r"(^|[\s;&|(/])bun\s+test(\s|$)"),
    ("npm-test", r"(^|[\s;&|(])(npm|pnpm|yarn|bun)\s+(run\s+)?(test|t)(\s|$|:)"),
)
_GREENLOOP = r"(^|[\s;&|(/])greenloop(\s|$)"
# A greenloop command that starts or waits for a run (`greenloop run`, `greenloop job ID
# --wait`), options allowed before the subcommand; and a run id as greenloop prints it
# (layout.new_run_id: run-YYYYMMDD-HHMMSS-hex).
_GREENLOOP_RUN = r"(^|[\s;&|(/])greenloop(\s+-\S+)*\s+(run|job)(\s|$)"
_RUN_ID = r"\brun-\d{8}-\d{6}-[0-9a-f]{4,}\b"


_COMPILED: list[tuple[re.Pattern[str], tuple[tuple[str, re.Pattern[str]], ...]]] = []


def _rules() -> tuple[re.Pattern[str], tuple[tuple[str, re.Pattern[str]], ...]]:
    if not _COMPILED:
        import re

        _COMPILED.append((re.compile(_GREENLOOP), tuple((name, re.compile(rx)) for name, rx in _PATTERNS)))
    return _COMPILED[0]


def detect_test_command(command: str) -> str | None:
    """Which runner a shell command runs, or None. `greenloop run` records itself: None."""
    ours, rules = _rules()
    if ours.search(command):
        return None
    for framework, pattern in rules:
        if pattern.search(command):
            return framework
    return None


def attach_greenloop_run(ctx: HookContext, workspace: str, session_id: str, command: str, output: str) -> str:
    """A shell command that ran `greenloop run` (or `greenloop job … --wait`): give the run it
    names to the session. Returns a line for stderr ("" when there is nothing to attach).

    greenloop records its own runs, but a harness that exports no session id to its shell
    (Gemini CLI, Cursor) leaves such a run without one; the hook that watched the command
    knows the session, and the run id is in the command's output.
    """
    import re

    if not re.search(_GREENLOOP_RUN, command):
        return ""
    return attach_run_ids(ctx, workspace, session_id, output)


def attach_run_ids(ctx: HookContext, workspace: str, session_id: str, text: str) -> str:
    """Attach the last run named in `text` that has no agent session to `session_id`
    (`Store.attach_run`). Nothing is written for a workspace without state."""
    import re

    ids = list(dict.fromkeys(re.findall(_RUN_ID, text)))
    if not ids:
        return ""
    from greenloop.closure import store as store_mod
    from greenloop.state.url import configured

    location = configured(workspace)
    if not store_mod.has_state(workspace, location):
        return ""
    with store_mod.Store(workspace, clock=ctx.clock, warn=store_mod._stderr_warn, location=location) as st:
        for run_id in reversed(ids):
            run = st.attach_run(run_id, session_id)
            if run is not None:
                from greenloop.closure.run_evidence import fold_attached

                fold_attached(st, workspace, run_id, session_id, run.result_ref)
                return f"greenloop: run {run_id} ({run.outcome}) belongs to session {session_id}\n"
    return ""


def text_of(response: Any) -> tuple[str, int | None]:
    """The output text and exit code (when the harness gives one) of a shell tool's response."""
    import re
    from collections.abc import Mapping

    if isinstance(response, str):
        code_match = re.search(r"^Exit Code: (-?\d+)\s*$", response, re.M)
        return response, int(code_match.group(1)) if code_match else None
    if not isinstance(response, Mapping):
        return "", None
    parts: list[str] = []
    for key in ("stdout", "stderr", "output", "aggregated_output", "llmContent", "returnDisplay"):
        value = response.get(key)
        if isinstance(value, str) and value and value not in parts:
            parts.append(value)
    code: int | None = None
    for key in ("exit_code", "exitCode", "returncode", "return_code"):
        value = response.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            code = value
            break
    text = "\n".join(parts)
    if code is None:
        code_match = re.search(r"^Exit Code: (-?\d+)\s*$", text, re.M)
        code = int(code_match.group(1)) if code_match else None
    return text, code


def record_shell_run(
    ctx: HookContext,
    workspace: str,
    session_id: str | None,
    command: str,
    output: str,
    exit_code: int | None,
) -> str:
    """Parse a test command's output and record it as a run of the session.

    Returns a line for stderr saying what happened ("" when the command is not a test run).
    A run is recorded only when the parser recognised the runner's summary: the gate holds a
    turn on evidence, never on a guess.
    """
    framework = detect_test_command(command)
    if framework is None:
        return ""
    from greenloop.config import load

    if not load(workspace).enabled:
        return ""
    from greenloop.closure.store import Store, _stderr_warn, failing_names
    from greenloop.closure.transitions import Counts, RunRecord
    from greenloop.frameworks import parse_text
    from greenloop.layout import new_run_id
    from greenloop.system.fingerprint import working_tree

    parsed = parse_text(framework, iter(output.splitlines()))
    if not parsed.recognized:
        return f"greenloop: no {framework} summary found in the output of {command!r}; nothing recorded\n"
    s = Counts.of(parsed.summary)
    reason: str | None = None
    from greenloop.frameworks.results import load_failures_only

    if parsed.load_error and load_failures_only(parsed):  # load failures beside failing tests: red
        outcome, reason = "broken", f"the suite could not load: {parsed.load_error}"
    elif s.failed > 0 or (exit_code not in (None, 0)):
        outcome = "red"
    elif s.total == 0:
        outcome, reason = "broken", "no tests ran"
    else:
        outcome = "green"
    now = ctx.clock()
    record = RunRecord(
        run_id=new_run_id(now),
        ok=outcome == "green",
        at=now,
        outcome=outcome,
        session_id=session_id,
        summary=s,
        failing=failing_names(parsed.failures),
        fingerprint=working_tree(workspace),
        framework=framework,
        command=command,
        source="hook",
        exit_code=exit_code,
        reason=reason,
    )
    with Store(workspace, clock=ctx.clock, warn=_stderr_warn) as store:
        from greenloop.closure import run_evidence

        evidence = run_evidence.evidence_of_parse(parsed, command, record.ok, framework, workspace)
        if not evidence.whole_suite:  # `pytest tests/test_a.py`: a narrowed run (release = "full")
            record = record._replace(selection="target")
        if session_id is not None:
            fp = record.fingerprint
            baseline = run_evidence.ensure_start(store, workspace, session_id, lambda: fp)
            evidence = evidence._replace(marks=run_evidence.marks_now(workspace, baseline))
        store.record_run(record, evidence)
    return (
        f"greenloop: recorded {record.run_id} ({outcome}: {s.failed} failed, {s.passed} passed) "
        f"from {command!r}\n"
    )
