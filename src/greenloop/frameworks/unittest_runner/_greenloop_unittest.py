"""greenloop's unittest runner: `python -m unittest` plus one compact JSON report.

`greenloop run` starts `python -m _greenloop_unittest [ARGS]` through a PYTHONPATH entry that
holds only this file, so it works with any workspace interpreter. It takes exactly the
arguments of `python -m unittest` (no arguments: discovery from the working folder) and
prints exactly its output (the text runner of the standard library); its result class also
records each outcome, and the report is written when the run ends. It imports nothing from
greenloop (only the standard library) and keeps to Python 3.8+ syntax.

    GREENLOOP_UNITTEST_REPORT=<path>   where to write the report (nothing is written without it)
    GREENLOOP_UNITTEST_STREAM=<path>   where to append {"start": id, "file", "line"} and
                                       {"end": id, "passed", "failed", "skipped", "failures"}
                                       as each test starts and stops (what it added to the
                                       counts); first the tests the run will run
                                       ({"collected": [[id, file], …]}), and {"between": …} for
                                       what failed outside any test (setUpClass, tearDownModule):
                                       what `greenloop run --mode resume` keeps of a run cut short.
                                       One write a test: a test's end goes out with the next
                                       test's start when no code of the workspace runs between
                                       them (the next test is of the same class), so while the
                                       workspace's code runs (a test, a fixture) the record on
                                       disk is the one a write per line would leave

The report: {"version": 1, "python": "3.x", "counts": {"passed", "failures", "errors",
"skipped", "expected_failures", "unexpected_successes", "run"}, "failures": [{"id", "kind",
"category", "file", "line", "message", "traceback"}], "passed": [ids], "skipped": [ids] (skipped
and expected failures), "omitted": n,
"duration": seconds}. Counts are unittest's own: `Ran N tests` and `FAILED (failures=…)`.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import unittest
from types import TracebackType
from typing import Any

MAX_FAILURES = 200  # failures kept in detail; the counts stay exact
MAX_TRACEBACK = 20000  # characters of one failure's traceback

_REPORT_VAR = "GREENLOOP_UNITTEST_REPORT"
_STREAM_VAR = "GREENLOOP_UNITTEST_STREAM"  # a line per test started and stopped, as it happens
_STDLIB = os.path.dirname(os.__file__)


def _where(tb: TracebackType | None) -> tuple[str | None, int | None]:
    """(file, line) of the deepest frame in the workspace (not the standard library, not
    site-packages), relative to the working folder when under it."""
    cwd = os.getcwd()
    found: tuple[str | None, int | None] = (None, None)
    for frame in traceback.extract_tb(tb):
        name = os.path.abspath(frame.filename)
        if name.startswith(_STDLIB) or "site-packages" in name or frame.filename.startswith("<"):
            continue
        rel = os.path.relpath(name, cwd)
        found = (rel if not rel.startswith("..") else name, frame.lineno)
    return found


# what unittest runs in place of a module that could not load or a class that could not set up
_STAND_INS = ("_FailedTest", "_ErrorHolder")


def _name(test: unittest.TestCase) -> tuple[str, str]:
    """(name, kind): unittest's id; a module that failed to import is named after the module
    (kind load); a failing setUpClass/setUpModule keeps unittest's description (kind hook)."""
    cls = type(test).__name__
    if cls == "_FailedTest":
        return getattr(test, "_testMethodName", test.id()), "load"
    if cls == "_ErrorHolder":
        return test.id(), "hook"
    return test.id(), "test"


def _open_stream() -> int | None:
    path = os.environ.get(_STREAM_VAR)
    if not path:
        return None
    try:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return None  # no record: a stopped run then has only its text output


_CWD = os.getcwd()
_FILES: dict[str, str] = {}  # a test file's path relative to the working folder, as JSON, once per file
_NOWHERE = '"file": null, "line": null'


def _where_defined(test: unittest.TestCase) -> str:
    """The start line's part that places the test method: its file (relative to the working
    folder) and first line, as JSON (a line number's JSON is its digits)."""
    try:
        code = getattr(test, test._testMethodName).__code__
    except Exception:  # an odd test class never stops the run
        return _NOWHERE
    name = code.co_filename
    file = _FILES.get(name)
    if file is None:
        rel = os.path.relpath(name, _CWD)
        file = _FILES[name] = json.dumps(name if rel.startswith("..") else rel)
    return f'"file": {file}, "line": {code.co_firstlineno}'


# what a passing test adds, encoded once: most tests' end line
_ONE_PASSED_DELTA: dict[str, Any] = {"failed": 0, "skipped": 0, "passed": 1, "failures": []}
_ONE_PASSED = json.dumps(_ONE_PASSED_DELTA)[1:]
_json_string = json.encoder.encode_basestring_ascii  # what json.dumps does with a string, without its checks

# The tests whose next test (in the order the run goes) is of the same class: between the two,
# unittest runs no code of the workspace (no class or module fixture), so such a test's end
# line can wait and go out with the next test's start line, in one write. Any other test's end
# is written as it stops. Filled by _collected, by id() (the suite holds every test until it runs).
_HELD_ENDS: set[int] = set()


class _Collector(unittest.TextTestResult):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.greenloop_stream = _open_stream()
        self.greenloop_test: unittest.TestCase | None = None  # the test running now
        self.greenloop_test_id = ""  # and its id
        self.greenloop_quoted = ""  # and its id as a JSON string
        self.greenloop_held = ""  # the end line of the test that stopped last, when it can wait
        self.greenloop_passed: list[str] = []
        self.greenloop_failures: list[dict[str, Any]] = []
        self.greenloop_omitted = 0
        self.greenloop_at = (0, 0, 0, 0)  # the tally when the last test stopped

    def _keep(self, category: str, test: unittest.TestCase, err: Any) -> None:
        if len(self.greenloop_failures) >= MAX_FAILURES:
            self.greenloop_omitted += 1
            return
        name, kind = _name(test)
        file = line = None
        message = text = ""
        if err is not None:
            exc_type, value, tb = err
            file, line = _where(tb)
            try:  # the traceback unittest itself prints (its own frames left out)
                text = self._exc_info_to_string(err, test)  # type: ignore[attr-defined]
            except Exception:  # an odd exception never loses the failure
                text = repr(value)
            message = "".join(traceback.format_exception_only(exc_type, value)).strip()
        else:
            message = "unexpected success: the test is marked expectedFailure but passed"
        self.greenloop_failures.append({
            "id": name, "kind": kind, "category": category, "file": file, "line": line,
            "message": message[:MAX_TRACEBACK], "traceback": text[:MAX_TRACEBACK],
        })

    def _tally(self) -> tuple[int, int, int, int]:
        """(failed, skipped, passed, failures kept) so far, as the report counts them."""
        failed = len(self.failures) + len(self.errors) + len(self.unexpectedSuccesses)
        skipped = len(self.skipped) + len(self.expectedFailures)
        return failed, skipped, len(self.greenloop_passed), len(self.greenloop_failures)

    def _since(self, before: tuple[int, int, int, int], now: tuple[int, int, int, int]) -> str:
        """What the counts gained from `before` to `now`, as the JSON object's fields after its first."""
        if now == (before[0], before[1], before[2] + 1, before[3]):
            return _ONE_PASSED
        since = {"failed": now[0] - before[0], "skipped": now[1] - before[1], "passed": now[2] - before[2],
                 "failures": self.greenloop_failures[before[3]:now[3]]}
        return json.dumps(since)[1:]

    def greenloop_between(self) -> str:
        """The line for what failed since the last test stopped (a class or module fixture)."""
        now = self._tally()
        if now == self.greenloop_at:
            return ""
        line = '{"between": {' + self._since(self.greenloop_at, now) + "}\n"
        self.greenloop_at = now
        return line

    def greenloop_flush(self, text: str = "") -> None:
        """Write the held end line, what failed since, and `text`, in one write."""
        if self.greenloop_stream is None:
            return
        text = self.greenloop_held + self.greenloop_between() + text
        self.greenloop_held = ""
        if text:
            try:  # unbuffered: it survives a kill  # noqa: SIM105
                os.write(self.greenloop_stream, text.encode("utf-8"))
            except OSError:  # (a plain try: once a test, `contextlib.suppress` costs more)
                pass

    def startTest(self, test: unittest.TestCase) -> None:
        self.greenloop_test = test
        self.greenloop_test_id = test_id = test.id()
        if self.greenloop_stream is not None:
            self.greenloop_quoted = quoted = _json_string(test_id)
            self.greenloop_flush(f'{{"start": {quoted}, {_where_defined(test)}}}\n')
        super().startTest(test)

    def stopTest(self, test: unittest.TestCase) -> None:
        super().stopTest(test)
        if self.greenloop_stream is not None:
            now = self._tally()
            end = f'{{"end": {self.greenloop_quoted}, {self._since(self.greenloop_at, now)}\n'
            self.greenloop_at = now
            self.greenloop_held += end
            if id(test) not in _HELD_ENDS:
                self.greenloop_flush()

    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        self.greenloop_passed.append(self.greenloop_test_id if test is self.greenloop_test else test.id())

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addFailure(test, err)
        self._keep("failure", test, err)

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        super().addError(test, err)
        self._keep("error", test, err)

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        super().addUnexpectedSuccess(test)
        self._keep("unexpected_success", test, None)

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._keep("failure" if failed else "error", subtest, err)


class _Runner(unittest.TextTestRunner):
    resultclass = _Collector
    greenloop_result: _Collector | None = None

    def _makeResult(self) -> Any:
        result = super()._makeResult()
        if isinstance(result, _Collector):
            self.greenloop_result = result
        return result

    def run(self, test: Any) -> Any:
        started = time.time()
        _collected(test)
        try:
            result = super().run(test)
        finally:  # the last test's end, and what failed after it (the last tearDownModule)
            if self.greenloop_result is not None:
                self.greenloop_result.greenloop_flush()
        _write(result, time.time() - started)
        return result


def _tests_of(suite: Any) -> Any:
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _tests_of(test)
        else:
            yield test


_MODULE_FILES: dict[str, str] = {}  # a test module's file as JSON, worked out once per module


def _module_file(test: Any) -> str:
    """The file of the test's module relative to the working folder (null outside it), as
    JSON: what `python -m unittest FILE` takes to run that module again."""
    module = type(test).__module__
    found = _MODULE_FILES.get(module)
    if found is None:
        path = getattr(sys.modules.get(module), "__file__", None)
        rel = os.path.relpath(path, _CWD) if path else None
        found = _MODULE_FILES[module] = json.dumps(None if rel is None or rel.startswith("..") else rel)
    return found


def _collected(suite: Any) -> None:
    """The tests the run will run with their files (none for a module that failed to import)."""
    fd = _open_stream()
    if fd is None:
        return
    try:
        # json.dumps({"collected": [[id, file], …]}) written out by hand: thousands of small
        # lists would each be tracked by the garbage collector; strings are not
        tests = []
        before: Any = None
        for test in _tests_of(suite):
            cls = type(test)
            file = "null" if cls.__name__ in _STAND_INS else _module_file(test)
            tests.append(f"[{_json_string(test.id())}, {file}]")
            if cls is type(before):
                _HELD_ENDS.add(id(before))
            before = test
        os.write(fd, ('{"collected": [' + ", ".join(tests) + "]}\n").encode("utf-8"))
    except Exception:  # the record is for a resume; it never stops the run
        pass
    finally:
        os.close(fd)


def _write(result: unittest.TestResult, duration: float) -> None:
    path = os.environ.get(_REPORT_VAR)
    if not path:
        return
    counts = {
        "run": result.testsRun,
        "passed": len(getattr(result, "greenloop_passed", ())),
        "failures": len(result.failures),
        "errors": len(result.errors),
        "skipped": len(result.skipped),
        "expected_failures": len(result.expectedFailures),
        "unexpected_successes": len(result.unexpectedSuccesses),
    }
    data = {
        "version": 1,
        "python": sys.version.split()[0],
        "counts": counts,
        "failures": getattr(result, "greenloop_failures", []),
        "passed": getattr(result, "greenloop_passed", []),
        # the tests skipped (a skip decorator, skipTest()) and expected to fail, by id
        "skipped": list(dict.fromkeys(
            _name(test)[0] for test, _ in (*result.skipped, *result.expectedFailures))),
        "omitted": getattr(result, "greenloop_omitted", 0),
        "duration": round(duration, 3),
    }
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            # one string from the C encoder: json.dump would write it in thousands of pieces
            fh.write(json.dumps(data, ensure_ascii=False))
        os.replace(tmp, path)
    except OSError:
        pass  # no report: greenloop says so and reads the text output


def main() -> None:
    sys.argv[0] = "python -m unittest"  # the usage text unittest prints names the command people know
    unittest.main(module=None, testRunner=_Runner)


if __name__ == "__main__":
    main()
