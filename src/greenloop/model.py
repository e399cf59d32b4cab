"""The typed records that flow between modules, each with one JSON form.

Records are typed named tuples (immutable; `record._replace(field=value)` makes a changed copy).
They are on the path every `greenloop run` takes before its runner starts, and a NamedTuple class
costs a sixth of what a frozen dataclass costs to create (docs/architecture.md, "Start-up").
Annotations are evaluated (no `from __future__ import annotations` here): NamedTuple turns
string annotations into ForwardRefs, compiling each one, which would cost more than the classes.

`to_json()` gives the snake_case dict that the CLI's `--json`, the MCP tools and the files on
disk all show; `from_json()` reads it back, tolerating missing optional keys so older files
still load.
"""

from typing import Any, Literal, NamedTuple, get_args

__all__ = [
    "FRAMEWORKS",
    "Detection",
    "Failure",
    "FrameworkId",
    "Outcome",
    "ParseResult",
    "Plan",
    "Progress",
    "RawRun",
    "ResumeInfo",
    "RetryInfo",
    "RunResult",
    "SandboxInfo",
    "ShardInfo",
    "Suite",
    "Summary",
]

FrameworkId = Literal[
    "vitest", "jest", "npm-test", "pytest", "node:test", "go", "cargo", "mocha", "unittest", "bun"
]
FRAMEWORKS: tuple[str, ...] = get_args(FrameworkId)
Outcome = Literal["green", "red", "broken"]


def _opt_str(v: Any) -> str | None:
    return None if v is None else str(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


class Summary(NamedTuple):
    """A run's counts: total, passed, failed, skipped (and flaky when reruns found some)."""
    total: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    # Tests that failed and then passed when rerun (`rerun_failures`): counted apart from
    # passed and failed, so total = passed + failed + skipped + flaky. Written only when set.
    flaky: int = 0

    def to_json(self) -> dict[str, Any]:
        """The counts as JSON."""
        d = {"total": self.total, "passed": self.passed, "failed": self.failed, "skipped": self.skipped}
        if self.flaky:
            d["flaky"] = self.flaky
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Summary":
        """Counts from their JSON form."""
        return cls(
            total=int(d.get("total", 0)),
            passed=int(d.get("passed", 0)),
            failed=int(d.get("failed", 0)),
            skipped=int(d.get("skipped", 0)),
            flaky=int(d.get("flaky") or 0),
        )


class Failure(NamedTuple):
    """One failing test (or one file/suite that failed to load, named after it)."""

    test: str
    file: str | None = None
    line: int | None = None
    message: str = ""
    expected: str | None = None
    got: str | None = None
    stack: str = ""
    hint: str = ""
    bug_id: str | None = None
    # "test" for an ordinary failing test, "load" for a file that failed to import,
    # "hook" for a beforeAll/afterAll (or fixture setup/teardown) error, "timeout" for the
    # test that was still running when the run's deadline stopped it.
    kind: Literal["test", "load", "hook", "timeout"] = "test"
    # True: the test failed, then passed when rerun (`rerun_failures`). Written only when set.
    flaky: bool = False

    def to_json(self) -> dict[str, Any]:
        """The failure as JSON (result.json's `failures[]`)."""
        d = {
            "test": self.test,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "expected": self.expected,
            "got": self.got,
            "stack": self.stack,
            "hint": self.hint,
            "bug_id": self.bug_id,
            "kind": self.kind,
        }
        if self.flaky:
            d["flaky"] = True
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Failure":
        """A failure from its JSON form."""
        kind = d.get("kind", "test")
        return cls(
            test=str(d.get("test", "")),
            file=_opt_str(d.get("file")),
            line=_opt_int(d.get("line")),
            message=str(d.get("message") or ""),
            expected=_opt_str(d.get("expected")),
            got=_opt_str(d.get("got")),
            stack=str(d.get("stack") or ""),
            hint=str(d.get("hint") or ""),
            bug_id=_opt_str(d.get("bug_id")),
            kind=kind if kind in ("test", "load", "hook", "timeout") else "test",
            flaky=bool(d.get("flaky", False)),
        )


class ParseResult(NamedTuple):
    """What a parser recognised in a runner's output or report. Parsing is total: never raises.

    `recognized` is True when the runner's closing summary (or a report) was found; with it
    False the counts are whatever was seen, and `notes` say what was missing.
    """

    summary: Summary = Summary()
    failures: tuple[Failure, ...] = ()
    notes: tuple[str, ...] = ()
    recognized: bool = False
    duration_ms: int | None = None
    # Set when the suite could not even load the code under test (SyntaxError, missing module).
    load_error: str | None = None
    # The tests the runner reported as run and passed, named as failures are named (the
    # evidence that lets a bug move to fixed). Empty where the output does not name them.
    passed_tests: tuple[str, ...] = ()
    # The runner's own timeout fired (Go's `panic: test timed out after`): run.py reports the
    # run as timed out, like greenloop's own deadline.
    timed_out: bool = False

    def to_json(self) -> dict[str, Any]:
        """The detection as JSON (`greenloop probe --json`)."""
        return {
            "summary": self.summary.to_json(),
            "failures": [f.to_json() for f in self.failures],
            "notes": list(self.notes),
            "recognized": self.recognized,
            "duration_ms": self.duration_ms,
            "load_error": self.load_error,
            "passed_tests": list(self.passed_tests),
        }


class Suite(NamedTuple):
    """One test root inside a workspace (a monorepo may have several)."""

    root: str
    framework: str
    config_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON."""
        return {"root": self.root, "framework": self.framework, "config_path": self.config_path}


class Detection(NamedTuple):
    """The answer of `probe`: which framework, where, and the command greenloop would run."""

    framework: str | None
    root: str
    config_path: str | None = None
    test_files: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    package_manager: str | None = None
    notes: tuple[str, ...] = ()
    suites: tuple[Suite, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The raw run as JSON."""
        return {
            "framework": self.framework,
            "config_path": self.config_path,
            "test_files": list(self.test_files),
            "command": list(self.command),
            "package_manager": self.package_manager,
            "root": self.root,
            "notes": list(self.notes),
            "suites": [s.to_json() for s in self.suites],
        }


class ShardInfo:
    """Which part of a suite split across machines a run is: shard `index` of `total` (1-based),
    and the git commit the shard ran at (None outside git), so `merge` can refuse shards of
    different commits.

    A small immutable class, not a NamedTuple (a tuple's own `index` method would clash with
    the field) nor a dataclass (importing `dataclasses` costs the hook path, see above)."""

    __slots__ = ("commit", "index", "total")
    index: int
    total: int
    commit: str | None

    def __init__(self, index: int, total: int, commit: str | None = None) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "commit", commit)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ShardInfo is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShardInfo) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[int, int, str | None]:
        return (self.index, self.total, self.commit)

    def __repr__(self) -> str:
        return f"ShardInfo(index={self.index}, total={self.total}, commit={self.commit!r})"

    def to_json(self) -> dict[str, Any]:
        """The shard as JSON (`{index, total}`)."""
        d: dict[str, Any] = {"index": self.index, "total": self.total}
        if self.commit is not None:
            d["commit"] = self.commit
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ShardInfo":
        """A shard from its JSON form."""
        return cls(index=int(d["index"]), total=int(d["total"]), commit=_opt_str(d.get("commit")))


class Plan(NamedTuple):
    """Everything needed to start one run; built purely from a Detection and options."""

    framework: str
    argv: tuple[str, ...]
    cwd: str
    timeout_ms: int
    env: tuple[tuple[str, str], ...] = ()  # variables added on top of the child environment
    report_file: str | None = None  # machine report the runner writes (json/junit), if planned
    report_format: str | None = None  # "vitest-json" | "jest-json" | "junit" | ...
    # A second report read when the first is missing (pytest: junit when greenloop's plugin
    # could not load; the plugin switches the junit report off when it runs).
    fallback_report_file: str | None = None
    fallback_report_format: str | None = None
    shell: bool = False  # True only for a user's verbatim --command
    notes: tuple[str, ...] = ()
    # Why the runner cannot start (not installed), with how to install it; execute() then
    # reports a broken run without starting anything.
    unavailable: str | None = None
    # How the run is narrowed: None runs the whole suite; "target", "last_failed", "command"
    # or "shard" (RunResult.selection: a narrowed run closes only the bugs whose tests it names).
    selection: str | None = None
    shard: ShardInfo | None = None  # the part of the suite this run runs (`--shard I/N`)
    # A record the runner appends to as tests start and end (greenloop's pytest plugin and
    # node:test reporter): what a run stopped at its deadline saw, and the test it stopped in.
    stream_file: str | None = None
    # NDJSON lines, one per finished test, that greenloop's reporter for the runner appends
    # while it runs (live progress per test); None: progress counts the text output's lines.
    progress_file: str | None = None

    @property
    def command_text(self) -> str:
        """The command as a shell would show it (quoted)."""
        import shlex

        return self.argv[0] if self.shell else shlex.join(self.argv)


class Progress(NamedTuple):
    """Counts of tests finished so far while a run is going (live progress, MCP notifications)."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    elapsed_ms: int = 0

    @property
    def done(self) -> int:
        """Tests finished so far (passed + failed + skipped)."""
        return self.passed + self.failed + self.skipped

    def to_json(self) -> dict[str, Any]:
        """The progress as JSON."""
        return {
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "done": self.done,
            "elapsed_ms": self.elapsed_ms,
        }


class RawRun(NamedTuple):
    """What the process layer observed. Output lives in files; nothing here is parsed."""

    exit_code: int | None
    timed_out: bool
    aborted: bool
    duration_ms: int
    stdout_path: str
    stderr_path: str
    signal: int | None = None
    spawn_error: str | None = None  # the command could not start (not found, permission)
    survivors: tuple[int, ...] = ()  # pids still alive after the sweep (should be empty)


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
            enforced_by=_opt_str(d.get("enforced_by")),
            workspace_root=_opt_str(d.get("workspace_root")),
            note=_opt_str(d.get("note")),
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
            first_pass_run=_opt_str(d.get("first_pass_run")),
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
        d = self._asdict()
        for key in ("kept_files", "rerun_files"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ResumeInfo":
        return cls(
            from_run=str(d.get("from_run", "")),
            kept=int(d.get("kept") or 0),
            kept_files=tuple(str(x) for x in d.get("kept_files") or ()),
            rerun_files=tuple(str(x) for x in d.get("rerun_files") or ()),
            dropped=int(d.get("dropped") or 0),
            rerun_run=_opt_str(d.get("rerun_run")),
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
    # "command" (a verbatim command may run anything) or "shard" (one part of a split suite).
    # A narrowed run closes only the bugs whose own tests it names in `passed_tests`.
    selection: str | None = None
    passed_tests: tuple[str, ...] = ()
    retry: RetryInfo | None = None
    # Set on a run of one shard (`--shard I/N`); `greenloop merge` folds all N into one result.
    shard: ShardInfo | None = None
    resume_token: str | None = None  # continues this run if greenloop stops before it ends
    resume: ResumeInfo | None = None  # set when this result continues an interrupted run

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
            "retry": self.retry.to_json() if self.retry is not None else None,
            "shard": self.shard.to_json() if self.shard is not None else None,
            "resume_token": self.resume_token,
            "resume": self.resume.to_json() if self.resume is not None else None,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "RunResult":
        """A result from result.json's form."""
        outcome = d.get("outcome", "broken")
        return cls(
            run_id=str(d["run_id"]),
            ok=bool(d.get("ok", False)),
            outcome=outcome if outcome in ("green", "red", "broken") else "broken",
            framework=_opt_str(d.get("framework")),
            command=str(d.get("command", "")),
            exit_code=_opt_int(d.get("exit_code")),
            timed_out=bool(d.get("timed_out", False)),
            aborted=bool(d.get("aborted", False)),
            crashed=bool(d.get("crashed", False)),
            crash_reason=_opt_str(d.get("crash_reason")),
            summary=Summary.from_json(d.get("summary") or {}),
            failures=tuple(Failure.from_json(f) for f in d.get("failures") or ()),
            output_tail=str(d.get("output_tail") or ""),
            notes=tuple(str(n) for n in d.get("notes") or ()),
            duration_ms=int(d.get("duration_ms") or 0),
            sandbox=SandboxInfo.from_json(d.get("sandbox") or {}),
            result_ref=_opt_str(d.get("result_ref")),
            workspace=_opt_str(d.get("workspace")),
            session_id=_opt_str(d.get("session_id")),
            started_at=_opt_str(d.get("started_at")),
            next_action=_opt_str(d.get("next_action")),
            bugs_opened=tuple(str(b) for b in d.get("bugs_opened") or ()),
            bugs_transitioned=tuple(
                {str(k): str(v) for k, v in t.items()} for t in d.get("bugs_transitioned") or ()
            ),
            selection=_opt_str(d.get("selection")),
            passed_tests=tuple(str(t) for t in d.get("passed_tests") or ()),
            retry=RetryInfo.from_json(d["retry"]) if isinstance(d.get("retry"), dict) else None,
            shard=ShardInfo.from_json(d["shard"]) if isinstance(d.get("shard"), dict) else None,
            resume_token=_opt_str(d.get("resume_token")),
            resume=ResumeInfo.from_json(d["resume"]) if isinstance(d.get("resume"), dict) else None,
        )
