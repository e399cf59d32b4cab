"""The frozen records of an integration spec: units, contracts, cases, steps and expectations.

`greenloop.integration.spec.loading.load_spec` builds them from units.json, contract.json files
and integration/spec.json; everything else in an integration run only reads them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonpath

__all__ = [
    "ACTIONS",
    "COMPARE_OPS",
    "DEFAULT_HEALTH",
    "DEFAULT_START",
    "FE_HEALTH",
    "HTTP_METHODS",
    "PLACEHOLDER",
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
    "env_var_name",
    "jsonpath_env",
]

DEFAULT_START: tuple[str, ...] = ("node", "code/server.js")
DEFAULT_HEALTH = "/api/health"
FE_HEALTH = "/"  # the default health path of a frontend unit started by its own command
ACTIONS = ("goto", "fill", "click", "press", "wait_for")
UNIT_KINDS = ("be", "fe")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
COMPARE_OPS = ("==", "!=", ">=", "<=", ">", "<")
# {{step0.token}}, {{step1.items.0.id}}, {{step1.items[0].id}}, {{step2}} (the whole body)
PLACEHOLDER = re.compile(r"\{\{\s*(.*?)\s*\}\}")


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
        """The endpoint as written in the contract: `GET /api/items/:id`."""
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
    """The HTTP endpoints a unit's contract.json exports (empty when it exports none)."""

    source: str  # the contract file, relative to the project
    endpoints: tuple[Endpoint, ...]

    def find(self, method: str, path: str) -> Endpoint | None:
        """The declared endpoint a step's method and path fit, or None."""
        for ep in self.endpoints:
            if ep.matches(method, path):
                return ep
        return None


@dataclass(frozen=True)
class Unit:
    """One unit of units.json, with its defaults filled in and its folders made absolute."""

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
    """What an HTTP step's response must hold: a status, JSONPath values, assertions."""

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
        """The action as one line for messages and the trace: `fill input[name=title] "buy milk"`."""
        if self.verb == "goto":
            return f"goto {self.value}"
        if self.verb in ("fill", "press"):
            return f"{self.verb} {self.selector} {json.dumps(self.value, ensure_ascii=False)}"
        if self.verb == "wait_for" and self.text:
            text = json.dumps(self.text, ensure_ascii=False)
            return f"wait_for {self.selector + ' ' if self.selector else ''}text {text}"
        return f"{self.verb} {self.selector}"


@dataclass(frozen=True)
class PageExpect:
    """A page holds: an element matches `selector` (one of them contains `text`; exactly `count`)."""

    selector: str
    text: str | None = None
    count: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The expectation as spec.json writes it (unset fields left out)."""
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
        """What the step does, for messages: `POST /api/todos`, `page /` or `browser actions`."""
        if self.kind == "browser":
            return f"page {self.page}" if self.page is not None else "browser actions"
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Case:
    """One case of integration/spec.json: the units it involves and its steps, in order."""

    id: str
    involves: tuple[str, ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Spec:
    """A validated project: every unit of units.json and the selected cases."""

    root: str
    units: tuple[Unit, ...]
    cases: tuple[Case, ...]

    def unit(self, unit_id: str) -> Unit:
        """The unit with this id (KeyError when there is none)."""
        for u in self.units:
            if u.id == unit_id:
                return u
        raise KeyError(unit_id)

    @property
    def has_browser_steps(self) -> bool:
        """Whether any selected case drives a browser (the run then needs Chromium)."""
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

