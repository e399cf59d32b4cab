"""`greenloop accept` (issue 31, "Honest done"): a person accepts a skipped or removed test,
and the gate stops owing it; the agent cannot. Everything runs the real CLI in its own process
against a real pytest workspace and its real SQLite state: a person's run gets a real
pseudo-terminal (os.openpty), an agent's is refused by its harness variable, by its harness
among the ancestors (a process named like one, or one a hook bound), or by having no terminal.
The commands under test run orphaned (init is their only ancestor) so that the suite, run from
an agent's shell, does not find that agent above them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from greenloop.cli import AGENT_ENV
from greenloop.closure import accept as people
from greenloop.closure import session
from greenloop.closure.store import Store

FAKE = str(Path(__file__).with_name("fake_harness.py"))
ADD = "tests/test_calc.py::test_add"
ZERO = "tests/test_calc.py::test_zero"
TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 2) == 4\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)


def _env(ws: Path, **extra: str) -> dict[str, str]:
    """A person's shell: no harness variable, git's user.name set in a config of its own."""
    drop = {n for _, n in AGENT_ENV} | set(session.ENV_VARS) | set(people.HARNESS_VARS)
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.endswith("_PROJECT_DIR")}
    gitconfig = ws.parent / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Ana Lima\n")
    env.update(GIT_CONFIG_GLOBAL=str(gitconfig), GIT_CONFIG_NOSYSTEM="1",
               GREENLOOP_CONFIG_HOME=str(ws.parent / "no-user-config"))
    env.update(extra)
    return env


def greenloop(ws: Path, *args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI without a terminal (stdin from /dev/null), as a script or an agent's shell runs it."""
    return subprocess.run(
        [sys.executable, "-m", "greenloop", *args], cwd=ws, env=dict(env or _env(ws)),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )


# A person's terminal is nobody's child: the command runs orphaned (its starter has exited, so
# it hangs under init), or the suite run from an agent's shell would find that harness among
# its ancestors and be refused. fd 3 carries the terminal past the /dev/null a background
# list gets as stdin.
_ORPHAN = 'exec 3<&0; (while kill -0 $$ 2>/dev/null; do sleep 0.01; done; "$@" <&3 3<&-; echo $? > "$0") &'


def orphaned(
    ws: Path, argv: list[str], env: Mapping[str, str] | None = None, *, terminal: bool = True
) -> tuple[int, str]:
    """Run `argv` with no ancestor but init, on a fresh pseudo-terminal (stdin, stdout and
    stderr) as in a person's terminal, or with stdin from /dev/null and its output in a file;
    its exit status and everything it wrote."""
    tag = time.monotonic_ns()
    code_file, out_file = ws.parent / f"exit-{tag}", ws.parent / f"out-{tag}"
    master, slave = os.openpty() if terminal else (-1, -1)
    with open(os.devnull) as null, open(out_file, "wb") as sink:
        ends = (slave, slave, slave) if terminal else (null.fileno(), sink.fileno(), sink.fileno())
        try:
            starter = subprocess.Popen(["sh", "-c", _ORPHAN, str(code_file), *argv], cwd=ws,
                                       env=dict(env or _env(ws)), stdin=ends[0], stdout=ends[1],
                                       stderr=ends[2], start_new_session=True)
        finally:
            if terminal:
                os.close(slave)
    assert starter.wait(timeout=30) == 0  # reaped: the command now starts, orphaned
    out = b""
    while terminal:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the terminal's last writer closed it
            chunk = b""
        if not chunk:
            os.close(master)
            break
        out += chunk
    deadline = time.monotonic() + 60
    while not code_file.exists() or not code_file.read_text().strip():
        assert time.monotonic() < deadline, out
        time.sleep(0.01)
    if not terminal:
        out = out_file.read_bytes()
    return int(code_file.read_text()), out.decode("utf-8", "replace").replace("\r\n", "\n")


def in_terminal(ws: Path, argv: list[str], env: Mapping[str, str] | None = None) -> tuple[int, str]:
    return orphaned(ws, argv, env)


def person(ws: Path, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    return in_terminal(ws, [sys.executable, "-m", "greenloop", *args], env)


def check(ws: Path, sid: str = "s1") -> dict[str, Any]:
    p = greenloop(ws, "check", ".", "--session", sid, "--json")
    assert p.returncode in (0, 1), p.stderr
    out: dict[str, Any] = json.loads(p.stdout)
    return out


def acceptances(ws: Path) -> list[Any]:
    with Store(ws) as store:
        return store.acceptances()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Session s1 ran the whole suite green (it guards both tests), then skipped test_zero with a
    mark and ran again: test_zero is owed, "skipped in this session"."""
    ws = tmp_path_factory.mktemp("accept") / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "tests" / "test_calc.py").write_text(TESTS)
    (ws / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    for step in range(2):
        if step:
            (ws / "tests" / "test_calc.py").write_text(
                TESTS.replace("def test_zero", "import pytest\n\n\n@pytest.mark.skip\ndef test_zero")
            )
        run = greenloop(ws, "run", ".", "--session", "s1", "--json")
        assert run.returncode == 0, run.stdout + run.stderr
    return ws


@pytest.fixture
def ws(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(template, copy)
    return copy


def test_the_workspace_owes_the_skipped_test(ws: Path) -> None:
    verdict = check(ws)
    assert verdict["satisfied"] is False and verdict["holding"] == "taken_away"
    assert [(o["test"], o["reason"]) for o in verdict["owed"]] == [(ZERO, "skipped")]
    assert verdict["accepted"] == []


def test_a_person_accepts_it_and_the_gate_no_longer_owes_it(ws: Path) -> None:
    before = time.time()
    code, out = person(ws, "accept", ZERO, "--reason", "needs the staging database; tracked in #12")
    assert code == 0, out
    login = people.who(str(ws)).split("(")[-1].rstrip(")")
    assert f"accepted {ZERO} for every session of this workspace" in out
    assert f"by Ana Lima ({login}) at " in out and "tracked in #12" in out
    [record] = acceptances(ws)
    assert record.by == f"Ana Lima ({login})" and record.session_id is None and record.at >= before
    verdict = check(ws)
    assert verdict["satisfied"] is True and verdict["owed"] == [] and verdict["owed_count"] == 0
    [shown] = verdict["accepted"]
    assert shown["test"] == ZERO and shown["reason"] == "skipped"
    assert shown["accepted_by"] == record.by and shown["accepted_reason"].endswith("#12")
    assert shown["accepted_at"].endswith("Z") and shown["accepted_for"] is None
    # the human form lists who, when and why; the agent form says it is accepted, never the command
    human = greenloop(ws, "check", ".", "--session", "s1", "--format", "human")
    assert human.returncode == 0 and f"accepted: {ZERO} (skipped in this session" in human.stdout
    assert f"by {record.by}" in human.stdout
    agent = greenloop(ws, "check", ".", "--session", "s1", "--format", "agent")
    assert agent.returncode == 0 and f"note: accepted: {ZERO}" in agent.stdout
    assert "greenloop accept " not in agent.stdout
    # `greenloop accepted` lists it, and nothing is left to accept
    listing = json.loads(greenloop(ws, "accepted", ".", "--json").stdout)
    assert [a["test"] for a in listing["acceptances"]] == [ZERO] and listing["taken_away"] == []
    text = greenloop(ws, "accepted", ".").stdout
    assert f"accepted {ZERO} (workspace) by {record.by}" in text


def test_an_accepted_test_that_fails_is_owed_again(ws: Path) -> None:
    code, out = person(ws, "accept", ZERO, "--reason", "flaky upstream")
    assert code == 0, out
    (ws / "tests" / "test_calc.py").write_text(TESTS)  # the skip is gone: it runs, and fails
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b + 1\n")
    run = greenloop(ws, "run", ".", "--session", "s1", "--json")
    assert run.returncode == 1, run.stdout + run.stderr
    verdict = check(ws)
    assert verdict["satisfied"] is False
    assert {(o["test"], o["reason"]) for o in verdict["owed"]} == {(ADD, "failed"), (ZERO, "failed")}
    assert verdict["accepted"] == []
    # and a failure cannot be accepted: exit 2, nothing recorded
    code, out = person(ws, "accept", ADD, "--reason", "later")
    assert code == 2 and "a failure cannot be accepted" in out
    assert len(acceptances(ws)) == 1


def test_a_removed_test_can_be_accepted_too(ws: Path) -> None:
    (ws / "tests" / "test_calc.py").write_text(TESTS.split("\n\n\ndef test_zero")[0] + "\n")
    run = greenloop(ws, "run", ".", "--session", "s1", "--json")
    assert run.returncode == 0, run.stdout + run.stderr
    [owed] = check(ws)["owed"]
    assert owed["test"] == ZERO and owed["reason"] == "removed"
    code, out = person(ws, "accept", ZERO, "--reason", "test_zero moved to the integration suite")
    assert code == 0, out
    verdict = check(ws)
    assert verdict["satisfied"] is True and [a["why"] for a in verdict["accepted"]] == [owed["why"]]


def test_the_human_check_tells_a_person_how_to_accept_and_the_agents_never(ws: Path) -> None:
    human = greenloop(ws, "check", ".", "--session", "s1", "--format", "human")
    assert human.returncode == 1
    hint = f'a person can accept a skipped or removed test: greenloop accept {ZERO} --reason "…"'
    assert hint in human.stdout
    agent = greenloop(ws, "check", ".", "--session", "s1", "--format", "agent")
    assert agent.returncode == 1 and "greenloop accept" not in agent.stdout
    listing = greenloop(ws, "accepted", ".")
    assert f"taken away, not accepted: {ZERO} (skipped in this session" in listing.stdout


def test_an_acceptance_for_one_session_covers_only_that_session(ws: Path) -> None:
    code, out = person(ws, "accept", ZERO, "--session", "s2", "--reason", "r")
    assert code == 2 and f"{ZERO} is not owed as skipped, removed or .only in session s2" in out
    code, out = person(ws, "accept", ZERO, "--session", "s1", "--reason", "only here", "--json")
    assert code == 0, out
    record = json.loads(out)
    assert record["session_id"] == "s1" and record["reason"] == "only here" and record["by"].startswith("Ana")
    assert check(ws)["satisfied"] is True
    assert json.loads(greenloop(ws, "accepted", ".", "--session", "s2", "--json").stdout)["acceptances"] == []


def test_bad_arguments_name_the_fix(ws: Path) -> None:
    code, out = person(ws, "accept", "tests/test_calc.py::test_nope", "--reason", "r")
    assert code == 2 and f"pass one of: {ZERO}" in out
    code, out = person(ws, "accept", ZERO, "--reason", "   ")
    assert code == 2 and "--reason is empty" in out
    code, out = person(ws, "accept", ZERO)
    assert code == 2 and "--reason" in out
    code, out = person(ws, "accept", ZERO, "no-such-folder", "--reason", "r")
    assert code == 2 and "is not an existing folder" in out
    assert acceptances(ws) == []


# ------------------------------------------------------------------ the agent is refused


REFUSING_VARS = sorted({n for _, n in AGENT_ENV} | set(session.ENV_VARS) - {"GREENLOOP_SESSION"}
                       | set(people.HARNESS_VARS))


@pytest.mark.parametrize("name", REFUSING_VARS)
def test_a_harness_variable_refuses_it_even_on_a_terminal(ws: Path, name: str) -> None:
    code, out = person(ws, "accept", ZERO, "--reason", "r", env=_env(ws, **{name: "1"}))
    assert code == 2
    assert f"refused inside an agent's session ({name} is set)" in out
    assert "a person must run it from their own terminal" in out
    assert acceptances(ws) == [] and check(ws)["owed_count"] == 1


def test_no_terminal_refuses_it(ws: Path) -> None:
    code, out = orphaned(ws, [sys.executable, "-m", "greenloop", "accept", ZERO, "--reason", "r"],
                         terminal=False)
    assert code == 2 and "refused without a terminal (stdin is not a TTY)" in out
    assert "a person must run it from their own terminal" in out
    assert acceptances(ws) == []


def test_a_process_named_like_a_harness_among_the_ancestors_refuses_it(ws: Path) -> None:
    # A real process called `claude` (a shell script of that name: its comm is "claude") that
    # runs the command as its child, on a terminal, with no harness variable anywhere.
    harness = ws.parent / "bin" / "claude"
    harness.parent.mkdir()
    harness.write_text(f'#!/bin/sh\n"{sys.executable}" -m greenloop accept "$@"\necho "exit $?"\n')
    harness.chmod(0o755)
    code, out = in_terminal(ws, [str(harness), ZERO, "--reason", "r"])
    assert code == 0 and "exit 2" in out, out
    assert "refused inside an agent's session (it runs under claude (pid " in out
    assert acceptances(ws) == []


def test_a_harness_a_hook_bound_among_the_ancestors_refuses_it(ws: Path) -> None:
    # The fake harness (a python process, orphaned: nothing above it but init) runs a hook,
    # which binds it to session s1, then runs the command in its shell: the process-tree
    # resolution names the session.
    plan = [
        {"hook": "claude-code", "payload": {"session_id": "s1", "transcript_path": str(ws / "t.jsonl"),
                                            "cwd": str(ws), "hook_event_name": "SessionStart",
                                            "source": "startup"}},
        {"shell": f"{sys.executable} -m greenloop accept {ZERO} --reason r"},
    ]
    (ws.parent / "plan.json").write_text(json.dumps(plan))
    code, out = orphaned(ws, [sys.executable, FAKE, str(ws.parent / "plan.json")], terminal=False)
    assert code == 0, out
    _, shell = json.loads(out)
    assert shell["code"] == 2
    assert "refused inside an agent's session (it runs under the harness process of agent session s1)" in (
        shell["stderr"]
    )
    assert acceptances(ws) == []


def test_accept_is_no_mcp_tool() -> None:
    from greenloop.mcp import tools

    assert not [name for name in tools.TOOL_NAMES if "accept" in name]
