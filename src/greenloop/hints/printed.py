"""A value as a runner printed it -> Python data, and back to the short form a hint quotes.

Values come as the runners print them: Python reprs (pytest), JS inspect output (vitest,
node:test, `{ subtotal: 18, …(1) }`), JSON-like (jest) and node's multi-line `key: value`
form. A value shortened by the runner, or too long to read in the time a hint may take, is not
parsed: `is_parsed` says so, and nothing is said about it.
"""

from __future__ import annotations

import ast
import re
import warnings

__all__ = ["MAX_TEXT", "NUMBER", "UNDEFINED", "is_parsed", "parse_value", "show"]

MAX_TEXT = 4000  # characters of a printed value that are parsed at all
_SHOW = 40  # characters of one value quoted in a hint


class _Undefined:
    """JS `undefined` (kept apart from None so the hint names what the runner printed)."""

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED = _Undefined()
_UNPARSED = object()

_JS_KEY = re.compile(r"([{,]\s*)([A-Za-z_$][\w$]*)\s*:")
_JS_WORDS = {"true": "True", "false": "False", "null": "None", "undefined": "__undefined__"}
_JS_WORD = re.compile(r"\b(true|false|null|undefined)\b")
_ELLIPSIS = re.compile(r",?\s*…\(\d+\)|\.\.\.")
_TYPE_PREFIX = re.compile(r"^(?:Object|Array|Map|Set)\s+(?=[\[{])")
_LINE_PAIR = re.compile(r"^\s*['\"]?([\w$]+)['\"]?\s*:\s*(.+?),?\s*$")
NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")


def _literal(text: str) -> object:
    try:
        with warnings.catch_warnings():  # ("'\:x'": a printed backslash is not a bad escape to report)
            warnings.simplefilter("ignore", SyntaxWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _UNPARSED
    return _fix_undefined(value)


def _fix_undefined(value: object) -> object:
    if value == "__undefined__":
        return UNDEFINED
    if isinstance(value, dict):
        return {k: _fix_undefined(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fix_undefined(v) for v in value]
    return value


def parse_value(text: str | None) -> object:
    """The value a runner printed, as Python data; `_UNPARSED` (falsy test: `is_parsed`) if unsure."""
    if text is None:
        return _UNPARSED
    s = text.strip()
    if not s or len(s) > MAX_TEXT:  # a value cut to a bound would not parse; a huge one costs too much
        return _UNPARSED
    if s in ("None", "null"):
        return None
    if s == "undefined":
        return UNDEFINED
    if NUMBER.match(s):
        return float(s) if any(c in s for c in ".eE") else int(s)
    s = _TYPE_PREFIX.sub("", s)  # jest's older `Object {` / `Array [`
    if "\n" in s and not s.startswith(("{", "[", "'", '"')):
        return _lines_value(s)
    if _ELLIPSIS.search(s):
        return _UNPARSED  # shortened by the runner: the diff lines say more
    value = _literal(s)
    if value is not _UNPARSED:
        return value
    js = _TYPE_PREFIX.sub("", s)
    js = _JS_KEY.sub(r'\1"\2":', _JS_WORD.sub(lambda m: _JS_WORDS[m.group(1)], js))
    js = re.sub(r"\b(?:Object|Array)\s+(?=[\[{])", "", js)
    value = _literal(js)
    if value is not _UNPARSED:
        return value
    if s[0] in "{[(<" or "\n" in s:
        return _UNPARSED
    return s  # node:test prints a string without quotes in its expected/actual fields


def _lines_value(text: str) -> object:
    """node:test's multi-line form: `key: value` per line (an array prints `0: 'a'`)."""
    pairs: dict[str, object] = {}
    for line in text.splitlines()[:200]:
        m = _LINE_PAIR.match(line)
        if not m:
            return _UNPARSED
        value = parse_value(m.group(2))
        if value is _UNPARSED:
            return _UNPARSED
        pairs[m.group(1)] = value
    if pairs and all(k.isdigit() for k in pairs) and list(pairs) == [str(i) for i in range(len(pairs))]:
        return list(pairs.values())
    return pairs


def is_parsed(value: object) -> bool:
    """Whether `parse_value` could read the value (False for a shortened or unreadable one)."""
    return value is not _UNPARSED


def show(value: object) -> str:
    """A value as a hint quotes it (Python repr, undefined as JS prints it), shortened."""
    text = repr(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        text = repr(value)
    return text if len(text) <= _SHOW else text[: _SHOW - 1] + "…"
