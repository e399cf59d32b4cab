"""The composed hint of an assertion whose values can be read: the failing call (or the test's
check), the two values, where the value came from, and what the values show (hints/values.py),
said only when a plain test on the two values holds."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING

from greenloop.hints.frames import Evidence, place
from greenloop.hints.rule import MAX_MESSAGE, short
from greenloop.model import Failure

if TYPE_CHECKING:
    from greenloop.hints.source import Call, Sources

__all__ = ["value_hint"]

_WHERE_LINE = re.compile(r"^\s*\+\s*where (?P<value>.+?) = (?P<call>.+?)\s*$", re.M)
_FUNC_REPR = re.compile(r"<(?:function|bound method) ([\w.]+)(?: of [^>]*)? at 0x[0-9a-f.]+>")
_ASSERT_LINE = re.compile(r"^(?:AssertionError: )?assert (?P<got>.+?) (?:==|is) (?P<exp>.+?)\s*$", re.M)
_NODE_PAIR = re.compile(
    r"^(?P<got>[^\n]{1,200}?) !==? (?P<exp>[^\n]{1,200})$", re.M
)  # node: actual !== expected
# expect.js and chai's words (mocha): "Error: expected '2d' to equal '3d'"
_EXPECTED_TO = re.compile(
    r"^(?:\w*Error: )?expected (?P<got>[^\n]{1,200}?) to (?:equal|be|eql|deeply equal|strictly equal)"
    r" (?P<exp>[^\n]{1,200})$",
    re.M,
)
_CALL_TEXT = re.compile(r"^((?:[A-Za-z_$][\w$]*\.)*)([A-Za-z_$][\w$]*)\(")
_JS_FRAMEWORKS = ("vitest", "jest", "node:test", "mocha", "bun")
# The two sides of a check as the test's line writes them: `assert A == B`, `expect(A).toBe(B)`,
# `assert.strictEqual(A, B)`, `self.assertEqual(A, B)`, `assert_eq!(A, B)`
_CHECK_SIDES = (
    re.compile(r"^\s*assert\s+(?P<a>.+?)\s*(?:==|!=|\bis\b)\s*(?P<b>.+?)\s*(?:,.*)?$"),
    re.compile(r"^\s*expect\((?P<a>.+)\)\s*\.\s*(?:not\s*\.\s*)?to\w*\((?P<b>.+)\)\s*;?\s*$"),
    re.compile(r"^\s*(?:assert|self)\.\w*[Ee]qual\((?P<a>[^,]+),\s*(?P<b>[^,]+?)\s*(?:,[^,]*)?\)\s*;?\s*$"),
    re.compile(r"^\s*assert_(?:eq|ne)!\((?P<a>[^,]+),\s*(?P<b>[^,]+?)\s*(?:,.*)?\)\s*;?\s*$"),
)
_JS_LITERALS = re.compile(r"\b(?:true|false|null|undefined|nil)\b")
_PY_LITERALS = {"true": "True", "false": "False"}
_PY_WORDS = re.compile(r"\b(True|False|None)\b")
_TO_JS = {"True": "true", "False": "false", "None": "null"}


def _pytest_call(message: str) -> tuple[Call | None, str | None, bool]:
    """(call, its value, counted) from pytest's `where` lines, `<function f at 0x…>` named.
    `assert len(x) == 3` makes the first `where` a len(): the call is then the one that built
    x, the value is the count, and counted is True."""
    wheres = list(_WHERE_LINE.finditer(message[:MAX_MESSAGE]))
    if not wheres:
        return None, None, False
    first = wheres[0]
    counted = first.group("call").startswith("len(")
    target: re.Match[str] | None = first
    if counted:
        arg = first.group("call")[4:-1]
        target = next((w for w in wheres[1:] if w.group("value") == arg), None)
    if target is None:
        return None, first.group("value"), counted
    text = target.group("call")
    for sub in wheres:
        if sub.group("value").startswith("<"):
            text = text.replace(sub.group("value"), sub.group("call"))
    text = _FUNC_REPR.sub(lambda f: f.group(1), text)
    c = _CALL_TEXT.match(text)
    if not c:
        return None, first.group("value"), counted
    shown = text if len(text) <= 80 else text[:79] + "…"
    from greenloop.hints.source import Call

    return Call(c.group(1).rstrip("."), c.group(2), shown), first.group("value"), counted


def _shown(text: str | None, node: bool) -> str:
    """A printed value as the hint quotes it: node's multi-line objects on one line, node's bare
    strings quoted (node:test prints them without quotes), long values shortened."""
    if text is None:
        return ""
    from greenloop.hints import printed

    value = printed.parse_value(text)
    if printed.is_parsed(value) and (
        "\n" in text.strip() or (node and isinstance(value, str) and value == text.strip())
    ):
        return printed.show(value)
    return short(text)


def _body(call: str | None, tw: str, got: str, exp: str, detail: str, shortened: bool, zh: bool) -> str:
    """The first sentence: the failing call (or the test's check), the two values, the test's line.
    `shortened`: the runner cut both values (pytest's `{'email': 'ad...}`), the finding says the rest."""
    if zh:
        if call is None:
            if shortened:
                return f"{tw} 处测试检查的值与期望不同"
            return (
                f"{tw} 处测试检查的值中 {detail}"
                if detail
                else f"{tw} 处的测试得到 {got or '?'},而期望 {exp or '另一个值'}"
            )
        if shortened:
            return f"{call} 的返回值与 {tw} 处测试的期望不同"
        if detail:
            return f"{call} 的返回值中 {detail}({tw} 处的测试)"
        return f"{call} 返回了 {got or '?'},而 {tw} 处的测试期望 {exp or '另一个值'}"
    if call is None:
        if shortened:
            return f"The value the test checks at {tw} differs from the expected one"
        if detail:
            return f"In the value the test checks at {tw}, {detail}"
        return f"The test at {tw} got {got or '?'} where it expects {exp or 'a different value'}"
    if shortened:
        return f"{call} returned a value unlike the one the test at {tw} expects"
    if detail:
        return f"{call} returned a value whose {detail} (the test at {tw})"
    return f"{call} returned {got or '?'} where the test at {tw} expects {exp or 'a different value'}"


def _fixed_check(line: str | None) -> str | None:
    """The test's check when both its sides are literals written in the line (`assert 1 == 2`):
    no code under test produces either value, so nothing about the code can be read from them."""
    if not line or len(line) > 200:
        return None
    for pattern in _CHECK_SIDES:
        m = pattern.match(line)
        if m and all(_literal(m.group(k)) for k in ("a", "b")):
            return line.strip().rstrip(";")
    return None


def _literal(text: str) -> bool:
    """Whether `text` is a constant as written in Python, JavaScript, Go or Rust source."""
    text = _JS_LITERALS.sub(lambda w: _PY_LITERALS.get(w.group(0), "None"), text.strip())
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return True


def _test_helper(sources: Sources, test_file: str | None, name: str) -> bool:
    """Whether the test file itself defines the function `name` (a helper, not the code under test)."""
    from greenloop.hints.source import definition_lines

    lines = sources.lines(test_file)
    if not lines or not test_file:
        return False
    return next(definition_lines(lines, name, "." + test_file.rsplit(".", 1)[-1]), None) is not None


def value_hint(
    failure: Failure, ev: Evidence, sources: Sources | None, zh: bool, framework: str | None, rule_id: str
) -> str | None:
    """The composed hint of an assertion failure, or None when its values say too little."""
    js = framework in _JS_FRAMEWORKS or (
        framework in (None, "npm-test") and re.search(r"\.[cm]?[jt]sx?$", failure.file or "") is not None
    )  # (npm-test runs JavaScript; a stored record without a runner says it by its file)
    node = framework == "node:test"
    message = failure.message[:MAX_MESSAGE]
    call, where_value, counted = _pytest_call(message)
    counted = counted or rule_id == "collection-length"
    call = call or ev.call
    if call is not None and sources is not None and _test_helper(sources, ev.test_file, call.name):
        call = None  # a helper the test file defines (commander's getSuggestion) is not the code under test
    exp, got = failure.expected, failure.got
    if got is None and where_value is not None:
        got = where_value
    if exp is None or got is None:
        a = _ASSERT_LINE.search(message) or _NODE_PAIR.search(message) or _EXPECTED_TO.search(message)
        if a and "..." not in a.group(0):
            got, exp = got if got is not None else a.group("got"), exp if exp is not None else a.group("exp")
    tw = ev.test_where or ("测试" if zh else "the test")
    fixed = _fixed_check(sources.line(ev.test_file, ev.test_line)) if sources is not None else None
    if fixed is not None:
        if zh:
            return f"{tw} 处的检查比较的是两个写死的值(`{fixed}`),与被测代码无关;这个断言本身要改。"
        return (
            f"The check at {tw} compares two fixed values (`{fixed}`): no code under test produces"
            " either side, so the assertion itself is what needs changing."
        )
    words = " ".join(x for x in (call.text if call else "", failure.test) if x)
    from greenloop.hints import values

    finding = values.compare_texts(got, exp, words) or values.diff_from_message(message, words)
    origin: str | None = place(ev)
    definition: tuple[str, int] | None = None
    if origin is None and call is not None and sources is not None and ev.test_file:
        definition = sources.definition(ev.test_file, call)
        if definition is not None:
            origin = f"{call.name} ({definition[0]}:{definition[1]})"
    if finding is None and origin is None and call is None:
        return None
    if finding is None and not (exp or got):
        return None
    # ("0x..." is an address a stored record masked, not a value the runner shortened)
    shortened = finding is not None and not finding.detail_en and "..." in f"{got}{exp}".replace("0x...", "")
    detail = (finding.detail_zh if zh else finding.detail_en) if finding is not None else ""
    g, e = _shown(got, node), _shown(exp, node)
    if counted and g and e:  # the values are counts of items, not what the call returned
        g, e = (f"{g} 个元素", f"{e} 个") if zh else (f"{g} item(s)", e)
    body = _body(call.text if call else None, tw, g, e, detail, shortened, zh)
    if js and detail:  # the finding's values are Python data: say them as the runner does
        body = _PY_WORDS.sub(lambda w: _TO_JS[w.group(1)], body)
    if origin:
        body += f";该值来自 {origin}" if zh else f"; it comes from {origin}"
    if finding is not None and finding.en:
        says = finding.zh if zh else finding.en
        returns = sources.returns(*definition) if definition and sources else None
        if finding.kind == "no-return" and js and (got or "").strip() == "null":
            # (a JavaScript function without a return gives undefined: null was given on purpose)
            says = (
                "该值是 null:查找没有找到,或某个分支有意返回 null"
                if zh
                else "the value is null: a lookup that found nothing, or a branch that gives null on purpose"
            )
        elif finding.kind == "no-return" and returns is not None:
            none = "undefined" if js else "None"
            name = call.name if call else ("该函数" if zh else "it")
            if returns is False:
                says = (
                    f"{name} 里没有任何带值的 return,所以返回 {none}"
                    if zh
                    else f"it has no return statement with a value, so every call gives {none}"
                )
            else:  # it does return somewhere: this input takes a branch that does not, or returns None
                says = (
                    f"{name} 对这组输入走到了没有 return 的分支(或显式返回了 {none})"
                    if zh
                    else f"{name} returns a value elsewhere, so this input takes a branch without a return"
                    f" (or one that returns {none} on purpose)"
                )
        if js:
            says = _PY_WORDS.sub(lambda w: _TO_JS[w.group(1)], says)
        second = says
    elif origin:
        name = origin.split(" (", 1)[0]
        second = f"用这组输入逐步检查 {name}" if zh else f"Follow {name} with that input"
    else:
        second = "检查代码对这组输入如何计算该值" if zh else "Check how the code computes it for that input"
    if zh:
        return f"{body}。{second}。"
    return f"{body}. {second[0].upper()}{second[1:]}."
