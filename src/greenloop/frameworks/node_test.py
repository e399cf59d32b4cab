"""node:test (Node 20): the TAP reporter (nested subtests, YAML diagnostics) and the spec
reporter (`▶`/`✔`/`✖`, `ℹ tests 2`, `✖ failing tests:`), with and without colour.

Counting follows node's own summary (`# tests/# pass/# fail/# cancelled/# skipped/# todo`,
or the spec reporter's `ℹ` lines), mapped onto greenloop's four numbers:

    total = tests    passed = pass    failed = fail + cancelled    skipped = skipped + todo

When those lines are printed they are the counts (summed when several runs wrote some).
Without them (a run killed before it finished) the entries seen are counted by node's
rule: a describe is a suite, never a test; every other entry is a test, a `test()` with
subtests included; a test marked skip counts as skipped and one marked todo as todo whether
it passed, failed or was cancelled (so a failing todo never fails the count); a test
cancelled because its suite's before-hook failed, or left unawaited, counts as failed.
The spec reporter prints a describe and a test with subtests alike, so its entries with
children are counted as suites there (the closing lines correct it).

Failures: one record per failing test; a suite whose hook failed is one record of kind
"hook" named after the suite (node counts it nowhere: its tests are cancelled, or passed
before a failing after-hook), and the tests cancelled under it get no record of their own;
a test file that fails outside any test (import error, syntax error) is one load failure
named after the file; one whose process was killed by a signal while its tests ran (TAP's
`signal:`, e.g. a test that killed its own process under `--test-concurrency`) is one
failure of kind "test" named after the file, since it is no load failure. Node's own
`# tests`/`ℹ tests` line marks the output as recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from greenloop.frameworks.common import (
    MAX_DETAILED_FAILURES,
    MAX_NAMED_FAILURES,
    Event,
    bounded_join,
    first_user_frame,
    load_error_of,
    relativize,
    run_parser,
    strip_ansi,
    summary_of,
    trim_stack,
)
from greenloop.model import Failure, ParseResult, Summary

__all__ = ["TextParser", "parse_report", "parse_text", "progress_event", "running_tests"]

_SUBTEST = re.compile(r"^(\s*)# Subtest: (.*)$")
_RESULT = re.compile(r"^(\s*)(not ok|ok) \d+(?: - (.*?))?(?: # (SKIP|TODO)\b.*)?$")
_TAP_SUMMARY = re.compile(r"^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$")
_SPEC_SUMMARY = re.compile(r"^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) ([\d.]+)$")
_GROUP = re.compile(r"^(\s*)▶ (.*)$")
_SPEC_RESULT = re.compile(r"^(\s*)([✔✖﹣])\s+(.*?)(?: \([\d.]+m?s\))?(?: # (SKIP|TODO)\b.*)?$")
# The parser's spelling of a spec line: node 20 prints a todo's reason (or `TODO`) and a
# skip's reason after the duration as `# reason`, so a `# …` after the duration marks a todo
# (a skip has its own `﹣` mark); a test that never ran (cancelled) has no duration.
_SPEC_LINE = re.compile(
    r"^(\s*)([✔✖﹣])\s+(.*?)(?:( \([\d.]+m?s\))(?: # (.*))?|(?: # (SKIP|TODO)\b.*))?$"
)
_SPEC_AT = re.compile(r"^test at (\S+):(\d+):(\d+)$")
_ERROR_LINE = re.compile(r"^\s*(?:# )?([A-Z]\w*Error|Error)\b.*?:\s")
_YAML_KEY = re.compile(r"^(\s*)([A-Za-z_]+):(?: (.*))?$")
_FILE_NAME = re.compile(r"(?:^|/)[^/\s]+\.(?:[cm]?[jt]s|tsx|jsx)$")
_SUBTESTS_FAILED = re.compile(r"^'?\d+ subtests? failed'?$")
_CANCELLED = "test did not finish before its parent and was cancelled"


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1].replace("''", "'")
    return v


def _yaml_value(v: str) -> str:
    """A TAP diagnostic value as the test wrote it: YAML's `~` is JavaScript's null."""
    v = _unquote(v)
    return "null" if v == "~" else v


@dataclass
class _Open:
    indent: int
    name: str
    children: bool = False


@dataclass
class _Result:
    indent: int
    ok: bool
    name: str
    directive: str | None
    path: list[str]
    parent: bool
    yaml: dict[str, list[str]] = field(default_factory=dict)
    body: list[str] = field(default_factory=list)


@dataclass
class TextParser:
    root: str | None = None
    stack: list[_Open] = field(default_factory=list)
    pending: _Result | None = None
    in_yaml: bool = False
    yaml_indent: int = 0
    yaml_key: str = ""
    counts: dict[str, float] = field(default_factory=dict)
    passed: int = 0
    failed: int = 0
    cancelled: int = 0
    skipped: int = 0
    todo: int = 0
    hook_suites: list[str] = field(default_factory=list)
    cancelled_records: list[Failure] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    passed_names: list[str] = field(default_factory=list)
    recent_errors: list[str] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    repeat: bool = False  # inside the spec reporter's "✖ failing tests:" recap
    recap_loc: tuple[str, int] | None = None
    mode: Literal["tap", "spec", ""] = ""

    # -- shared
    def _classify(self, r: _Result) -> None:
        full = " > ".join([*r.path, r.name])
        y = {k: "\n".join(v) for k, v in r.yaml.items()}
        ftype = _unquote(y.get("failureType", ""))
        error = y.get("error", "")
        if "\n" not in error:
            error = _unquote(error)
        body_text = "\n".join(s.strip() for s in r.body if s.strip())
        cancelled = ftype == "cancelledByParent" or _CANCELLED in error or _CANCELLED in body_text
        # TAP names a describe (`type: 'suite'`); the spec reporter prints a describe and a
        # test with subtests alike, so there every entry with children reads as a suite.
        suite = _unquote(y.get("type", "")) == "suite" if self.mode == "tap" else r.parent
        if suite:
            first = body_text.split("\n")[0]
            hook = ftype == "hookFailed" or (
                self.mode == "spec" and not r.ok and bool(body_text) and not cancelled
                and not _SUBTESTS_FAILED.match(first)
            )
            if not r.ok and hook:
                self.hook_suites.append(full)
                self._add(full, "hook", r, y, error or body_text)
            elif not r.ok and ftype and ftype not in ("subtestsFailed", "hookFailed", "cancelledByParent"):
                self._add(full, "test", r, y, error or body_text)  # the describe's own body threw
            return
        if r.directive == "SKIP":
            self.skipped += 1
            return
        if r.directive == "TODO":
            self.todo += 1  # node counts a todo as todo whether it passed or failed
            return
        if r.ok:
            self.passed += 1
            self.passed_names.append(full)
            return
        if cancelled:
            self.cancelled += 1
            # kept aside: under a suite whose hook failed, that hook is the one record
            f = self._make(full, "test", r, y, error or body_text)
            self.cancelled_records.append(f._replace(message=f"cancelled: {f.message}"))
            return
        self.failed += 1
        if r.parent:
            if ftype not in ("subtestsFailed", ""):  # its own code or hook failed, not only its subtests
                self._add(full, "hook" if ftype == "hookFailed" else "test", r, y, error or body_text)
            return
        is_file = not r.path and bool(_FILE_NAME.search(r.name)) and (
            "test failed" in error or "test failed" in body_text
        )
        signal = _unquote(y.get("signal", "")) if is_file else ""
        if is_file and signal not in ("", "~", "null"):
            # the file's process was killed while its tests ran (a test that killed it, the
            # out-of-memory killer): node saw none of its results, and it is no load failure
            name = relativize(r.name, self.root) if self.root else r.name
            self.failures.append(Failure(
                test=name, file=name, line=None, kind="test",
                message=f"the test file's process was killed by {signal} while its tests ran; "
                "node reports none of its tests (a test killed its own process, or the system did)",
            ))
            self.recent_errors = []
            return
        if is_file:
            name = relativize(r.name, self.root) if self.root else r.name
            detail = relativize("\n".join(self.recent_errors[-3:]), self.root) or (
                "the test file failed outside any test"
            )
            last = relativize(self.recent_errors[-1], self.root) if self.recent_errors else "failed"
            self.load_errors.append(f"{name}: {last}")
            self.failures.append(Failure(test=name, file=name, message=detail, kind="load"))
            self.recent_errors = []
            return
        in_hook = ftype == "hookFailed" or (self.mode == "spec" and "runHook (node:internal" in body_text)
        self._add(full, "hook" if in_hook else "test", r, y, error or body_text)

    def _add(self, name: str, kind: Literal["test", "load", "hook"], r: _Result, y: dict[str, str],
             message: str) -> None:
        """`y` is r's YAML diagnostics, each key's lines joined."""
        if len(self.failures) >= MAX_NAMED_FAILURES:
            return
        if len(self.failures) >= MAX_DETAILED_FAILURES:
            self.failures.append(Failure(test=name, kind=kind))
            return
        self.failures.append(self._make(name, kind, r, y, message))

    def _make(self, name: str, kind: Literal["test", "load", "hook"], r: _Result, y: dict[str, str],
              message: str) -> Failure:
        stack_text = y.get("stack", "") or "\n".join(r.body)
        exp = got = None
        if "expected" in y or "actual" in y:
            exp = _yaml_value(y["expected"]) if "expected" in y else None
            got = _yaml_value(y["actual"]) if "actual" in y else None
        else:
            for body_line in r.body:
                s = body_line.strip()
                if s.startswith("actual: ") and got is None:
                    got = s[8:].rstrip(",")
                elif s.startswith("expected: ") and exp is None:
                    exp = s[10:].rstrip(",")
        msg_lines: list[str] = []
        for text in message.splitlines():
            s = text.strip()
            if s.startswith("at ") or s == "{":
                break
            msg_lines.append(s)
        while msg_lines and not msg_lines[-1]:
            msg_lines.pop()
        if "name" in y and msg_lines and not msg_lines[0].startswith(_unquote(y["name"])):
            msg_lines[0] = f"{_unquote(y['name'])}: {msg_lines[0]}"
        ufile, uline = first_user_frame(stack_text)
        loc = _unquote(y.get("location", ""))
        file: str | None = ufile
        line: int | None = uline
        if file is None and loc:
            m = re.match(r"^(.*):(\d+):(\d+)$", loc)
            if m:
                file, line = m.group(1), int(m.group(2))
        return Failure(
            test=name,
            file=relativize(file, self.root) if file else None,
            line=line,
            message=bounded_join([m for m in msg_lines if m][:20]),
            expected=exp,
            got=got,
            stack=trim_stack(stack_text, self.root),
            kind=kind,
        )

    def _flush(self) -> None:
        if self.pending is not None:
            self._classify(self.pending)
        self.pending = None
        self.in_yaml = False

    def feed(self, raw: str) -> None:
        line = strip_ansi(raw)
        if self.in_yaml:
            self._yaml(line)
            return
        if self.mode != "spec":
            m = _SUBTEST.match(line)
            if m:
                self._flush()
                self.mode = "tap"
                ind = len(m.group(1))
                self.stack = [o for o in self.stack if o.indent < ind]
                self.stack.append(_Open(ind, m.group(2)))
                return
            m = _RESULT.match(line)
            if m:
                self._flush()
                self.mode = "tap"
                self._result(len(m.group(1)), m.group(2) == "ok", m.group(3) or "", m.group(4))
                return
            if self.pending is not None and line.strip() == "---":
                self.in_yaml = True
                self.yaml_indent = len(line) - len(line.lstrip()) + 0
                self.yaml_key = ""
                return
            m = _TAP_SUMMARY.match(line)
            if m:
                self._flush()
                self._count(m.group(1), m.group(2))
                return
            if self.mode == "tap" and line.startswith("#"):
                self._remember_error(line[1:].strip())
                return
        if self.mode != "tap":
            self._spec(line)

    def _result(self, ind: int, ok: bool, name: str, directive: str | None) -> None:
        # entries opened at this indent are this test (its "# Subtest:" line); deeper ones are done
        own = [o for o in self.stack if o.indent == ind and o.name == name]
        parent_flag = bool(own and own[-1].children)
        self.stack = [o for o in self.stack if o.indent < ind]
        if self.stack:
            self.stack[-1].children = True
        path = [o.name for o in self.stack]
        self.pending = _Result(ind, ok, name.replace("\\#", "#"), directive, path, parent_flag)

    def _yaml(self, line: str) -> None:
        s = line.strip()
        if s == "...":
            self._flush()
            return
        assert self.pending is not None
        ind = len(line) - len(line.lstrip())
        m = _YAML_KEY.match(line)
        if m and ind == self.yaml_indent:
            self.yaml_key = m.group(2)
            val = m.group(3)
            vals = self.pending.yaml.setdefault(self.yaml_key, [])
            if val and val not in ("|-", "|", ">-"):
                vals.append(val)
            return
        if self.yaml_key and len(self.pending.yaml.get(self.yaml_key, ())) < 60:
            self.pending.yaml.setdefault(self.yaml_key, []).append(line[self.yaml_indent + 2 :])

    def _remember_error(self, text: str) -> None:
        text = text[2:] if text.startswith("# ") else text
        if _ERROR_LINE.match(text):
            self.recent_errors.append(text)
            del self.recent_errors[:-5]

    # -- spec reporter
    def _spec(self, line: str) -> None:
        if line.startswith("✖ failing tests:"):
            self._flush()
            self.repeat = True
            return
        m = _SPEC_SUMMARY.match(line)
        if m:
            self._flush()
            self.mode = "spec"
            self._count(m.group(1), m.group(2))
            return
        if self.repeat:
            a = _SPEC_AT.match(line.strip())
            if a:
                self.recap_loc = (a.group(1), int(a.group(2)))
                return
            r = _SPEC_LINE.match(line)
            if r and self.recap_loc is not None:
                self._recap(r.group(3))
            return
        g = _GROUP.match(line)
        if g:
            self._flush()
            self.mode = "spec"
            ind = len(g.group(1))
            self.stack = [o for o in self.stack if o.indent < ind]
            if self.stack:
                self.stack[-1].children = True
            self.stack.append(_Open(ind, g.group(2)))
            return
        r = _SPEC_LINE.match(line)
        if r:
            self._flush()
            ind = len(r.group(1))
            name = r.group(3)
            own = [o for o in self.stack if o.indent == ind and o.name == name]
            is_parent = bool(own)
            self.stack = [o for o in self.stack if o.indent < ind]
            if self.stack and not is_parent:
                self.stack[-1].children = True
            path = [o.name for o in self.stack]
            mark, after_duration, directive = r.group(2), r.group(5), r.group(6)
            if mark == "﹣":
                directive = "SKIP"
            elif directive is None and after_duration is not None:
                directive = "TODO"  # node 20 prints a todo's reason in place of the word TODO
            self.pending = _Result(ind, mark != "✖", name, directive, path, is_parent)
            if self.mode == "":
                self.mode = "spec"
            return
        if self.pending is not None:
            if len(self.pending.body) < 120:
                self.pending.body.append(line)
            return
        self._remember_error(line)

    def _recap(self, name: str) -> None:
        assert self.recap_loc is not None
        file, lineno = self.recap_loc
        self.recap_loc = None
        for i, f in enumerate(self.failures):
            if f.kind == "test" and f.test.rsplit(" > ", 1)[-1] == name and f.file is None:
                self.failures[i] = f._replace(file=file, line=lineno)
                return

    def _count(self, key: str, value: str) -> None:
        # summed: `npm test` may run node --test more than once, each with its closing lines
        self.counts[key] = self.counts.get(key, 0.0) + float(value)

    def finish(self) -> ParseResult:
        self._flush()
        recognized = "tests" in self.counts
        notes: list[str] = []
        # the tests cancelled under a suite whose hook failed: that hook's record says why
        for f in self.cancelled_records:
            if not any(f.test.startswith(h + " > ") for h in self.hook_suites):
                if len(self.failures) < MAX_DETAILED_FAILURES:
                    self.failures.append(f)
                elif len(self.failures) < MAX_NAMED_FAILURES:
                    self.failures.append(Failure(test=f.test, kind=f.kind))
        c = {k: int(v) for k, v in self.counts.items()}
        parts = (c.get("pass", 0), c.get("fail", 0) + c.get("cancelled", 0),
                 c.get("skipped", 0) + c.get("todo", 0))
        if recognized and c["tests"] == sum(parts):
            summary = Summary(total=c["tests"], passed=parts[0], failed=parts[1], skipped=parts[2])
        elif recognized:  # cut or interleaved closing lines: what the entries say
            summary = summary_of(self.passed, self.failed + self.cancelled, self.skipped + self.todo)
            notes.append(f"node:test's closing lines do not add up (tests {c['tests']}); counts come "
                         "from the lines seen")
        else:
            summary = summary_of(self.passed, self.failed + self.cancelled, self.skipped + self.todo)
            if self.passed or self.failed or self.cancelled or self.skipped or self.todo:
                notes.append("node:test's closing '# tests'/'ℹ tests' lines were not found; "
                             "counts come from the lines seen")
            else:
                notes.append("no node:test output was recognised (no TAP or spec reporter lines)")
        if self.hook_suites:
            named = ", ".join(self.hook_suites[:3]) + (" …" if len(self.hook_suites) > 3 else "")
            notes.append(
                f"{len(self.hook_suites)} suite hook(s) failed ({named}): node counts no test for "
                "them (their tests are counted as cancelled, or passed before an after-hook "
                "failed); they are listed in failures with kind 'hook'"
            )
        dur = self.counts.get("duration_ms")
        return ParseResult(
            summary=summary,
            failures=tuple(self.failures),
            notes=tuple(notes),
            recognized=recognized,
            duration_ms=int(dur) if dur is not None else None,
            load_error=load_error_of(self.load_errors),
            passed_tests=tuple(self.passed_names),
        )


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    return run_parser(lambda: TextParser(root=root), lines, "node:test")


def progress_event(line: str) -> Event | None:
    """TAP `ok`/`not ok` lines and spec `✔`/`✖`/`﹣` lines (a parent's line counts too)."""
    s = strip_ansi(line)
    m = _RESULT.match(s)
    if m:
        if m.group(4):
            return "skip"
        return "pass" if m.group(2) == "ok" else "fail"
    r = _SPEC_RESULT.match(s)
    if r:
        if r.group(4) or r.group(2) == "﹣":
            return "skip"
        return "pass" if r.group(2) == "✔" else "fail"
    return None


def running_tests(path: str, root: str | None = None) -> list[tuple[str, str | None, int | None]]:
    """The tests greenloop's node:test reporter saw start and not complete (its stream, see
    frameworks/node_reporter/): per test file the last one started, as (name with its
    describes joined by " > ", file, line). The entry node makes for a test file itself is
    not a test, but under `--test-concurrency` node holds back a file's test events until the
    files before it have finished, so a file started and not ended with none of its tests
    seen is named itself (its line unknown): the test running there is not known, the file
    is. Empty when the stream is missing."""
    import json

    stacks: dict[str | None, list[str]] = {}
    running: dict[str | None, list[tuple[tuple[str, ...], int | None]]] = {}
    files_open: list[str] = []  # test files whose own entry started and has not ended
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:
        return []
    with fh:
        for raw in fh:
            try:
                item = json.loads(raw)
            except ValueError:
                continue  # a line torn by the kill
            if not isinstance(item, dict):
                continue
            file = item.get("file") if isinstance(item.get("file"), str) else None
            nesting: int = item["nesting"] if isinstance(item.get("nesting"), int) else 0
            name = item.get("start", item.get("end"))
            if isinstance(name, str) and name == file:
                if "start" in item and name not in files_open:
                    files_open.append(name)
                elif "end" in item and name in files_open:
                    files_open.remove(name)
                continue
            if not isinstance(name, str):
                continue
            stack = stacks.setdefault(file, [])
            open_ = running.setdefault(file, [])
            if "start" in item:
                del stack[nesting:]
                stack.append(name)
                line = item.get("line") if isinstance(item.get("line"), int) else None
                open_.append((tuple(stack), line))
            else:
                for i in range(len(open_) - 1, -1, -1):
                    names = open_[i][0]
                    if len(names) == nesting + 1 and names[-1] == name:
                        del open_[i]
                        break
    found: list[tuple[str, str | None, int | None]] = []
    for file, open_ in running.items():
        if open_:
            names, line = open_[-1]
            found.append((" > ".join(names), relativize(file, root) if file and root else file, line))
    for file in files_open:
        if not running.get(file):
            name = relativize(file, root) if root else file
            found.append((name, name, None))
    return found


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """The TAP reporter written to a file (`--test-reporter=tap --test-reporter-destination=FILE`):
    unlike the junit reporter it keeps failing after-hooks. Missing or incomplete gives
    recognized=False with a note."""
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except FileNotFoundError:
        missing = f"report {path} is missing: the runner never wrote it (it crashed or was killed)"
        return ParseResult(notes=(missing,))
    except OSError as exc:
        return ParseResult(notes=(f"report {path} cannot be read ({exc.strerror})",))
    with fh:
        res = parse_text(fh, root=root)
    if not res.recognized:
        return ParseResult(summary=res.summary, failures=res.failures,
                           notes=(f"report {path} is not a complete node:test TAP report", *res.notes),
                           load_error=res.load_error)
    return res
