"""Parsing a step's expectations: an HTTP step's {status, json, assert} and its JSONPath
assertions (`$.items.length > 0`, `$.token exists`)."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonpath

from greenloop.integration.spec.problems import Problems, quoted
from greenloop.integration.spec.records import Assertion, Expect

__all__ = ["parse_assertion", "parse_expect"]

_EXPECT_KEYS = {"status", "json", "assert"}


def parse_assertion(text: str, env: jsonpath.JSONPathEnvironment) -> Assertion:
    """Parse `<jsonpath> <op> <JSON literal>` / `<jsonpath> exists`; raises ValueError with the fix."""
    s = text.strip()
    if s.endswith(" exists") or s == "exists":
        path = s[: -len("exists")].strip()
        length = False
        if path.endswith(".length"):
            path, length = path[: -len(".length")], True
        _compile_path(path, env)
        return Assertion(text, path, "exists", None, length)
    # Try each operator occurrence from the right: the literal is what follows, and must parse.
    for m in reversed(list(re.finditer(r"\s(==|!=|>=|<=|>|<)\s", s))):
        left, op, right = s[: m.start()].strip(), m.group(1), s[m.end() :].strip()
        try:
            value = json.loads(right)
        except json.JSONDecodeError:
            continue
        length = False
        if left.endswith(".length"):
            left, length = left[: -len(".length")], True
        _compile_path(left, env)
        if op in (">", ">=", "<", "<=") and (
            isinstance(value, bool) or not isinstance(value, (int, float, str))
        ):
            raise ValueError(f"{op} compares numbers or strings, not {quoted(value)}")
        return Assertion(text, left, op, value, length)
    raise ValueError(
        'must be "<jsonpath> <op> <JSON literal>" with op one of == != > >= < <= '
        '(e.g. "$.items.length > 0", "$.title == \\"buy milk\\"") or "<jsonpath> exists"'
    )


def _compile_path(path: str, env: jsonpath.JSONPathEnvironment) -> None:
    if not path.startswith("$"):
        raise ValueError(f"JSONPath {quoted(path)} must start with $")
    try:
        env.compile(path)
    except jsonpath.JSONPathError as exc:
        first = str(exc).splitlines()[0]
        raise ValueError(f"JSONPath {quoted(path)} is not valid RFC 9535 syntax ({first})") from None



def parse_expect(raw: Any, where: str, env: jsonpath.JSONPathEnvironment, problems: Problems) -> Expect:
    """An HTTP step's `expect` object; every bad field is noted in `problems`."""
    if not isinstance(raw, dict):
        problems.add(where, 'field "expect" must be an object {status, json, assert}')
        return Expect()
    for key in raw:
        if key not in _EXPECT_KEYS:
            problems.add(where, f'unknown field "expect.{key}" (known: status, json, assert)')
    status: tuple[int, ...] = ()
    st = raw.get("status")
    if st is not None:
        codes = st if isinstance(st, list) else [st]
        ok = bool(codes) and all(
            isinstance(c, int) and not isinstance(c, bool) and 100 <= c <= 599 for c in codes
        )
        if not ok:
            problems.add(
                where,
                f'field "expect.status" must be an HTTP status code or a list of them (got {quoted(st)})',
            )
        else:
            status = tuple(codes)
    pairs: list[tuple[str, Any]] = []
    js = raw.get("json")
    if js is not None:
        if not isinstance(js, dict):
            problems.add(
                where, 'field "expect.json" must be an object mapping a JSONPath to the expected value'
            )
        else:
            for p, v in js.items():
                try:
                    _compile_path(p, env)
                except ValueError as exc:
                    problems.add(where, f'field "expect.json": {exc}')
                    continue
                pairs.append((p, v))
    asserts: list[Assertion] = []
    ax = raw.get("assert")
    if ax is not None:
        if not isinstance(ax, list) or not all(isinstance(a, str) for a in ax):
            problems.add(where, 'field "expect.assert" must be a list of strings like "$.items.length > 0"')
        else:
            for i, text in enumerate(ax):
                try:
                    asserts.append(parse_assertion(text, env))
                except ValueError as exc:
                    problems.add(where, f'field "expect.assert[{i}]" {quoted(text)}: {exc}')
    return Expect(status, tuple(pairs), tuple(asserts))


