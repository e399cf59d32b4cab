"""Checking an HTTP response against a step's expectations: status, JSONPath values
(`expect.json`) and assertions (RFC 9535 JSONPath, compared with JSON types)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from greenloop.integration.http_call import HttpResponse
from greenloop.integration.placeholders import as_text
from greenloop.integration.spec.records import Assertion, Expect, jsonpath_env
from greenloop.integration.trace import bound_body

__all__ = ["Mismatch", "check_expect", "json_equal"]


def json_equal(a: Any, b: Any) -> bool:
    """Equality with JSON types: "1" is not 1, true is not 1, 1 equals 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def _compare(op: str, got: Any, want: Any) -> bool:
    if op == "==":
        return json_equal(got, want)
    if op == "!=":
        return not json_equal(got, want)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (got, want))
    strings = isinstance(got, str) and isinstance(want, str)
    if not (numbers or strings):
        return False
    if op == ">":
        return bool(got > want)
    if op == ">=":
        return bool(got >= want)
    if op == "<":
        return bool(got < want)
    return bool(got <= want)


@dataclass(frozen=True)
class Mismatch:
    """Why a step failed: its reason (one of cases.REASONS), what was expected and what came."""

    reason: str
    expected: Any
    got: Any
    message: str



def _values(path: str, body: Any) -> list[Any]:
    return list(jsonpath_env().compile(path).findall(body))


def _check_assertion(a: Assertion, body: Any) -> Mismatch | None:
    values = _values(a.path, body)
    if a.length:
        sized = []
        for v in values:
            if not isinstance(v, (list, str, dict)):
                return Mismatch(
                    "assertion_failed", a.text, v, f"{a.text}: {a.path} is {as_text(v)}, which has no length"
                )
            sized.append(len(v))
        values = sized
    if a.op == "exists":
        if values:
            return None
        return Mismatch("assertion_failed", a.text, None, f"{a.text}: nothing at {a.path}")
    if not values:
        return Mismatch(
            "assertion_failed", a.text, None, f"{a.text}: nothing at {a.path} (an empty match never holds)"
        )
    bad = [v for v in values if not _compare(a.op, v, a.value)]
    if bad:
        got: Any = values[0] if len(values) == 1 else values
        return Mismatch("assertion_failed", a.text, got, f"{a.text}: got {bound_body(as_text(got), 300)}")
    return None


def check_expect(expect: Expect, response: HttpResponse) -> Mismatch | None:
    """The first expectation the response does not meet, or None."""
    if expect.status and response.status not in expect.status:
        want: Any = expect.status[0] if len(expect.status) == 1 else list(expect.status)
        return Mismatch(
            "status_mismatch",
            {"status": want},
            {"status": response.status, "body": bound_body(response.body, 1000)},
            f"expected status {want}, got {response.status}",
        )
    for path, want in expect.json:
        values = _values(path, response.body)
        if not values:
            return Mismatch(
                "assertion_failed",
                {path: want},
                {path: None},
                f"{path}: nothing there (expected {as_text(want)})",
            )
        wrong = [v for v in values if not json_equal(v, want)]
        if wrong:
            got = values[0] if len(values) == 1 else values
            return Mismatch(
                "assertion_failed",
                {path: want},
                {path: got},
                f"{path}: expected {as_text(want)}, got {bound_body(as_text(got), 300)}",
            )
    for a in expect.asserts:
        miss = _check_assertion(a, response.body)
        if miss is not None:
            return miss
    return None
