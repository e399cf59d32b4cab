"""The agent format: what an AI agent reads of a run, a closure check or a job, in few tokens.

A green run is one line. A red run lists each failure (its name, `file:line`, expected and
got, the hint; values cut with a visible marker past a limit), the first ones in full and,
past a budget, the rest by name only, grouped by file; then one summary line and the
command that reruns just the failures. Notes are said only when they change what to do next
(a sandbox not enforced, a fallback to the whole suite, a bug kept open, a target that is
not a path); a note that stays true across runs (the tests' environment, the virtualenv) is
said once per session: the caller passes the keys (`once_key`) not said before in the run's
session, and records them as said (`api.first_said`). The whole record stays in result.json,
`--json` and MCP's structuredContent.

Pure: nothing here reads a file or the state.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal

from greenloop.model import Failure
from greenloop.result import RunResult

__all__ = [
    "ACT",
    "DETAIL_CHARS",
    "ONCE",
    "VALUE_CHARS",
    "check_text",
    "cut",
    "job_text",
    "note_kind",
    "once_key",
    "once_keys",
    "run_text",
]

VALUE_CHARS = 200  # expected, got or a message line, each
HINT_CHARS = 400
DETAIL_CHARS = 2400  # failures in full up to about this much text; the rest by name
DETAIL_MAX = 10
TAIL_LINES = 12  # of a broken run's output
TAIL_CHARS = 1500

NoteKind = Literal["once", "act", "quiet"]

# Notes that stay true from run to run: said once per session (then only when they change).
ONCE: tuple[str, ...] = (
    "the tests' environment differs",
    "the workspace's virtualenv",
    "the active virtualenv",
    "above the workspace, within",
    "runs with greenloop's own interpreter",
    "runs through `",
    "runs through Yarn Plug'n'Play",
    "not on PATH; using this interpreter",
    "sandbox enforced by",
    "cargo nextest runs the suite",
    "libtest output is parsed as text",
    "takes no machine reporter",
)
# Notes that change what the agent should do next: said every time (a long one that stays
# true, the sandbox not enforced, in full once per session and briefly after that).
ACT: tuple[str, ...] = (
    "sandbox NOT enforced",
    "ran the full suite",
    "cannot filter tests by name",
    "stay open",
    "is not a path in the workspace",
    "is ignored with a verbatim command",
    "survived the shutdown",
    "greenloop is disabled",
    "no recorded run",
    "files changed since the last run",
    "files changed in this session and no run was recorded",
    "a turn ended unresolved",
    "failed, then passed when rerun",
    "could not be recorded for the gate",  # the gate will not see this run
    "the session could not be resolved",
)
# What the session still owes (tests seen failing, tests taken away): a word, not a phrase, so
# the gate's wording may change; "allowed" must not match.
_OWED = re.compile(r"\bow(?:e|es|ed|ing)\b")
_SAID_BRIEFLY = {"sandbox NOT enforced": "sandbox NOT enforced (said above in this session)"}
# Closure-check notes the headline already says, or that change nothing an agent does.
_CHECK_QUIET = (
    "no session given",
    "using the workspace-level run",
    "was parsed from a test command",
    "the last run is",
    "has no recorded run and no hook event yet",
)


def note_kind(note: str) -> NoteKind:
    """Whether a note is said once per session, every time, or only for a broken run."""
    if any(p in note for p in ACT) or _OWED.search(note):
        return "act"
    if any(p in note for p in ONCE):
        return "once"
    return "quiet"


def once_key(note: str) -> str:
    """The state's key of a note said once per session: its text, so a changed note is new."""
    return hashlib.sha1(note.encode("utf-8")).hexdigest()[:16]


def _long_lived(note: str) -> bool:
    return note_kind(note) == "once" or any(p in note for p in _SAID_BRIEFLY)


def once_keys(notes: Iterable[str], *, green: bool = False) -> list[str]:
    """The keys of the notes that are said in full once per session (ask the state which are
    new). A green run says none that changes nothing (the environment, the virtualenv): they
    wait for the session's first run that is not green."""
    return [
        once_key(n) for n in dict.fromkeys(notes) if _long_lived(n) and not (green and _quiet_when_green(n))
    ]


def _quiet_when_green(note: str) -> bool:
    return note_kind(note) == "once"


def cut(text: str | None, limit: int, where: str = "") -> str:
    """`text` on one line, cut past `limit` characters with a marker saying how much is left out."""
    if not text:
        return ""
    flat = " ⏎ ".join(line.rstrip() for line in text.strip().splitlines())
    if len(flat) <= limit:
        return flat
    return flat[:limit] + f"…[+{len(flat) - limit} chars{where}]"


def _where(f: Failure) -> str:
    if not f.file:
        return ""
    return f"{f.file}:{f.line}" if f.line else f.file


_LABELS = {"load": "LOAD ERROR", "hook": "HOOK FAILED", "timeout": "TIMED OUT"}


def _failure(f: Failure, where_more: str) -> list[str]:
    label = "FLAKY" if f.flaky else _LABELS.get(f.kind, "FAIL")
    place = _where(f)
    lines = [f"{label} {f.test}" + (f" ({place})" if place and place != f.test else "")]
    if f.expected is not None or f.got is not None:
        lines.append(
            f"  expected: {cut(f.expected, VALUE_CHARS, where_more) or '—'}"
            f" | got: {cut(f.got, VALUE_CHARS, where_more) or '—'}"
        )
    elif f.message:
        first = f.message.strip().splitlines()[0] if f.message.strip() else ""
        lines.append(f"  {cut(first, VALUE_CHARS, where_more)}")
    if f.hint:
        lines.append(f"  hint: {cut(f.hint, HINT_CHARS, where_more)}")
    return lines


def _short_name(f: Failure) -> str:
    """The name inside its file's group: a pytest or Go-style id without the file it repeats."""
    name = f.test
    if f.file and name.startswith(f.file + "::"):
        name = name[len(f.file) + 2 :]
    return f"{name}:{f.line}" if f.line else name


def _by_name(failures: Iterable[Failure]) -> list[str]:
    groups: dict[str, list[str]] = {}
    for f in failures:
        groups.setdefault(f.file or "", []).append(_short_name(f))
    return [f"{file or '(no file)'}: " + "; ".join(names) for file, names in groups.items()]


def _counts(r: RunResult) -> str:
    s = r.summary
    parts = []
    if s.failed or r.outcome == "red":
        parts.append(f"{s.failed} failed")
    parts.append(f"{s.passed} passed")
    if s.skipped:
        parts.append(f"{s.skipped} skipped")
    if s.flaky:
        parts.append(f"{s.flaky} flaky")
    text = ", ".join(parts)
    return text + (f" of {s.total}" if s.failed or r.outcome == "red" else "")


def _context(r: RunResult, run_id: bool) -> str:
    bits = [r.framework or "unknown runner"]
    if r.shard is not None:
        bits.append(f"shard {r.shard.index}/{r.shard.total}")
    if r.selection in ("target", "last_failed"):
        bits.append("narrowed")
    elif r.selection == "affected":
        bits.append("affected tests only")
    secs = r.duration_ms / 1000
    bits.append(f"{secs:.1f}s" if secs < 60 else f"{int(secs // 60)}m{int(secs % 60):02d}s")
    if run_id:
        bits.append(r.run_id)
    return "(" + ", ".join(bits) + ")"


def _rel(path: str | None, cwd: str | None) -> str | None:
    if not path or not cwd:
        return path
    try:
        rel = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if rel.startswith(os.pardir + os.sep + os.pardir) else rel


def _notes(notes: Iterable[str], new_once: Collection[str], *, broken: bool, green: bool) -> list[str]:
    out: list[str] = []
    for n in dict.fromkeys(notes):
        kind = note_kind(n)
        if green and _quiet_when_green(n):
            continue
        if _long_lived(n) and once_key(n) not in new_once:
            brief = next((b for p, b in _SAID_BRIEFLY.items() if p in n), None)
            if brief:
                out.append(f"note: {brief}")
            continue
        if kind == "quiet" and not broken:
            continue
        out.append(f"note: {n}")
    return out


def _tail(r: RunResult) -> list[str]:
    tail = r.output_tail.rstrip().splitlines()[-TAIL_LINES:]
    if not tail:
        return []
    text = "\n".join(tail)[-TAIL_CHARS:]
    return ["output (last lines):", *(f"  {t}" for t in text.splitlines())]


def run_text(
    r: RunResult,
    *,
    new_once: Collection[str] = (),
    rerun: str = "greenloop run --last-failed",
    cwd: str | None = None,
    run_id: bool = False,
) -> str:
    """A run in the agent format (module docstring). `new_once`: the `once_key`s of notes not
    yet said in the run's session; `rerun`: the command that reruns just the failures;
    `run_id`: name the run (a harness hook that watched the shell command finds the run by
    its id in the output and gives it to the session; needed when the run has none)."""
    ref = _rel(r.result_ref, cwd)
    where_more = " in result.json" if ref else ""
    lines: list[str] = []
    sandbox_note = r.sandbox.note if r.sandbox.note and r.sandbox.enforced_by is None else None
    notes = [*r.notes, *([sandbox_note] if sandbox_note else [])]
    if r.outcome == "green":
        lines.append(f"green: {_counts(r)} {_context(r, run_id)}")
    elif r.outcome == "red":
        shown, used = 0, 0
        for f in r.failures:
            block = _failure(f, where_more)
            size = sum(len(b) + 1 for b in block)
            if shown and (shown >= DETAIL_MAX or used + size > DETAIL_CHARS):
                break
            lines += block
            shown, used = shown + 1, used + size
        rest = r.failures[shown:]
        if rest:
            lines.append(f"{len(rest)} more failing, by name:")
            lines += _by_name(rest)
        if r.retry is not None:
            rt = r.retry
            lines.append(f"retry: {len(rt.fixed)} fixed, {len(rt.remain)} still failing, {len(rt.new)} new")
        if not r.failures:  # red, and no failing test recognised: what the runner said
            lines.append("no failing test was recognised in the output")
            lines += _tail(r)
        lines.append(f"red: {_counts(r)} {_context(r, run_id)}")
        if r.failures:
            lines.append(f"rerun the failures: {rerun}")
    else:
        lines.append(f"broken: {r.crash_reason or 'broken'} {_context(r, run_id)}")
        if r.summary.total:
            lines.append(f"counts so far: {_counts(r)}")
        for f in r.failures[:DETAIL_MAX]:
            lines += _failure(f, where_more)
        lines.append(f"command: {cut(r.command, 300)}")
        lines += _tail(r)
    lines += _notes(notes, new_once, broken=r.outcome == "broken", green=r.outcome == "green")
    cut_anything = r.outcome != "green" and ref and any("…[+" in line for line in lines)
    if cut_anything or (r.outcome == "red" and len(r.failures) > DETAIL_MAX):
        lines.append(f"full record: {ref}")
    return "\n".join(lines)


def check_text(check: Mapping[str, Any], *, run_again: str = "greenloop run") -> str:
    """A closure check (ClosureCheck.to_json) in the agent format: one line when satisfied."""
    run = check.get("last_run") or None
    if check.get("satisfied"):
        head = "satisfied" + (f": last run {run['run_id']} is {run['outcome']}" if run else "")
    else:
        head = "NOT satisfied"
        if run:
            failing = ", ".join(run.get("failing") or [])
            head += f": last run {run['run_id']} is {run['outcome']}" + (f" ({failing})" if failing else "")
        head += f"; fix it, then {run_again} again"
    lines = [head]
    for n in check.get("notes") or ():
        if not any(q in n for q in _CHECK_QUIET):
            lines.append(f"note: {n}")
    return "\n".join(lines)


def job_text(status: Mapping[str, Any], run: RunResult | None, *, new_once: Collection[str] = (),
             rerun: str = "greenloop run --last-failed", follow: str = "", cwd: str | None = None) -> str:
    """A background job (JobStatus.to_json) in the agent format: its state, or its run's text."""
    if run is not None:
        return run_text(run, new_once=new_once, rerun=rerun, cwd=cwd)
    line = f"job {status.get('job_id')}: {status.get('status')}"
    if status.get("error"):
        line += f": {status['error']}"
    if not status.get("finished") and follow:
        line += f"; follow it with {follow}"
    return line
