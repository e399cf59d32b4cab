"""The dashboard's pages and guards through Starlette's test client, on real state: runs
recorded with the store, result.json files where the run store keeps them, a real bug log and
real gate decisions."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from starlette.testclient import TestClient

from greenloop import layout
from greenloop.bugs.log import BugLog
from greenloop.closure import store
from greenloop.closure.gate import Gate
from greenloop.config import Config
from greenloop.dashboard import data, live, pages
from greenloop.dashboard.app import COOKIE, create_app
from greenloop.model import Failure, Summary
from greenloop.result import RunResult

# every page reads the closure state from either backend
pytestmark = pytest.mark.usefixtures("state_backend")

TOKEN = "t0ken-for-tests"
HOST = "127.0.0.1:8765"
XSS = "<img src=x onerror=alert(1)>"


def record(ws: Path, run_id: str, *, ok: bool, session: str | None = None, at: float = 0.0,
           failures: tuple[Failure, ...] = ()) -> RunResult:
    run_dir = layout.run_dir(ws, run_id)
    run_dir.mkdir(parents=True)
    (run_dir / "stdout.txt").write_text("collected 2 items\n")
    result = RunResult(
        run_id=run_id, ok=ok, outcome="green" if ok else "red", framework="pytest", command="pytest",
        exit_code=0 if ok else 1, summary=Summary(total=2, passed=2 - len(failures), failed=len(failures)),
        failures=failures, duration_ms=1234, result_ref=str(run_dir / "result.json"), session_id=session,
        output_tail="tail " + XSS,
    )
    (run_dir / "result.json").write_text(json.dumps(result.to_json()))
    store.record_result(ws, result, session_id=session, clock=lambda: at or time.time(), warn=lambda _m: None)
    return result


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / ".git").mkdir()  # the state root
    return root


def client(ws: Path, *, authed: bool = True) -> TestClient:
    c = TestClient(create_app(str(ws), token=TOKEN, hosts=frozenset({HOST})), base_url=f"http://{HOST}")
    if authed:
        c.cookies.set(COOKIE, TOKEN)
    return c


def test_the_token_is_traded_for_a_cookie_and_everything_else_is_refused(ws: Path) -> None:
    c = client(ws, authed=False)
    assert c.get("/").status_code == 403
    assert c.get("/?token=wrong").status_code == 403
    first = c.get(f"/?token={TOKEN}&outcome=red", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/?outcome=red"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert c.get("/?outcome=red").status_code == 200  # the cookie now
    # DNS rebinding: another Host is refused even with the token
    other = TestClient(create_app(str(ws), token=TOKEN, hosts=frozenset({HOST})), base_url="http://evil.example:8765")
    other.cookies.set(COOKIE, TOKEN)
    assert other.get("/").status_code == 421
    # nothing but GET: no request can change the state
    assert client(ws).post("/").status_code == 405


def test_runs_page_lists_filters_pages_and_charts(ws: Path) -> None:
    base = 1_700_000_000.0
    for i in range(60):
        record(ws, f"run-{i:03d}", ok=i % 3 != 0, session="s-1" if i % 2 else "s-2", at=base + i,
               failures=() if i % 3 else (Failure(test="t"),))
    c = client(ws)
    page = c.get("/").text
    assert "older →" in page and "<svg class=trend" in page and page.count("<rect class=fail") == 60

    def table(url: str) -> str:
        return c.get(url).text.split("<table class=runs>")[1]

    rows = table("/")
    assert rows.count("<tr class=") == data.PAGE_SIZE and "run-059" in rows and "run-009" not in rows
    older = table("/?page=1")
    assert "run-009" in older and "run-059" not in older
    red = table("/?outcome=red")
    assert "run-057" in red and "run-058" not in red
    s1 = table("/?session=s-1")
    assert "run-059" in s1 and "run-058" not in s1
    assert "1.2 s" in page  # durations from the rows' result.json


def test_run_page_shows_failures_with_diff_hint_and_escapes_everything(ws: Path) -> None:
    f = Failure(test=XSS, file="tests/test_x.py", line=7, message=f"AssertionError {XSS}",
                expected='{"a": 1}', got='{"a": 2}', stack="at x", hint=f"check {XSS}", kind="test")
    record(ws, "run-xss", ok=False, failures=(f,))
    page = client(ws).get("/runs/run-xss").text
    assert XSS not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "tests/test_x.py:7" in page and "<table class=diff>" in page and "class=hint" in page
    assert client(ws).get("/runs/run-missing").status_code == 404


def test_a_run_in_progress_streams_its_output_then_ends(ws: Path) -> None:
    run_dir = layout.run_dir(ws, "run-live")
    run_dir.mkdir(parents=True)
    lines = "tests/test_a.py::test_one PASSED\ntests/test_a.py::test_two FAILED\n"
    (run_dir / "stdout.txt").write_text(lines)
    live.announce(str(ws), "run-live", str(run_dir), "pytest")
    c = client(ws)
    assert "… running" in c.get("/").text
    page = c.get("/runs/run-live").text
    assert 'data-stream="/runs/run-live/stream"' in page and "test_two FAILED" in page
    # a line written in two parts (pytest -v writes the name, then the outcome) arrives once, whole
    with (run_dir / "stdout.txt").open("a") as fh:
        fh.write("tests/test_a.py::test_three ")
    from greenloop.dashboard import app as app_mod

    async def first_events() -> str:
        class Client:
            async def is_disconnected(self) -> bool:
                return False

        stream = app_mod._follow_run(Client(), str(run_dir), "pytest", 0)  # type: ignore[arg-type]
        seen = [await stream.__anext__() for _ in range(4)]
        with (run_dir / "stdout.txt").open("a") as fh:
            fh.write("PASSED [ 75%]\n")
        seen += [await stream.__anext__() for _ in range(2)]
        await stream.aclose()
        return "".join(seen)

    import asyncio

    partial = asyncio.run(first_events())
    assert 'data: "tests/test_a.py::test_three PASSED [ 75%]"' in partial
    assert partial.count("test_three") == 1
    (run_dir / "result.json").write_text(json.dumps({"run_id": "run-live", "outcome": "red"}))
    with c.stream("GET", "/runs/run-live/stream") as r:
        text = "".join(r.iter_text())
    # greenloop's per-test progress file, when the runner writes one, is what progress counts
    (run_dir / "progress.ndjson").write_text('{"status": "pass"}\n{"status": "skip", "count": 2}\n')
    with c.stream("GET", "/runs/run-live/stream") as r:
        exact = "".join(r.iter_text())
    assert 'event: progress\ndata: {"passed": 1, "failed": 0, "skipped": 2}' in exact
    assert 'event: line\ndata: "tests/test_a.py::test_one PASSED"' in text
    assert 'event: progress\ndata: {"passed": 2, "failed": 1, "skipped": 0}' in text
    assert text.rstrip().endswith('event: end\ndata: {"outcome": "red"}')
    # a reconnect with Last-Event-ID resumes after the lines it had
    first_id = text.split("id: ")[1].split("\n")[0]
    with c.stream("GET", "/runs/run-live/stream", headers={"Last-Event-ID": first_id}) as r:
        again = "".join(r.iter_text())
    assert "test_one PASSED" not in again and "test_two FAILED" in again


def test_sessions_page_shows_turns_interceptions_and_unresolved(ws: Path) -> None:
    record(ws, "run-red", ok=False, session="sess-1", failures=(Failure(test="t"),))
    gate = Gate(ws, config=Config(max_intercept_rounds=1))
    assert gate.on_turn_stopping("sess-1").kind == "steer"
    assert gate.on_turn_stopping("sess-1").kind == "release"
    c = client(ws)
    listing = c.get("/sessions").text
    assert "sess-1" in listing and "release" in listing
    detail = c.get("/sessions/sess-1").text
    assert "steer" in detail and "release" in detail and "<b>open</b>" in detail and "run-red" in detail
    assert c.get("/sessions/nobody").status_code == 404


def test_bug_board_and_history(ws: Path) -> None:
    log = BugLog(ws / "bugs.ndjson")
    a = log.open(unit_id="ws", test_name=XSS, title=f"title {XSS}", run_id="run-1", by="t").bug
    b = log.open(unit_id="ws", test_name="t2", title="second", run_id="run-1", by="t").bug
    log.transition(b.id, "fixed", by="greenloop run", fix_refs=("run-2",), closed_by="run-2",
                   evidence="test_passed")
    record(ws, "run-1", ok=False, failures=(Failure(test=XSS),))
    c = client(ws)
    board = c.get("/bugs").text
    assert XSS not in board and "seen in 1 run(s)" in board and "closed by run-2 (test_passed)" in board
    detail = c.get(f"/bugs/{b.id}").text
    assert "test_passed" in detail and detail.count("<tr><td>") == 2  # opened, fixed
    assert c.get(f"/bugs/{a.id}").status_code == 200 and c.get("/bugs/bug-nope").status_code == 404


def test_integration_pages(ws: Path) -> None:
    folder = ws / "integration" / "runs" / "int-1"
    (folder / "browser").mkdir(parents=True)
    (ws / "units.json").write_text('{"units": []}')
    (folder / "result.json").write_text(json.dumps({
        "ok": False, "run_id": "int-1", "cases_total": 1, "cases_passed": 0, "ports_used": {"api": 41234},
        "cases": [{"case_id": "create", "status": "failed", "placeholders": {"step1.id": 7}}],
        "failures": [{"case_id": "create", "failed_step": 1, "reason": "status", "expected": 201,
                      "got": 500}],
    }))
    (folder / "http-trace.ndjson").write_text(json.dumps({
        "case_id": "create", "step": 1, "unit": "api", "method": "POST", "url": "http://127.0.0.1:41234/x",
        "request_body": {"title": XSS}, "status": 500, "response_body": "boom", "duration_ms": 3}) + "\n")
    (folder / "process.log").write_text(f"api started {XSS}\n")
    (folder / "browser" / "shot.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    c = client(ws)
    assert "int-1" in c.get("/integration").text
    page = c.get("/integration/int-1").text
    assert XSS not in page and "41234" in page and "step1.id" in page and "POST" in page
    assert c.get("/integration/int-1/file/browser/shot.png").status_code == 200
    assert c.get("/integration/int-1/file/../../../etc/passwd").status_code == 404


def test_events_say_what_changed_and_resume_from_last_event_id(ws: Path) -> None:
    from greenloop.dashboard import app as app_mod

    record(ws, "run-a", ok=True)
    key = app_mod._state(data.Source.of(str(ws)))
    record(ws, "run-b", ok=False, failures=(Failure(test="t"),))
    assert app_mod._state(data.Source.of(str(ws))) != key
    parsed = app_mod._parse_key(key)
    now = app_mod._parse_key(app_mod._state(data.Source.of(str(ws))))
    assert [k for k in app_mod._KEYS if parsed[k] != now[k]] == ["runs"]


def test_static_assets_ship_in_the_package(ws: Path) -> None:
    c = client(ws)
    js = c.get("/static/app.js")
    assert js.status_code == 200 and "EventSource" in js.text and "innerHTML = html" in js.text
    assert "textContent" in js.text  # streamed output is inserted as text, never as HTML
    assert c.get("/static/style.css").status_code == 200 and c.get("/static/nope.js").status_code == 404


def test_diff_marks_only_the_lines_that_differ() -> None:
    table = pages.diff_table("a\nb\nc", "a\nB\nc")
    assert table.count("<tr class=same>") == 2 and table.count("<tr class=diff>") == 1


def test_a_state_database_that_cannot_be_reached_gets_a_page_that_says_so(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PostgreSQL state URL whose server is down: the pages that read the state answer 503
    with the database (password hidden) and what to do, not a server error."""
    import socket

    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GREENLOOP_STATE_URL", f"postgresql://greenloop:s3cret@127.0.0.1:{port}/gl?connect_timeout=2")
    c = client(ws)
    for path in ("/", "/sessions"):
        page = c.get(path)
        assert page.status_code == 503, (path, page.text[:300])
        assert "The state database cannot be read" in page.text and "greenloop doctor" in page.text
        assert f"127.0.0.1:{port}" in page.text and "s3cret" not in page.text


# ------------------------------------------------- a real `greenloop serve` on 127.0.0.1


class Served(NamedTuple):
    """A `greenloop serve` process answering on 127.0.0.1, and a client for it with its cookie."""
    base: str
    token: str

    def get(self, path: str) -> tuple[int, str]:
        req = urllib.request.Request(self.base + path, headers={"Cookie": f"{COOKIE}={self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode("utf-8")

    def events(self, path: str, within: float = 10.0) -> Iterator[tuple[str, str]]:
        """(event, data) pairs of an SSE stream, as they arrive; a stream still open `within`
        seconds after it started fails the test (a read waits at most that long too)."""
        req = urllib.request.Request(self.base + path, headers={"Cookie": f"{COOKIE}={self.token}"})
        deadline = time.monotonic() + within
        with urllib.request.urlopen(req, timeout=within) as r:
            event = ""
            for raw in r:
                assert time.monotonic() < deadline, f"{path} still open after {within} s"
                line = raw.decode("utf-8").rstrip("\n")
                if line.startswith("event: "):
                    event = line[len("event: "):]
                elif line.startswith("data: "):
                    yield event, line[len("data: "):]


@pytest.fixture()
def served(ws: Path) -> Iterator[Served]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "serve", str(ws), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    assert proc.stdout is not None
    link = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not link:
        found = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", proc.stdout.readline())
        link = found.group(0) if found else ""
    assert found, "greenloop serve printed no link"
    try:
        yield Served(found.group(1), found.group(2))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


SESSION_SUITE = """
def test_adds():
    assert 1 + 1 == 2


def test_subtracts():
    assert 2 - 1 == {expected}
"""


def test_every_session_that_recorded_a_run_is_listed_with_its_runs(ws: Path, served: Served) -> None:
    """Runs made with GREENLOOP_SESSION set (the MCP tools, scripts) and no hook event: each
    session is on the sessions page with its runs, and its own page lists them."""
    (ws / "tests").mkdir()
    (ws / "tests" / "test_calc.py").write_text(SESSION_SUITE.format(expected=1))
    sessions = ("sess-alpha", "sess-beta", "sess-gamma")
    for sid in sessions:
        done = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws)], capture_output=True,
                              text=True, timeout=120, env={**os.environ, "GREENLOOP_SESSION": sid})
        assert done.returncode == 0, done.stdout + done.stderr
    # a second, red run for one of them
    (ws / "tests" / "test_calc.py").write_text(SESSION_SUITE.format(expected=3))
    red = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "GREENLOOP_SESSION": "sess-beta"})
    assert red.returncode == 1, red.stdout + red.stderr
    with store.Store(ws) as st:
        made = {sid: [r.run_id for r in st.runs(session_id=sid)] for sid in sessions}
        assert st.conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0] == 0  # no hook event
    status, runs_page = served.get("/")
    assert status == 200 and all(rid in runs_page for ids in made.values() for rid in ids)
    status, listing = served.get("/sessions")
    assert status == 200 and "No sessions yet" not in listing
    rows = {sid: listing.split(f'href="/sessions/{sid}"')[1].split("</tr>")[0] for sid in sessions}
    assert ">1</a>" in rows["sess-alpha"] and ">2</a>" in rows["sess-beta"] and ">1</a>" in rows["sess-gamma"]
    assert made["sess-beta"][0] in rows["sess-beta"] and "✗" in rows["sess-beta"]  # its last run, red
    assert listing.index("sess-beta") < listing.index("sess-gamma")  # the most recently seen first
    for sid, ids in made.items():
        status, page = served.get(f"/sessions/{sid}")
        table = page.split("id=session-runs>")[1]
        assert status == 200 and all(f'href="/runs/{rid}"' in table for rid in ids), sid
        assert "no hook event" in page
    # a session that also sends a hook event is one row, with its runs
    Gate(ws, config=Config(max_intercept_rounds=1)).on_turn_stopping("sess-beta")
    listing = served.get("/sessions")[1]
    assert listing.count('href="/sessions/sess-beta"') == 1
    assert ">2</a>" in listing.split('href="/sessions/sess-beta"')[1].split("</tr>")[0]
    assert served.get("/sessions/sess-nobody")[0] == 404


A_TEST, B_TEST, C_TEST = "tests/test_a.py::test_add", "tests/test_a.py::test_sub", "tests/test_b.py::test_mul"


def test_the_session_page_shows_the_gate_verdict(ws: Path, served: Served) -> None:
    """Unresolved and why, the owed tests with the run that made each owed, and the
    acceptances a person recorded (who, when, why): read from the store, shown read-only."""
    from greenloop.closure.evidence import RunEvidence
    from greenloop.closure.transitions import Counts, RunRecord

    now = time.time()
    a_failed = ((A_TEST, "tests/test_a.py", 3),)
    with store.Store(ws) as st:
        one = RunRecord("run-one", ok=False, at=now - 30, session_id="sess-v", summary=Counts(3, 2, 1, 0))
        st.record_run(one, RunEvidence(failed=a_failed, passed=(B_TEST, C_TEST), total=3, whole_suite=True))
        two = RunRecord("run-two", ok=False, at=now - 20, session_id="sess-v", summary=Counts(3, 1, 1, 1))
        st.record_run(two, RunEvidence(failed=a_failed, passed=(C_TEST,), skipped=(B_TEST,), total=3,
                                       whole_suite=True))
        st.add_acceptance(B_TEST, f"flaky upstream {XSS}", "ana", session_id="sess-v")
        green = RunRecord("run-ok", ok=True, outcome="green", at=now - 10, session_id="sess-ok",
                          summary=Counts(1, 1, 0, 0))
        st.record_run(green, RunEvidence(passed=(C_TEST,), total=1, ok=True, whole_suite=True))
        owed = {o.test: o.run_id for o in st.owed("sess-v")[0]}
    held = served.get("/sessions/sess-v")[1]  # owing, not yet released: held, not unresolved
    assert "<b>held</b>" in held and "<span id=verdict-reason>owed</span>" in held
    gate = Gate(ws, config=Config(max_intercept_rounds=1))
    assert gate.on_turn_stopping("sess-v").kind == "steer"
    assert gate.on_turn_stopping("sess-v").kind == "release"
    with store.Store(ws) as st:
        [record] = st.unresolved_records("sess-v")
    assert owed == {A_TEST: "run-one"} and record["reason"]
    status, page = served.get("/sessions/sess-v")
    assert status == 200
    verdict = page.split("<section id=verdict>")[1].split("</section>")[0]
    assert "<b>unresolved</b>" in verdict and f"<span id=verdict-reason>{record['reason']}</span>" in verdict
    owed_table = verdict.split("<table id=owed")[1].split("</table>")[0]
    a_row = owed_table.split(A_TEST)[1].split("</tr>")[0]
    assert "failed" in a_row and 'href="/runs/run-one"' in a_row and "tests/test_a.py:3" in a_row
    b_row = owed_table.split(B_TEST)[1].split("</tr>")[0]
    assert "skipped in this session" in b_row and 'href="/runs/run-two"' in b_row
    assert "accepted (not counted)" in b_row and "1 counted" in verdict  # the acceptance counts B out
    accepted = verdict.split("<table id=acceptances")[1].split("</table>")[0]
    assert B_TEST in accepted and "<td>ana</td>" in accepted and "this session" in accepted
    assert "flaky upstream &lt;img" in accepted and XSS not in page  # escaped like everything else
    assert time.strftime("%Y-%m-%d", time.localtime(now)) in accepted  # when
    assert "<form" not in page and "<button" not in page  # shown, never changed here
    status, ok_page = served.get("/sessions/sess-ok")
    assert status == 200 and "<b>clear</b>" in ok_page and "the session owes no test" in ok_page


def test_a_run_stream_ends_when_the_store_has_the_run_or_the_run_went_away(ws: Path, served: Served) -> None:
    """The run stream's end does not hang on a result.json in the folder it tails: the run
    recorded in the state database ends it with that outcome, and a run whose announcement went
    away without a result ends it as broken."""
    run_dir = layout.run_dir(ws, "run-elsewhere")
    run_dir.mkdir(parents=True)
    (run_dir / "stdout.txt").write_text("tests/test_a.py::test_one FAILED\n")
    live.announce(str(ws), "run-elsewhere", str(run_dir), "pytest")
    stream = served.events("/runs/run-elsewhere/stream")
    assert next(stream) == ("line", '"tests/test_a.py::test_one FAILED"')
    with (run_dir / "stdout.txt").open("a") as fh:
        fh.write("1 failed\n")
    # recorded, its result kept in another folder (a DevLoop unit's copy): no result.json here
    other = ws / "units-copy"
    other.mkdir()
    result = RunResult(run_id="run-elsewhere", ok=False, outcome="red", framework="pytest", command="pytest",
                       exit_code=1, summary=Summary(total=1, failed=1), result_ref=str(other / "result.json"))
    (other / "result.json").write_text(json.dumps(result.to_json()))
    started = time.monotonic()
    store.record_result(ws, result, warn=lambda _m: None)
    rest = list(stream)
    assert ("line", '"1 failed"') in rest and rest[-1] == ("end", '{"outcome": "red"}')
    assert time.monotonic() - started < 5
    # a run that stopped without a result (its announcement removed, nothing recorded)
    gone_dir = layout.run_dir(ws, "run-gone")
    gone_dir.mkdir(parents=True)
    (gone_dir / "stdout.txt").write_text("collecting ...\n")
    live.announce(str(ws), "run-gone", str(gone_dir), "pytest")
    stream = served.events("/runs/run-gone/stream")
    assert next(stream) == ("line", '"collecting ..."')
    live.finished(str(ws), "run-gone")
    assert list(stream)[-1] == ("end", '{"outcome": "broken"}')
