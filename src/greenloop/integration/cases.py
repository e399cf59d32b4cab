"""Running one integration case: its steps in order, until the first one that fails.

A step is executed by the executor for its kind; an HTTP step (it has `call`) is sent to its
unit's port with headers and a JSON body (`http_call`), its `{{stepN.a.b}}` placeholders filled
from earlier responses of the same case (`placeholders`; an unresolvable one fails the case as
`placeholder_unresolved`), and its response checked against its expectations
(`response_checks`).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from greenloop.closure.transitions import iso
from greenloop.integration.http_call import HttpResponse, Transport, http_transport
from greenloop.integration.placeholders import Unresolved, resolve
from greenloop.integration.response_checks import Mismatch, check_expect
from greenloop.integration.spec.records import Case, Step
from greenloop.integration.trace import TraceEntry, TraceWriter

__all__ = [
    "CASE_TIMEOUT_S",
    "REASONS",
    "CaseOutcome",
    "StepExecutor",
    "StepResult",
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


@dataclass(frozen=True)
class CaseOutcome:
    """How one case ended: passed, failed or timeout, and for a failure the step and why."""

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
        """Whether every step of the case held."""
        return self.status == "passed"

    def to_json(self) -> dict[str, Any]:
        """The case's row in result.json (without the evidence a failure carries)."""
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

