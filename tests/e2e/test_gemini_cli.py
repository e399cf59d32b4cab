"""The closure gate in the real Gemini CLI (pinned in tests/harnesses/gemini-cli), offline.

A copy of examples/demo (one real bug, one failing test) is wired by `greenloop init gemini`;
`gemini -p … --yolo` runs against a scripted model server on 127.0.0.1 (gemini_model.py) that
calls real tools: the shell, the greenloop MCP server, read_file, replace. Each turn runs in a
network namespace of its own with only loopback, when the machine allows one (gemini_cli.py,
gemini_offline.py), and every proxy variable points at a loopback guard. Each scenario checks
what reached the model, what greenloop recorded, and that nothing tried to leave loopback.

A user turn here is one `gemini -p PROMPT` run; the second turn of a session is
`gemini --resume latest -p PROMPT` (same session id, a new BeforeAgent with the user's prompt).
Corrective rounds inside a turn are the CLI's own: an AfterAgent `deny` re-enters the agent
with greenloop's reason as the next prompt.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from greenloop.closure.store import Store

from .gemini_cli import GeminiCli, require_gemini, steer_requests
from .gemini_model import call, say
from .helpers import REPO, cli, netns_works, processes_under, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

FAILING = "tests/test_cart.py::test_discount_code_takes_ten_percent_off"
PROMPT = "The cart's discount is wrong; fix it and make the tests pass."
BUDGET = 2  # max_intercept_rounds, the default


@pytest.fixture
def project(tmp_path: Path) -> Path:
    require_gemini()
    root = tmp_path / "project"
    shutil.copytree(REPO / "examples" / "demo", root)
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    init = cli("init", "gemini", str(root))
    assert init.code == 0, init.stderr
    return root


@pytest.fixture(scope="module")
def netns() -> bool:
    works = netns_works()
    if not works:
        print("no user namespaces here: isolation rests on the leak guard alone", file=sys.stderr)
    return works


@pytest.fixture
def gemini(tmp_path: Path, project: Path, netns: bool) -> Any:
    cli_ = GeminiCli(tmp_path, project, netns=netns)
    yield cli_
    assert cli_.hits == [], f"requests tried to leave loopback: {cli_.hits}"
    # The CLI ends its MCP server and hook processes with itself.
    assert wait_until(lambda: not processes_under(project), timeout=10), processes_under(project)


def check(project: Path, session: str) -> dict[str, Any]:
    run = cli("check", "--session", session, "--json", cwd=project)
    data: dict[str, Any] = run.json
    return data


def kinds(project: Path, session: str) -> list[tuple[int, str]]:
    with Store(project) as store:
        return [(i["turn_seq"], i["kind"]) for i in store.interceptions(session)]


@pytest.mark.timeout(420)
def test_a_shell_greenloop_run_in_the_first_turn_holds_the_turn(gemini: GeminiCli, project: Path) -> None:
    budget = 3  # the project's own max_intercept_rounds: the gate counts what the config says
    (project / "greenloop.toml").write_text(f"max_intercept_rounds = {budget}\n")
    session = str(uuid.uuid4())
    steps = [
        call(
            "run_shell_command", {"command": "greenloop run .", "description": "run the tests"}, expect=PROMPT
        ),
        say("All done.", expect="test_discount_code_takes_ten_percent_off"),
        # Corrective round 1: the model calls a tool before it answers.
        call("read_file", {"file_path": str(project / "cart.py")}, expect=f"Intercept 1 of {budget}"),
        say("Done, I think.", expect="functionResponse"),
        # Corrective round 2: another tool, then an answer.
        call(
            "run_shell_command",
            {"command": "ls", "description": "look around"},
            expect=f"Intercept 2 of {budget}",
        ),
        say("Done again.", expect="functionResponse"),
        # Corrective round 3: an answer without a tool (stop_hook_active is true this time).
        say("I could not fix it.", expect=f"Intercept 3 of {budget}"),
    ]
    result = gemini.turn(PROMPT, steps, "--session-id", session, timeout=300)
    assert result.code == 0, result.stderr[-3000:]
    assert result.json["session_id"] == session

    steers = list(steer_requests(result.requests))
    assert len(steers) == budget
    assert all(FAILING in request.last_user_text() for request in steers)
    assert kinds(project, session) == [(1, "steer")] * budget + [(1, "release")]
    verdict = check(project, session)
    assert verdict["unresolved"] is True and verdict["satisfied"] is False
    assert verdict["last_run"]["session_id"] == session  # the shell run is the session's


@pytest.mark.timeout(600)
def test_mcp_test_run_is_held_released_then_a_new_turn_fixes_it(gemini: GeminiCli, project: Path) -> None:
    session = str(uuid.uuid4())
    # Turn 1: red through the MCP tool; the budget is spent over rounds that call tools.
    turn1 = [
        call("mcp_greenloop_test_run", {}, expect=PROMPT),
        # What the model reads is the agent format: the failing test and the rerun command.
        say("All done.", expect=(FAILING, "test_run with last_failed=true")),
        call("mcp_greenloop_test_closure_check", {}, expect=f"Intercept 1 of {BUDGET}"),
        say("Done now.", expect="functionResponse"),
        call("read_file", {"file_path": str(project / "cart.py")}, expect=f"Intercept 2 of {BUDGET}"),
        say("I give up.", expect="functionResponse"),
    ]
    first = gemini.turn(PROMPT, turn1, "--session-id", session, timeout=300)
    assert first.code == 0, first.stderr[-3000:]
    assert first.json["session_id"] == session
    # The MCP server found the session through the process tree (greenloop.closure.session).
    with Store(project) as store:
        assert [r.session_id for r in store.runs()] == [session]
    steers = list(steer_requests(first.requests))
    assert len(steers) == BUDGET and all(FAILING in r.last_user_text() for r in steers)
    assert kinds(project, session) == [(1, "steer"), (1, "steer"), (1, "release")]
    verdict = check(project, session)
    assert verdict["unresolved"] is True and verdict["satisfied"] is False

    # Turn 2, the same words again: a new budget; the model fixes the bug and re-runs green.
    turn2 = [
        say("It looks fine to me.", expect=PROMPT),
        call(
            "replace",
            {
                "file_path": str(project / "cart.py"),
                "instruction": "Take 10% off instead of keeping 10%.",
                "old_string": "return total * 10 // 100",
                "new_string": "return total * 90 // 100",
            },
            expect=f"Intercept 1 of {BUDGET}",
        ),
        call("mcp_greenloop_test_run", {}, expect="functionResponse"),
        say("Fixed: the discount takes 10% off and every test passes.", expect="green"),
    ]
    second = gemini.turn(PROMPT, turn2, "--resume", "latest", timeout=300)
    assert second.code == 0, second.stderr[-3000:]
    assert second.json["session_id"] == session
    assert "every test passes" in second.json["response"]
    new_steers = list(steer_requests(second.requests))
    assert len(new_steers) == 1 and f"Intercept 1 of {BUDGET}" in new_steers[0].last_user_text()
    assert kinds(project, session)[3:] == [(2, "steer")]
    verdict = check(project, session)
    assert verdict["satisfied"] is True and verdict["unresolved"] is False
    assert verdict["last_run"]["ok"] is True and verdict["last_run"]["session_id"] == session


@pytest.mark.timeout(240)
def test_the_leak_guard_sees_a_request_for_the_internet(gemini: GeminiCli) -> None:
    """The guard is where the CLI's traffic goes when it is not for loopback: aim the CLI at
    Google's real endpoint and the request reaches the guard (and nothing else)."""
    gemini.extra_env["GOOGLE_GEMINI_BASE_URL"] = "https://generativelanguage.googleapis.com"
    report = gemini.run("hello", [], timeout=120, until_guard_hit=True)
    assert any("generativelanguage.googleapis.com" in hit for hit in report["hits"]), report["stderr"][-2000:]
    assert report["requests"] == []
    gemini.hits.clear()  # seen and stopped: what the fixture checks is the scenarios' traffic
