"""integrate() against real unit processes on loopback: the happy path and every misbehaviour."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from greenloop.errors import SpecError
from greenloop.integration.ports import PortPicker
from greenloop.integration.result import IntegrationResult
from greenloop.system import procfs

from .itkit import FAKE, MARK, read_lines, step, unit, write_project

Run = Callable[..., IntegrationResult]


def _ticks_now() -> int:
    return procfs.boot_ticks_now() - 1


def _zombie_children_since(ticks: int) -> list[int]:
    me = os.getpid()
    return [
        st.pid for pid in procfs.pids()
        if (st := procfs.stat(pid)) and st.state == "Z" and st.ppid == me and st.start >= ticks
    ]


def _runs(project: Path) -> list[Path]:
    folder = project / "integration" / "runs"
    return sorted(folder.iterdir()) if folder.is_dir() else []


def test_green_run_with_dependencies_placeholders_trace_and_files(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("db-svc"), unit("todo-be", depends_on=["db-svc"], env={"EXTRA": "from-units-json"})],
        [
            {
                "id": "token-flow",
                "involves": ["todo-be"],
                "steps": [
                    step(
                        "todo-be",
                        "POST /api/echo",
                        body={"n": 1, "flag": True, "password": "hunter2"},
                        expect={
                            "status": 201,
                            "json": {"$.body.n": 1, "$.body.flag": True},
                            "assert": ["$.token exists", "$.body.n >= 1"],
                        },
                    ),
                    step(
                        "todo-be",
                        "POST /api/echo",
                        headers={"Authorization": "Bearer {{step0.token}}", "X-N": "n={{step0.body.n}}"},
                        body={
                            "copied": "{{step0.body.n}}",
                            "text": "n is {{step0.body.n}}",
                            "flag": "{{step0.body.flag}}",
                        },
                        expect={
                            "status": [200, 201],
                            "json": {
                                "$.body.copied": 1,
                                "$.body.text": "n is 1",
                                "$.body.flag": True,
                                "$.headers.authorization": "Bearer tok-todo-be",
                                "$.headers.x-n": "n=1",
                            },
                        },
                    ),
                    step(
                        "todo-be",
                        "GET /api/items",
                        expect={
                            "status": 200,
                            "assert": [
                                "$.items.length == 2",
                                "$.items[*].done == false",
                                "$.items[0].id < 2",
                            ],
                        },
                    ),
                    step("todo-be", "GET /api/items/{{step2.items[1].id}}", expect={"json": {"$.id": 2}}),
                    step(
                        "todo-be",
                        "GET /api/env",
                        expect={
                            "json": {
                                "$.UNIT_ID": "todo-be",
                                "$.HOST": "127.0.0.1",
                                "$.PYTHONUNBUFFERED": "1",
                                "$.EXTRA": "from-units-json",
                            },
                            "assert": ["$.DB_SVC_URL exists"],
                        },
                    ),
                ],
            },
            {"id": "db-alive", "steps": [step("db-svc", "GET /api/health", expect={"status": 200})]},
        ],
    )
    junit = tmp_path / "junit.xml"
    r = run(project, junit=str(junit))
    assert r.ok, r.to_json()
    assert r.exit_code == 0
    assert (r.cases_total, r.cases_passed, r.cases_failed, r.cases_timeout) == (2, 2, 0, 0)
    assert r.surviving_processes == () and not r.crashed and r.category_hint is None
    [folder] = _runs(project)
    assert folder.name == r.run_id
    assert sorted(p.name for p in folder.iterdir()) == [
        "attempts.json",
        "cases",
        "env.json",
        "http-trace.ndjson",
        "process.log",
        "result.json",
    ]
    env = json.loads((folder / "env.json").read_text())
    assert set(env) == {"db-svc", "todo-be"}
    for uid, entry in env.items():
        assert entry == {"port": r.ports_used[uid], "url": f"http://127.0.0.1:{r.ports_used[uid]}"}
        assert entry["port"] not in (3010, 5173, 5432, 6379)
    assert env["db-svc"]["port"] != env["todo-be"]["port"]
    assert json.loads((folder / "result.json").read_text()) == r.to_json()
    assert IntegrationResult.from_json(r.to_json()) == r

    # The dependency's URL reached the dependent as DB_SVC_URL (checked through the unit itself).
    trace = read_lines(folder / "http-trace.ndjson")
    assert [(t["case_id"], t["step"]) for t in trace] == [("token-flow", i) for i in range(5)] + [
        ("db-alive", 0)
    ]
    env_answer = trace[4]["response_body"]
    assert env_answer["DB_SVC_URL"] == env["db-svc"]["url"] and env_answer["PORT"] == str(
        env["todo-be"]["port"]
    )
    assert set(trace[0]) == {
        "ts",
        "case_id",
        "step",
        "unit",
        "method",
        "url",
        "request_headers",
        "request_body",
        "status",
        "response_headers",
        "response_body",
        "duration_ms",
        "error",
    }
    # Redaction: the password field, the token field, Authorization and Set-Cookie never reach the file.
    text = (folder / "http-trace.ndjson").read_text()
    assert "hunter2" not in text and "tok-todo-be" not in text and "secret-cookie" not in text
    assert trace[0]["request_body"]["password"] == "[redacted]"
    assert trace[1]["request_headers"]["Authorization"] == "[redacted]"
    assert trace[0]["response_headers"]["Set-Cookie"] == "[redacted]"
    assert trace[3]["url"].endswith("/api/items/2")
    assert (
        sum("/api/health" in t["url"] for t in trace) == 1
    )  # the case's own call; health polls are not traced

    log = (folder / "process.log").read_text()
    port = env["todo-be"]["port"]
    assert f"[todo-be:{port}] out| todo-be listening on 127.0.0.1:{port}" in log
    assert f'[todo-be:{port}] err| todo-be: "POST /api/echo HTTP/1.1" 201' in log
    assert "[greenloop] health db-svc GET" in log
    # db-svc was healthy before todo-be started.
    assert log.index("health db-svc GET") < log.index("started todo-be")

    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("tests") == "2" and suite.get("failures") == "0"


def test_failing_case_records_step_reason_expected_got_and_stderr(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("api")],
        [
            {
                "id": "wrong-status",
                "involves": ["api"],
                "steps": [
                    step("api", "GET /api/items", expect={"status": 200}),
                    step("api", "GET /api/items/nope", expect={"status": 200}),
                ],
            },
            {"id": "typed-json", "steps": [step("api", "GET /api/items/1", expect={"json": {"$.id": "1"}})]},
            {
                "id": "empty-forall",
                "steps": [step("api", "GET /api/items", expect={"assert": ["$.empty[*] == 1"]})],
            },
            {
                "id": "unresolved",
                "steps": [
                    step("api", "GET /api/items"),
                    step("api", "GET /api/items/{{step0.items.7.id}}"),
                ],
            },
            {"id": "fine", "steps": [step("api", "GET /api/items", expect={"status": 200})]},
        ],
    )
    junit = tmp_path / "junit.xml"
    r = run(project, junit=str(junit))
    assert not r.ok and r.exit_code == 1 and not r.crashed
    assert (r.cases_total, r.cases_passed, r.cases_failed) == (5, 1, 4)
    by = {f.case_id: f for f in r.failures}
    f = by["wrong-status"]
    assert (f.failed_step, f.reason, f.expected) == (1, "status_mismatch", {"status": 200})
    assert f.got["status"] == 404 and f.got["body"] == {"error": "not_found", "got": "nope"}
    assert f.involves == ("api",)
    assert '"GET /api/items/nope HTTP/1.1" 404' in f.stderr_excerpt
    t = by["typed-json"]
    assert (t.reason, t.expected, t.got) == ("assertion_failed", {"$.id": "1"}, {"$.id": 1})
    assert by["empty-forall"].reason == "assertion_failed" and "empty" in by["empty-forall"].message
    u = by["unresolved"]
    assert u.reason == "placeholder_unresolved" and u.failed_step == 1
    assert "step0.items.7.id" in u.message and u.got == {"available": ["0", "1"]}
    # The unresolved step was never sent (the trace holds only step 0 of that case).
    trace = read_lines(_runs(project)[0] / "http-trace.ndjson")
    assert [t["step"] for t in trace if t["case_id"] == "unresolved"] == [0]
    assert r.category_hint == "integration_bug"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "4"
    failed = [tc.get("name") for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert failed == ["wrong-status", "typed-json", "empty-forall", "unresolved"]


def test_unit_that_crashes_on_start_fails_at_once_and_starts_nothing_after_it(
    tmp_path: Path, run: Run
) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("base", "crash"), unit("web", depends_on=["base"]), unit("side")],
        [{"id": "c", "steps": [step("web", "GET /api/health")]}],
    )
    t0 = time.monotonic()
    r = run(project, health_timeout_s=60)
    assert time.monotonic() - t0 < 30  # an exit is noticed at once, not at the health timeout
    assert r.crashed and r.exit_code == 3 and r.category_hint == "unit_crash"
    assert r.startup_failure is not None
    assert r.startup_failure["unit"] == "base" and r.startup_failure["exit_code"] == 3
    assert "boom: giving up" in r.startup_failure["stderr_excerpt"]
    assert "cannot read config.yml" in r.startup_failure["stderr_excerpt"]
    assert r.cases[0]["status"] == "not_run"
    log = (_runs(project)[0] / "process.log").read_text()
    assert "started web" not in log  # its dependency never became healthy
    assert [f.case_id for f in r.failures] == ["startup:base"]


def test_unit_that_never_becomes_healthy_is_an_infra_flake(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("sick", "never-healthy")],
        [{"id": "c", "steps": [step("sick", "GET /api/items")]}],
    )
    r = run(project, health_timeout_s=1.0)
    assert r.crashed and r.exit_code == 3 and r.category_hint == "infra_flake"
    assert r.startup_failure is not None and r.startup_failure["reason"] == "health_timeout"
    assert "503" in r.startup_failure["message"]
    assert r.failures == ()  # not a code bug: nothing for the bug log
    assert json.loads((_runs(project)[0] / "result.json").read_text())["startup_failure"]["unit"] == "sick"


def test_teardown_kills_what_ignores_sigterm_forks_and_daemonizes(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [
            unit("stubborn", "ignore-term"),
            unit("parent", "grandchildren"),
            unit("daemon", "daemon"),
            unit("ghost", "daemon-clearenv"),
        ],
        [
            {
                "id": "all-up",
                "steps": [
                    step(u, "GET /api/health", expect={"status": 200})
                    for u in ("stubborn", "parent", "daemon", "ghost")
                ],
            }
        ],
    )
    t0 = time.monotonic()
    ticks = _ticks_now()
    r = run(project, grace_s=0.5)
    took = time.monotonic() - t0
    # Descendants killed after their parent died were re-parented to us (the subreaper): reaped.
    assert _zombie_children_since(ticks) == []
    assert r.ok and r.surviving_processes == (), r.to_json()
    assert took < 30
    log = (_runs(project)[0] / "process.log").read_text()
    assert "ignoring SIGTERM" in log
    assert "stubborn killed by SIGKILL" in log  # the grace ran out
    assert "no process left" in log
    # The no_survivors fixture scans /proc for the test's marker and the project folder.


def test_slow_answer_hits_the_case_timeout_and_the_next_case_runs(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("slowpoke")],
        [
            {
                "id": "too-slow",
                "steps": [step("slowpoke", "GET /api/items"), step("slowpoke", "GET /api/slow?s=60")],
            },
            {"id": "next", "steps": [step("slowpoke", "GET /api/items", expect={"status": 200})]},
        ],
    )
    t0 = time.monotonic()
    r = run(project, case_timeout_s=1.0)
    assert time.monotonic() - t0 < 30  # the case gave up long before the 60 s answer
    assert (r.cases_passed, r.cases_failed, r.cases_timeout) == (1, 0, 1) and r.exit_code == 1
    [f] = r.failures
    assert (f.case_id, f.failed_step, f.reason) == ("too-slow", 1, "timeout")
    assert r.cases[1]["status"] == "passed"
    trace = read_lines(_runs(project)[0] / "http-trace.ndjson")
    assert trace[1]["status"] is None and "no answer" in trace[1]["error"]


def test_run_timeout_stops_everything_as_infra_flake(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("slowpoke")],
        [
            {"id": "first", "steps": [step("slowpoke", "GET /api/slow?s=60")]},
            {"id": "never", "steps": [step("slowpoke", "GET /api/items")]},
        ],
    )
    r = run(project, run_timeout_s=2.0, case_timeout_s=30)
    assert r.crashed and r.category_hint == "infra_flake" and r.exit_code == 3
    assert [c["status"] for c in r.cases] == ["timeout", "not_run"]
    assert r.duration_ms < 30000  # stopped at the run limit, not after the 60 s answer


def test_unit_crashing_mid_run_is_reported_as_unit_crashed(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("fragile")],
        [
            {
                "id": "kaboom",
                "steps": [
                    step("fragile", "POST /api/crash", expect={"status": 200}),
                    step("fragile", "GET /api/slow?s=2"),  # the process exits while this is being answered
                ],
            }
        ],
    )
    r = run(project)
    [f] = r.failures
    assert (f.failed_step, f.reason) == (1, "unit_crashed"), f
    assert f.got == {"exit_code": 7}
    assert "crashing on purpose" in f.stderr_excerpt
    assert r.category_hint == "unit_crash" and r.exit_code == 1


def test_process_log_is_capped_keeping_start_and_end(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("noisy", "flood", "11")],
        [{"id": "c", "steps": [step("noisy", "GET /api/health", expect={"status": 200})]}],
    )
    r = run(project, health_timeout_s=30)
    assert r.ok, r.to_json()
    log_path = _runs(project)[0] / "process.log"
    size = log_path.stat().st_size
    assert 9 * 1024 * 1024 < size <= 10 * 1024 * 1024 + 1024
    text = log_path.read_text()
    assert "FIRST-LINE of the flood" in text and "LAST-LINE of the flood" in text
    assert "omitted: process.log keeps its start and its end" in text
    assert text.rstrip().endswith("no process left")


@pytest.fixture()
def held_ports() -> Iterator[list[int]]:
    socks = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        socks.append(s)
    yield [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_taken_ports_are_retried_three_times_then_infra_flake(
    tmp_path: Path, run: Run, held_ports: list[int]
) -> None:
    project = write_project(
        tmp_path / "p", [unit("api")], [{"id": "c", "steps": [step("api", "GET /api/items")]}]
    )
    r = run(project, port_picker=PortPicker(candidates=iter([*held_ports, _free_port()])))
    assert r.crashed and r.category_hint == "infra_flake" and r.exit_code == 3
    assert r.startup_failure is not None and r.startup_failure["reason"] == "port_unavailable"
    for p in held_ports:
        assert str(p) in r.startup_failure["message"]

    # Two taken ports, then a free one: the run goes on.
    project2 = write_project(
        tmp_path / "q", [unit("api")], [{"id": "c", "steps": [step("api", "GET /api/items")]}]
    )
    free = _free_port()
    r2 = run(project2, port_picker=PortPicker(candidates=iter([*held_ports[:2], 5173, free])))
    assert r2.ok and r2.ports_used == {"api": free}


def test_port_taken_between_choice_and_use_is_retried(tmp_path: Path, run: Run) -> None:
    """A unit that dies with EADDRINUSE is restarted on another port, at most three times."""
    project = write_project(
        tmp_path / "p",
        [unit("unlucky", "port-in-use")],
        [{"id": "c", "steps": [step("unlucky", "GET /api/items")]}],
    )
    r = run(project)
    assert r.startup_failure is not None and r.startup_failure["reason"] == "port_unavailable"
    assert r.category_hint == "infra_flake"
    log = (_runs(project)[0] / "process.log").read_text()
    assert log.count("started unlucky") == 3


def test_bug_bridge_opens_a_bug_for_a_failed_case_and_a_green_run_verifies(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("api")],
        [
            {
                "id": "needs-two",
                "involves": ["api"],
                "steps": [step("api", "GET /api/items", expect={"assert": ["$.items.length == 3"]})],
            },
        ],
    )
    red = run(project, record_bugs=True)
    assert red.exit_code == 1 and len(red.bugs_opened) == 1
    assert red.failures[0].bug_id == red.bugs_opened[0]
    lines = read_lines(project / "bugs.ndjson")
    assert lines[-1]["source"] == "integration_test" and lines[-1]["test_name"] == "needs-two"
    spec = json.loads((project / "integration" / "spec.json").read_text())
    spec["cases"][0]["steps"][0]["expect"] = {"assert": ["$.items.length == 2"]}
    (project / "integration" / "spec.json").write_text(json.dumps(spec))
    green = run(project, record_bugs=True)
    assert green.ok
    moved = {t.get("to") for t in green.bugs_transitioned}
    assert "verified" in moved or "fixed" in moved, green.bugs_transitioned


def _as_dict(r: IntegrationResult) -> dict[str, Any]:
    return r.to_json()


def test_a_broken_transport_still_tears_down_and_writes_a_result(tmp_path: Path, run: Run) -> None:
    """An exception inside greenloop (here: a transport seam that raises) becomes a crashed result."""

    def broken(*_: Any) -> Any:
        raise RuntimeError("transport exploded")

    project = write_project(
        tmp_path / "p", [unit("api")], [{"id": "c", "steps": [step("api", "GET /api/items")]}]
    )
    r = run(project, transport=broken)
    assert r.crashed and r.exit_code == 3 and r.surviving_processes == ()
    assert any("transport exploded" in n for n in r.notes)
    assert json.loads((_runs(project)[0] / "result.json").read_text())["crashed"] is True


def test_a_start_program_that_does_not_exist_is_bad_input(tmp_path: Path, run: Run) -> None:
    """Checked before anything starts: not on PATH, not a file in the unit folder (exit 2)."""
    units: list[dict[str, Any]] = [
        {"id": "ghost", "kind": "be", "start": ["greenloop-no-such-command-xyz", "serve"]},
        {"id": "lost", "kind": "be", "start": ["bin/missing.sh"]},
        {"id": "local", "kind": "be", "start": ["serve.sh"]},
        {"id": "plain", "kind": "be", "start": ["./data.txt"]},
    ]
    project = write_project(
        tmp_path / "p", units, [{"id": "c", "steps": [step(u["id"], "GET /") for u in units]}]
    )
    (project / "units" / "local" / "serve.sh").write_text("#!/bin/sh\n")
    (project / "units" / "local" / "serve.sh").chmod(0o755)
    (project / "units" / "plain" / "data.txt").write_text("not a program\n")
    with pytest.raises(SpecError) as info:
        run(project)
    msg = str(info.value)
    assert info.value.exit_code == 2
    assert 'unit "ghost": field "start": program "greenloop-no-such-command-xyz" is not on PATH' in msg
    assert 'unit "lost": field "start": program "bin/missing.sh" does not exist in the unit folder' in msg
    assert 'unit "local"' in msg and 'write "./serve.sh"' in msg
    assert 'unit "plain"' in msg and "is not executable; run chmod +x" in msg
    assert _runs(project) == []  # no run folder, nothing started


def test_a_program_on_the_units_path_is_found(tmp_path: Path, run: Run, mark: str) -> None:
    """PATH is the one the units start with (the env seam), not greenloop's own."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "greenloop-test-unit"
    tool.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {FAKE!r}\n"
        f"runpy.run_path({FAKE!r}, run_name='__main__')\n"
    )
    tool.chmod(0o755)
    units = [{"id": "api", "kind": "be", "start": ["greenloop-test-unit", "ok"]}]
    project = write_project(tmp_path / "p", units, [{"id": "c", "steps": [step("api", "GET /api/items")]}])
    with pytest.raises(SpecError, match="not on PATH"):
        run(project)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", MARK: mark}
    r = run(project, env=env)
    assert r.ok, r.to_json()


def test_a_program_that_exists_but_cannot_start_fails_at_run_time(tmp_path: Path, run: Run) -> None:
    """A broken interpreter line passes validation and fails the spawn itself (exit 3)."""
    units = [{"id": "ghost", "kind": "be", "start": ["./serve"]}]
    project = write_project(tmp_path / "p", units, [{"id": "c", "steps": [step("ghost", "GET /")]}])
    script = project / "units" / "ghost" / "serve"
    script.write_text("#!/greenloop/no/such/interpreter\n")
    script.chmod(0o755)
    r = run(project)
    assert r.crashed and r.exit_code == 3
    assert r.startup_failure is not None and r.startup_failure["reason"] == "spawn_error"
    assert "./serve" in r.startup_failure["message"]
    assert 'fix "start" in units.json' in r.startup_failure["message"]


def test_a_huge_got_is_bounded_in_the_result(tmp_path: Path, run: Run) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("api")],
        [
            {
                "id": "big",
                "steps": [
                    step(
                        "api",
                        "POST /api/echo",
                        body={"blob": "x" * 50000},
                        expect={"json": {"$.body.blob": "y"}},
                    )
                ],
            }
        ],
    )
    r = run(project)
    [f] = r.failures
    assert isinstance(f.got, str) and len(f.got) < 2100 and "more chars" in f.got
    assert (project / r.result_ref).stat().st_size < 20000


def test_a_sandboxed_unit_gets_its_env_entries_also_when_the_host_has_the_same_value(
    tmp_path: Path, run: Run, mark: str
) -> None:
    # The fake unit is copied into the project: the sandbox shows the workspace, and a repo
    # checked out under /tmp would be hidden behind the sandbox's private /tmp.
    (tmp_path / "p").mkdir()
    fake = tmp_path / "p" / "fakeunit.py"
    fake.write_text(Path(FAKE).read_text())
    api = unit("api", env={"DATABASE_URL": "sqlite://x", "EXTRA": "same"})
    api["start"] = [sys.executable, str(fake), "ok"]
    project = write_project(
        tmp_path / "p",
        [api],
        [
            {
                "id": "env",
                "steps": [
                    step(
                        "api",
                        "GET /api/env",
                        expect={
                            "json": {"$.DATABASE_URL": "sqlite://x", "$.EXTRA": "same", "$.UNIT_ID": "api"}
                        },
                    )
                ],
            }
        ],
    )
    host = {**os.environ, MARK: mark, "DATABASE_URL": "sqlite://x", "EXTRA": "same"}
    r = run(project, env=host, sandbox="workspace-write")
    assert r.ok, json.dumps(r.to_json(), indent=1)
