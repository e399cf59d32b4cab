"""The escape routes of tests/e2e/escapes.py on the real Gemini CLI (`gemini -p … --yolo`), offline.

The setup is test_gemini_cli.py's (the pinned CLI, `greenloop init gemini` in a copy of
examples/demo, the scripted model server and the leak guard in a network namespace of their
own). The model plays the route with the CLI's own tools: the shell for the test runs, its
`replace` tool for the edits. Each step says what the CLI must have sent (`expect`), so a
steer the route should not get, or one it should, fails the step. Like the scenarios there,
each corrective round calls a tool before the model says it is done again.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from . import test_gemini_cli as gem
from .escapes import NARROW, ROUTES, assert_unresolved, steers
from .gemini_cli import GeminiCli
from .gemini_model import Step, call, say

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# The fixtures: a wired copy of examples/demo, whether a network namespace works, the CLI.
project, netns, gemini = gem.project, gem.netns, gem.gemini

FAILED = "test_discount_code_takes_ten_percent_off"  # in the red run's output
DONE = "functionResponse"  # what the CLI sends after a tool ran


def shell(command: str, expect: str) -> Step:
    return call("run_shell_command", {"command": command, "description": "run a command"}, expect=expect)


def replace(path: Path, old: str, new: str, expect: str) -> Step:
    args = {"file_path": str(path), "instruction": "Edit it.", "old_string": old, "new_string": new}
    return call("replace", args, expect=expect)


def route_steps(name: str, root: Path) -> list[Step]:
    red = shell("greenloop run .", expect=gem.PROMPT)
    cart, tests = root / "cart.py", root / "tests" / "test_cart.py"
    if name == "narrow":
        steps = [red, shell(NARROW, expect=FAILED)]
    elif name == "skip":
        test = "def test_discount_code_takes_ten_percent_off():"
        steps = [
            red,
            replace(tests, test, f"@pytest.mark.skip\n{test}", expect=FAILED),
            shell("greenloop run .", DONE),
        ]
    else:
        steps = [
            red,
            replace(cart, "return total * 10 // 100", "return total * 90 // 100", expect=FAILED),
            shell("greenloop run .", DONE),
            replace(cart, "# The bug the demo shows", "# What the demo showed", expect=DONE),
        ]
    steps.append(say("Done.", expect=DONE))
    # Each corrective round: a tool, then "done" again.
    for number in range(1, ROUTES[name].rounds(gem.BUDGET) + 1):
        steps += [
            call("read_file", {"file_path": str(cart)}, expect=f"Intercept {number} of {gem.BUDGET}"),
            say("Done.", expect=DONE),
        ]
    return steps


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(ROUTES))
def test_an_escape_is_held_then_released_unresolved(gemini: GeminiCli, project: Path, name: str) -> None:
    session = str(uuid.uuid4())
    result = gemini.turn(gem.PROMPT, route_steps(name, project), "--session-id", session, timeout=300)
    assert result.code == 0, result.stderr[-3000:]
    assert result.json["session_id"] == session
    held = steers(r.last_user_text() for r in result.requests if r.agent)
    assert_unresolved(ROUTES[name], held, project, session, gem.check(project, session), gem.BUDGET)
