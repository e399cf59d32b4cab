"""The escape routes of tests/e2e/escapes.py on the real Codex CLI (`codex exec`), offline.

The setup is test_codex_cli.py's (the pinned CLI, `greenloop init codex` in a copy of
examples/demo, a scripted Responses API model and a proxy trap in a network namespace of
their own): the model plays the route through the shell tool (`exec_command`), then says
"done" until the turn ends. A Stop hook's block reason reaches the model as the newest user
message of the next request.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import test_codex_cli as codex
from .escapes import FIX, NARROW, ROUTES, SKIP, TOUCH, assert_unresolved, steers
from .responses_server import Answer, call, texts

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

codex_project = codex.codex_project  # the fixture: a wired demo project and a CODEX_HOME


def shell(command: str) -> Answer:
    return call("exec_command", cmd=command, yield_time_ms=30000)


PLANS = {
    "narrow": [codex.run_in_shell(), shell(NARROW)],
    "skip": [codex.run_in_shell(), shell(SKIP), codex.run_in_shell()],
    "stale": [codex.run_in_shell(), shell(FIX), codex.run_in_shell(), shell(TOUCH)],
}


def newest_message(request: dict[str, Any]) -> str:
    """The text of the request's newest input item when it is a message (a steer comes so)."""
    items = request.get("input") or []
    last = items[-1] if items else None
    if not isinstance(last, dict) or last.get("type") != "message":
        return ""
    return "\n".join(texts({"input": [last]}))


@pytest.mark.parametrize("name", list(PLANS))
def test_an_escape_is_held_then_released_unresolved(codex_project: codex.CodexProject, name: str) -> None:
    project = codex_project
    result = project.exec("Make the cart's tests pass.", PLANS[name])
    session = result.thread_id
    assert result.plan_left == 0  # the whole route was played
    assert codex._run_sessions(project)[-1] == session  # the escape's run is the thread's
    held = steers(map(newest_message, project.model_requests))
    assert_unresolved(ROUTES[name], held, project.root, session, project.check(session), codex.BUDGET)
