"""The escape routes of tests/e2e/escapes.py on the real Claude Code CLI (`claude -p`), offline.

The setup is test_claude_code.py's (the pinned CLI, `greenloop init claude-code` in a copy of
examples/demo, the scripted model server in a network namespace of its own): the model plays
the route through the Bash tool, then says "Done." until the turn ends. Every request that
carried a steer is read from what the model server received. The honest path (red, a fix,
green, done) is played too: it is never held.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import test_claude_code as claude
from .escapes import FIX, NARROW, ROUTES, SKIP, TOUCH, assert_unresolved, interceptions, steers
from .model_server import last_user_text

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

demo = claude.demo  # the fixture: a copy of examples/demo wired by `greenloop init claude-code`


def bash(command: str) -> dict[str, Any]:
    return {"tool": "Bash", "input": {"command": command, "description": "Run a command"}}


SCRIPTS = {
    "narrow": [claude.GREENLOOP_RUN, bash(NARROW)],
    "skip": [claude.GREENLOOP_RUN, bash(SKIP), claude.GREENLOOP_RUN],
    "stale": [claude.GREENLOOP_RUN, bash(FIX), claude.GREENLOOP_RUN, bash(TOUCH)],
}


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_an_escape_is_held_then_released_unresolved(demo: Path, name: str) -> None:
    result = claude.drive(demo, [claude.turn("Make the tests pass.", SCRIPTS[name])])
    sid = result["session_id"]
    [t] = result["turns"]
    assert t["script_left"] == 0  # the whole route was played before the first stop
    held = steers(map(last_user_text, claude.main_requests(t)))
    assert_unresolved(ROUTES[name], held, demo, sid, claude.check(demo, sid), claude.BUDGET)


def test_the_honest_path_is_never_held(demo: Path) -> None:
    """Red, a real fix, green, done: the turn ends at the first stop, with no corrective round."""
    script = [claude.GREENLOOP_RUN, bash(FIX), claude.GREENLOOP_RUN]
    result = claude.drive(demo, [claude.turn("Make the tests pass.", script)])
    sid = result["session_id"]
    [t] = result["turns"]
    assert t["script_left"] == 0
    assert steers(map(last_user_text, claude.main_requests(t))) == []
    assert interceptions(demo, sid) == []
    verdict = claude.check(demo, sid)
    assert verdict["satisfied"] is True and verdict["unresolved"] is False, verdict
    assert verdict["holding"] == "" and verdict["unresolved_reason"] is None, verdict
    green, red = claude.runs(demo)
    assert (red["ok"], green["ok"]) == (False, True) and {red["session_id"], green["session_id"]} == {sid}
