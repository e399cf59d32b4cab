"""greenloop's pytest report plugin: counts and failures as one compact JSON file.

Loaded by `greenloop run` with `-p _greenloop_pytest_report` through a PYTHONPATH entry that
holds only this file, so it works in any workspace virtualenv. It imports nothing from
greenloop (only the standard library and pytest) and keeps to Python 3.8+ syntax
(its annotations are never evaluated).

    GREENLOOP_PYTEST_REPORT=<path>   where to write the report (nothing happens without it)
    GREENLOOP_PYTEST_JUNIT=<path>    the --junitxml path greenloop planned as a fallback; when
                                     this plugin is active it switches that report off
    GREENLOOP_PYTEST_SHARD=I/N       run only shard I of N (`greenloop run --shard I/N`): items
                                     whose node id hashes to another shard are deselected
    GREENLOOP_PYTEST_STREAM=<path>   where to append, as they happen, one JSON line per test
                                     started ({"start": nodeid, "line": n}) and ended ({"end": nodeid}) and
                                     per failure ({"failure": {…}}, as in the report): what a run
                                     stopped at its deadline had seen, and the test it stopped in;
                                     first, once collection ends, the node ids it will run
                                     ({"collected": [...], "rootdir": path}), which resume needs
    GREENLOOP_PROGRESS_FILE=<path>   where to append one NDJSON line per finished test, the
                                     moment pytest reports it (live progress: greenloop tails
                                     the file; pytest prints a file's dots on one line)

Under pytest-xdist (`-n N`) only the controller writes: the workers skip this plugin's
setup (they carry `config.workerinput`) and xdist replays every worker's reports, test
starts and test ends into the controller's hooks, so the report, the stream and progress
see every worker's tests once, in the order the controller received them. A worker that
dies inside a test (`os._exit`, a signal) never reports its end: xdist reports that test
failed in a phase named "???" with "worker 'gwN' crashed while running …"; the report keeps
it as a failure of its own (its line taken from its start, which the controller records only
under xdist) and the stream closes it.
Sharding deselects in each worker's collection, so every worker holds the same shard.

Sharding hashes each item's node id (CRC-32 of its UTF-8 bytes, modulo N): node ids are
relative to pytest's rootdir, so every machine puts a test in the same shard whatever the
collection order, the N shards are disjoint, and together they are the whole suite.

Counting is pytest's own closing line: the terminal reporter's tally of reports by the
category pytest's `pytest_report_teststatus` hook gives them (xfail is "xfailed", a strict
xpass "failed", an error in setup or teardown "error", a collection error "error"), read
once at the end, so the plugin costs nothing per test. Without a terminal reporter
(`-p no:terminal`) it keeps the same tally itself, report by report. Only failing reports
are kept in detail: node id, phase, file and line, message and the long representation.

The report: {"version": 1, "pytest": "8.x", "counts": {"passed": n, "failed": n, …},
"failures": [{"nodeid", "when", "category", "file", "line", "message", "longrepr", "expected"?,
"got"? (a failing `==`'s operands, whole)}],
"passed": [nodeid], "skipped": [nodeid] (skipped and xfailed), "omitted": n, "duration": seconds,
"exitstatus": n}
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import zlib
from typing import Any

import pytest

MAX_FAILURES = 200  # failures kept in detail; the counts stay exact
MAX_LONGREPR = 20000  # characters of one failure's long representation

_REPORT_VAR = "GREENLOOP_PYTEST_REPORT"
_JUNIT_VAR = "GREENLOOP_PYTEST_JUNIT"
_SHARD_VAR = "GREENLOOP_PYTEST_SHARD"
_STREAM_VAR = "GREENLOOP_PYTEST_STREAM"
_PROGRESS_VAR = "GREENLOOP_PROGRESS_FILE"

# the terminal reporter's categories as live progress counts them
_PROGRESS_STATUS = {
    "passed": "pass",
    "xpassed": "pass",
    "failed": "fail",
    "error": "fail",
    "skipped": "skip",
    "xfailed": "skip",
}


# the terminal reporter's categories that are test outcomes (not "", "warnings", "deselected")
CATEGORIES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


# the phase xdist gives the report of a test whose worker died while running it
CRASH_PHASE = "???"


MAX_OPERAND = 4000  # characters of an assertion operand's repr kept in full


class _Operands:
    """The operands of each test's failing comparison (`assert got == expected`), in full:
    pytest's own message shortens long reprs (`({'id': 42}, ...timezone.utc))`), and two
    shortened reprs may read the same. pytest calls `pytest_assertrepr_compare` with the two
    values when a rewritten assert fails; the report keeps them as `got` (left) and
    `expected` (right)."""

    def __init__(self) -> None:
        self.current = ""
        self.found: dict[str, tuple[str, str, str]] = {}  # node id -> (op, left, right)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        self.current = nodeid

    def pytest_assertrepr_compare(self, config: pytest.Config, op: str, left: Any, right: Any) -> None:
        if self.current:
            self.found[self.current] = (op, _repr(left), _repr(right))
        # None: pytest's own explanation is still the one printed


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception as exc:  # a value whose __repr__ raises never loses the failure
        text = f"<unrepresentable {type(value).__name__}: {exc}>"
    if len(text) <= MAX_OPERAND:
        return text
    return text[:MAX_OPERAND] + f"… [cut {len(text) - MAX_OPERAND} chars]"


def _operands_of(report: Any, operands: _Operands | None) -> dict[str, str]:
    """`expected`/`got` of a failing `==` comparison in the report's test, in full; {} when the
    failure is not that comparison failing (an exception, a caught AssertionError)."""
    if operands is None or getattr(report, "when", None) != "call":
        return {}
    found = operands.found.get(report.nodeid)
    crash = getattr(report.longrepr, "reprcrash", None)
    message = str(getattr(crash, "message", "") or "")
    if message.startswith("AssertionError: "):  # (a tuple's comparison message names the error)
        message = message[len("AssertionError: "):]
    if found is None or found[0] != "==" or not message.startswith("assert"):
        return {}
    return {"got": found[1], "expected": found[2]}


def _detail(category: str, report: Any, lines: dict[str, int] | None = None,
            operands: _Operands | None = None) -> dict[str, Any]:
    location = getattr(report, "location", None)
    file = line = None
    if location:
        file = location[0]
        if location[1] is not None:
            line = location[1] + 1
        elif lines:  # a crashed worker's report has no line: where the test started has it
            line = lines.get(report.nodeid)
    elif getattr(report, "fspath", None):
        file = str(report.fspath)
    crash = getattr(report.longrepr, "reprcrash", None)
    try:
        text = report.longreprtext
    except Exception:  # a plugin's odd longrepr never loses the failure
        text = str(report.longrepr)
    return {
        "nodeid": report.nodeid,
        "when": getattr(report, "when", None) or "collect",
        "category": category,
        "file": file,
        "line": line,
        "message": getattr(crash, "message", None),
        "longrepr": text[:MAX_LONGREPR],
        **_operands_of(report, operands),
    }


class _Tally:
    """The terminal reporter's tally, kept here when there is no terminal reporter."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.stats: dict[str, list[Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        category = _category(self.config, report)
        if category:
            self.stats.setdefault(category, []).append(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.stats.setdefault("error", []).append(report)
        elif report.skipped:
            self.stats.setdefault("skipped", []).append(report)


def _category(config: pytest.Config, report: Any) -> str:
    """The terminal reporter's category of one report ("" for a passing setup or teardown)."""
    result = config.hook.pytest_report_teststatus(report=report, config=config)
    if result is not None:
        return str(result[0])
    if report.when == "call":  # pytest's default answer lives in the terminal plugin itself
        return str(report.outcome)
    return "error" if report.failed else "skipped" if report.skipped else ""


class _Progress:
    """One NDJSON line per finished test, written at once (an unbuffered append: a few
    microseconds a test), counted as the terminal reporter's tally counts it."""

    def __init__(self, config: pytest.Config, fd: int) -> None:
        self.config = config
        self.fd = fd

    def _write(self, status: str, nodeid: str) -> None:
        line = json.dumps({"status": status, "test": nodeid}, ensure_ascii=False) + "\n"
        with contextlib.suppress(OSError):  # a full disk loses progress lines, never the run
            os.write(self.fd, line.encode("utf-8"))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" and report.passed:
            return  # a passing setup or teardown is no test outcome (and most reports are)
        status = _PROGRESS_STATUS.get(_category(self.config, report))
        if status is not None:
            self._write(status, report.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._write("fail", report.nodeid)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


class _Starts:
    """Where each test started (node id -> line), kept only when xdist distributes the tests:
    a crashed worker's report has no line of its own."""

    def __init__(self) -> None:
        self.lines: dict[str, int] = {}

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if location and isinstance(location[1], int):
            self.lines[nodeid] = location[1] + 1


class _Report:
    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config = config
        self.path = path
        self.started = time.time()
        self.tally: _Tally | None = None
        self.starts: _Starts | None = None
        self.operands: _Operands | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.config.pluginmanager.get_plugin("terminalreporter") is None:
            self.tally = _Tally(self.config)
            self.config.pluginmanager.register(self.tally, "_greenloop_pytest_tally")

    def _stats(self) -> dict[str, list[Any]]:
        if self.tally is not None:
            return self.tally.stats
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        stats = getattr(terminal, "stats", None)
        return stats if isinstance(stats, dict) else {}

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        stats = self._stats()
        counts: dict[str, int] = {}
        failures: list[dict[str, Any]] = []
        passed: list[str] = []
        skipped: list[str] = []
        omitted = 0
        for category in CATEGORIES:
            reports = [r for r in stats.get(category, ()) if hasattr(r, "nodeid")]
            if not reports:
                continue
            counts[category] = len(reports)
            if category in ("passed", "xpassed"):
                # the evidence a bug needs to move to fixed: this test ran and passed
                passed.extend(str(r.nodeid) for r in reports)
            elif category in ("skipped", "xfailed"):
                # the evidence of a test taken away to get green (a skip or xfail mark, a
                # pytest.skip() call, a module skipped whole: then its file's node id)
                skipped.extend(str(r.nodeid) for r in reports)
            if category not in ("failed", "error"):
                continue
            for report in reports:
                if len(failures) >= MAX_FAILURES:
                    omitted += 1
                    continue
                failures.append(_detail(category, report, self.starts.lines if self.starts else None,
                                        self.operands))
        data = {
            "version": 1,
            "pytest": _pytest_version(),
            "counts": counts,
            "failures": failures,
            "passed": passed,
            "skipped": list(dict.fromkeys(skipped)),
            "omitted": omitted,
            "duration": round(time.time() - self.started, 3),
            "exitstatus": int(exitstatus),
        }
        shard = _shard()
        if shard is not None:
            data["shard"] = f"{shard[0]}/{shard[1]}"
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)
            os.replace(tmp, self.path)
        except OSError:
            pass  # no report: greenloop says so and reads the text output


def shard_of(nodeid: str, total: int) -> int:
    """The shard (1-based) of `total` that runs the item with this node id."""
    return zlib.crc32(nodeid.encode("utf-8")) % total + 1


def _shard() -> tuple[int, int] | None:
    text = os.environ.get(_SHARD_VAR, "")
    index, _, total = text.partition("/")
    try:
        i, n = int(index), int(total)
    except ValueError:
        return None
    return (i, n) if 1 <= i <= n else None


@pytest.hookimpl(trylast=True)  # after -k/-m and other plugins have chosen the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[Any]) -> None:
    shard = _shard()
    if shard is None:
        return
    index, total = shard
    keep: list[Any] = []
    drop: list[Any] = []
    for item in items:
        (keep if shard_of(item.nodeid, total) == index else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


class _Stream:
    """The partial record: a line written and flushed per test start and end and per failure,
    so a run killed at its deadline (no pytest_sessionfinish, no report) still says what it
    saw and which tests were running (one per xdist worker). Two short writes per test."""

    def __init__(self, path: str, operands: _Operands | None = None) -> None:
        # open for the whole session, line-buffered: each line reaches the file when written
        self.fh = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self.operands = operands

    def _write(self, item: dict[str, Any]) -> None:
        with contextlib.suppress(OSError, ValueError):  # a full disk never fails the run
            self.fh.write(json.dumps(item, ensure_ascii=False) + "\n")

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        # the whole run's test list: `greenloop run --mode resume` tells from it which files
        # had not started when a run was cut short
        config = session.config
        rootdir = getattr(config, "rootpath", None) or getattr(config, "rootdir", "")  # pytest < 6.1
        self._write({"collected": [item.nodeid for item in session.items], "rootdir": str(rootdir)})

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        line = location[1] + 1 if location and isinstance(location[1], int) else None
        self._write({"start": nodeid, "line": line})

    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        self._write({"end": nodeid})

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            phase = report.when
            category = "failed" if phase in ("call", CRASH_PHASE) else "error"
            self._write({"failure": _detail(category, report, operands=self.operands)})

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._write({"failure": _detail("error", report)})

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        with contextlib.suppress(OSError):
            self.fh.close()


def _pytest_version() -> str | None:
    return str(getattr(pytest, "__version__", "")) or None


@pytest.hookimpl(tryfirst=True)  # before junitxml's own pytest_configure reads xmlpath
def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(_REPORT_VAR)
    if not path or hasattr(config, "workerinput"):  # xdist workers: the controller reports
        return
    junit = os.environ.get(_JUNIT_VAR)
    xmlpath = getattr(config.option, "xmlpath", None)
    if junit and xmlpath and os.path.abspath(xmlpath) == os.path.abspath(junit):
        config.option.xmlpath = None  # the fallback is not needed: this report replaces it
    report = _Report(config, path)
    config.pluginmanager.register(report, "_greenloop_pytest_report_writer")
    report.operands = _Operands()
    config.pluginmanager.register(report.operands, "_greenloop_pytest_operands")
    if getattr(config.option, "dist", "no") != "no":  # pytest-xdist's controller (-n, --dist)
        report.starts = _Starts()
        config.pluginmanager.register(report.starts, "_greenloop_pytest_starts")
    stream = os.environ.get(_STREAM_VAR)
    if stream:
        # without it (a folder it cannot write) a timed-out run has only its text output
        with contextlib.suppress(OSError):
            config.pluginmanager.register(_Stream(stream, report.operands), "_greenloop_pytest_stream")
    progress = os.environ.get(_PROGRESS_VAR)
    if progress:
        try:
            fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError:
            return  # no live progress, never a broken run
        config.pluginmanager.register(_Progress(config, fd), "_greenloop_pytest_progress")
