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
before a failing after-hook), and each test cancelled under it (which node counts failed)
has a record of kind "cancelled" of its own, whose file and line are the hook's failure and
whose message names that hook, so every failure counted has a name;
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
    relativize,
    run_parser,
    strip_ansi,
)
from greenloop.frameworks.node_test_failure import failure_of, unquote
from greenloop.frameworks.results import closing_result, unclosed_note
from greenloop.model import Failure, ParseResult

__all__ = ["TextParser", "parse_report", "parse_text", "progress_event"]

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
    """Streaming parser of node:test's text output: `feed` one line at a time, then `finish`."""

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
    skipped_names: list[str] = field(default_factory=list)  # `# SKIP` and `# TODO` entries
    recent_errors: list[str] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    repeat: bool = False  # inside the spec reporter's "✖ failing tests:" recap
    recap_loc: tuple[str, int] | None = None
    mode: Literal["tap", "spec", ""] = ""

    # -- shared
    def _classify(self, r: _Result) -> None:
        full = " > ".join([*r.path, r.name])
        y = {k: "\n".join(v) for k, v in r.yaml.items()}
        ftype = unquote(y.get("failureType", ""))
        error = y.get("error", "")
        if "\n" not in error:
            error = unquote(error)
        body_text = "\n".join(s.strip() for s in r.body if s.strip())
        cancelled = ftype == "cancelledByParent" or _CANCELLED in error or _CANCELLED in body_text
        # TAP names a describe (`type: 'suite'`); the spec reporter prints a describe and a
        # test with subtests alike, so there every entry with children reads as a suite.
        suite = unquote(y.get("type", "")) == "suite" if self.mode == "tap" else r.parent
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
            self.skipped_names.append(full)
            return
        if r.directive == "TODO":
            self.todo += 1  # node counts a todo as todo whether it passed or failed
            self.skipped_names.append(full)
            return
        if r.ok:
            self.passed += 1
            self.passed_names.append(full)
            return
        if cancelled:
            self.cancelled += 1
            # kept aside: under a suite whose hook failed, that hook is the one record
            f = failure_of(full, "test", r.body, y, error or body_text, self.root)
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
        signal = unquote(y.get("signal", "")) if is_file else ""
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
        self.failures.append(failure_of(name, kind, r.body, y, message, self.root))
    def _flush(self) -> None:
        if self.pending is not None:
            self._classify(self.pending)
        self.pending = None
        self.in_yaml = False

    def feed(self, raw: str) -> None:
        """Read one line of node:test's output."""
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
            # a block of text under expected/actual keeps its mark: it is a string's lines
            if val and (val not in ("|-", "|", ">-") or self.yaml_key in ("expected", "actual")):
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
        """The result of every line fed so far."""
        self._flush()
        recognized = "tests" in self.counts
        notes: list[str] = []
        hooks = {f.test: f for f in self.failures if f.kind == "hook" and f.test in self.hook_suites}
        for f in self.cancelled_records:
            # a test cancelled under a suite whose hook failed: a record of its own that points
            # at the hook's failure (the nearest such suite above it)
            suite = max((h for h in self.hook_suites if f.test.startswith(h + " > ")), key=len, default=None)
            if suite is not None:
                f = _cancelled_by(f, suite, hooks.get(suite))
            if len(self.failures) < MAX_DETAILED_FAILURES:
                self.failures.append(f)
            elif len(self.failures) < MAX_NAMED_FAILURES:
                self.failures.append(Failure(test=f.test, file=f.file, line=f.line, kind=f.kind))
        c = {k: int(v) for k, v in self.counts.items()}
        parts = (c.get("pass", 0), c.get("fail", 0) + c.get("cancelled", 0),
                 c.get("skipped", 0) + c.get("todo", 0))
        seen = (self.passed, self.failed + self.cancelled, self.skipped + self.todo)
        if recognized and c["tests"] == sum(parts):
            counts = parts
        elif recognized:  # cut or interleaved closing lines: what the entries say
            counts = seen
            notes.append(f"node:test's closing lines do not add up (tests {c['tests']}); counts come "
                         "from the lines seen")
        else:
            counts = seen
            notes.append(unclosed_note(
                seen,
                "node:test's closing '# tests'/'ℹ tests' lines were not found",
                "no node:test output was recognised (no TAP or spec reporter lines)",
            ))
        if self.hook_suites:
            named = ", ".join(self.hook_suites[:3]) + (" …" if len(self.hook_suites) > 3 else "")
            notes.append(
                f"{len(self.hook_suites)} suite hook(s) failed ({named}): node counts no test for "
                "them (their tests are counted as cancelled, or passed before an after-hook "
                "failed); they are listed in failures with kind 'hook'"
            )
        dur = self.counts.get("duration_ms")
        return closing_result(
            counts, self.failures, notes=notes, recognized=recognized,
            duration_ms=int(dur) if dur is not None else None,
            load_errors=self.load_errors, passed_names=self.passed_names,
            skipped_names=self.skipped_names,
        )


def _cancelled_by(f: Failure, suite: str, hook: Failure | None) -> Failure:
    """The record of test `f`, cancelled because a hook of `suite` failed (`hook`: that
    failure's record, when it was kept): placed where the hook failed, its message naming it."""
    why = hook.message.splitlines()[0] if hook is not None and hook.message else ""
    message = (f"cancelled: a hook of '{suite}' failed" + (f" ({why})" if why else "")
               + "; node counts this test failed, and it runs once that hook is fixed")
    return Failure(test=f.test, file=hook.file if hook is not None and hook.file else f.file,
                   line=hook.line if hook is not None and hook.file else f.line, message=message,
                   kind="cancelled")


def parse_text(lines: Any, root: str | None = None) -> ParseResult:
    """Parse node:test's text output, one line at a time (total: never raises)."""
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
