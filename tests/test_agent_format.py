"""The agent format: chosen by the harness's variables or --format, a green run in one line,
failures with their values cut, long-lived notes said once per session, and no note naming a
path of greenloop's own source tree (real runs of real pytest workspaces)."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from greenloop import agent_format
from greenloop.cli import AGENT_ENV, main
from greenloop.commands.output import agent_harness, chosen
from greenloop.errors import UsageError
from greenloop.model import Failure, Summary
from greenloop.result import RunResult, SandboxInfo

RED = (
    "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)


def _workspace(root: Path, *, red: bool) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".git").mkdir(exist_ok=True)  # the state lives here, not in a parent's
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    (root / "calc.py").write_text(f"def add(a, b):\n    return a {'-' if red else '+'} b\n")
    (root / "test_calc.py").write_text(RED)
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["run", *argv])
    return code, capsys.readouterr().out


# --------------------------------------------------------------------------- which format


@pytest.mark.parametrize(("harness", "name"), AGENT_ENV, ids=[n for _h, n in AGENT_ENV])
def test_each_harness_variable_chooses_the_agent_format(harness: str, name: str) -> None:
    args = argparse.Namespace(json=False, format=None)
    assert agent_harness({name: "1"}) == harness
    assert chosen(args, {name: "1"}) == "agent"
    assert chosen(args, {name: ""}) == "human"  # set but empty: not set
    assert chosen(argparse.Namespace(json=False, format="human"), {name: "1"}) == "human"
    assert chosen(argparse.Namespace(json=True, format=None), {name: "1"}) == "json"


def test_format_flag_without_a_harness_and_json_with_format_is_refused() -> None:
    assert chosen(argparse.Namespace(json=False, format=None), {"PATH": "/bin"}) == "human"
    assert chosen(argparse.Namespace(json=False, format="agent"), {}) == "agent"
    with pytest.raises(UsageError, match="--json and --format agent"):
        chosen(argparse.Namespace(json=True, format="agent"), {})


def test_every_harness_greenloop_has_an_adapter_for_has_a_variable() -> None:
    from greenloop.cli import HARNESSES

    assert set(HARNESSES) <= {h for h, _n in AGENT_ENV}
    assert {"copilot", "opencode", "any"} <= {h for h, _n in AGENT_ENV}


def test_under_claude_code_run_answers_in_the_agent_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path / "ws", red=True)
    monkeypatch.setenv("CLAUDECODE", "1")
    code, out = _run(capsys, str(ws), "--session", "s1")
    assert code == 1
    assert out.startswith("FAIL test_calc.py::test_add (test_calc.py:4)\n  expected: 3 | got: -1\n  hint: ")
    assert "red: 1 failed, 1 passed of 2 (pytest, " in out
    assert f"rerun the failures: greenloop run {ws} --last-failed" in out
    code, human = _run(capsys, str(ws), "--session", "s1", "--format", "human")
    assert code == 1 and "✗ red  1 failed, 1 passed (2 tests)" in human and "command:" in human


# --------------------------------------------------------------------------- what it says


def _result(**kw: object) -> RunResult:
    base: dict[str, object] = {
        "run_id": "run-1", "ok": True, "outcome": "green", "framework": "pytest", "command": "pytest",
        "exit_code": 0, "summary": Summary(total=3, passed=3), "duration_ms": 812,
        "result_ref": "/ws/.greenloop/runs/run-1/result.json",
    }
    base.update(kw)
    return RunResult(**base)  # type: ignore[arg-type]


def test_a_green_run_is_one_line_even_with_notes_that_change_nothing() -> None:
    env_note = "the tests' environment differs from greenloop's: set PYTHONUNBUFFERED=1"
    r = _result(notes=("pytest runs in the workspace's virtualenv .venv", env_note,
                       "last_failed: reran 2 failure(s) of run-0"))
    keys = agent_format.once_keys(r.notes, green=True)
    assert keys == []  # nothing to say once: the session's first red run says them
    assert agent_format.run_text(r, new_once=set(keys)) == "green: 3 passed (pytest, 0.8s)"


def test_a_sandbox_not_enforced_is_said_in_full_once_then_briefly() -> None:
    note = "sandbox NOT enforced (auto): the run could write outside the workspace and reach the network"
    r = _result(sandbox=SandboxInfo("auto", None, "/ws", note))
    [key] = agent_format.once_keys([note], green=True)
    first = agent_format.run_text(r, new_once={key}).splitlines()
    assert first == ["green: 3 passed (pytest, 0.8s)", f"note: {note}"]
    later = agent_format.run_text(r, new_once=set()).splitlines()
    brief = "note: sandbox NOT enforced (said above in this session)"
    assert later == ["green: 3 passed (pytest, 0.8s)", brief]


def test_failures_give_name_place_values_cut_with_a_marker_and_hint() -> None:
    long = "x" * 5000
    f = Failure(test="t.py::test_big", file="t.py", line=7, message="AssertionError", expected=long,
                got="short", hint="compare the two")
    r = _result(ok=False, outcome="red", exit_code=1, summary=Summary(total=3, passed=2, failed=1),
                failures=(f,))
    text = agent_format.run_text(r, cwd="/ws")
    lines = text.splitlines()
    assert lines[0] == "FAIL t.py::test_big (t.py:7)"
    cut = f"{'x' * agent_format.VALUE_CHARS}…[+4800 chars in result.json]"
    assert lines[1] == f"  expected: {cut} | got: short"
    assert lines[2] == "  hint: compare the two"
    assert lines[3:] == [
        "red: 1 failed, 2 passed of 3 (pytest, 0.8s)",
        "rerun the failures: greenloop run --last-failed",
        "full record: .greenloop/runs/run-1/result.json",
    ]


def test_a_hundred_failures_stay_small_and_every_one_is_named() -> None:
    fails = tuple(
        Failure(test=f"tests/test_m.py::test_case_{i:03d}", file="tests/test_m.py", line=10 + i,
                message=f"AssertionError: assert {i} == {i + 1}", expected=str(i + 1), got=str(i),
                hint=f"add({i}) returned {i} where the test at tests/test_m.py:{10 + i} expects {i + 1}")
        for i in range(100)
    )
    r = _result(ok=False, outcome="red", exit_code=1, summary=Summary(total=100, failed=100), failures=fails)
    text = agent_format.run_text(r)
    assert len(text) < 2500 * 3  # well under 2,500 tokens (bench/agent_tokens.py counts them)
    for i in range(100):
        assert re.search(rf"\btest_case_{i:03d}\b", text), i
    assert "more failing, by name:\ntests/test_m.py: test_case_" in text


def test_a_broken_run_says_why_with_the_last_output_and_its_notes() -> None:
    r = _result(ok=False, outcome="broken", crashed=True, crash_reason="timed out after 5000 ms",
                exit_code=None, summary=Summary(), output_tail="collecting ...\nhanging in test_slow\n",
                notes=("the run timed out while test_slow was running; counts are those seen",))
    lines = agent_format.run_text(r).splitlines()
    assert lines[0] == "broken: timed out after 5000 ms (pytest, 0.8s)"
    assert "command: pytest" in lines and "  hanging in test_slow" in lines
    assert lines[-1].startswith("note: the run timed out while test_slow")


def test_check_is_one_line_when_satisfied_and_says_what_to_do_when_not() -> None:
    ok = {"satisfied": True, "last_run": {"run_id": "run-1", "outcome": "green"},
          "notes": ["no session given: reporting the workspace's latest run (--session scopes it)"]}
    assert agent_format.check_text(ok) == "satisfied: last run run-1 is green"
    red = {"satisfied": False, "last_run": {"run_id": "run-2", "outcome": "red", "failing": ["t::a"]},
           "notes": ["the last run is red: t::a", "a turn ended red after its interception budget; x"]}
    assert agent_format.check_text(red).splitlines() == [
        "NOT satisfied: last run run-2 is red (t::a); fix it, then greenloop run again",
        "note: a turn ended red after its interception budget; x",
    ]


def test_owed_tests_are_said_and_allowed_is_not_owed() -> None:
    assert agent_format.note_kind("the session owes 2 tests: t::a, t::b") == "act"
    assert agent_format.note_kind("tests owed: t::a") == "act"
    assert agent_format.note_kind("the gate allowed the stop") == "quiet"


def test_the_note_phrases_the_format_sorts_by_are_still_written_by_greenloop() -> None:
    # A reworded note would fall silently into "quiet": each phrase must occur in the source.
    src = Path(agent_format.__file__).parent
    text = "\n".join(p.read_text(encoding="utf-8") for p in src.rglob("*.py") if p.name != "agent_format.py")
    for phrase in (*agent_format.ONCE, *agent_format.ACT):
        assert phrase in text, phrase


# --------------------------------------------------------------------------- once per session


def test_a_note_that_stays_true_is_said_once_per_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path / "ws", red=True)
    env_note = "note: the tests' environment differs from greenloop's"
    said = []
    for session in ("s1", "s1", "s2"):
        code, out = _run(capsys, str(ws), "--format", "agent", "--session", session)
        assert code == 1
        said.append(env_note in out)
    assert said == [True, False, True]  # twice in one session: once; a new session: again
    with sqlite3.connect(ws / ".greenloop" / "state.db") as db:
        rows = db.execute("SELECT session_id, COUNT(*) FROM notes_said GROUP BY session_id").fetchall()
    said_in = dict(rows)
    assert said_in.keys() == {"s1", "s2"} and said_in["s1"] == said_in["s2"] >= 1  # each note once each
    # --json and the human text still carry every note, every time
    _code, out = _run(capsys, str(ws), "--json", "--session", "s1")
    assert any("tests' environment differs" in n for n in json.loads(out)["notes"])


# --------------------------------------------------------------------------- no source paths

_SOURCE_PATH = re.compile(r"src/greenloop|greenloop/\w+\.py|\bdocs/\w+\.md|\w+/\w+\.py\b")


@pytest.mark.parametrize(
    ("sandbox", "env"),
    [
        ("auto", {}),  # bubblewrap where it works: caches redirected, TMPDIR
        ("full-access", {}),
        ("auto", {"GREENLOOP_BWRAP": "/nonexistent/bwrap"}),  # Landlock instead
        ("auto", {"GREENLOOP_BWRAP": "/nonexistent/bwrap", "GREENLOOP_LANDLOCK": "off"}),  # nothing
    ],
    ids=["bwrap", "full-access", "landlock", "none"],
)
def test_no_note_names_a_path_of_greenloops_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    sandbox: str, env: dict[str, str],
) -> None:
    ws = _workspace(tmp_path / "ws", red=True)
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)  # the active virtualenv: a note of its own
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("CLAUDECODE", "1")  # dropped from the child: one more item in the env note
    _code, out = _run(capsys, str(ws), "--json", "--sandbox", sandbox)
    data = json.loads(out)
    notes = [*data["notes"], data["sandbox"]["note"] or ""]
    assert any("virtualenv" in n for n in notes) and any("environment differs" in n for n in notes)
    for form in ("agent", "human"):
        _code, text = _run(capsys, str(ws), "--format", form, "--sandbox", sandbox, "--session", form)
        notes += [line for line in text.splitlines() if "note:" in line]
    for note in notes:
        assert not _SOURCE_PATH.search(note), note


# --------------------------------------------------------------------------- job, check, merge


def test_job_wait_and_check_answer_in_the_agent_format_under_an_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path / "ws", red=True)
    monkeypatch.setenv("AI_AGENT", "some-agent")
    assert main(["run", str(ws), "--background", "--session", "s1"]) == 0
    started = re.search(r"started job (\S+):", capsys.readouterr().out)
    assert started is not None
    code = main(["job", started.group(1), str(ws), "--wait"])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("FAIL test_calc.py::test_add (test_calc.py:4)\n"), out
    assert "red: 1 failed, 1 passed of 2 (pytest, " in out
    assert f"rerun the failures: greenloop run {ws} --last-failed" in out
    code = main(["check", str(ws), "--session", "s1"])
    out = capsys.readouterr().out
    assert code == 1 and out.startswith("NOT satisfied: last run run-")
    assert "(test_calc.py::test_add); fix it, then greenloop run again\n" in out


def test_merge_of_shards_answers_in_the_agent_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path / "ws", red=True)
    refs = []
    for shard in ("1/2", "2/2"):
        _code, out = _run(capsys, str(ws), "--shard", shard, "--json")
        refs.append(json.loads(out)["result_ref"])
    code = main(["merge", *refs, "--path", str(ws), "--format", "agent"])
    out = capsys.readouterr().out
    assert code == 1 and "FAIL test_calc.py::test_add (test_calc.py:4)" in out
    assert "red: 1 failed, 1 passed of 2 (pytest, " in out and "command:" not in out


def test_a_run_without_a_session_names_its_id_so_a_hook_can_give_it_to_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import time

    from greenloop.closure.store import Store
    from greenloop.hooks.base import HookContext, attach_greenloop_run

    ws = _workspace(tmp_path / "ws", red=False)
    monkeypatch.setenv("GEMINI_CLI", "1")  # Gemini CLI gives its shell no session id
    monkeypatch.chdir(ws)
    code, out = _run(capsys, ".")
    green = r"green: 2 passed \(pytest, \d+\.\ds, run-\d{8}-\d{6}-[0-9a-f]+\)\n"
    assert code == 0 and re.fullmatch(green, out), out
    ctx = HookContext(env={}, cwd=str(ws), clock=time.time)
    said = attach_greenloop_run(ctx, str(ws), "gemini-s1", "greenloop run .", out)
    assert "belongs to session gemini-s1" in said
    with Store(ws) as store:
        assert store.latest_run(session_id="gemini-s1") is not None
    _code, out = _run(capsys, ".", "--session", "s2")
    assert re.fullmatch(r"green: 2 passed \(pytest, \d+\.\ds\)\n", out)  # its session is known: no id


def test_no_virtualenv_or_lockfile_note_names_a_path_of_greenloops_source(tmp_path: Path) -> None:
    from greenloop.runner.toolchain import python_runner

    def venv(root: Path, name: str = ".venv") -> Path:
        (root / name / "bin").mkdir(parents=True)
        (root / name / "bin" / "python").write_text("")
        (root / name / "lib" / "python3.11" / "site-packages" / "pytest").mkdir(parents=True)
        return root / name

    notes: list[str] = []
    for case in ("workspace", "active", "uv", "poetry-missing"):
        root = tmp_path / case
        (root / ".git").mkdir(parents=True)
        env: dict[str, str] = {}
        if case == "workspace":
            venv(root)
        elif case == "active":
            env["VIRTUAL_ENV"] = str(venv(tmp_path / "elsewhere", "env"))
        else:
            (root / ("uv.lock" if case == "uv" else "poetry.lock")).write_text("")
        _argv, said, _unavailable = python_runner(
            str(root), env, lambda tool: "/usr/bin/uv" if tool == "uv" else None
        )
        assert said, case
        notes += said
    for note in notes:
        assert agent_format.note_kind(note) == "once", note  # true from run to run: said once
        assert not _SOURCE_PATH.search(note), note


def test_a_red_run_with_no_failing_test_recognised_shows_what_the_runner_said() -> None:
    r = _result(ok=False, outcome="red", exit_code=1, summary=Summary(total=2, passed=2),
                output_tail="Error: something outside any test\n  at setup.js:3\n")
    assert agent_format.run_text(r).splitlines() == [
        "no failing test was recognised in the output",
        "output (last lines):",
        "  Error: something outside any test",
        "    at setup.js:3",
        "red: 0 failed, 2 passed of 2 (pytest, 0.8s)",
    ]
