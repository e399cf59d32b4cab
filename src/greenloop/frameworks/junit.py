"""JUnit XML reports: pytest's `--junitxml` and node:test's junit reporter (Node 20).

Read with iterparse so a large report stays in bounded memory. Two dialects:

- pytest: `<testsuite name="pytest" tests= failures= errors= skipped=>` carries the same
  counts as pytest's closing line; each `<testcase classname="pkg.test_mod.TestClass"
  name="test_x[id]">` becomes the node id `pkg/test_mod.py::TestClass::test_x[id]`.
- node:test: nested `<testsuite>` for describes and tests with subtests, `<testcase>` for
  leaves. Leaves are counted (a parent whose subtests failed is not a second failure); a
  leaf cancelled by its parent counts as skipped; a suite whose every test was cancelled
  had a failing before-hook and counts as one failure named after it; a top-level case
  named after a file that failed outside any test is a load failure.
"""

from __future__ import annotations

import contextlib
import re
import xml.etree.ElementTree as ET
from typing import Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    bounded_join,
    expected_got,
    first_user_frame,
    is_user_frame,
    relativize,
    strip_ansi,
    trim_stack,
)
from greenloop.frameworks.results import closing_result
from greenloop.model import Failure, ParseResult

__all__ = ["parse_report", "pytest_failure", "pytest_user_frame"]

_TEST_FILE = re.compile(r"\.(?:[cm]?[jt]s|tsx|jsx)$")
_ACTUAL = re.compile(r"^\s*actual: (.*?),?$")
_EXPECTED = re.compile(r"^\s*expected: (.*?),?$")


def _pytest_nodeid(classname: str, name: str) -> tuple[str, str]:
    parts = [p for p in classname.split(".") if p]
    mod: list[str] = []
    cls: list[str] = []
    for p in parts:
        (cls if cls or p[:1].isupper() else mod).append(p)
    if not mod:
        # collection errors: classname="" and name is the dotted module path
        path = name.replace(".", "/") + ".py"
        return path, path
    path = "/".join(mod) + ".py"
    return "::".join([path, *cls, name]), path


def _node_expected_got(text: str) -> tuple[str | None, str | None]:
    exp = got = None
    for line in text.splitlines():
        if got is None and (m := _ACTUAL.match(line)):
            got = m.group(1)
        elif exp is None and (m := _EXPECTED.match(line)):
            exp = m.group(1)
    return exp, got


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """A JUnit XML report (the pytest and node:test dialects, else read generically); missing
    or invalid gives recognized=False with a note."""
    try:
        return _parse(path, root)
    except FileNotFoundError:
        return ParseResult(notes=(f"report {path} is missing: the runner never wrote it "
                                  "(it crashed or was killed)",))
    except (ET.ParseError, OSError, ValueError) as exc:
        return ParseResult(notes=(f"report {path} is not valid JUnit XML ({type(exc).__name__}: {exc})",))


def _pytest_case(tags: list[str], message: str) -> tuple[Literal["test", "load", "hook"], str]:
    """A failing pytest testcase's kind, and what else pytest's tally counts it as ("passed",
    "failed" or ""). pytest's tally counts a teardown error on its own: a test that passed and
    then failed its teardown is "passed" and "error"; one that failed and then failed its
    teardown is "failed" and "error". Counted from the testcase's children (`tags`), since
    the `tests` attribute changed meaning in pytest 9.1 (it no longer counts the teardown
    error as one more test)."""
    tally = ""
    if tags == ["error"] and message.startswith("failed on teardown"):
        tally = "passed"
    elif "failure" in tags and "error" in tags:
        tally = "failed"
    if message == "collection failure":
        return "load", tally
    if message.startswith(("failed on setup", "failed on teardown")):
        return "hook", tally
    return "test", tally


def _parse(path: str, root: str | None) -> ParseResult:
    failures: list[Failure] = []
    passed_names: list[str] = []
    skipped_names: list[str] = []
    passed = failed = skipped = 0
    suites: list[dict[str, object]] = []  # open <testsuite> stack: name, counts
    dialect: Literal["pytest", "node", "generic"] | None = None
    load_errors: list[str] = []
    duration = 0.0
    saw_root = False
    for event, el in ET.iterparse(path, events=("start", "end")):
        tag = el.tag
        if event == "start":
            if tag in ("testsuites", "testsuite"):
                saw_root = True
            if tag == "testsuite":
                if dialect is None and el.get("name") == "pytest":
                    dialect = "pytest"
                suites.append({"name": el.get("name") or "", "cases": 0, "cancelled": 0})
            continue
        if tag == "testcase":
            classname = el.get("classname") or ""
            name = el.get("name") or ""
            if dialect is None:
                dialect = "node" if classname == "test" else "generic"
            with contextlib.suppress(ValueError):
                duration += float(el.get("time") or 0)
            bad = [c for c in el if c.tag in ("failure", "error")]
            skip = next((c for c in el if c.tag == "skipped"), None)
            names = [str(s["name"]) for s in suites if s["name"] and s["name"] != "pytest"]
            if suites:
                suites[-1]["cases"] = int(str(suites[-1]["cases"])) + 1
            if dialect == "pytest":
                test, file = _pytest_nodeid(classname, name)
            else:
                test, file = " > ".join([*names, name]), None
            if bad:
                c = bad[0]
                ftype = c.get("type") or ""
                message = strip_ansi(c.get("message") or "")
                text = strip_ansi(c.text or "")
                if dialect == "node" and ftype == "cancelledByParent":
                    skipped += 1
                    if suites:
                        suites[-1]["cancelled"] = int(str(suites[-1]["cancelled"])) + 1
                    el.clear()
                    continue
                failed += 1
                kind: Literal["test", "load", "hook"] = "test"
                if dialect == "pytest":
                    kind, tally = _pytest_case([b.tag for b in bad], message)
                    if tally == "passed":
                        passed += 1
                        passed_names.append(test)
                    elif tally == "failed":
                        failed += 1
                elif dialect == "node":
                    if not names and _TEST_FILE.search(name) and message == "test failed":
                        kind = "load"
                        test = relativize(name, root) if root else name
                        file = test
                    elif ftype == "hookFailed":
                        kind = "hook"
                f = _failure(test, file, kind, message, text, dialect, root)
                if kind == "load":
                    last = f.message.splitlines()[-1] if f.message else "failed to load"
                    load_errors.append(f"{test}: {last}")
                if len(failures) >= MAX_DETAILED_FAILURES:
                    f = Failure(test=f.test, file=f.file, kind=f.kind, message=f.message[:200])
                failures.append(f)
            elif skip is not None:
                skipped += 1
                skipped_names.append(test)
            else:
                passed += 1
                passed_names.append(test)
            el.clear()
        elif tag == "testsuite":
            s = suites.pop() if suites else {"name": "", "cases": 0, "cancelled": 0}
            cases, cancelled = int(str(s["cases"])), int(str(s["cancelled"]))
            if dialect == "node" and cases > 0 and cases == cancelled:
                # every test cancelled by its parent: a before hook of this suite failed
                failed += 1
                path_names = [str(x["name"]) for x in suites if x["name"]] + [str(s["name"])]
                failures.append(Failure(
                    test=" > ".join(path_names), kind="hook",
                    message="a before/after hook of this suite failed, so every test in it was cancelled "
                    "(the junit report carries no detail; the text output has it)",
                ))
            el.clear()
    if not saw_root:
        return ParseResult(notes=(f"report {path} has no <testsuites>/<testsuite> element: not JUnit XML",))
    return closing_result(
        (passed, failed, skipped),
        failures,
        duration_ms=int(duration * 1000),
        load_errors=load_errors,
        passed_names=passed_names,
        skipped_names=skipped_names,
    )


_PY_LOC = re.compile(r"^(\S[^:]*\.py):(\d+): ")
# where Python says a SyntaxError (or IndentationError) is: `File "app/mod.py", line 7`
_SYNTAX_AT = re.compile(r'^File "([^"]+\.py)", line (\d+)')


def pytest_user_frame(locations: list[str], root: str | None) -> tuple[str | None, int | None]:
    """The deepest `path.py:N: …` location inside the workspace: a relative path (pytest prints
    the files under its rootdir relative) or an absolute one under `root`; never a library's
    (site-packages, the standard library's socket.py, <frozen …>). (None, None) if none is."""
    prefix = root.rstrip("/") + "/" if root else None
    for ln in reversed(locations):
        m = _PY_LOC.match(ln)
        if not m or "site-packages" in ln or "<frozen" in ln:
            continue
        path = m.group(1)
        outside = path.startswith("/") and (prefix is None or not path.startswith(prefix))
        if outside or path.startswith("../"):
            continue  # pytest writes a file outside its rootdir absolute, or relative when shorter
        return path, int(m.group(2))
    return None, None


def pytest_failure(test: str, file: str | None, kind: Literal["test", "load", "hook"], message: str,
                   text: str, root: str | None) -> Failure:
    """One pytest failure from its long representation (the text of a junit <failure> or of
    greenloop's pytest report): E-lines as message, expected/got, the deepest workspace frame."""
    return _failure(test, file, kind, message, text, "pytest", root)


def _failure(test: str, file: str | None, kind: Literal["test", "load", "hook"], message: str, text: str,
             dialect: str | None, root: str | None) -> Failure:
    exp: str | None
    got: str | None
    if dialect == "pytest":
        lines = text.splitlines()
        e_lines = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
        exp, got = expected_got(e_lines)
        msg = [e for e in e_lines if e] or [message]
        locs = [ln for ln in lines if _PY_LOC.match(ln)]
        stack = "\n".join(locs)
        ufile, uline = pytest_user_frame(locs, root)
        if kind == "load":
            # a file that cannot be compiled: the place Python names, in the test file or in
            # the module it imports, not the import line (or nothing, for the test file itself)
            for e in reversed(e_lines):
                m = _SYNTAX_AT.match(e)
                if m and is_user_frame(e):
                    ufile, uline = m.group(1), int(m.group(2))
                    break
    else:
        # node: "Error [ERR_TEST_FAILURE]: message … cause: AssertionError … actual/expected"
        exp, got = _node_expected_got(text)
        first = message or (text.strip().splitlines() or [""])[0]
        msg = [first]
        # The wrapper's own stack points at the test's call site; the cause's at the failure.
        stack = text.split("cause:", 1)[1] if "cause:" in text else text
        ufile, uline = first_user_frame(stack)
    where = ufile or file
    return Failure(
        test=test,
        file=relativize(where, root) if where else None,
        line=uline,
        message=relativize(bounded_join(msg[:20]), root),
        expected=exp,
        got=got,
        stack=trim_stack(stack, root),
        kind=kind,
    )
