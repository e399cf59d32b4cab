"""Parsing the steps of a case: HTTP steps (`call`), browser steps (`page`, `actions`,
`expect`) and the `{{stepN.field}}` placeholders that use an earlier step's response."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jsonpath

from greenloop.integration.spec.expectations import parse_expect
from greenloop.integration.spec.problems import Problems, quoted
from greenloop.integration.spec.records import (
    ACTIONS,
    HTTP_METHODS,
    PLACEHOLDER,
    Action,
    PageExpect,
    Step,
    Unit,
)

__all__ = ["parse_step", "placeholders_in"]

_PLACEHOLDER_BODY = re.compile(r"^step(\d+)((?:\.[A-Za-z0-9_$-]+|\[\d+\])*)$")
_STEP_KEYS = {"unit", "call", "headers", "body", "expect", "name"}
_BROWSER_STEP_KEYS = {"unit", "page", "actions", "expect", "wait_ms", "name"}
_PAGE_EXPECT_KEYS = {"selector", "text", "count"}


def placeholders_in(value: Any) -> list[str]:
    """The placeholder expressions (`step0.token`) anywhere in a JSON value, in order."""
    found: list[str] = []
    if isinstance(value, str):
        found.extend(m.group(1) for m in PLACEHOLDER.finditer(value))
    elif isinstance(value, dict):
        for k, v in value.items():
            found.extend(placeholders_in(k))
            found.extend(placeholders_in(v))
    elif isinstance(value, list):
        for v in value:
            found.extend(placeholders_in(v))
    return found


def _check_placeholders(value: Any, index: int, where: str, field: str, problems: Problems) -> None:
    for expr in placeholders_in(value):
        m = _PLACEHOLDER_BODY.match(expr)
        if not m:
            problems.add(
                where,
                f'field "{field}": placeholder {{{{{expr}}}}} must look like {{{{stepN.key}}}} '
                "(e.g. {{step0.token}}, {{step1.items.0.id}})",
            )
            continue
        n = int(m.group(1))
        if n >= index:
            problems.add(
                where,
                f'field "{field}": placeholder {{{{{expr}}}}} refers to step {n}, not an earlier step '
                f"(this is step {index}); placeholders can only use responses of earlier steps",
            )


def parse_step(
    raw: Any,
    index: int,
    case_id: str,
    units: Mapping[str, Unit],
    env: jsonpath.JSONPathEnvironment,
    problems: Problems,
) -> Step | None:
    """Step `index` of a case (HTTP or browser), or None when it is not an object or mixes both
    kinds; every bad field is noted in `problems`."""
    where = f"integration/spec.json case {quoted(case_id)}, step {index}"
    if not isinstance(raw, dict):
        problems.add(where, "must be an object {unit, call, headers, body, expect}")
        return None
    if "page" in raw or "actions" in raw:
        if "call" in raw:
            problems.add(
                where,
                'a step is either an HTTP step ("call") or a browser step ("page"/"actions"), not both; '
                "split it into two steps",
            )
            return None
        return _parse_browser_step(raw, index, where, units, problems)
    for key in raw:
        if key not in _STEP_KEYS:
            problems.add(where, f"unknown field {quoted(key)} (known: {', '.join(sorted(_STEP_KEYS))})")
    uid = raw.get("unit")
    unit = _step_unit(uid, where, units, problems)
    if unit is not None and unit.kind != "be":
        problems.add(
            where,
            f'field "unit": unit {quoted(uid)} is a {unit.kind} unit; HTTP steps ("call") go to be units',
        )
    call = raw.get("call")
    method = path = ""
    if not isinstance(call, str) or len(call.split()) != 2:
        problems.add(
            where,
            f'field "call" must be "METHOD /path", e.g. "POST /api/todos" (got {quoted(call)})',
        )
    else:
        method, path = call.split()
        method = method.upper()
        if method not in HTTP_METHODS:
            problems.add(
                where, f'field "call": unknown method {quoted(method)} (one of {", ".join(HTTP_METHODS)})'
            )
        if not path.startswith("/"):
            problems.add(where, f'field "call": path {quoted(path)} must start with "/"')
        _check_placeholders(path, index, where, "call", problems)
        contract = unit.contract if unit is not None else None
        if contract is not None and method in HTTP_METHODS and contract.find(method, path) is None:
            declared = ", ".join(ep.text for ep in contract.endpoints) or "nothing"
            problems.add(
                where,
                f'field "call": unit {quoted(uid)} does not declare {quoted(method + " " + path)} in '
                f"{contract.source} (declared: {declared}); add it to the contract or fix the step",
            )
    headers_raw = raw.get("headers", {})
    headers: list[tuple[str, str]] = []
    if not isinstance(headers_raw, dict):
        problems.add(where, 'field "headers" must be an object of "Name": "value"')
    else:
        for k, v in headers_raw.items():
            if not isinstance(v, str):
                problems.add(where, f'field "headers.{k}" must be a string (got {quoted(v)})')
                continue
            headers.append((str(k), v))
        _check_placeholders(headers_raw, index, where, "headers", problems)
    has_body = "body" in raw
    body = raw.get("body")
    _check_placeholders(body, index, where, "body", problems)
    expect = parse_expect(raw.get("expect", {}), where, env, problems)
    return Step(
        index=index,
        unit=uid if isinstance(uid, str) else "",
        method=method,
        path=path,
        headers=tuple(headers),
        body=body,
        has_body=has_body,
        expect=expect,
    )


def _text_arg(value: Any, where: str, field: str, index: int, problems: Problems, what: str) -> str:
    if not isinstance(value, str) or not value:
        problems.add(where, f'field "{field}" must be {what} (got {quoted(value)})')
        return ""
    _check_placeholders(value, index, where, field, problems)
    return value


def _parse_action(raw: Any, i: int, index: int, where: str, problems: Problems) -> Action | None:
    field = f"actions[{i}]"
    if not isinstance(raw, dict) or len(raw) != 1:
        problems.add(
            where,
            f'field "{field}" must be an object with one action, e.g. {{"click": "button#add"}} '
            f"(actions: {', '.join(ACTIONS)}; got {quoted(raw)})",
        )
        return None
    [(verb, arg)] = raw.items()
    field = f"{field}.{verb}"
    if verb not in ACTIONS:
        problems.add(
            where,
            f'field "actions[{i}]": unknown action {quoted(verb)} (known: {", ".join(ACTIONS)})',
        )
        return None
    if verb == "goto":
        path = _text_arg(arg, where, field, index, problems, 'a path starting with "/", e.g. "/"')
        if path and not path.startswith("/"):
            problems.add(
                where,
                f'field "{field}": path {quoted(path)} must start with "/" (the unit\'s own URL)',
            )
        return Action(verb, value=path)
    if verb in ("fill", "press"):
        example = '["input[name=title]", "buy milk"]' if verb == "fill" else '["input[name=title]", "Enter"]'
        pair = isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg)
        if not pair or not arg[0]:
            problems.add(
                where,
                f'field "{field}" must be [selector, text], e.g. {example} (got {quoted(arg)})',
            )
            return None
        _check_placeholders(arg, index, where, field, problems)
        return Action(verb, selector=arg[0], value=arg[1])
    if verb == "click":
        sel = _text_arg(arg, where, field, index, problems, 'a selector, e.g. "button#add"')
        return Action(verb, selector=sel)
    # wait_for: "li" | {"text": "buy milk"} | {"selector": "li", "text": "buy milk"}
    if isinstance(arg, str):
        return Action(verb, selector=_text_arg(arg, where, field, index, problems, "a selector"))
    if isinstance(arg, dict) and arg and set(arg) <= {"selector", "text"}:
        sel = _text_arg(arg["selector"], where, f"{field}.selector", index, problems, "a selector") if (
            "selector" in arg
        ) else ""
        text = _text_arg(arg["text"], where, f"{field}.text", index, problems, "a non-empty text") if (
            "text" in arg
        ) else ""
        return Action(verb, selector=sel, text=text)
    problems.add(
        where,
        f'field "{field}" must be a selector ("li") or {{"text": "buy milk"}} or '
        f'{{"selector": "li", "text": "buy milk"}} (got {quoted(arg)})',
    )
    return None


def _parse_page_expect(
    raw: Any, field: str, index: int, where: str, problems: Problems
) -> PageExpect | None:
    if not isinstance(raw, dict):
        problems.add(
            where,
            f'field "{field}" must be an object {{selector, text, count}} (got {quoted(raw)})',
        )
        return None
    for key in raw:
        if key not in _PAGE_EXPECT_KEYS:
            problems.add(where, f'unknown field "{field}.{key}" (known: selector, text, count)')
    sel = raw.get("selector")
    if not isinstance(sel, str) or not sel:
        problems.add(
            where, f'field "{field}.selector" is required: a selector such as "li" (got {quoted(sel)})'
        )
        return None
    _check_placeholders(sel, index, where, f"{field}.selector", problems)
    text = raw.get("text")
    if text is not None:
        if not isinstance(text, str) or not text:
            problems.add(where, f'field "{field}.text" must be a non-empty string (got {quoted(text)})')
            text = None
        else:
            _check_placeholders(text, index, where, f"{field}.text", problems)
    count = raw.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        problems.add(where, f'field "{field}.count" must be a whole number >= 0 (got {quoted(count)})')
        count = None
    return PageExpect(sel, text, count)


def _step_unit(uid: Any, where: str, units: Mapping[str, Unit], problems: Problems) -> Unit | None:
    """The unit a step names, or None (and a problem) when units.json has no such unit."""
    unit = units.get(uid) if isinstance(uid, str) else None
    if unit is None:
        problems.add(
            where, f'field "unit": unknown unit {quoted(uid)} (units.json has: {", ".join(sorted(units))})'
        )
    return unit


def _parse_browser_step(
    raw: Mapping[str, Any], index: int, where: str, units: Mapping[str, Unit], problems: Problems
) -> Step | None:
    for key in raw:
        if key not in _BROWSER_STEP_KEYS:
            problems.add(
                where,
                f"unknown field {quoted(key)} in a browser step "
                f"(known: {', '.join(sorted(_BROWSER_STEP_KEYS))})",
            )
    uid = raw.get("unit")
    unit = _step_unit(uid, where, units, problems)
    if unit is not None and unit.kind != "fe":
        problems.add(
            where,
            f'field "unit": unit {quoted(uid)} is a {unit.kind} unit; browser steps ("page"/"actions") go to '
            'frontend units ("kind": "fe")',
        )
    page: str | None = None
    if "page" in raw:
        page = _text_arg(raw["page"], where, "page", index, problems, 'a path starting with "/", e.g. "/"')
        if page and not page.startswith("/"):
            problems.add(
                where,
                f'field "page": path {quoted(page)} must start with "/" (the unit\'s own URL)',
            )
    actions: list[Action] = []
    raw_actions = raw.get("actions", [])
    if not isinstance(raw_actions, list):
        problems.add(
            where, 'field "actions" must be a list like [{"fill": ["input", "text"]}, {"click": "button"}]'
        )
    else:
        for i, a in enumerate(raw_actions):
            action = _parse_action(a, i, index, where, problems)
            if action is not None:
                actions.append(action)
    checks: list[PageExpect] = []
    exp = raw.get("expect")
    if exp is not None:
        items = exp if isinstance(exp, list) else [exp]
        for i, item in enumerate(items):
            field = "expect" if not isinstance(exp, list) else f"expect[{i}]"
            check = _parse_page_expect(item, field, index, where, problems)
            if check is not None:
                checks.append(check)
    wait_ms = raw.get("wait_ms")
    if wait_ms is not None and (isinstance(wait_ms, bool) or not isinstance(wait_ms, int) or wait_ms <= 0):
        problems.add(
            where,
            f'field "wait_ms" must be a whole number of milliseconds > 0 (got {quoted(wait_ms)})',
        )
        wait_ms = None
    return Step(
        index=index,
        unit=uid if isinstance(uid, str) else "",
        method="",
        path="",
        kind="browser",
        page=page,
        actions=tuple(actions),
        checks=tuple(checks),
        wait_ms=wait_ms,
    )


