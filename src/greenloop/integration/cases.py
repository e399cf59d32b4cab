"""Running one integration case: steps, placeholders, expectations (RFC 9535 JSONPath).

A step is executed by the executor for its kind; an HTTP step (it has `call`) is sent to its
unit's port with headers and a JSON body. `{{stepN.a.b}}` placeholders (array indices as `.0`
or `[0]`) are filled from earlier responses of the same case; a placeholder that is a whole
JSON value keeps its JSON type, inside a string it becomes text. An unresolvable placeholder
fails the case (`placeholder_unresolved`); it is never sent as literal text.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from greenloop.closure.transitions import iso
from greenloop.integration.spec.records import PLACEHOLDER, Assertion, Case, Expect, Step, jsonpath_env
from greenloop.integration.trace import TraceEntry, TraceWriter, bound_body

__all__ = [
    "CASE_TIMEOUT_S",
    "REASONS",
    "CaseOutcome",
    "HttpResponse",
    "Mismatch",
    "StepExecutor",
    "StepResult",
    "Transport",
    "Unresolved",
    "as_text",
    "check_expect",
    "http_transport",
    "json_equal",
    "parse_body",
    "resolve",
    "run_case",
]

CASE_TIMEOUT_S = 30.0
REASONS = (
    "status_mismatch",
    "assertion_failed",
    "placeholder_unresolved",
    "timeout",
    "connection_error",
    "unit_crashed",
)
_PART = re.compile(r"\.([A-Za-z0-9_$-]+)|\[(\d+)\]")
_WHOLE = re.compile(r"^\s*\{\{\s*([^{}]*?)\s*\}\}\s*$")


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Mapping[str, str]
    body: Any  # parsed JSON, or the text when the body is not JSON, or None when empty


Transport = Callable[[str, str, Mapping[str, str], "bytes | None", float], HttpResponse]


def http_transport(
    method: str, url: str, headers: Mapping[str, str], body: bytes | None, timeout: float
) -> HttpResponse:
    """One HTTP request over http.client; raises OSError/socket.timeout on network trouble."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=max(0.01, timeout))
    try:
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        conn.request(method, target, body=body, headers=dict(headers))
        resp = conn.getresponse()
        raw = resp.read()
        resp_headers = {k: v for k, v in resp.getheaders()}
        status = resp.status
    finally:
        conn.close()
    return HttpResponse(status, resp_headers, parse_body(raw.decode("utf-8", "replace")))


def parse_body(text: str | None) -> Any:
    """A body as parsed JSON, or the text when it is not JSON, or None when empty."""
    if not text:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class Unresolved(Exception):
    """A placeholder that points at nothing; `available` lists what was there."""

    def __init__(self, expr: str, available: Sequence[str]) -> None:
        super().__init__(expr)
        self.expr = expr
        self.available = list(available)


def _keys_of(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [str(k) for k in value]
    if isinstance(value, list):
        return [str(i) for i in range(len(value))]
    return []


def _lookup(expr: str, responses: Sequence[Any]) -> Any:
    m = re.match(r"^step(\d+)(.*)$", expr)
    if not m:
        raise Unresolved(expr, [f"step{i}" for i in range(len(responses))])
    n = int(m.group(1))
    if n >= len(responses):
        raise Unresolved(expr, [f"step{i}" for i in range(len(responses))])
    value = responses[n]
    rest = m.group(2)
    pos = 0
    while pos < len(rest):
        pm = _PART.match(rest, pos)
        if not pm:
            raise Unresolved(expr, _keys_of(value))
        key, idx = pm.group(1), pm.group(2)
        pos = pm.end()
        if isinstance(value, dict) and key is not None and key in value:
            value = value[key]
        elif isinstance(value, list) and (idx is not None or (key is not None and key.isdigit())):
            i = int(idx if idx is not None else key)
            if i >= len(value):
                raise Unresolved(expr, _keys_of(value))
            value = value[i]
        else:
            raise Unresolved(expr, _keys_of(value))
    return value


def as_text(value: Any) -> str:
    """A value as text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def resolve(template: Any, responses: Sequence[Any], *, url_path: bool = False) -> Any:
    """Fill `{{stepN…}}` placeholders from earlier response bodies. Raises Unresolved."""
    if isinstance(template, str):
        whole = _WHOLE.match(template)
        if whole and not url_path:
            return _lookup(whole.group(1), responses)

        def text(m: re.Match[str]) -> str:
            t = as_text(_lookup(m.group(1), responses))
            return urllib.parse.quote(t, safe="") if url_path else t

        return PLACEHOLDER.sub(text, template)
    if isinstance(template, dict):
        return {
            str(resolve(k, responses)) if isinstance(k, str) else k: resolve(v, responses)
            for k, v in template.items()
        }
    if isinstance(template, list):
        return [resolve(v, responses) for v in template]
    return template


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
    reason: str
    expected: Any
    got: Any
    message: str


@dataclass(frozen=True)
class StepResult:
    """What a non-HTTP executor (the browser) reports for one step.

    `value` is what later placeholders see as `stepN`; `mismatch` fails the case; `artifacts`
    names evidence files (`screenshot`, `html`) relative to the project.
    """

    value: Any
    mismatch: Mismatch | None = None
    artifacts: Mapping[str, str] = field(default_factory=dict)


# (case, step, earlier step values, seconds left in the case) -> result; raises Unresolved.
StepExecutor = Callable[[Case, Step, Sequence[Any], float], StepResult]


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


@dataclass(frozen=True)
class CaseOutcome:
    case_id: str
    status: str  # passed | failed | timeout
    duration_ms: int
    steps_run: int
    failed_step: int | None = None
    reason: str | None = None
    expected: Any = None
    got: Any = None
    message: str = ""
    unit: str | None = None  # the unit the failing step called
    involves: tuple[str, ...] = field(default_factory=tuple)
    artifacts: Mapping[str, str] = field(default_factory=dict)  # evidence files of a failing step

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "status": self.status,
            "duration_ms": self.duration_ms,
            "steps_run": self.steps_run,
            "failed_step": self.failed_step,
            "reason": self.reason,
            "message": self.message,
        }


def run_case(
    case: Case,
    *,
    urls: Mapping[str, str],
    timeout_s: float = CASE_TIMEOUT_S,
    trace: TraceWriter | None = None,
    crashed: Callable[[str], int | None] = lambda unit: None,
    transport: Transport = http_transport,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    executors: Mapping[str, StepExecutor] | None = None,
) -> CaseOutcome:
    """Run the steps of one case in order; stop at the first failing step.

    HTTP steps are sent here; a step of another kind goes to `executors[step.kind]`.
    """
    start = clock()
    deadline = start + timeout_s
    responses: list[Any] = []

    def outcome(
        step: Step | None,
        status: str,
        reason: str | None = None,
        expected: Any = None,
        got: Any = None,
        message: str = "",
        artifacts: Mapping[str, str] | None = None,
    ) -> CaseOutcome:
        return CaseOutcome(
            case_id=case.id,
            status=status,
            duration_ms=int((clock() - start) * 1000),
            steps_run=len(case.steps) if step is None else step.index + 1,
            failed_step=None if step is None else step.index,
            reason=reason,
            expected=expected,
            got=got,
            message=message,
            unit=None if step is None else step.unit,
            involves=case.involves,
            artifacts=dict(artifacts or {}),
        )

    def unresolved(step: Step, exc: Unresolved) -> CaseOutcome:
        return outcome(
            step,
            "failed",
            "placeholder_unresolved",
            "{{" + exc.expr + "}}",
            {"available": exc.available},
            f"placeholder {{{{{exc.expr}}}}} cannot be resolved "
            f"(keys there: {', '.join(exc.available) or 'none'})",
        )

    for step in case.steps:
        remaining = deadline - clock()
        if remaining <= 0:
            return outcome(
                step,
                "timeout",
                "timeout",
                f"case within {timeout_s:g} s",
                None,
                f"case timed out after {timeout_s:g} s before step {step.index}",
            )
        if step.kind != "http":
            executor = (executors or {}).get(step.kind)
            if executor is None:
                return outcome(
                    step,
                    "failed",
                    "connection_error",
                    f"a {step.kind} executor",
                    None,
                    f"step {step.index}: this run has no executor for {step.kind} steps",
                )
            try:
                result = executor(case, step, responses, remaining)
            except Unresolved as exc:
                return unresolved(step, exc)
            miss = result.mismatch
            if miss is not None:
                return outcome(
                    step,
                    "timeout" if miss.reason == "timeout" else "failed",
                    miss.reason,
                    miss.expected,
                    miss.got,
                    miss.message,
                    result.artifacts,
                )
            responses.append(result.value)
            continue
        try:
            path = resolve(step.path, responses, url_path=True)
            headers = {str(k): str(resolve(v, responses)) for k, v in step.headers}
            body = resolve(step.body, responses) if step.has_body else None
        except Unresolved as exc:
            return unresolved(step, exc)
        base = urls.get(step.unit)
        if base is None:  # a unit that is not running (should not happen after validation)
            return outcome(
                step, "failed", "connection_error", step.unit, None, f"unit {step.unit} is not running"
            )
        url = base + path
        data: bytes | None = None
        if step.has_body:
            data = json.dumps(body, ensure_ascii=False).encode()
            if not any(k.lower() == "content-type" for k in headers):
                headers["Content-Type"] = "application/json"
        if not any(k.lower() == "accept" for k in headers):
            headers["Accept"] = "application/json"
        t0, ts = clock(), wall()
        response: HttpResponse | None = None
        error: str | None = None
        timed_out = False
        try:
            response = transport(step.method, url, headers, data, remaining)
        except TimeoutError:
            timed_out = True
            error = f"no answer within the case's remaining {remaining:.2f} s"
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
        duration = int((clock() - t0) * 1000)
        if trace is not None:
            trace.write(
                TraceEntry(
                    ts=iso(ts),
                    case_id=case.id,
                    step=step.index,
                    unit=step.unit,
                    method=step.method,
                    url=url,
                    request_headers=headers,
                    request_body=body if step.has_body else None,
                    status=None if response is None else response.status,
                    response_headers={} if response is None else response.headers,
                    response_body=None if response is None else response.body,
                    duration_ms=duration,
                    error=error,
                )
            )
        if timed_out:
            return outcome(
                step,
                "timeout",
                "timeout",
                f"case within {timeout_s:g} s",
                None,
                f"step {step.index} ({step.call}) timed out: {error}",
            )
        if response is None:
            code = crashed(step.unit)
            if code is not None:
                return outcome(
                    step,
                    "failed",
                    "unit_crashed",
                    "unit running",
                    {"exit_code": code},
                    f"unit {step.unit} is gone (exit code {code}) at step {step.index} ({step.call})",
                )
            return outcome(
                step,
                "failed",
                "connection_error",
                f"an answer from {step.unit}",
                {"error": error},
                f"step {step.index} ({step.call}) got no answer: {error}",
            )
        responses.append(response.body)
        miss = check_expect(step.expect, response)
        if miss is not None:
            return outcome(
                step,
                "failed",
                miss.reason,
                miss.expected,
                miss.got,
                f"step {step.index} ({step.call}): {miss.message}",
            )
    return outcome(None, "passed")
