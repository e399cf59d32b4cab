"""The result of one run, as result.json, the CLI's `--json` and the MCP tools show it:
`RunResult` and its parts (how the run was sandboxed, what a retry or a resume did).

Typed named tuples like model.py's records, for the same reason: they are created on every
run's path, and annotations stay evaluated (no `from __future__ import annotations`).
"""

from typing import Any, NamedTuple

from greenloop.model import AffectedInfo, Failure, Outcome, ShardInfo, Summary, optional_int, optional_str

__all__ = ["ResumeInfo", "RetryInfo", "RunResult", "SandboxInfo"]


class SandboxInfo(NamedTuple):
    """How a run was sandboxed: the mode asked for, who enforced it, and a note when nothing did."""
    mode: str = "full-access"
    enforced_by: str | None = None  # "bubblewrap 0.8.0" | "landlock ABI 7" | None: not enforced
    workspace_root: str | None = None
    note: str | None = None  # why a sandbox that was asked for is not enforced, and how to get one

    def to_json(self) -> dict[str, Any]:
        """The sandbox record as JSON."""
        return {
            "mode": self.mode,
            "enforced_by": self.enforced_by,
            "workspace_root": self.workspace_root,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "SandboxInfo":
        """A sandbox record from its JSON form."""
        return cls(
            mode=str(d.get("mode", "full-access")),
            enforced_by=optional_str(d.get("enforced_by")),
            workspace_root=optional_str(d.get("workspace_root")),
            note=optional_str(d.get("note")),
        )


class RetryInfo(NamedTuple):
    """What a `retry` run found against the run it retried (`mode="retry"`)."""

    previous_run: str
    first_pass_run: str | None  # the run of the previous failures alone (None: there were none)
    fixed: tuple[str, ...] = ()  # previous failures that passed
    remain: tuple[str, ...] = ()  # previous failures that still fail
    new: tuple[str, ...] = ()  # failures the previous run did not have
    full_suite: bool = False  # the rest of the suite ran too (the previous failures passed)

    def to_json(self) -> dict[str, Any]:
        """The retry record as JSON."""
        d = self._asdict()
        for key in ("fixed", "remain", "new"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RetryInfo":
        """A retry record from its JSON form."""
        return cls(
            previous_run=str(d.get("previous_run", "")),
            first_pass_run=optional_str(d.get("first_pass_run")),
            fixed=tuple(str(x) for x in d.get("fixed") or ()),
            remain=tuple(str(x) for x in d.get("remain") or ()),
            new=tuple(str(x) for x in d.get("new") or ()),
            full_suite=bool(d.get("full_suite", False)),
        )


class ResumeInfo(NamedTuple):
    """How a `resume` run continued an interrupted one (`mode="resume"`): which test files'
    results were kept from the interrupted attempt and which files ran again."""

    from_run: str  # the interrupted run (the result keeps its run id when it is continued)
    kept: int = 0  # tests kept from the interrupted attempt (their files had finished)
    kept_files: tuple[str, ...] = ()
    rerun_files: tuple[str, ...] = ()  # files that ran again: not started, or half done
    dropped: int = 0  # finished tests of half-done files, dropped: their files ran again whole
    rerun_run: str | None = None  # the attempt that ran them (its output: the run folder's resume-N/)
    whole_suite: bool = False  # the run's files could not be known: the whole suite ran again

    def to_json(self) -> dict[str, Any]:
        """The resume record as JSON."""
        d = self._asdict()
        for key in ("kept_files", "rerun_files"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ResumeInfo":
        """A resume record from its JSON form."""
        return cls(
            from_run=str(d.get("from_run", "")),
            kept=int(d.get("kept") or 0),
            kept_files=tuple(str(x) for x in d.get("kept_files") or ()),
            rerun_files=tuple(str(x) for x in d.get("rerun_files") or ()),
            dropped=int(d.get("dropped") or 0),
            rerun_run=optional_str(d.get("rerun_run")),
            whole_suite=bool(d.get("whole_suite", False)),
        )


class RunResult(NamedTuple):
    """The structured result of one run."""

    run_id: str
    ok: bool
    outcome: Outcome
    framework: str | None
    command: str
    exit_code: int | None
    timed_out: bool = False
    aborted: bool = False
    crashed: bool = False
    crash_reason: str | None = None
    summary: Summary = Summary()
    failures: tuple[Failure, ...] = ()
    output_tail: str = ""
    notes: tuple[str, ...] = ()
    duration_ms: int = 0
    sandbox: SandboxInfo = SandboxInfo()
    result_ref: str | None = None
    workspace: str | None = None
    session_id: str | None = None
    started_at: str | None = None
    # "retry_coder" when tests failed, "retry_tester" when the suite could not load the code.
    next_action: str | None = None
    bugs_opened: tuple[str, ...] = ()
    bugs_transitioned: tuple[dict[str, str], ...] = ()
    # How the run was narrowed: None for the whole suite, else "target", "last_failed",
    # "command" (a verbatim command may run anything), "shard" (one part of a split suite) or
    # "affected" (the tests the changed files can break, plus the owed ones: `affected`).
    # A narrowed run closes only the bugs whose own tests it names in `passed_tests`.
    selection: str | None = None
    passed_tests: tuple[str, ...] = ()
    # The tests the runner reported skipped, xfail or todo (ParseResult.skipped_tests).
    skipped_tests: tuple[str, ...] = ()
    retry: RetryInfo | None = None
    # Set on a run of one shard (`--shard I/N`); `greenloop merge` folds all N into one result.
    shard: ShardInfo | None = None
    resume_token: str | None = None  # continues this run if greenloop stops before it ends
    resume: ResumeInfo | None = None  # set when this result continues an interrupted run
    affected: AffectedInfo | None = None  # set on an `--affected` run: what it chose and why

    def to_json(self) -> dict[str, Any]:
        """The result as JSON: exactly result.json's form (schemas/run-result.json)."""
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "outcome": self.outcome,
            "framework": self.framework,
            "command": self.command,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "aborted": self.aborted,
            "crashed": self.crashed,
            "crash_reason": self.crash_reason,
            "summary": self.summary.to_json(),
            "failures": [f.to_json() for f in self.failures],
            "output_tail": self.output_tail,
            "notes": list(self.notes),
            "duration_ms": self.duration_ms,
            "sandbox": self.sandbox.to_json(),
            "result_ref": self.result_ref,
            "workspace": self.workspace,
            "session_id": self.session_id,
            "started_at": self.started_at,
            "next_action": self.next_action,
            "bugs_opened": list(self.bugs_opened),
            "bugs_transitioned": [dict(t) for t in self.bugs_transitioned],
            "selection": self.selection,
            "passed_tests": list(self.passed_tests),
            "skipped_tests": list(self.skipped_tests),
            "retry": self.retry.to_json() if self.retry is not None else None,
            "shard": self.shard.to_json() if self.shard is not None else None,
            "resume_token": self.resume_token,
            "resume": self.resume.to_json() if self.resume is not None else None,
            "affected": self.affected.to_json() if self.affected is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RunResult":
        """A result from result.json's form."""
        outcome = d.get("outcome", "broken")
        return cls(
            run_id=str(d["run_id"]),
            ok=bool(d.get("ok", False)),
            outcome=outcome if outcome in ("green", "red", "broken") else "broken",
            framework=optional_str(d.get("framework")),
            command=str(d.get("command", "")),
            exit_code=optional_int(d.get("exit_code")),
            timed_out=bool(d.get("timed_out", False)),
            aborted=bool(d.get("aborted", False)),
            crashed=bool(d.get("crashed", False)),
            crash_reason=optional_str(d.get("crash_reason")),
            summary=Summary.from_json(d.get("summary") or {}),
            failures=tuple(Failure.from_json(f) for f in d.get("failures") or ()),
            output_tail=str(d.get("output_tail") or ""),
            notes=tuple(str(n) for n in d.get("notes") or ()),
            duration_ms=int(d.get("duration_ms") or 0),
            sandbox=SandboxInfo.from_json(d.get("sandbox") or {}),
            result_ref=optional_str(d.get("result_ref")),
            workspace=optional_str(d.get("workspace")),
            session_id=optional_str(d.get("session_id")),
            started_at=optional_str(d.get("started_at")),
            next_action=optional_str(d.get("next_action")),
            bugs_opened=tuple(str(b) for b in d.get("bugs_opened") or ()),
            bugs_transitioned=tuple(
                {str(k): str(v) for k, v in t.items()} for t in d.get("bugs_transitioned") or ()
            ),
            selection=optional_str(d.get("selection")),
            passed_tests=tuple(str(t) for t in d.get("passed_tests") or ()),
            skipped_tests=tuple(str(t) for t in d.get("skipped_tests") or ()),
            retry=RetryInfo.from_json(d["retry"]) if isinstance(d.get("retry"), dict) else None,
            shard=ShardInfo.from_json(d["shard"]) if isinstance(d.get("shard"), dict) else None,
            resume_token=optional_str(d.get("resume_token")),
            resume=ResumeInfo.from_json(d["resume"]) if isinstance(d.get("resume"), dict) else None,
            affected=AffectedInfo.from_json(d["affected"]) if isinstance(d.get("affected"), dict) else None,
        )
