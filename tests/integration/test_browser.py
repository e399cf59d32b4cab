"""Frontend units checked in a real headless Chromium (Debian's chromium through Playwright).

All real and on loopback: the example project's Python and Node units, its static todo-fe
unit served by greenloop, and one browser per run. After every test the autouse scan of
conftest.py finds no process carrying the test's marker (Chromium inherits it), and no child
of this process (the Playwright driver) is left either.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from greenloop.integration.chromium import CHROMIUM_ENV, find_chromium
from greenloop.integration.result import IntegrationResult
from greenloop.system import procfs

from .itkit import FAKE, MARK, read_lines, scan, wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "todo"
MODULES = EXAMPLE / "units" / "todo-api" / "node_modules"
UI_CASES = ["ui-shows-a-todo-created-through-the-api", "a-todo-added-in-the-ui-is-in-the-api"]
PNG = b"\x89PNG\r\n\x1a\n"

pytestmark = [
    pytest.mark.skipif(
        not (MODULES / "better-sqlite3").is_dir() or shutil.which("node") is None,
        reason="the example's Node unit is not installed: npm ci in examples/todo/units/todo-api",
    ),
    pytest.mark.skipif(find_chromium(os.environ) is None, reason="Debian's chromium is not installed"),
]

Run = Callable[..., IntegrationResult]


def copy_example(dest: Path) -> Path:
    shutil.copytree(
        EXAMPLE, dest, ignore=shutil.ignore_patterns("node_modules", "runs", "bugs.ndjson*", ".greenloop")
    )
    (dest / "units" / "todo-api" / "node_modules").symlink_to(MODULES, target_is_directory=True)
    return dest


def edit_json(path: Path, change: Callable[[Any], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))


def my_children() -> list[str]:
    """Processes whose parent is this test process: live ones (the Playwright driver would be
    one), and Chromium's zombies (re-parented to the run's subreaper, then never reaped)."""
    me, found = os.getpid(), []
    for pid in procfs.pids():
        st = procfs.stat(pid)
        if st is None or st.ppid != me:
            continue
        if not st.gone:
            found.append(f"{pid} {procfs.cmdline(pid)}")
        elif st.comm.startswith("chrom"):
            found.append(f"{pid} <defunct {st.comm}>")
    return found


def run_folder(project: Path, r: IntegrationResult) -> Path:
    return project / r.result_ref.rsplit("/", 1)[0]


def test_the_ui_shows_what_the_api_stored_and_the_api_stores_what_the_ui_added(
    tmp_path: Path, run: Run
) -> None:
    project = copy_example(tmp_path / "todo")
    r = run(project, cases=UI_CASES)
    assert r.ok, json.dumps(r.to_json(), indent=1)
    assert r.cases_passed == 2 and r.surviving_processes == ()
    assert set(r.ports_used) == {"auth", "todo-api", "todo-fe"}
    assert len(set(r.ports_used.values())) == 3
    assert not my_children()
    folder = run_folder(project, r)
    env = json.loads((folder / "env.json").read_text())
    assert env["todo-fe"] == {"port": r.ports_used["todo-fe"], "url": f"http://127.0.0.1:{r.ports_used['todo-fe']}"}

    trace = read_lines(folder / "http-trace.ndjson")
    api = f"http://127.0.0.1:{r.ports_used['todo-api']}"
    auth = f"http://127.0.0.1:{r.ports_used['auth']}"
    page = [t for t in trace if t.get("source") == "browser"]
    steps = [t for t in trace if "source" not in t]
    assert {t["case_id"] for t in steps} == set(UI_CASES)  # the HTTP steps keep their shape
    assert set(page[0]) == set(steps[0]) | {"source"}
    # The page called the backends it was pointed at: window.__API_BASE__ and the auth backend.
    added = [t for t in page if t["method"] == "POST" and t["url"] == f"{api}/api/todos"]
    assert len(added) == 1
    [add] = added
    assert (add["case_id"], add["step"], add["unit"], add["status"]) == (UI_CASES[1], 0, "todo-api", 201)
    assert add["request_body"] == {"title": "water the plants"}
    assert add["response_body"]["owner"] == "bob"
    assert add["request_headers"]["authorization"] == "[redacted]"
    logins = [t for t in page if t["url"] == f"{auth}/api/login"]
    assert [t["unit"] for t in logins] == ["auth", "auth"]
    assert all(t["response_body"]["token"] == "[redacted]" for t in logins)
    assert all(t["request_body"]["password"] == "[redacted]" for t in logins)
    listed = [t for t in page if t["case_id"] == UI_CASES[0] and t["url"] == f"{api}/api/todos"]
    assert listed and listed[-1]["response_body"]["items"][0]["title"] == "buy oat milk"
    assert not any(t["url"].startswith(f"http://127.0.0.1:{r.ports_used['todo-fe']}") for t in page)

    log = (folder / "process.log").read_text()
    fe = f"[todo-fe:{r.ports_used['todo-fe']}]"
    assert f'{fe} out| "GET / HTTP/1.1" 200' in log
    assert f"{fe} out| \"GET /app.js HTTP/1.1\" 200" in log
    assert "browser closed" in log


def test_a_page_pointed_at_a_stopped_backend_shows_its_error_state(tmp_path: Path, run: Run) -> None:
    project = copy_example(tmp_path / "todo")

    def units(data: Any) -> None:
        data["units"].append({"id": "doomed", "kind": "be", "start": [sys.executable, FAKE, "ok"]})
        fe = next(u for u in data["units"] if u["id"] == "todo-fe")
        fe["depends_on"] = ["doomed", "auth"]

    edit_json(project / "units.json", units)
    (project / "units" / "doomed").mkdir()
    case = {
        "id": "backend-gone",
        "steps": [
            {"unit": "doomed", "call": "POST /api/crash", "expect": {"status": 200}},
            {
                "unit": "todo-fe",
                "page": "/",
                "expect": [
                    {"selector": "#error", "text": "Cannot reach the todo service"},
                    {"selector": "body[data-state=error]", "count": 1},
                    {"selector": "#login:visible", "count": 0},
                ],
            },
        ],
    }
    edit_json(project / "integration" / "spec.json", lambda d: d.update(cases=[case]))
    r = run(project)
    assert r.cases_passed == 1, json.dumps(r.to_json(), indent=1)
    assert r.surviving_processes == () and not my_children()
    folder = run_folder(project, r)
    doomed = f"http://127.0.0.1:{r.ports_used['doomed']}"
    [health] = [t for t in read_lines(folder / "http-trace.ndjson") if t.get("source") == "browser"]
    assert health["url"] == f"{doomed}/api/health" and health["status"] is None
    assert "ERR_CONNECTION_REFUSED" in health["error"] and health["unit"] == "doomed"
    log = (folder / "process.log").read_text()
    fe = f"[todo-fe:{r.ports_used['todo-fe']}] console|"
    assert f"{fe} error: cannot reach todo service at {doomed}" in log
    assert not (folder / "browser").exists()  # a passing step leaves no screenshot


def test_a_failing_expectation_saves_a_screenshot_and_the_page(tmp_path: Path, run: Run) -> None:
    project = copy_example(tmp_path / "todo")

    def break_case(data: Any) -> None:
        case = next(c for c in data["cases"] if c["id"] == UI_CASES[0])
        case["steps"][2]["expect"] = {"selector": "#todos li", "text": "a todo nobody wrote"}
        # the step's actions (goto, fill, click) share this wait: long enough for a loaded
        # machine's page, short enough for a test
        case["steps"][2]["wait_ms"] = 4000

    edit_json(project / "integration" / "spec.json", break_case)
    # the case's own deadline well past the step's wait: a loaded machine fails the step, not the case
    r = run(project, cases=[UI_CASES[0]], case_timeout_s=120.0)
    assert r.exit_code == 1 and (r.cases_failed, r.cases_timeout) == (1, 0)
    [f] = r.failures
    assert (f.case_id, f.failed_step, f.reason, f.unit) == (UI_CASES[0], 2, "assertion_failed", "todo-fe")
    assert f.expected == {"selector": "#todos li", "text": "a todo nobody wrote"}
    assert f.got["texts"] == ["buy oat milk"] and f.got["count_with_text"] == 0
    assert "within 4 s" in f.message and "1 element(s) match" in f.message
    shot, html = project / f.artifacts["screenshot"], project / f.artifacts["html"]
    assert shot.read_bytes().startswith(PNG) and shot.stat().st_size > 1000
    assert "buy oat milk" in html.read_text() and "window.__API_BASE__" in html.read_text()
    stored = json.loads((run_folder(project, r) / "result.json").read_text())
    assert stored["failures"][0]["artifacts"] == dict(f.artifacts)
    assert r.surviving_processes == () and not my_children()


PAGE_SERVER = r"""
import http.server, json, os
api = os.environ["API_URL"]
page = ('<!doctype html><html><head><title>items</title></head><body><ul id="items"></ul><script>'
        'fetch(%s + "/api/items").then(r => r.json()).then(d => { for (const i of d.items) {'
        ' const li = document.createElement("li"); li.textContent = "item " + i.id;'
        ' document.getElementById("items").append(li); } });'
        '</script></body></html>') % json.dumps(api)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = page.encode()
        self.send_response(200); self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
"""


def test_a_frontend_unit_with_its_own_server_gets_its_backend_url(tmp_path: Path, run: Run) -> None:
    root = tmp_path / "p"
    for uid in ("api", "web"):
        (root / "units" / uid).mkdir(parents=True)
    units = [
        {"id": "api", "kind": "be", "start": [sys.executable, FAKE, "ok"]},
        {"id": "web", "kind": "fe", "start": [sys.executable, "-c", PAGE_SERVER], "depends_on": ["api"]},
    ]
    (root / "units.json").write_text(json.dumps({"units": units}))
    case = {
        "id": "items-in-the-page",
        "steps": [
            {"unit": "web", "page": "/", "expect": {"selector": "#items li", "count": 2}},
            {"unit": "web", "actions": [{"wait_for": {"selector": "li", "text": "item 2"}}],
             "expect": {"selector": "li", "text": "{{step0.texts.0}}"}},
        ],
    }
    (root / "integration").mkdir()
    (root / "integration" / "spec.json").write_text(json.dumps({"cases": [case]}))
    r = run(root)
    assert r.ok, json.dumps(r.to_json(), indent=1)
    assert set(r.ports_used) == {"api", "web"} and r.surviving_processes == () and not my_children()
    trace = read_lines(run_folder(root, r) / "http-trace.ndjson")
    [items] = [t for t in trace if t["url"].endswith("/api/items")]
    assert (items["source"], items["unit"], items["status"]) == ("browser", "api", 200)


def descendants(root: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process below `root` (Chromium's zygote-forked
    renderers start with an environment of their own, so they cannot be found by marker)."""
    parent: dict[int, int] = {}
    cmdline: dict[int, str] = {}
    for pid in procfs.pids():
        st = procfs.stat(pid)
        if st is not None:
            parent[pid], cmdline[pid] = st.ppid, procfs.cmdline(pid)
    found: list[tuple[int, str]] = []
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier}
        found.extend((pid, cmdline[pid]) for pid in sorted(frontier))
    return found


def static_project(root: Path, *steps: dict[str, Any]) -> Path:
    """A fake backend and a static frontend unit with an empty page; one case of `steps`."""
    for uid in ("api", "web"):
        (root / "units" / uid).mkdir(parents=True)
    (root / "units" / "web" / "static").mkdir()
    (root / "units" / "web" / "static" / "index.html").write_text("<html><head></head><body></body></html>")
    units = [
        {"id": "api", "kind": "be", "start": [sys.executable, FAKE, "ok"]},
        {"id": "web", "kind": "fe", "static": "static", "depends_on": ["api"]},
    ]
    (root / "units.json").write_text(json.dumps({"units": units}))
    (root / "integration").mkdir()
    spec = {"cases": [{"id": "waits", "steps": list(steps)}]}
    (root / "integration" / "spec.json").write_text(json.dumps(spec))
    return root


def test_a_wait_cut_by_the_case_timeout_is_a_timeout(tmp_path: Path, run: Run) -> None:
    never = {"unit": "web", "page": "/", "expect": {"selector": "#never"}, "wait_ms": 60000}
    root = static_project(tmp_path / "p", never)
    r = run(root, case_timeout_s=4.0)
    assert (r.cases_failed, r.cases_timeout, r.exit_code) == (0, 1, 1)
    [f] = r.failures
    assert (f.failed_step, f.reason) == (0, "timeout")
    assert f.artifacts["screenshot"].endswith("waits-step0.png")
    assert r.surviving_processes == () and not my_children()


def test_a_browser_that_cannot_start_breaks_the_run(tmp_path: Path, run: Run, mark: str) -> None:
    root = static_project(tmp_path / "p", {"unit": "web", "page": "/", "expect": {"selector": "body"}})
    r = run(root, env={**os.environ, MARK: mark, CHROMIUM_ENV: "/bin/false"}, record_bugs=True)
    assert r.exit_code == 3 and r.crashed and r.category_hint == "infra_flake"
    [f] = r.failures
    assert f.reason == "connection_error" and "the browser could not start" in f.message
    assert any("/bin/false" in n for n in r.notes)
    assert not (root / "bugs.ndjson").exists() or not (root / "bugs.ndjson").read_text().strip()
    assert r.surviving_processes == () and not my_children()


@contextlib.contextmanager
def page_waiting_for_never(tmp_path: Path, mark: str) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`greenloop integrate` as a process, its one browser step open on a page and waiting 90 s
    for a selector that never comes; killed with its group if the test leaves it running.
    (The tests below allow 45 s for what takes 1-3 s on a quiet machine: a 2-core machine
    running other suites beside this one has taken over 20 s; 90 s keeps "stopped before the
    step's own wait ended" meaningful.)"""
    never = {"unit": "web", "page": "/", "expect": {"selector": "#never"}, "wait_ms": 90000}
    root = static_project(tmp_path / "p", never)
    argv = [sys.executable, "-m", "greenloop", "integrate", str(root), "--json", "--sandbox", "full-access"]
    child = subprocess.Popen(
        argv, env={**os.environ, MARK: mark}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    runs = root / "integration" / "runs"
    try:

        def page_open() -> bool:
            logs = list(runs.glob("*/process.log")) if runs.is_dir() else []
            return bool(logs) and '"GET / HTTP/1.1" 200' in logs[0].read_text()

        gone = child.poll() is not None and child.stderr is not None
        assert wait_for(page_open, 30), child.stderr.read() if gone and child.stderr else ""
        assert scan(mark, str(tmp_path)), "Chromium should be running now"
        yield child, runs
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def test_ctrl_c_during_a_browser_step_leaves_no_chromium(tmp_path: Path, mark: str) -> None:
    with page_waiting_for_never(tmp_path, mark) as (child, runs):
        child.send_signal(signal.SIGINT)
        try:
            code = child.wait(timeout=45)
        except subprocess.TimeoutExpired:  # say where the interrupted run stood
            logs = sorted(runs.glob("*/process.log"))
            tail = logs[0].read_text()[-3000:] if logs else "(no process.log)"
            pytest.fail(f"greenloop did not stop within 45 s of Ctrl-C; its process.log ends:\n{tail}")
    assert code == 130
    [result_file] = runs.glob("*/result.json")
    result = json.loads(result_file.read_text())
    assert result["interrupted"] is True and result["surviving_processes"] == []
    log = result_file.with_name("process.log").read_text()
    assert log.index("browser closed") < log.index("teardown: SIGTERM to api")  # the browser goes first
    # no_survivors scans /proc for this test's marker, which Chromium and its driver inherit.


def test_a_renderer_that_crashes_mid_step_fails_the_step_at_once(tmp_path: Path, mark: str) -> None:
    """The page dies under a step waiting 90 s for a selector: the step fails at its next poll
    (a crash, not a timeout), the run ends red, and no Chromium is left."""
    with page_waiting_for_never(tmp_path, mark) as (child, _runs):
        renderers = [pid for pid, cmd in descendants(child.pid) if "--type=renderer" in cmd]
        assert renderers, descendants(child.pid)
        for pid in renderers:
            os.kill(pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=45)
    assert child.returncode == 1
    result = json.loads(out)
    [f] = result["failures"]
    # Killed while waiting for the selector ("the page is gone") or, on a slow machine, while
    # the page was still loading (goto: "Page crashed"): a connection error either way.
    assert f["reason"] == "connection_error" and "crashed" in f["message"].lower(), f
    assert result["surviving_processes"] == []


def test_a_cancel_during_a_browser_step_kills_chromium_and_writes_aborted(tmp_path: Path, run: Run) -> None:
    """integrate(cancel=…) mid browser step (the MCP tool's path): Chromium is killed at once."""
    import threading
    import time

    never = {"unit": "web", "page": "/", "expect": {"selector": "#never"}, "wait_ms": 90000}
    root = static_project(tmp_path / "p", never)
    runs = root / "integration" / "runs"
    cancel = threading.Event()

    def page_open() -> bool:
        logs = list(runs.glob("*/process.log")) if runs.is_dir() else []
        return bool(logs) and '"GET / HTTP/1.1" 200' in logs[0].read_text()

    def watch() -> None:
        wait_for(page_open, 30)
        cancel.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    r = run(root, cancel=cancel)
    watcher.join()
    assert time.monotonic() - t0 < 45  # not the 90 s wait (page_waiting_for_never says why 45)
    assert r.aborted and r.exit_code == 130 and not r.crashed
    assert [c["status"] for c in r.cases] == ["aborted"] and r.failures == ()
    assert r.surviving_processes == () and not my_children()
    log = (root / r.process_log).read_text()
    assert log.index("browser closed") < log.index("teardown: SIGTERM to api")
