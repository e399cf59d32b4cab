"""Failure -> hint: one or two sentences naming the likely cause and where to look.

A hint names three things (docs/architecture.md, "A hint says only what the evidence
shows"): the failing expression, the values that differ, and the place in the user's code
that produced them (hints/frames.py). The cause comes from the first row of the hint table
(hints/rules.py) that matches (hints/matching.py); assertion failures whose values can be read
get the composed value hint (hints/assertion.py) instead of their row's template. What the
values show (off by one, a factor of 100, a swapped pair, a missing return …) comes from
hints/values.py and is said only when a plain test on the two values holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from greenloop.hints.assertion import value_hint
from greenloop.hints.constraint import constraint_parts
from greenloop.hints.frames import Evidence, evidence, place, top_user_frame
from greenloop.hints.matching import find
from greenloop.hints.rule import MAX_MESSAGE, check_language, fields_text, quote, short
from greenloop.hints.rules import RULES, VALUE_RULES
from greenloop.model import Failure

if TYPE_CHECKING:  # the helpers load with the first failure: a green run never needs them
    from greenloop.hints.source import Sources

__all__ = ["apply", "hint_for"]

_STUBS: Mapping[str, tuple[str, str]] = {
    "vitest": ("vi.spyOn / vi.mock", "vi.spyOn / vi.mock"),
    "jest": ("jest.spyOn / jest.mock", "jest.spyOn / jest.mock"),
    "node:test": ("node:test's mock.method / mock.timers", "node:test 的 mock.method / mock.timers"),
    "pytest": ("monkeypatch (or a fake server fixture)", "monkeypatch(或伪服务 fixture)"),
    "unittest": ("unittest.mock.patch (or a fake server in setUp)",
                 "unittest.mock.patch(或在 setUp 里起伪服务)"),
    "mocha": ("sinon.stub / sinon.useFakeTimers (or nock for HTTP)",
              "sinon.stub / sinon.useFakeTimers(HTTP 用 nock)"),
    "bun": ("bun:test's mock() / spyOn / mock.module", "bun:test 的 mock() / spyOn / mock.module"),
    "go": ("an interface with a fake, or httptest.NewServer", "接口加伪实现,或 httptest.NewServer"),
    "cargo": ("a trait with a fake impl (or a local TcpListener)", "trait 加伪实现(或本地 TcpListener)"),
}
_STUB_DEFAULT = ("a stub or fake", "stub 或伪实现")
# What keeps a test from finishing, in the words of its language (a Python test has no promise)
_STALLS: Mapping[str, tuple[str, str]] = {
    "python": (
        "a blocking call with no timeout (a socket read, a lock, a queue, a subprocess, input())"
        " or a loop that never ends",
        "有没有超时的阻塞调用(socket 读取、锁、队列、子进程、input())或永不结束的循环",
    ),
    "go": (
        "a goroutine blocked on a channel, a lock or a WaitGroup that is never released",
        "有 goroutine 阻塞在永远不会释放的 channel、锁或 WaitGroup 上",
    ),
    "rust": (
        "a thread blocked on a channel, a lock or a join that never returns, or a loop that never ends",
        "有线程阻塞在永不返回的 channel、锁或 join 上,或有永不结束的循环",
    ),
    "js": (
        "a missing await or return on a promise, a callback that is never called",
        "漏了 await/return、回调从未被调用",
    ),
}
_LANGUAGE = {"pytest": "python", "unittest": "python", "go": "go", "cargo": "rust"}
_CANCELLED = re.compile(r"\A\s*(?:asyncio\.)?(?:exceptions\.)?CancelledError\b")
_WAITS = re.compile(r"\bwait_for\(|\btimeout\(|\btimeout\s*=")


# A key of an object literal in JSON, JS, Python or mocha's diff notation (which has no commas).
_KEY = re.compile(r"""(?:^|[{,\s])['"]?([\w$]{1,60})['"]?\s*:(?!//)""")
_DIFF_KEYS = (
    re.compile(r"^\s*[-+]\s+\"?(?P<key>[\w$]+)\"?: ", re.M),  # jest / node diff lines
)


def _segments(text: str) -> dict[str, str]:
    """Each key of an object rendering and the text after it up to the next key (its value,
    or the start of a nested object's): compared key by key, the first that differs is where
    two renderings part, whether entries end with commas, newlines or both."""
    found = list(_KEY.finditer(text[:2000]))
    out: dict[str, str] = {}
    for i, m in enumerate(found):
        end = found[i + 1].start(1) if i + 1 < len(found) else min(len(text), 2000)
        value = text[m.end() : end]
        out.setdefault(m.group(1), " ".join(value.lstrip(" \t\n'\"").rstrip(" \t\n,'\"}])").split()))
    return out


def _diff_key(failure: Failure) -> str | None:
    """The first key whose value differs between expected and got (JSON, JS or Python notation),
    a key that differs only because another did (a total off by as much as its tax) coming after
    the one that explains it. Values the runner shortened (`{'subtotal': ... 'total': 120}`) hide
    keys, so they are not compared; pytest's "Differing items" lines are read instead."""
    from greenloop.hints import printed, values

    exp_v, got_v = printed.parse_value(failure.expected), printed.parse_value(failure.got)
    found: str | None = None
    while isinstance(exp_v, dict) and isinstance(got_v, dict):  # down to the innermost key that differs
        keys = values.differing_keys(got_v, exp_v)
        others = [k for k in [*exp_v, *got_v] if (k in exp_v) != (k in got_v)]
        if not keys:
            return str(others[0]) if others else found
        found = str(keys[0])
        exp_v, got_v = exp_v[keys[0]], got_v[keys[0]]
    if found is not None:
        return found
    text = failure.message[:MAX_MESSAGE]
    items = values.differing_items(text)
    if items is not None:
        keys = values.differing_keys(*items)
        return str(keys[0]) if keys else None
    shortened = any("..." in v or "…" in v for v in (failure.expected or "", failure.got or ""))
    exp = {} if shortened else _segments(failure.expected or "")
    got = {} if shortened else _segments(failure.got or "")
    if exp and got:
        for key in [*exp, *(k for k in got if k not in exp)]:
            if exp.get(key) != got.get(key):
                return key
    for pattern in _DIFF_KEYS:
        m = pattern.search(text)
        if m:
            return m.group("key")
    return None


def hint_for(
    failure: Failure,
    *,
    framework: str | None = None,
    language: str = "en",
    sources: Sources | None = None,
) -> str:
    """One or two sentences naming the failing expression, the values, and the place in the
    user's code that produced them. `sources` (one per run) lets the hint read the workspace's
    files for the failing line and the called function's definition."""
    check_language(language)
    ev = evidence(failure, sources)
    rule, groups = find(failure, ev)
    fw = framework or ("pytest" if ".py" in (failure.file or failure.stack) else None)
    if rule.id in ("raised-in-code", "fallback") and _cancelled_wait(failure, ev, sources):
        rule, groups = next(r for r in RULES if r.id == "py-async-timeout"), {}
    panicked = _panic_place(failure, fw, rule.id, sources)
    if panicked is not None:  # a Go or Rust panic with no frame outside the test's file
        rule = next(r for r in RULES if r.id == "panic-in-code")
        groups = {"detail": short(failure.message.strip().splitlines()[0].removeprefix("panic: "))}
    zh = language == "zh"
    unordered = _unordered_pair(failure, fw, ev, sources, zh) if rule.id in VALUE_RULES else None
    if unordered is not None:
        return unordered
    if rule.id in VALUE_RULES:
        composed = value_hint(failure, ev, sources, zh, fw, rule.id)
        if composed is not None:
            return composed
    where_in_code = panicked or (_syntax_place(failure) if rule.id == "syntax-error" else None) or place(ev)
    frames_where = top_user_frame(failure)
    where = where_in_code or (ev.test_where if ev.test_line else None) or frames_where
    test_where = ev.test_where or where
    stub = _STUBS.get(fw or "", _STUB_DEFAULT)[1 if zh else 0]
    expected, got = short(failure.expected), short(failure.got)
    head = failure.message[:MAX_MESSAGE].strip()
    first = short(head.splitlines()[0] if head else "")
    if expected and got:
        expectation = f"{expected}(实际 {got})" if zh else f"{expected} (got {got})"
    elif expected:
        expectation = expected
    else:
        expectation = (
            (f"断言成立({first})" if first else "测试通过")
            if zh
            else (f"its assertion to hold ({first})" if first else "the test to pass")
        )
    key = _diff_key(failure)
    values: dict[str, str] = {
        "test": f"“{failure.test}”" if zh else f"'{failure.test}'",
        "where": where or ("测试代码" if zh else "the test's code"),
        "test_where": test_where or ("测试文件" if zh else "the test file"),
        "expected": expected or groups.get("expected", ""),
        "wanted": expected or ("另一个值" if zh else "a different value"),
        "got": got or groups.get("got", ""),
        "stub": stub,
        "stall": _STALLS[_language(fw, failure)][1 if zh else 0],
        "expectation": expectation,
        "diff": (f"(首个差异字段:{key})" if zh else f" (first difference: '{key}')") if key else "",
        "first": first or ("无信息" if zh else "no message"),
        "module": "",
        "url": "",
        "what": "undefined",
        "prop": "?",
        "code": quote(ev.code_line) if where_in_code else "",
        "subscript": "",
        "defined": "",
        "suggest": "",
        "test_call": f" (`{ev.call.text}`)" if ev.call else "",
        "detail": "",
        "rdetail": "",
    }
    values.update({k: short(v) for k, v in groups.items() if k not in ("expected", "got") or not values[k]})
    if rule.id == "py-key-error":
        values["subscript"] = _subscript(groups.get("key", ""), ev.code_line, zh)
    elif rule.id == "py-index-error" and ev.code_line and "[len(" in ev.code_line.replace(" ", ""):
        values["suggest"] = (
            ":下标等于 len() 已越过最后一个元素(差 1)"
            if zh
            else ": an index equal to len() is one past the last item (off by one)"
        )
    elif rule.id == "py-attribute" and groups.get("typ") == "dict":
        attr = groups.get("attr", "")
        values["suggest"] = (
            f":字典的值要用 ['{attr}'] 或 .get('{attr}') 读取"
            if zh
            else f"; a dict's entries are read with ['{attr}'] or .get('{attr}')"
        )
    elif rule.id == "did-not-raise" and ev.call is not None and sources is not None and ev.test_file:
        found = sources.definition(ev.test_file, ev.call)
        if found is not None:
            values["defined"] = f" {ev.call.name} ({found[0]}:{found[1]})"
    elif rule.id == "db-constraint":
        constraint = groups.get("constraint", "")
        values.update(constraint_parts(fields_text(failure, rule.fields), ev, constraint, zh))
    return (rule.zh if zh else rule.en).format_map(values)


def _language(framework: str | None, failure: Failure) -> str:
    """The language of the failing test: its runner's, else its file's."""
    if framework in _LANGUAGE:
        return _LANGUAGE[framework]
    suffix = (failure.file or "").rsplit(".", 1)[-1]
    return {"py": "python", "go": "go", "rs": "rust"}.get(suffix, "js")


_PY_SYNTAX_AT = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)')
# babel (jest): "SyntaxError: /w/x.ts: Unexpected token (17:23)"; node: "/w/lib/response.js:100"
_JS_SYNTAX_AT = re.compile(
    r"SyntaxError: (?P<path>[^\s:]+\.[cm]?[jt]sx?): [^\n]*\((?P<line>\d+):\d+\)"
    r"|^(?P<path2>[^\s:]+\.[cm]?[jt]sx?):(?P<line2>\d+)\s*$",
    re.M,
)


def _syntax_place(failure: Failure) -> str | None:
    """Where a file does not parse: the place the error itself names (Python's `File "…", line
    N`, the compiler's path and line), else the record's own file:line, never the frame that
    imported the broken file."""
    text = failure.message[:MAX_MESSAGE]
    m = _PY_SYNTAX_AT.search(text)
    if m:
        return f"{m.group('path')}:{m.group('line')}"
    j = _JS_SYNTAX_AT.search(text)
    if j:
        return f"{j.group('path') or j.group('path2')}:{j.group('line') or j.group('line2')}"
    if failure.file:
        return f"{failure.file}:{failure.line}" if failure.line else failure.file
    return None


def _panic_place(failure: Failure, fw: str | None, rule_id: str, sources: Sources | None) -> str | None:
    """`explicit_panic (src/lib.rs:49)`: the function a Go or Rust panic happened in and its line,
    when the runner placed it there (a Rust unit test panics in the file it tests) and the
    failure is a panic, not an assertion's values."""
    if fw not in ("go", "cargo") or rule_id != "fallback" or sources is None or failure.kind != "test":
        return None
    head = failure.message.lstrip()
    if failure.expected or failure.got or not head or head.startswith(("assertion", "Error:")):
        return None
    if fw == "go" and not head.startswith("panic:"):
        return None  # (a Go failure that is not a panic is a t.Error's own words)
    code = sources.line(failure.file, failure.line) or ""
    if re.match(r"(?:debug_)?assert", code):  # Rust's assert!(…, "msg"): a check, not a crash
        return None
    fn = sources.function_at(failure.file, failure.line)
    return f"{fn} ({failure.file}:{failure.line})" if fn and failure.file else None


def _unordered_pair(failure: Failure, fw: str | None, ev: Evidence, sources: Sources | None,
                    zh: bool) -> str | None:
    """unittest's assertEqual(first, second) when the call shows neither as the expected value
    (the parser left expected and got empty: frameworks/unittest.py): the two values as "first"
    and "second", with the argument each came from when the test's line can be read."""
    if fw != "unittest" or failure.expected or failure.got or failure.kind != "test":
        return None
    from greenloop.frameworks.unittest import first_second

    pair = first_second(failure.message)
    if pair is None:
        return None
    a, b = short(pair[0]), short(pair[1])
    args = _call_args(sources.line(failure.file, failure.line) if sources is not None else None)
    where = ev.test_where or (f"{failure.file}:{failure.line}" if failure.file else "")
    if zh:
        named = f"第一个参数 `{args[0]}` 为 {a}，第二个参数 `{args[1]}` 为 {b}" if args else (
            f"第一个值为 {a}，第二个值为 {b}")
        return (f"{where} 的 assertEqual：{named}；unittest 不区分期望值和实际值，"
                "先确定哪一个是被测代码算出的，再沿它查。")
    named = (f"{a} from its first argument, `{args[0]}`, and {b} from its second, `{args[1]}`" if args
             else f"{a} as its first value and {b} as its second")
    return (f"assertEqual at {where} got {named}; unittest gives the two no roles, so decide which one "
            "the code under test computed and follow that one.")


def _call_args(line: str | None) -> tuple[str, str] | None:
    """The source of an assertEqual call's two arguments on `line` (one line), else None."""
    if not line or "assert" not in line:
        return None
    import ast

    from greenloop.frameworks.unittest import call_args

    args = call_args(line)
    text = line.strip()
    first, second = (ast.get_source_segment(text, arg) for arg in args) if args else (None, None)
    if not first or not second:
        return None
    return _cut(first), _cut(second)


def _cut(code: str, limit: int = 40) -> str:
    return code if len(code) <= limit else code[: limit - 1] + "…"


def _cancelled_wait(failure: Failure, ev: Evidence, sources: Sources | None) -> bool:
    """A CancelledError whose line waits with a timeout (`await asyncio.wait_for(…, timeout=1)`):
    the time ran out, though the message (Python 3.11's first exception) does not say so."""
    if not _CANCELLED.match(failure.message) or sources is None:
        return False
    lines = (sources.line(ev.test_file, ev.test_line), ev.code_line)
    return any(line and _WAITS.search(line) for line in lines)


def _subscript(key: str, code_line: str | None, zh: bool) -> str:
    """` in `settings["timeout_ms"]`` (the lookup of `key` in the failing line), or the line."""
    if not code_line:
        return ""
    inner = re.escape(key.strip().strip("'\""))
    m = re.search(r"[\w.\])]+\[\s*['\"]?" + inner + r"['\"]?\s*\]", code_line)
    text = m.group(0) if m else code_line
    text = text if len(text) <= 70 else text[:69] + "…"
    return f"(`{text}`)" if zh else f" in `{text}`"


def apply(
    failures: Iterable[Failure],
    *,
    framework: str | None = None,
    language: str = "en",
    root: str | None = None,
    sources: Sources | None = None,
) -> tuple[Failure, ...]:
    """Copies of `failures` whose empty hints are filled (a hint already written is kept).
    `root`: the folder the runner ran in, whose files the hints may read (once each); or
    `sources`, a reader of that folder the caller has used already."""
    check_language(language)
    if sources is None and root:
        from greenloop.hints.source import Sources

        sources = Sources(root)
    return tuple(
        f
        if f.hint.strip()
        else f._replace(hint=hint_for(f, framework=framework, language=language, sources=sources))
        for f in failures
    )
