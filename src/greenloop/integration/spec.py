"""Load and validate a DevLoop project's units.json, integration/spec.json and contracts.

Everything is checked before anything starts: the loader either returns a typed `Spec` or
raises one `SpecError` that lists every violation, each naming the file, case, step and field
and saying how to fix it. Nothing here starts a process or writes a file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpath

from greenloop.errors import SpecError

__all__ = [
    "ACTIONS",
    "DEFAULT_HEALTH",
    "DEFAULT_START",
    "FE_HEALTH",
    "HTTP_METHODS",
    "UNIT_KINDS",
    "Action",
    "Assertion",
    "Case",
    "Contract",
    "Endpoint",
    "Expect",
    "PageExpect",
    "Spec",
    "Step",
    "Unit",
    "check_programs",
    "env_var_name",
    "jsonpath_env",
    "load_spec",
    "load_units",
    "placeholders_in",
]

DEFAULT_START: tuple[str, ...] = ("node", "code/server.js")
DEFAULT_HEALTH = "/api/health"
FE_HEALTH = "/"  # the default health path of a frontend unit started by its own command
ACTIONS = ("goto", "fill", "click", "press", "wait_for")
UNIT_KINDS = ("be", "fe")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
COMPARE_OPS = ("==", "!=", ">=", "<=", ">", "<")

_UNIT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# {{step0.token}}, {{step1.items.0.id}}, {{step1.items[0].id}}, {{step2}} (the whole body)
PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}")
_PLACEHOLDER_BODY = re.compile(r"^step(\d+)((?:\.[A-Za-z0-9_$-]+|\[\d+\])*)$")
_STEP_KEYS = {"unit", "call", "headers", "body", "expect", "name"}
_BROWSER_STEP_KEYS = {"unit", "page", "actions", "expect", "wait_ms", "name"}
_PAGE_EXPECT_KEYS = {"selector", "text", "count"}
_EXPECT_KEYS = {"status", "json", "assert"}
_CASE_KEYS = {"id", "involves", "steps", "description", "name"}
_UNIT_KEYS = {
    "id", "kind", "path", "start", "health", "depends_on", "env", "name", "description", "calls", "static",
    "status", "status_run",  # the unit registry's status, written by greenloop (units.py)
}


def jsonpath_env() -> jsonpath.JSONPathEnvironment:
    """The RFC 9535 (strict) JSONPath environment used for every expectation."""
    return jsonpath.JSONPathEnvironment(strict=True)


def env_var_name(unit_id: str) -> str:
    """`todo-be` -> `TODO_BE_URL`: upper-cased, every other character turned into `_`."""
    return re.sub(r"[^A-Z0-9]", "_", unit_id.upper()) + "_URL"


@dataclass(frozen=True)
class Endpoint:
    """One `METHOD /path` a contract declares; `:name` segments are path parameters."""

    method: str
    path: str

    @property
    def text(self) -> str:
        return f"{self.method} {self.path}"

    def matches(self, method: str, path: str) -> bool:
        """Does a step's path (query dropped, placeholders allowed in whole segments) fit?"""
        if method != self.method:
            return False
        want = [s for s in self.path.split("/")]
        got = [s for s in path.split("?", 1)[0].split("/")]
        if len(want) != len(got):
            return False
        for w, g in zip(want, got, strict=True):
            if w.startswith(":") and len(w) > 1:
                if not g:
                    return False
                continue
            if PLACEHOLDER.search(g) or w != g:
                return False
        return True


@dataclass(frozen=True)
class Contract:
    source: str  # the contract file, relative to the project
    endpoints: tuple[Endpoint, ...]

    def find(self, method: str, path: str) -> Endpoint | None:
        for ep in self.endpoints:
            if ep.matches(method, path):
                return ep
        return None


@dataclass(frozen=True)
class Unit:
    id: str
    kind: str
    path: str  # absolute folder the unit starts in
    start: tuple[str, ...]
    health: str
    depends_on: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    contract: Contract | None = None
    static: str | None = None  # absolute folder greenloop serves for a frontend unit (no start)


@dataclass(frozen=True)
class Assertion:
    """`<jsonpath> <op> <JSON literal>` or `<jsonpath> exists`; `.length` ends a path for a size."""

    text: str
    path: str  # the JSONPath without a trailing `.length`
    op: str  # one of COMPARE_OPS or "exists"
    value: Any = None
    length: bool = False


@dataclass(frozen=True)
class Expect:
    status: tuple[int, ...] = ()
    json: tuple[tuple[str, Any], ...] = ()
    asserts: tuple[Assertion, ...] = ()


@dataclass(frozen=True)
class Action:
    """One browser action: goto (value = path), fill/press (selector, value), click (selector),
    wait_for (selector and/or text)."""

    verb: str
    selector: str = ""
    value: str = ""
    text: str = ""

    def describe(self) -> str:
        if self.verb == "goto":
            return f"goto {self.value}"
        if self.verb in ("fill", "press"):
            return f"{self.verb} {self.selector} {json.dumps(self.value, ensure_ascii=False)}"
        if self.verb == "wait_for" and self.text:
            return f"wait_for {self.selector + ' ' if self.selector else ''}text {_q(self.text)}"
        return f"{self.verb} {self.selector}"


@dataclass(frozen=True)
class PageExpect:
    """A page holds: an element matches `selector` (one of them contains `text`; exactly `count`)."""

    selector: str
    text: str | None = None
    count: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"selector": self.selector}
        if self.text is not None:
            out["text"] = self.text
        if self.count is not None:
            out["count"] = self.count
        return out


@dataclass(frozen=True)
class Step:
    """One step of a case: an HTTP step has `call`; a browser step has `page` and/or `actions`."""

    index: int
    unit: str
    method: str
    path: str
    kind: str = "http"  # the executor that runs it: "http" or "browser"
    headers: tuple[tuple[str, str], ...] = ()
    body: Any = None
    has_body: bool = False
    expect: Expect = Expect()
    page: str | None = None  # browser: the path to open on the unit's URL first
    actions: tuple[Action, ...] = ()
    checks: tuple[PageExpect, ...] = ()  # browser: the step's "expect"
    wait_ms: int | None = None  # browser: how long actions and expectations wait (default 5 s)

    @property
    def call(self) -> str:
        if self.kind == "browser":
            return f"page {self.page}" if self.page is not None else "browser actions"
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Case:
    id: str
    involves: tuple[str, ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Spec:
    root: str
    units: tuple[Unit, ...]
    cases: tuple[Case, ...]

    def unit(self, unit_id: str) -> Unit:
        for u in self.units:
            if u.id == unit_id:
                return u
        raise KeyError(unit_id)

    @property
    def has_browser_steps(self) -> bool:
        return any(s.kind == "browser" for c in self.cases for s in c.steps)

    def needed_units(self) -> tuple[Unit, ...]:
        """The units the selected cases use, plus everything they depend on, in file order."""
        want: set[str] = set()
        todo = [s.unit for c in self.cases for s in c.steps] + [u for c in self.cases for u in c.involves]
        while todo:
            uid = todo.pop()
            if uid in want:
                continue
            want.add(uid)
            todo.extend(self.unit(uid).depends_on)
        return tuple(u for u in self.units if u.id in want)


class _Problems:
    """Collects violations so that one error can name all of them."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        self.items.append(f"{where}: {message}")

    def raise_if_any(self, what: str) -> None:
        if not self.items:
            return
        if len(self.items) == 1:
            raise SpecError(f"{what} is invalid: {self.items[0]}")
        lines = "\n".join(f"  - {p}" for p in self.items)
        raise SpecError(f"{what} is invalid ({len(self.items)} problems):\n{lines}")


def _read_json(path: Path, rel: str, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{rel} not found in {path.parent}: {what}") from None
    except OSError as exc:
        raise SpecError(f"cannot read {rel}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"{rel} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); fix the syntax"
        ) from None


def _q(s: object) -> str:
    return json.dumps(s, ensure_ascii=False)


def _load_contract(root: Path, unit_rel: str, unit_id: str, problems: _Problems) -> Contract | None:
    path = root / unit_rel / "contract.json"
    rel = f"{unit_rel}/contract.json"
    if not path.is_file():
        return None
    try:
        data = _read_json(path, rel, "")
    except SpecError as exc:
        problems.add(f"unit {_q(unit_id)}", exc.message)
        return None
    http = (
        data.get("exports", {}).get("http")
        if isinstance(data, dict) and isinstance(data.get("exports"), dict)
        else None
    )
    if http is None:
        # A contract without HTTP exports declares nothing to check against.
        return Contract(rel, ())
    if not isinstance(http, dict):
        problems.add(rel, 'field "exports.http" must be an object of "METHOD /path" keys')
        return None
    endpoints: list[Endpoint] = []
    for key in http:
        parts = str(key).split()
        if len(parts) != 2 or parts[0].upper() not in HTTP_METHODS or not parts[1].startswith("/"):
            problems.add(rel, f'endpoint {_q(key)} in "exports.http" must look like "GET /api/items/:id"')
            continue
        endpoints.append(Endpoint(parts[0].upper(), parts[1]))
    return Contract(rel, tuple(endpoints))


def load_units(project: str | Path) -> tuple[Unit, ...]:
    """Read and validate `units.json` (and each unit's contract.json, where present)."""
    root = Path(project).resolve()
    data = _read_json(
        root / "units.json", "units.json", "run this in a DevLoop project (the folder holding units.json)"
    )
    problems = _Problems()
    raw_units = data.get("units") if isinstance(data, dict) else None
    if not isinstance(raw_units, list) or not raw_units:
        raise SpecError(
            'units.json is invalid: field "units" must be a non-empty list of {id, kind, path, start, ...}'
        )
    seen: set[str] = set()
    units: list[Unit] = []
    for i, raw in enumerate(raw_units):
        where = f"units.json units[{i}]"
        if not isinstance(raw, dict):
            problems.add(where, "must be an object with at least an id")
            continue
        uid = raw.get("id")
        if not isinstance(uid, str) or not _UNIT_ID.match(uid):
            problems.add(
                where, f'field "id" must be a name of letters, digits, ".", "_" or "-" (got {_q(uid)})'
            )
            continue
        where = f"units.json unit {_q(uid)}"
        if uid in seen:
            problems.add(where, 'field "id": the id is used twice; give each unit its own id')
            continue
        seen.add(uid)
        for key in raw:
            if key not in _UNIT_KEYS:
                problems.add(where, f"unknown field {_q(key)} (known: {', '.join(sorted(_UNIT_KEYS))})")
        kind = raw.get("kind", "be")
        if kind not in UNIT_KINDS:
            problems.add(where, f'field "kind" must be one of {", ".join(UNIT_KINDS)} (got {_q(kind)})')
            kind = "be"
        rel = raw.get("path", f"units/{uid}")
        if not isinstance(rel, str) or not rel:
            problems.add(where, 'field "path" must be a folder relative to the project')
            rel = f"units/{uid}"
        folder = (root / rel).resolve()
        if not folder.is_dir():
            problems.add(where, f'field "path": folder {_q(rel)} does not exist; create it or fix the path')
        static: str | None = None
        if "static" in raw:
            static_rel = raw["static"]
            if kind != "fe":
                problems.add(where, 'field "static" is for frontend units ("kind": "fe"); remove it')
            elif "start" in raw:
                problems.add(
                    where,
                    'fields "static" and "start" exclude each other: greenloop serves the "static" '
                    'folder itself; keep one of them',
                )
            elif not isinstance(static_rel, str) or not static_rel or Path(static_rel).is_absolute():
                problems.add(
                    where, f'field "static" must be a folder relative to the unit (got {_q(static_rel)})'
                )
            elif not (folder / static_rel).resolve().is_dir():
                problems.add(
                    where,
                    f'field "static": folder {_q(static_rel)} does not exist in {_q(rel)}; '
                    "create it or fix the path",
                )
            else:
                static = str((folder / static_rel).resolve())
        if kind == "fe" and "static" not in raw and "start" not in raw:
            problems.add(
                where,
                'a frontend unit needs "static" (a folder greenloop serves, e.g. "static") or "start" '
                "(the argv of its own server)",
            )
        start = raw.get("start", [] if kind == "fe" else list(DEFAULT_START))
        if kind == "fe" and "start" not in raw:
            pass
        elif not isinstance(start, list) or not start or not all(isinstance(a, str) and a for a in start):
            problems.add(
                where,
                'field "start" must be a non-empty argv list of strings, e.g. ["node", "code/server.js"]',
            )
            start = list(DEFAULT_START)
        health = raw.get("health", FE_HEALTH if kind == "fe" else DEFAULT_HEALTH)
        if not isinstance(health, str) or not health.startswith("/"):
            problems.add(where, f'field "health" must be a path starting with "/" (got {_q(health)})')
            health = DEFAULT_HEALTH
        deps = raw.get("depends_on", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            problems.add(where, 'field "depends_on" must be a list of unit ids')
            deps = []
        env = raw.get("env", {})
        env_pairs: list[tuple[str, str]] = []
        if not isinstance(env, dict):
            problems.add(where, 'field "env" must be an object of NAME: "value"')
        else:
            for k, v in env.items():
                if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                    problems.add(where, f'field "env.{k}" must be a string (got {_q(v)})')
                    continue
                env_pairs.append((str(k), str(v)))
        contract = _load_contract(root, rel, uid, problems)
        units.append(
            Unit(
                id=uid,
                kind=str(kind),
                path=str(folder),
                start=tuple(start),
                health=health,
                depends_on=tuple(deps),
                env=tuple(env_pairs),
                contract=contract,
                static=static,
            )
        )
    ids = {u.id for u in units}
    for u in units:
        for d in u.depends_on:
            if d not in ids:
                problems.add(
                    f"units.json unit {_q(u.id)}",
                    f'field "depends_on": unknown unit {_q(d)} (units: {", ".join(sorted(ids))})',
                )
            elif d == u.id:
                problems.add(
                    f"units.json unit {_q(u.id)}", 'field "depends_on": a unit cannot depend on itself'
                )
    problems.raise_if_any("units.json")
    cycle = _find_cycle(units)
    if cycle:
        raise SpecError(
            f'units.json is invalid: field "depends_on" has a cycle: {" -> ".join(cycle)}; '
            "remove one of these dependencies"
        )
    return tuple(units)


def _find_cycle(units: Sequence[Unit]) -> list[str] | None:
    graph = {u.id: u.depends_on for u in units}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in graph.get(n, ()):
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in graph:
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


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


def _parse_assertion(text: str, env: jsonpath.JSONPathEnvironment) -> Assertion:
    """Parse `<jsonpath> <op> <JSON literal>` / `<jsonpath> exists`; raises ValueError with the fix."""
    s = text.strip()
    if s.endswith(" exists") or s == "exists":
        path = s[: -len("exists")].strip()
        length = False
        if path.endswith(".length"):
            path, length = path[: -len(".length")], True
        _compile(path, env)
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
        _compile(left, env)
        if op in (">", ">=", "<", "<=") and (
            isinstance(value, bool) or not isinstance(value, (int, float, str))
        ):
            raise ValueError(f"{op} compares numbers or strings, not {_q(value)}")
        return Assertion(text, left, op, value, length)
    raise ValueError(
        'must be "<jsonpath> <op> <JSON literal>" with op one of == != > >= < <= '
        '(e.g. "$.items.length > 0", "$.title == \\"buy milk\\"") or "<jsonpath> exists"'
    )


def _compile(path: str, env: jsonpath.JSONPathEnvironment) -> None:
    if not path.startswith("$"):
        raise ValueError(f"JSONPath {_q(path)} must start with $")
    try:
        env.compile(path)
    except jsonpath.JSONPathError as exc:
        first = str(exc).splitlines()[0]
        raise ValueError(f"JSONPath {_q(path)} is not valid RFC 9535 syntax ({first})") from None


def _check_placeholders(value: Any, index: int, where: str, field: str, problems: _Problems) -> None:
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


def _parse_step(
    raw: Any,
    index: int,
    case_id: str,
    units: Mapping[str, Unit],
    env: jsonpath.JSONPathEnvironment,
    problems: _Problems,
) -> Step | None:
    where = f"integration/spec.json case {_q(case_id)}, step {index}"
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
            problems.add(where, f"unknown field {_q(key)} (known: {', '.join(sorted(_STEP_KEYS))})")
    uid = raw.get("unit")
    unit = _step_unit(uid, where, units, problems)
    if unit is not None and unit.kind != "be":
        problems.add(
            where, f'field "unit": unit {_q(uid)} is a {unit.kind} unit; HTTP steps ("call") go to be units'
        )
    call = raw.get("call")
    method = path = ""
    if not isinstance(call, str) or len(call.split()) != 2:
        problems.add(where, f'field "call" must be "METHOD /path", e.g. "POST /api/todos" (got {_q(call)})')
    else:
        method, path = call.split()
        method = method.upper()
        if method not in HTTP_METHODS:
            problems.add(
                where, f'field "call": unknown method {_q(method)} (one of {", ".join(HTTP_METHODS)})'
            )
        if not path.startswith("/"):
            problems.add(where, f'field "call": path {_q(path)} must start with "/"')
        _check_placeholders(path, index, where, "call", problems)
        contract = unit.contract if unit is not None else None
        if contract is not None and method in HTTP_METHODS and contract.find(method, path) is None:
            declared = ", ".join(ep.text for ep in contract.endpoints) or "nothing"
            problems.add(
                where,
                f'field "call": unit {_q(uid)} does not declare {_q(method + " " + path)} in '
                f"{contract.source} (declared: {declared}); add it to the contract or fix the step",
            )
    headers_raw = raw.get("headers", {})
    headers: list[tuple[str, str]] = []
    if not isinstance(headers_raw, dict):
        problems.add(where, 'field "headers" must be an object of "Name": "value"')
    else:
        for k, v in headers_raw.items():
            if not isinstance(v, str):
                problems.add(where, f'field "headers.{k}" must be a string (got {_q(v)})')
                continue
            headers.append((str(k), v))
        _check_placeholders(headers_raw, index, where, "headers", problems)
    has_body = "body" in raw
    body = raw.get("body")
    _check_placeholders(body, index, where, "body", problems)
    expect = _parse_expect(raw.get("expect", {}), where, env, problems)
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


def _text_arg(value: Any, where: str, field: str, index: int, problems: _Problems, what: str) -> str:
    if not isinstance(value, str) or not value:
        problems.add(where, f'field "{field}" must be {what} (got {_q(value)})')
        return ""
    _check_placeholders(value, index, where, field, problems)
    return value


def _parse_action(raw: Any, i: int, index: int, where: str, problems: _Problems) -> Action | None:
    field = f"actions[{i}]"
    if not isinstance(raw, dict) or len(raw) != 1:
        problems.add(
            where,
            f'field "{field}" must be an object with one action, e.g. {{"click": "button#add"}} '
            f"(actions: {', '.join(ACTIONS)}; got {_q(raw)})",
        )
        return None
    [(verb, arg)] = raw.items()
    field = f"{field}.{verb}"
    if verb not in ACTIONS:
        problems.add(where, f'field "actions[{i}]": unknown action {_q(verb)} (known: {", ".join(ACTIONS)})')
        return None
    if verb == "goto":
        path = _text_arg(arg, where, field, index, problems, 'a path starting with "/", e.g. "/"')
        if path and not path.startswith("/"):
            problems.add(where, f'field "{field}": path {_q(path)} must start with "/" (the unit\'s own URL)')
        return Action(verb, value=path)
    if verb in ("fill", "press"):
        example = '["input[name=title]", "buy milk"]' if verb == "fill" else '["input[name=title]", "Enter"]'
        pair = isinstance(arg, list) and len(arg) == 2 and all(isinstance(a, str) for a in arg)
        if not pair or not arg[0]:
            problems.add(where, f'field "{field}" must be [selector, text], e.g. {example} (got {_q(arg)})')
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
        f'{{"selector": "li", "text": "buy milk"}} (got {_q(arg)})',
    )
    return None


def _parse_page_expect(
    raw: Any, field: str, index: int, where: str, problems: _Problems
) -> PageExpect | None:
    if not isinstance(raw, dict):
        problems.add(where, f'field "{field}" must be an object {{selector, text, count}} (got {_q(raw)})')
        return None
    for key in raw:
        if key not in _PAGE_EXPECT_KEYS:
            problems.add(where, f'unknown field "{field}.{key}" (known: selector, text, count)')
    sel = raw.get("selector")
    if not isinstance(sel, str) or not sel:
        problems.add(
            where, f'field "{field}.selector" is required: a selector such as "li" (got {_q(sel)})'
        )
        return None
    _check_placeholders(sel, index, where, f"{field}.selector", problems)
    text = raw.get("text")
    if text is not None:
        if not isinstance(text, str) or not text:
            problems.add(where, f'field "{field}.text" must be a non-empty string (got {_q(text)})')
            text = None
        else:
            _check_placeholders(text, index, where, f"{field}.text", problems)
    count = raw.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        problems.add(where, f'field "{field}.count" must be a whole number >= 0 (got {_q(count)})')
        count = None
    return PageExpect(sel, text, count)


def _step_unit(uid: Any, where: str, units: Mapping[str, Unit], problems: _Problems) -> Unit | None:
    """The unit a step names, or None (and a problem) when units.json has no such unit."""
    unit = units.get(uid) if isinstance(uid, str) else None
    if unit is None:
        problems.add(
            where, f'field "unit": unknown unit {_q(uid)} (units.json has: {", ".join(sorted(units))})'
        )
    return unit


def _parse_browser_step(
    raw: Mapping[str, Any], index: int, where: str, units: Mapping[str, Unit], problems: _Problems
) -> Step | None:
    for key in raw:
        if key not in _BROWSER_STEP_KEYS:
            problems.add(
                where,
                f"unknown field {_q(key)} in a browser step (known: {', '.join(sorted(_BROWSER_STEP_KEYS))})",
            )
    uid = raw.get("unit")
    unit = _step_unit(uid, where, units, problems)
    if unit is not None and unit.kind != "fe":
        problems.add(
            where,
            f'field "unit": unit {_q(uid)} is a {unit.kind} unit; browser steps ("page"/"actions") go to '
            'frontend units ("kind": "fe")',
        )
    page: str | None = None
    if "page" in raw:
        page = _text_arg(raw["page"], where, "page", index, problems, 'a path starting with "/", e.g. "/"')
        if page and not page.startswith("/"):
            problems.add(where, f'field "page": path {_q(page)} must start with "/" (the unit\'s own URL)')
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
        problems.add(where, f'field "wait_ms" must be a whole number of milliseconds > 0 (got {_q(wait_ms)})')
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


def _parse_expect(raw: Any, where: str, env: jsonpath.JSONPathEnvironment, problems: _Problems) -> Expect:
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
                where, f'field "expect.status" must be an HTTP status code or a list of them (got {_q(st)})'
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
                    _compile(p, env)
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
                    asserts.append(_parse_assertion(text, env))
                except ValueError as exc:
                    problems.add(where, f'field "expect.assert[{i}]" {_q(text)}: {exc}')
    return Expect(status, tuple(pairs), tuple(asserts))


def _program_problem(unit: Unit, path_var: str | None) -> str | None:
    """Why `unit.start[0]` cannot be executed as the unit's spawn would look it up, or None.

    The lookup is exec's: a name with a "/" is a file relative to the unit's folder (or
    absolute); a bare name is searched on PATH only, never in the unit's folder."""
    program = unit.start[0]
    if "/" in program:
        target = Path(unit.path) / program
        if not target.is_file():
            return (
                f'field "start": program {_q(program)} does not exist in the unit folder '
                f"{_q(unit.path)}; fix the path or create the file"
            )
        if not os.access(target, os.X_OK):
            return (
                f'field "start": program {_q(program)} is not executable; run chmod +x on it '
                f'or start it through its interpreter (e.g. ["python3", {json.dumps(program)}])'
            )
        return None
    if shutil.which(program, path=path_var if path_var is not None else os.defpath) is not None:
        return None
    hint = "install it or fix the name"
    if (Path(unit.path) / program).is_file():
        hint = f'to run the file in the unit folder write "./{program}"'
    return f'field "start": program {_q(program)} is not on PATH; {hint}'


def check_programs(units: Sequence[Unit], env: Mapping[str, str]) -> None:
    """Raise SpecError (nothing started) when a unit's start program does not exist.

    `env` is the environment the units are started with (its PATH is searched). Frontend units
    that greenloop serves itself (`static`) have no program. A program that exists but fails
    when started (a broken interpreter line, a crash) is still reported by the run itself.
    """
    problems = _Problems()
    for u in units:
        if u.static is not None or not u.start:
            continue
        problem = _program_problem(u, env.get("PATH"))
        if problem is not None:
            problems.add(f"units.json unit {_q(u.id)}", problem)
    problems.raise_if_any("units.json")


def load_spec(project: str | os.PathLike[str], cases: Sequence[str] = ()) -> Spec:
    """Validate the whole project; return the Spec restricted to `cases` (all when empty)."""
    root = Path(project).resolve()
    if not root.is_dir():
        raise SpecError(f"project folder {str(project)!r} does not exist; pass a DevLoop project folder")
    units = load_units(root)
    by_id = {u.id: u for u in units}
    data = _read_json(
        root / "integration" / "spec.json",
        "integration/spec.json",
        'write the integration cases there: {"cases": [{"id", "involves", "steps": [...]}]}',
    )
    problems = _Problems()
    raw_cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(raw_cases, list) or not raw_cases:
        raise SpecError('integration/spec.json is invalid: field "cases" must be a non-empty list of cases')
    env = jsonpath_env()
    parsed: list[Case] = []
    seen: set[str] = set()
    for ci, raw in enumerate(raw_cases):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw.get("id"):
            problems.add(f"integration/spec.json cases[{ci}]", 'field "id" must be a non-empty string')
            continue
        cid = raw["id"]
        where = f"integration/spec.json case {_q(cid)}"
        if cid in seen:
            problems.add(where, 'field "id": two cases share this id; give each case its own id')
        seen.add(cid)
        for key in raw:
            if key not in _CASE_KEYS:
                problems.add(where, f"unknown field {_q(key)} (known: {', '.join(sorted(_CASE_KEYS))})")
        involves = raw.get("involves", [])
        if not isinstance(involves, list) or not all(isinstance(u, str) for u in involves):
            problems.add(where, 'field "involves" must be a list of unit ids')
            involves = []
        for u in involves:
            if u not in by_id:
                problems.add(
                    where,
                    f'field "involves": unknown unit {_q(u)} (units.json has: {", ".join(sorted(by_id))})',
                )
        steps_raw = raw.get("steps")
        if not isinstance(steps_raw, list) or not steps_raw:
            problems.add(where, 'field "steps" must be a non-empty list of steps')
            continue
        steps = [_parse_step(s, i, cid, by_id, env, problems) for i, s in enumerate(steps_raw)]
        opened = False
        for st in steps:
            if st is None or st.kind != "browser":
                continue
            if not (st.page or st.actions or st.checks):
                problems.add(
                    f"{where}, step {st.index}",
                    'a browser step needs "page", "actions" or "expect"; it does nothing as written',
                )
            starts_page = st.page is not None or (bool(st.actions) and st.actions[0].verb == "goto")
            if not opened and not starts_page:
                problems.add(
                    f"{where}, step {st.index}",
                    'field "page": the first browser step of a case must open a page ("page": "/" or '
                    'a first action {"goto": "/"})',
                )
            opened = True
        step_units = [s.unit for s in steps if s is not None and s.unit in by_id]
        all_involved = tuple(dict.fromkeys([*[u for u in involves if u in by_id], *step_units]))
        parsed.append(Case(cid, all_involved, tuple(s for s in steps if s is not None)))
    problems.raise_if_any("integration/spec.json")
    if cases:
        unknown = [c for c in cases if c not in seen]
        if unknown:
            raise SpecError(
                f"--case {', '.join(_q(c) for c in unknown)}: no such case in integration/spec.json "
                f"(cases: {', '.join(c.id for c in parsed)})"
            )
        parsed = [c for c in parsed if c.id in set(cases)]
    return Spec(str(root), units, tuple(parsed))
