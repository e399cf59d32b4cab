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
    "FAILURE_KINDS",
    "FRAMEWORKS",
    "AffectedInfo",
    "Detection",
    "Failure",
    "FailureKind",
    "FrameworkId",
    "Outcome",
    "ParseResult",
    "Plan",
    "Progress",
    "RawRun",
    "ShardInfo",
    "Suite",
    "Summary",
    "optional_int",
    "optional_str",
]

FrameworkId = Literal[
    "vitest", "jest", "npm-test", "pytest", "node:test", "go", "cargo", "mocha", "unittest", "bun"
]
FRAMEWORKS: tuple[str, ...] = get_args(FrameworkId)
Outcome = Literal["green", "red", "broken"]


def optional_str(v: Any) -> str | None:
    """A JSON value read back as an optional string (None stays None)."""
    return None if v is None else str(v)


def optional_int(v: Any) -> int | None:
    """A JSON value read back as an optional integer (None stays None)."""
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


FailureKind = Literal["test", "load", "hook", "timeout", "cancelled"]
FAILURE_KINDS: tuple[str, ...] = ("test", "load", "hook", "timeout", "cancelled")


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
    # test that was still running when the run's deadline stopped it, "cancelled" for a test
    # the runner counted failed because a hook above it failed (node:test), named beside
    # that hook's own record, which its file and line point at.
    kind: FailureKind = "test"
    # True: the test failed, then passed when rerun (`rerun_failures`). Written only when set.
    flaky: bool = False
    # Where in the code under test the error was thrown ("src/utils.ts:570"), when `file` and
    # `line` are the test's own frame (a JavaScript test failing by an exception from source).
    # Written only when set.
    origin: str | None = None

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
            "origin": self.origin,
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
            file=optional_str(d.get("file")),
            line=optional_int(d.get("line")),
            message=str(d.get("message") or ""),
            expected=optional_str(d.get("expected")),
            got=optional_str(d.get("got")),
            stack=str(d.get("stack") or ""),
            hint=str(d.get("hint") or ""),
            bug_id=optional_str(d.get("bug_id")),
            kind=kind if kind in FAILURE_KINDS else "test",
            flaky=bool(d.get("flaky", False)),
            origin=optional_str(d.get("origin")),
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
    # The tests the runner reported as skipped, xfail or todo, named the same way (the gate's
    # evidence that a test was taken away to get green). Empty where the output does not name them.
    skipped_tests: tuple[str, ...] = ()
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
            "skipped_tests": list(self.skipped_tests),
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
    the git commit the shard ran at (None outside git), so `merge` can refuse shards of
    different commits, and the target the shards split (None: the whole suite), so a merge of
    a folder's shards is named as that folder's run, not the suite's.

    A small immutable class, not a NamedTuple (a tuple's own `index` method would clash with
    the field) nor a dataclass (importing `dataclasses` costs the hook path, see above)."""

    __slots__ = ("commit", "index", "target", "total")
    index: int
    total: int
    commit: str | None
    target: str | None

    def __init__(self, index: int, total: int, commit: str | None = None, target: str | None = None) -> None:
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "total", total)
        object.__setattr__(self, "commit", commit)
        object.__setattr__(self, "target", target)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"ShardInfo is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShardInfo) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[int, int, str | None, str | None]:
        return (self.index, self.total, self.commit, self.target)

    def __repr__(self) -> str:
        return (f"ShardInfo(index={self.index}, total={self.total}, commit={self.commit!r}, "
                f"target={self.target!r})")

    def to_json(self) -> dict[str, Any]:
        """The shard as JSON (`{index, total}`, plus `commit` and `target` when known)."""
        d: dict[str, Any] = {"index": self.index, "total": self.total}
        if self.commit is not None:
            d["commit"] = self.commit
        if self.target is not None:
            d["target"] = self.target
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "ShardInfo":
        """A shard from its JSON form."""
        return cls(index=int(d["index"]), total=int(d["total"]), commit=optional_str(d.get("commit")),
                   target=optional_str(d.get("target")))


class AffectedInfo(NamedTuple):
    """What an `--affected` run covers (greenloop.runner.affected): the files changed since
    `since` (the session's last green whole-suite run, or git HEAD), the test files it chose
    (the runner's related-files arguments for vitest and jest), the owed tests it added, and
    `fallback`, the reason it ran the whole suite instead (a file it cannot map), or None."""

    changed: tuple[str, ...] = ()
    tests: tuple[str, ...] = ()
    owed: tuple[str, ...] = ()
    since: str = "HEAD"
    fallback: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The selection as JSON (result.json's `affected`)."""
        return {"changed": list(self.changed), "tests": list(self.tests), "owed": list(self.owed),
                "since": self.since, "fallback": self.fallback}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "AffectedInfo":
        """The selection from its JSON form."""
        return cls(
            changed=tuple(str(x) for x in d.get("changed") or ()),
            tests=tuple(str(x) for x in d.get("tests") or ()),
            owed=tuple(str(x) for x in d.get("owed") or ()),
            since=str(d.get("since") or "HEAD"),
            fallback=optional_str(d.get("fallback")),
        )


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
    # How the run is narrowed: None runs the whole suite; "target", "last_failed", "command",
    # "shard" or "affected" (RunResult.selection: a narrowed run closes only the bugs whose
    # tests it names).
    selection: str | None = None
    shard: ShardInfo | None = None  # the part of the suite this run runs (`--shard I/N`)
    # A record the runner appends to as tests start and end (greenloop's pytest plugin and
    # node:test reporter): what a run stopped at its deadline saw, and the test it stopped in.
    stream_file: str | None = None
    # NDJSON lines, one per finished test, that greenloop's reporter for the runner appends
    # while it runs (live progress per test); None: progress counts the text output's lines.
    progress_file: str | None = None
    affected: AffectedInfo | None = None  # what an `--affected` run chose (or why it ran everything)
    # Set when the plan runs nothing (an `--affected` run with nothing changed and nothing
    # owed): execute() starts nothing and reports a run that is not green, saying why.
    nothing: str | None = None

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
