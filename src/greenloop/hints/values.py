"""Expected vs got -> what the two values show (off by one, a factor of 100, a swapped pair …).

A hint may only name a cause the values themselves show, so every reading here is a plain test
on the two values: got == -expected is a sign flip, got == expected * 1000 a factor of 1000,
'1 items' vs '1 item' a plural, '3' vs 3 a string where a number is expected. When no test
holds, nothing is said. A unit (cents, milliseconds) is named only when the words around the
value (its key, the expression, the test's name) speak of money or time; otherwise the hint
says only the factor.

Values come as the runners print them (read by hints/printed.py), or as pytest's diff lines
(`Differing items: {'subtotal': 1800} != {'subtotal': 18.0}`, `Right contains 1 more item`),
which are read when the values themselves were shortened. Every input is cut to a few thousand
characters first, so a huge value costs no more than a small one.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from greenloop.hints.printed import MAX_TEXT, NUMBER, UNDEFINED, is_parsed, parse_value, show

__all__ = ["Finding", "compare", "compare_texts", "diff_from_message", "differing_items", "differing_keys"]


class Finding(NamedTuple):
    """What the values show, one short clause per language; `detail` names the differing part."""

    kind: str  # off-by-one, factor, sign, rounding, type, case, whitespace, plural, swapped, …
    en: str  # empty when only the differing part is known ("key-value", "item")
    zh: str
    detail_en: str = ""
    detail_zh: str = ""


_MONEY = re.compile(
    r"price|cent|euro|eur\b|usd|dollar|amount|total|subtotal|cost|tax|fee|money|balance", re.I
)
_TIME = re.compile(r"ms\b|milli|second|timeout|delay|elapsed|duration|interval|_s\b|time", re.I)
_PLURAL = re.compile(r"(?<=[a-z])s(?=\s|$|[.,;!?)])")
_TOTAL = re.compile(r"total|sum|count|balance", re.I)  # names of a value made of the others
_PERCENT = re.compile(r"percent|ratio|rate|share|fraction", re.I)


def _num(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _decimals(v: object) -> int:
    text = repr(v)
    return len(text.split(".", 1)[1]) if "." in text and "e" not in text.lower() else 0


def _factor(got: float, exp: float, words: str) -> Finding | None:
    if got == 0 or exp == 0:
        return None
    for base in (1000000, 1000, 100, 10):
        for ratio, bigger in ((got / exp, "got"), (exp / got, "expected")):
            if math.isclose(ratio, base, rel_tol=1e-9):
                times = str(base)
                if bigger == "got":
                    side_en = f"the value is {times}× the expected one"
                else:
                    side_en = f"the value is 1/{times} of the expected one"
                side_zh = (
                    f"实际值是期望值的 {times} 倍" if bigger == "got" else f"实际值只有期望值的 1/{times}"
                )
                unit_en = unit_zh = ""
                if base == 100 and _PERCENT.search(words):
                    unit_en, unit_zh = " (a fraction vs a percentage)", "(小数与百分数混用)"
                elif base == 100 and _MONEY.search(words):
                    unit_en, unit_zh = " (cents vs units)", "(分与元混用)"
                elif base in (1000, 1000000) and _TIME.search(words):
                    unit_en, unit_zh = " (milliseconds vs seconds)", "(毫秒与秒混用)"
                    if base == 1000000:
                        unit_en, unit_zh = " (a unit converted twice)", "(单位被换算了两次)"
                return Finding(
                    "factor",
                    f"{side_en}: a factor of {times}{unit_en}",
                    f"{side_zh}{unit_zh}",
                )
    return None


def _numbers(got: float, exp: float, words: str, got_raw: object, exp_raw: object) -> Finding | None:
    if got == -exp and got != 0:
        return Finding(
            "sign",
            "the sign is flipped: the size is right, the sign is the opposite",
            "符号相反:数值大小对,但正负号反了",
        )
    if isinstance(got_raw, int) and isinstance(exp_raw, int) and abs(got - exp) == 1:
        which = "one too few" if got < exp else "one too many"
        which_zh = "少了 1" if got < exp else "多了 1"
        return Finding(
            "off-by-one",
            f"off by one ({which}: a < vs <=, a start index, or a rounding-down division)",
            f"差 1({which_zh}:检查 < 与 <=、起始下标或向下取整的除法)",
        )
    factor = _factor(got, exp, words)
    if factor is not None:
        return factor
    if not exp.is_integer() and got.is_integer() and got == math.trunc(exp) and got != 0:
        return Finding(
            "fraction-dropped",
            "the fraction is dropped: an integer division (// or Math.floor) or an int() cuts it off",
            "小数部分被丢掉了:整数除法(// 或 Math.floor)或 int() 截掉了它",
        )
    places = max(_decimals(exp_raw), _decimals(got_raw))
    if places and abs(got - exp) <= 10**-places + 1e-12:
        return Finding(
            "rounding",
            "the values differ only in the last decimal place: rounding"
            " (truncating instead of rounding, or a float error)",
            "两个值只差最后一位小数:是取整方式问题(截断而非四舍五入,或浮点误差)",
        )
    if abs(got - exp) < 1e-9 * max(1.0, abs(exp)):
        return Finding("rounding", "the values differ only by a float error", "两个值只差浮点误差")
    return None


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[^\w@.]+|(?<=\d)-(?=\d)", text) if w]


def _strings(got: str, exp: str) -> Finding | None:
    if got.lower() == exp.lower():
        return Finding("case", "only the letter case differs", "只有大小写不同")
    if got.strip() == exp.strip() or " ".join(got.split()) == " ".join(exp.split()):
        extra = repr(got[len(got.rstrip()) :] or got[: len(got) - len(got.lstrip())] or " ")
        return Finding(
            "whitespace",
            f"only whitespace differs (got has {extra}): strip it or fix the concatenation",
            f"只有空白不同(实际值含 {extra}):去掉它或修正拼接",
        )
    # (a plural ends a word: the s of "https:" is not one)
    if got == exp + "s" or exp == got + "s" or _PLURAL.sub("", got) == _PLURAL.sub("", exp):
        return Finding(
            "plural",
            "only a plural -s differs: the singular case (1) needs its own word",
            "只差复数 s:数量为 1 时要用单数形式",
        )
    gw, ew = re.split(r"([^\w@]+)", got), re.split(r"([^\w@]+)", exp)
    g_words, e_words = [w for w in gw[::2] if w], [w for w in ew[::2] if w]
    if g_words == e_words and gw[1::2] != ew[1::2]:  # the words in order: only what is between them
        changed = [(g, e) for g, e in zip(gw[1::2], ew[1::2], strict=False) if g != e]
        shown = f" ({changed[0][0]!r} where {changed[0][1]!r} is expected)" if len(gw) == len(ew) else ""
        return Finding(
            "separators",
            f"the same words, with other separators between them{shown}: a join or a slash added twice",
            f"单词相同,只是分隔符不同{shown}:拼接或斜杠多加了一次",
        )
    if len(gw) == len(ew) and len(gw) > 1 and sorted(gw[::2]) == sorted(ew[::2]) and gw != ew:
        moved = [g for g, e in zip(gw[::2], ew[::2], strict=True) if g != e]
        if len(moved) == 2:
            return Finding(
                "swapped",
                f"the parts {moved[0]!r} and {moved[1]!r} are swapped:"
                " two arguments or fields in the wrong order",
                f"{moved[0]!r} 与 {moved[1]!r} 位置互换:两个参数或字段顺序写反了",
            )
        return Finding("swapped", "the same parts in another order", "内容相同但顺序不同")
    if exp.startswith(got) and got:
        if len(exp) - len(got) == 1:
            return Finding(
                "truncated",
                f"the text is one character short ({exp[-1]!r} is missing): a slice end off by one",
                f"文本少了最后一个字符 {exp[-1]!r}:切片结束位置差 1",
            )
        return Finding(
            "truncated",
            f"the text is cut short after {len(got)} characters",
            f"文本在第 {len(got)} 个字符处被截断",
        )
    if got.startswith(exp) and exp:
        return Finding(
            "extra-text",
            f"the text has extra {got[len(exp) :][:20]!r} at the end",
            f"文本末尾多了 {got[len(exp) :][:20]!r}",
        )
    return None


def _lists(got: list[object], exp: list[object], words: str) -> Finding | None:
    if got and len(got) < len(exp) and exp[len(exp) - len(got) :] == got and exp[: len(got)] != got:
        missing = exp[: len(exp) - len(got)]  # the end is there, the start is cut
        return Finding(
            "truncated-list",
            f"the list lacks its first {len(missing)} item(s) {show(missing)}"
            + (" (a slice start one too far)" if len(missing) == 1 else ""),
            f"列表缺少开头的 {len(missing)} 个元素 {show(missing)}"
            + ("(切片起点多走了一个)" if len(missing) == 1 else ""),
        )
    if got and len(got) < len(exp) and exp[: len(got)] == got:  # (an empty list shows no cut)
        missing = exp[len(got) :]
        n = len(missing)
        one = " (a slice or loop bound one short)" if n == 1 else ""
        one_zh = "(切片或循环边界少了一个)" if n == 1 else ""
        return Finding(
            "truncated-list",
            f"the list is cut short: the last {n} item(s) {show(missing)} are missing{one}",
            f"列表被截短:缺少末尾 {n} 个元素 {show(missing)}{one_zh}",
        )
    extra_items = got[len(exp) :]
    if len(got) > len(exp) and all(item in exp for item in extra_items) and all(item in got for item in exp):
        return Finding(
            "duplicates",
            f"the list repeats {show(extra_items)}:"
            " an item is added twice (deduplicate, or a loop runs twice)",
            f"列表重复了 {show(extra_items)}:某个元素被加了两次(需要去重,或循环多跑了一遍)",
        )
    if len(got) > len(exp) and got[: len(exp)] == exp:
        return Finding(
            "extra-items",
            f"the list has extra item(s) {show(got[len(exp) :])} at the end",
            f"列表末尾多了 {show(got[len(exp) :])}",
        )
    if len(got) == len(exp):
        if got == exp[::-1] and len(got) > 1:
            return Finding(
                "order",
                "the same items in reverse order (sort direction)",
                "元素相同但顺序相反(排序方向写反)",
            )
        try:
            same = sorted(map(repr, got)) == sorted(map(repr, exp))
        except TypeError:  # pragma: no cover - repr always sorts
            same = False
        if same:
            return Finding(
                "order", "the same items in another order (sorting)", "元素相同但顺序不同(排序问题)"
            )
        diffs = [i for i, (g, e) in enumerate(zip(got, exp, strict=True)) if g != e]
        if len(diffs) == 1:
            i = diffs[0]
            inner = _nested(compare(got[i], exp[i], words))
            at_en = f"item [{i}] is {show(got[i])}, expected {show(exp[i])}"
            at_zh = f"第 [{i}] 个元素是 {show(got[i])},期望 {show(exp[i])}"
            if inner is not None:
                return inner._replace(detail_en=at_en, detail_zh=at_zh)
            return Finding("item", "", "", at_en, at_zh)
    return None


def _plain_key(key: object) -> str:
    """`userId`, `user_id`, `UserID` all read `userid`."""
    return re.sub(r"[_\-\s]", "", str(key)).lower()


def _nested(finding: Finding | None) -> Finding | None:
    """A finding about one field: a boolean field says nothing about a comparison in the code,
    and a None inside a returned tuple or dict is not a function that returned None."""
    return None if finding is not None and finding.kind in ("boolean", "no-return") else finding


def _sums_the_rest(k: object, d: dict[object, object]) -> bool:
    """Whether d[k] is the sum of the dict's other numbers (a total of its parts)."""
    parts = [_num(v) for o, v in d.items() if o != k]
    nums = [x for x in parts if x is not None]
    value = _num(d[k])
    return value is not None and len(nums) >= 2 and math.isclose(value, sum(nums), abs_tol=1e-9)


def _consequences(
    keys: list[object], got: dict[object, object], exp: dict[object, object]
) -> tuple[list[object], bool]:
    """(the differing keys whose difference the others explain, whether two differ alike with
    nothing to tell which one is the cause). A number that is the sum of the dict's other numbers
    on both sides (a total of its parts), or that is off by exactly the sum of the other
    differences, changed because they did. Only numbers are judged."""
    numeric = [k for k in keys if _num(got[k]) is not None and _num(exp[k]) is not None]
    if len(numeric) < 2:
        return [], False
    totals = [k for k in numeric if _sums_the_rest(k, got) and _sums_the_rest(k, exp)]
    if totals and len(totals) < len(numeric):
        return totals, False
    delta = {k: float(got[k]) - float(exp[k]) for k in numeric}  # type: ignore[arg-type]
    after = [
        k
        for k in numeric
        if (rest := sum(delta[o] for o in numeric if o != k)) != 0
        and math.isclose(delta[k], rest, rel_tol=1e-9, abs_tol=1e-9)
    ]
    if after and len(after) < len(numeric):
        return after, False
    return [], len(after) == len(numeric) == 2  # (equal differences: either may explain the other)


def differing_keys(got: dict[object, object], exp: dict[object, object]) -> list[object]:
    """The keys whose values differ, in the runner's order, the ones that differ only as a
    consequence of another (see _consequences) moved to the end."""
    differing = [k for k in exp if k in got and got[k] != exp[k]]
    after = _consequences(differing, got, exp)[0]
    return [k for k in differing if k not in after] + after


def _dicts(got: dict[object, object], exp: dict[object, object], words: str) -> Finding | None:
    missing = [k for k in exp if k not in got]
    extra = [k for k in got if k not in exp]
    differing = differing_keys(got, exp)
    if differing:
        k = differing[0]
        inner = _nested(compare(got[k], exp[k], f"{words} {k}"))
        at_en = f"{k!s} is {show(got[k])}, expected {show(exp[k])}"
        at_zh = f"{k!s} 是 {show(got[k])},期望 {show(exp[k])}"
        after, tied = _consequences(differing, got, exp)
        if tied:  # which of the two is the cause the values cannot tell: name both, guess nothing
            if _TOTAL.search(str(k)) and not _TOTAL.search(str(differing[1])):
                # (pytest prints its differing items in a set's order: a sum's name reads last)
                k = differing[1]
                at_en = f"{k!s} is {show(got[k])}, expected {show(exp[k])}"
                at_zh = f"{k!s} 是 {show(got[k])},期望 {show(exp[k])}"
            o = differing[0] if k == differing[1] else differing[1]
            at_en += f", and {o!s} is {show(got[o])}, expected {show(exp[o])} (off by the same amount)"
            at_zh += f";{o!s} 是 {show(got[o])},期望 {show(exp[o])}(差了同样的量)"
            return Finding("key-value", "", "", at_en, at_zh)
        if after:
            names = ", ".join(map(str, after))
            at_en += f" ({names} follows from it)"
            at_zh += f"({names} 由它带出)"
        if inner is not None and not missing and not extra:
            return inner._replace(detail_en=at_en, detail_zh=at_zh)
        return (
            Finding("key-value", "", "", at_en, at_zh)
            if inner is None
            else inner._replace(detail_en=at_en, detail_zh=at_zh)
        )
    if missing and extra:
        for m_key in missing:
            for x_key in extra:
                same_name = _plain_key(m_key) == _plain_key(x_key)
                if same_name or (got[x_key] == exp[m_key] and len(missing) == len(extra) == 1):
                    return Finding(
                        "renamed-key",
                        f"the result names the key {x_key!r} where {m_key!r} is expected"
                        " (same value, another name)",
                        f"结果里的键叫 {x_key!r},期望的是 {m_key!r}(值相同,名字不同)",
                    )
    if missing:
        k = missing[0]
        return Finding(
            "missing-key",
            f"the key {k!r} (expected {show(exp[k])}) is missing from the result",
            f"结果里缺少键 {k!r}(期望 {show(exp[k])})",
        )
    if extra:
        k = extra[0]
        return Finding(
            "extra-key",
            f"the result has an extra key {k!r} = {show(got[k])} that is not expected",
            f"结果多了一个不应有的键 {k!r} = {show(got[k])}",
        )
    return None


def compare(got: object, exp: object, words: str = "") -> Finding | None:
    """What `got` vs `expected` shows, or None when the values show nothing particular.

    `words` (key names, the expression, the test name) only decide whether a factor is named
    as a unit; they never make a finding on their own.
    """
    if not is_parsed(got) or not is_parsed(exp) or (got == exp and type(got) is type(exp)):
        return None
    if (got is None or got is UNDEFINED) and exp is not None and exp is not UNDEFINED:
        shown = "undefined" if got is UNDEFINED else "None"
        return Finding(
            "no-return",
            f"the function returned {shown}: a path through it ends without a return"
            f" (or gives {shown} on purpose, e.g. for not found)",
            f"函数返回了 {shown}:有一条执行路径没有 return(或有意返回 {shown},例如没查到)",
        )
    g, e = _num(got), _num(exp)
    if g is not None and e is not None:
        return _numbers(g, e, words, got, exp)
    if isinstance(got, str) and e is not None and got.strip() == repr(exp):
        return Finding(
            "type",
            f"a string {got!r} where the number {show(exp)} is expected: convert it (int()/Number())",
            f"得到字符串 {got!r},期望数字 {show(exp)}:需要转换(int()/Number())",
        )
    if isinstance(exp, str) and g is not None and exp.strip() == repr(got):
        return Finding(
            "type",
            f"the number {show(got)} where the string {exp!r} is expected",
            f"得到数字 {show(got)},期望字符串 {exp!r}",
        )
    if isinstance(got, bool) and isinstance(exp, bool):
        return Finding(
            "boolean",
            f"the condition gives {got} for this input:"
            " check the comparison that decides it (> vs >=, and vs or)",
            f"该条件对这组输入给出 {got}:检查决定它的比较(> 与 >=、and 与 or)",
        )
    if isinstance(got, str) and isinstance(exp, str):
        return _strings(got, exp)
    if isinstance(got, list | tuple) and isinstance(exp, list | tuple):
        return _lists(list(got), list(exp), words)
    if isinstance(got, dict) and isinstance(exp, dict):
        return _dicts(got, exp, words)
    return None  # other type pairs ('truthy' vs False: a matcher's word, not a value) say nothing


_JS_MORE = re.compile(r",?\s*…\(\d+\)")
_PENDING = re.compile(r"^(?:Promise\s*\{|<coroutine object |<Task pending|Promise<)")


def compare_texts(got: str | None, expected: str | None, words: str = "") -> Finding | None:
    """`compare` on the printed forms of the two values. vitest shortens an object to its first
    keys (`{ subtotal: 1800, items: 2, …(1) }`): then only the keys both sides show are compared."""
    if len(got or "") > MAX_TEXT or len(expected or "") > MAX_TEXT:
        return None  # too long to read in the time a hint may take (and shortened by the runner anyway)
    if got and _PENDING.match(got.strip()) and not (expected and _PENDING.match(expected.strip())):
        return Finding(
            "not-awaited",
            "the value is a pending Promise/coroutine, not its result: the call is missing an await",
            "得到的是未完成的 Promise/协程而不是它的结果:调用处漏了 await",
        )
    if got and got.strip() == "NaN" and expected and NUMBER.match(expected.strip()):
        return Finding(
            "nan",
            "the value is NaN: something that is not a number (undefined, a text like '3,5')"
            " went into the arithmetic",
            "得到 NaN:有非数字的值(undefined、'3,5' 这类文本)参与了运算",
        )
    if got and expected and ("…(" in got or "…(" in expected):
        g, e = parse_value(_JS_MORE.sub("", got)), parse_value(_JS_MORE.sub("", expected))
        if isinstance(g, dict) and isinstance(e, dict):
            common = [k for k in e if k in g]
            return _dicts({k: g[k] for k in common}, {k: e[k] for k in common}, words)
        return None
    return compare(parse_value(got), parse_value(expected), words)


_DIFFERING = re.compile(r"Differing items:\s*\n((?:\s*\{.{0,400}?\} != \{.{0,400}?\}[ \t]*(?:\n|$))+)")
_DIFFERING_LINE = re.compile(r"^\s*(\{.{0,400}?\}) != (\{.{0,400}?\})\s*$", re.M)


def differing_items(message: str) -> tuple[dict[object, object], dict[object, object]] | None:
    """(got, expected) as pytest's "Differing items" lines give them, one key a line, in the
    order pytest printed them; None without such lines."""
    m = _DIFFERING.search(message[:MAX_TEXT])
    if not m:
        return None
    got: dict[object, object] = {}
    exp: dict[object, object] = {}
    for line in _DIFFERING_LINE.finditer(m.group(1)):
        g, e = parse_value(line.group(1)), parse_value(line.group(2))
        if isinstance(g, dict) and isinstance(e, dict):
            got.update(g)
            exp.update(e)
    return (got, exp) if got and exp else None


_MORE = re.compile(r"^\s*(Left|Right) contains (?:1|one) more items?:?\s*(.{0,400}?)\s*$", re.M)
_MORE_NEXT = re.compile(r"^\s*(Left|Right) contains \d+ more items?:\s*\n\s*(.{0,400}?)\s*$", re.M)
_AT_INDEX = re.compile(r"^\s*At index (\d+) diff: (.{0,200}) != (.{0,200})$", re.M)


def diff_from_message(message: str, words: str = "") -> Finding | None:
    """pytest's diff lines, when the compared values were shortened (`{'done': Fals...}`)."""
    text = message[:MAX_TEXT]
    items = differing_items(text)
    if items is not None:
        return _dicts(items[0], items[1], words)
    m = _MORE_NEXT.search(text) or _MORE.search(text)
    if m:
        side, item = m.group(1), parse_value(m.group(2))
        if isinstance(item, dict) and item:
            k, v = next(iter(item.items()))
            if side == "Right":
                return _dicts({}, {k: v}, words)
            return _dicts({k: v}, {}, words)
        if is_parsed(item):
            if side == "Right":
                # (pytest names the item past the shorter list's end: which item is missing
                # only the whole values can show)
                return Finding(
                    "truncated-list",
                    "the list has one item fewer than expected (a slice or loop bound one short)",
                    "列表比期望少一个元素(切片或循环边界少了一个)",
                )
            return Finding(
                "extra-items", "the list has one item more than expected", "列表比期望多一个元素"
            )
    m = _AT_INDEX.search(text)
    if m:
        got_i, exp_i = parse_value(m.group(2)), parse_value(m.group(3))
        inner = _nested(compare(got_i, exp_i, words))
        at_en = f"item [{m.group(1)}] is {show(got_i)}, expected {show(exp_i)}"
        at_zh = f"第 [{m.group(1)}] 个元素是 {show(got_i)},期望 {show(exp_i)}"
        if inner is not None:
            return inner._replace(detail_en=at_en, detail_zh=at_zh)
        return Finding("item", "", "", at_en, at_zh)
    return None
