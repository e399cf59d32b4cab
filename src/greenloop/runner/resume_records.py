"""What an interrupted unit run had finished, file by file, read from the records its runner
left in the run folder while it ran (`greenloop run --mode resume`, greenloop.runner.resume).

A runner killed before it wrote its report still leaves, line by line:

- pytest: greenloop's plugin's stream (stream.ndjson): the collected node ids once collection
  ends, a start and an end per test, each failure in detail; and progress.ndjson, one status
  line per test report (pytest's own categories: a test that passes and then errors in its
  teardown has two, as pytest's closing line counts it);
- vitest: greenloop's progress reporter (progress.ndjson): the test files vitest planned, a
  status line per test (with the failing ones' error), and a line when a file ends;
- node:test: greenloop's TAP reporter's stream (stream.ndjson): every test file as node
  enqueues it when the run starts, and the start and end of each, a file's own entry named
  after the file; and the progress reporter's status line per test, by its full name;
- unittest: greenloop's runner's stream (stream.ndjson): the loaded tests with their modules'
  files, a start per test and an end with what it added to the counts (and its failures), and
  what failed between tests (a class or module fixture), placed in the file it failed in.

From them: every test file of the run, the files whose every test finished (their counts,
passed tests and failures), and the files that had started. Other runners (jest, mocha,
bun, go, cargo, a package.json script) leave no list of the run's files that a
resume can trust: `read` says so, and the whole suite runs again.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, NamedTuple

from greenloop.frameworks.common import bounded_join, relativize, strip_ansi, trim_stack
from greenloop.frameworks.stream import json_records
from greenloop.model import Failure, Plan

__all__ = ["FileTests", "Finished", "read"]

RESUMABLE = ("pytest", "vitest", "node:test", "unittest")


class FileTests(NamedTuple):
    """The results of one test file whose every test finished."""

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    passed_tests: tuple[str, ...] = ()
    failures: tuple[Failure, ...] = ()
    skipped_tests: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        """Tests kept from the finished files."""
        return self.passed + self.failed + self.skipped


class Finished(NamedTuple):
    """What the interrupted run had done. Paths are relative to the runner's folder (plan.cwd)."""

    files: tuple[str, ...]  # every test file the run was to run, in its order
    done: dict[str, FileTests]  # the files whose every test finished
    started: frozenset[str]  # files with a test started or finished (done or half done)
    tests_of: dict[str, tuple[str, ...]]  # pytest: each file's collected node ids, as a target
    seen: dict[str, int]  # each file's test results recorded (a half-done file's are dropped)


def read(plan: Plan) -> Finished | str:
    """The run's finished files, or why they cannot be known (then the whole suite reruns)."""
    if plan.framework not in RESUMABLE:
        return (f"{plan.framework or 'this runner'} leaves no record of the run's test files that a "
                "resume can trust (only pytest, vitest, node:test and unittest do)")
    try:
        if plan.framework == "pytest":
            return _pytest(plan)
        if plan.framework == "vitest":
            return _vitest(plan)
        if plan.framework == "unittest":
            return _unittest(plan)
        return _node(plan)
    except OSError as exc:
        return f"the run's records could not be read ({exc.strerror or exc})"


def _records(path: str | None) -> Iterator[dict[str, Any]]:
    """The JSON objects of an NDJSON record (greenloop.frameworks.stream.json_records), none
    without a path."""
    return json_records(path) if path else iter(())


def _count(statuses: list[tuple[str, str]], failures: list[Failure]) -> FileTests:
    """A file's results from its (status, name) lines and its failures."""
    passed = [name for status, name in statuses if status == "pass"]
    failed = sum(1 for status, _ in statuses if status == "fail")
    skipped = [name for status, name in statuses if status == "skip"]
    return FileTests(len(passed), failed, len(skipped), tuple(passed), tuple(failures), tuple(skipped))


def _rel(path: str, cwd: str) -> str:
    return os.path.relpath(path if os.path.isabs(path) else os.path.join(cwd, path), cwd)


# ----------------------------------------------------------------------------- pytest


def _pytest(plan: Plan) -> Finished | str:
    from greenloop.frameworks.pytest_report import _failure

    cwd = plan.cwd
    collected: list[str] | None = None
    rootdir = cwd
    started: set[str] = set()
    ended: set[str] = set()
    failures: dict[str, list[Failure]] = {}
    collect_errors: list[str] = []
    for item in _records(plan.stream_file):
        if isinstance(item.get("collected"), list):
            collected = [str(x) for x in item["collected"]]
            rootdir = str(item.get("rootdir") or cwd)
        elif "start" in item:
            started.add(str(item["start"]))
        elif "end" in item:
            ended.add(str(item["end"]))
        elif isinstance(item.get("failure"), dict):
            f = _failure(item["failure"], cwd)
            if f is None:
                continue
            failures.setdefault(f.test, []).append(f)
            if item["failure"].get("when") == "collect" and collected is None:
                collect_errors.append(f.test)
    if collected is None:
        return ("pytest's collection was not recorded (the run stopped while collecting, or greenloop's "
                "plugin did not load)")
    statuses: dict[str, list[str]] = {}
    for item in _records(plan.progress_file):
        if isinstance(item.get("status"), str) and isinstance(item.get("test"), str):
            statuses.setdefault(item["test"], []).append(item["status"])

    def file_of(nodeid: str) -> str:
        return _rel(os.path.join(rootdir, nodeid.split("::", 1)[0]), cwd)

    def node_arg(nodeid: str) -> str:  # a node id relative to rootdir, as the runner's folder takes it
        path, sep, rest = nodeid.partition("::")
        return file_of(path) + sep + rest

    ids_of: dict[str, list[str]] = {}
    for nodeid in collect_errors:  # a file that could not be collected: its error is all it ran
        ids_of.setdefault(file_of(nodeid), []).append(nodeid)
        ended.add(nodeid)
    for nodeid in collected:
        ids_of.setdefault(file_of(nodeid), []).append(nodeid)
    done: dict[str, FileTests] = {}
    for file, ids in ids_of.items():
        if all(i in ended for i in ids):
            lines = [(s, i) for i in ids for s in statuses.get(i, ())]
            done[file] = _count(lines, [f for i in ids for f in failures.get(i, ())])
    begun = frozenset(file_of(i) for i in started | ended)
    tests_of = {file: tuple(node_arg(i) for i in ids if i in collected) for file, ids in ids_of.items()}
    seen = {file: sum(len(statuses.get(i, ())) for i in ids) for file, ids in ids_of.items()}
    return Finished(tuple(ids_of), done, begun, tests_of, seen)


# ----------------------------------------------------------------------------- vitest


def _vitest(plan: Plan) -> Finished | str:
    from greenloop.frameworks.vitest_report import failure_from_text

    cwd = plan.cwd
    files: list[str] | None = None
    lines: dict[str, list[tuple[str, str]]] = {}
    failures: dict[str, list[Failure]] = {}
    ends: dict[str, dict[str, Any]] = {}
    for item in _records(plan.progress_file):
        if isinstance(item.get("files"), list):
            files = [_rel(str(x), cwd) for x in item["files"]]
        elif isinstance(item.get("file_done"), str):
            ends[_rel(item["file_done"], cwd)] = item
        elif isinstance(item.get("status"), str) and isinstance(item.get("file"), str):
            file, name = _rel(item["file"], cwd), str(item.get("test") or "")
            lines.setdefault(file, []).append((item["status"], name))
            if item["status"] == "fail":
                text = strip_ansi(str(item.get("stack") or item.get("message") or ""))
                failure = failure_from_text(name, file, relativize(text, cwd), cwd)
                failures.setdefault(file, []).append(failure)
    if files is None:
        return "vitest's list of test files was not recorded (the run stopped before any test file started)"
    done: dict[str, FileTests] = {}
    for file, end in ends.items():
        own = lines.get(file, [])
        found = list(failures.get(file, ()))
        tests = _count(own, found)
        if end.get("state") == "failed" and not tests.failed:
            # the file failed outside its tests: it could not load (no test ran) or a hook
            # threw; vitest's report counts that as one failure, and so does the resume
            errors = [relativize(strip_ansi(str(e)), cwd) for e in end.get("errors") or ()]
            message = bounded_join(errors[:5]) if errors else "a beforeAll/afterAll hook failed"
            found.append(Failure(test=file, file=file, kind="hook" if own else "load", message=message))
            tests = tests._replace(failed=tests.failed + 1, failures=tuple(found))
        done[file] = tests
    seen = {file: len(own) for file, own in lines.items()}
    return Finished(tuple(files), done, frozenset(lines) | frozenset(ends), {}, seen)


# ----------------------------------------------------------------------------- node:test


def _node(plan: Plan) -> Finished | str:
    cwd = plan.cwd
    files: list[str] = []
    started: set[str] = set()
    finished: set[str] = set()
    for item in _records(plan.stream_file):
        if isinstance(item.get("queued_file"), str):
            files.append(_rel(item["queued_file"], cwd))
            continue
        file = item.get("file")
        name = item.get("start", item.get("end"))
        if isinstance(file, str) and name == file:  # the entry node makes for the file itself
            (started if "start" in item else finished).add(_rel(file, cwd))
    if not files:
        return ("node did not record its list of test files (greenloop's TAP reporter was not loaded, "
                "or the run stopped before node started)")
    lines: dict[str, list[tuple[str, str]]] = {}
    failures: dict[str, list[Failure]] = {}
    for item in _records(plan.progress_file):
        if not (isinstance(item.get("status"), str) and isinstance(item.get("file"), str)):
            continue
        file, name = _rel(item["file"], cwd), str(item.get("test") or "")
        own_entry = name == item["file"]  # the file failed outside any test: it could not load
        name = file if own_entry else name
        lines.setdefault(file, []).append((item["status"], name))
        if item["status"] == "fail":
            message = relativize(strip_ansi(str(item.get("message") or "")), cwd)
            stack = trim_stack(relativize(strip_ansi(str(item.get("stack") or "")), cwd), cwd)
            failures.setdefault(file, []).append(Failure(
                test=name, file=file, message=bounded_join(message.splitlines()[:20]), stack=stack,
                kind="load" if own_entry else "test"))
    done = {file: _count(lines.get(file, []), failures.get(file, [])) for file in finished}
    seen = {file: len(own) for file, own in lines.items()}
    return Finished(tuple(dict.fromkeys(files)), done, frozenset(started | finished | set(lines)), {}, seen)


# ----------------------------------------------------------------------------- unittest


def _unittest(plan: Plan) -> Finished | str:
    from greenloop.frameworks.unittest import report_failure

    cwd = plan.cwd
    collected: list[tuple[str, str]] | None = None
    ends: dict[str, dict[str, Any]] = {}
    started: set[str] = set()
    between: list[dict[str, Any]] = []
    for item in _records(plan.stream_file):
        if isinstance(item.get("collected"), list):
            # a test without a file (a module that failed to import) stands for itself
            collected = [(str(t[0]), str(t[1] or t[0])) for t in item["collected"]
                         if isinstance(t, list) and len(t) == 2]
        elif isinstance(item.get("start"), str):
            started.add(item["start"])
        elif isinstance(item.get("end"), str):
            ends[item["end"]] = item
        elif isinstance(item.get("between"), dict):
            between.append(item["between"])
    if collected is None:
        return "unittest's loaded tests were not recorded (greenloop's unittest runner did not start them)"
    ids_of: dict[str, list[str]] = {}
    for test_id, file in collected:
        ids_of.setdefault(file, []).append(test_id)
    passed: dict[str, list[str]] = {}
    skipped: dict[str, list[str]] = {}
    counts: dict[str, list[int]] = {file: [0, 0] for file in ids_of}  # failed, skipped
    failures: dict[str, list[Failure]] = {}
    file_of = {test_id: file for test_id, file in collected}
    for test_id, end in ends.items():
        if test_id not in file_of:
            continue
        file = file_of[test_id]
        if end.get("passed"):
            passed.setdefault(file, []).append(test_id)
        counts[file][0] += int(end.get("failed") or 0)
        counts[file][1] += int(end.get("skipped") or 0)
        if end.get("skipped") and not end.get("passed") and not end.get("failed"):
            skipped.setdefault(file, []).append(test_id)
        failures.setdefault(file, []).extend(report_failure(f, cwd) for f in end.get("failures") or ())
    for item in between:  # a class or module fixture failed: the file its traceback names
        found = [f for f in item.get("failures") or () if isinstance(f, dict)]
        if len(found) != int(item.get("failed") or 0) or item.get("passed") or item.get("skipped"):
            return "a failure outside any test was counted but not recorded in detail"
        for f in found:
            where = f.get("file")
            if not isinstance(where, str) or where not in ids_of:
                return f"a failure outside any test ({f.get('id')}) could not be placed in a test file"
            counts[where][0] += 1
            failures.setdefault(where, []).append(report_failure(f, cwd))
    done: dict[str, FileTests] = {}
    for file, ids in ids_of.items():
        if all(i in ends for i in ids):
            own = passed.get(file, [])
            done[file] = FileTests(len(own), counts[file][0], counts[file][1], tuple(own),
                                   tuple(failures.get(file, ())), tuple(skipped.get(file, ())))
    unplaced = [file for file in ids_of if file not in done and not file.endswith(".py")]
    if unplaced:
        return f"{unplaced[0]} did not finish and names no file to run again"
    begun = frozenset(file_of[i] for i in started | set(ends) if i in file_of)
    seen = {file: sum(1 for i in ids if i in ends) for file, ids in ids_of.items()}
    return Finished(tuple(ids_of), done, begun, {}, seen)
