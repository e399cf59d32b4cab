"""The dashboard in a real browser: `greenloop serve` on a temporary workspace, a red pytest run
started beside it, Debian's Chromium driven by Playwright. The run appears without a reload, its
output streams in, the page turns red when it ends, the failure shows expected/got and the
hint, and a test named like an HTML tag renders as text. Screenshots are kept in
$GREENLOOP_ARTIFACTS (default: .artifacts/dashboard in the checkout)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from greenloop.integration.chromium import CHROMIUM_ARGS, find_chromium

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

XSS = "<img src=x onerror=alert(1)>"
ARTIFACTS = Path(os.environ.get("GREENLOOP_ARTIFACTS", Path(__file__).resolve().parents[2] / ".artifacts"))

SUITE = f'''
import time
import pytest


@pytest.mark.parametrize("n", range(12))
def test_slowly(n):
    time.sleep(0.5)


def total_with_discount(total):
    return total * 10 // 100


def test_discount_takes_ten_percent_off():
    assert total_with_discount(2000) == 1800


@pytest.mark.parametrize("name", ["x"], ids=["{XSS}"])
def test_named_like_a_tag(name):
    assert name == "y"
'''


@contextlib.contextmanager
def serving(ws: Path) -> Iterator[str]:
    """`greenloop serve` on `ws`: its token link, while it runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "serve", str(ws), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    assert proc.stdout is not None
    link = ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not link:
        line = proc.stdout.readline()
        found = re.search(r"http://\S+\?token=\S+", line)
        link = found.group(0) if found else ""
    assert link, "greenloop serve printed no link"
    try:
        yield link
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    assert not (ws / ".greenloop" / "serve.json").exists()  # it cleans up after itself


def workspace(tmp_path: Path, suite: str) -> Path:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / "pytest.ini").write_text("[pytest]\naddopts = -v\n")
    (ws / "tests" / "test_shop.py").write_text(suite)
    return ws


@pytest.fixture()
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    ws = workspace(tmp_path, SUITE)
    with serving(ws) as link:
        yield ws, link


def test_a_red_run_appears_streams_and_turns_red(served: tuple[Path, str]) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    chromium = find_chromium(os.environ)
    assert chromium, "Debian's chromium is required (scripts/test installs it)"
    ws, link = served
    shots = ARTIFACTS / "dashboard"
    shots.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(link)
        page.wait_for_selector("#live-status.on")
        run = subprocess.Popen([sys.executable, "-m", "greenloop", "run", str(ws)],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            # the run appears on the open runs page, without a reload
            row = page.wait_for_selector("tr.running a", timeout=20_000)
            page.screenshot(path=str(shots / "runs-live.png"), full_page=True)
            row.click()
            page.wait_for_selector("body.running")
            page.wait_for_function(
                "document.getElementById('output').textContent.includes('test_slowly')", timeout=20_000)
            # per-test progress while it runs (the page is still the running one)
            page.wait_for_function(
                "(document.getElementById('progress') || {}).textContent.match(/^[1-9]\\d* passed/)",
                timeout=20_000)
            assert page.evaluate("document.body.className") == "running"
            page.screenshot(path=str(shots / "run-streaming.png"), full_page=True)
            # it turns red when the run ends, still without a reload
            page.wait_for_selector("body.red", timeout=60_000)
        finally:
            out, _ = run.communicate(timeout=120)
        assert run.returncode == 1
        assert "dashboard: http://" in out  # `greenloop run` links to the run it made
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1
        page.wait_for_selector("details.failure")
        discount = page.locator("details.failure", has_text="test_discount_takes_ten_percent_off")
        diff = discount.locator("table.diff tr.diff").first
        assert diff.locator("td").nth(0).inner_text().strip() == "1800"
        assert diff.locator("td").nth(1).inner_text().strip() == "200"
        assert discount.locator(".hint").inner_text().strip().startswith("hint")
        # the tag-named test is text on the page, not an element
        names = page.locator(".test-name").all_inner_texts()
        assert any(XSS in n for n in names)
        assert page.locator("main img").count() == 0
        page.screenshot(path=str(shots / "run-red.png"), full_page=True)
        for name, path in (("bugs", "/bugs"), ("sessions", "/sessions")):
            page.goto(link.split("/?")[0] + path)
            page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
        assert XSS not in page.content().replace("&lt;", "<") or page.locator("img").count() == 0
        browser.close()


# A suite that runs until the test that drives the browser says so: its first tests pass, one
# waits for a file the browser test creates once the run page is streaming, then one fails.
WAITING_SUITE = """
import os
import time
import pytest


@pytest.mark.parametrize("n", range(6))
def test_passes(n):
    pass


def test_waits_for_the_release_file():
    deadline = time.monotonic() + 90
    while not os.path.exists("release") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists("release")


def test_total_with_discount():
    assert 2000 * 10 // 100 == 1800
"""


def test_a_run_page_opened_while_it_runs_turns_red_when_it_ends(tmp_path: Path) -> None:
    """The run page of a run in progress, opened straight from its address: its output streams
    in, and its outcome element turns red when the run ends, without a reload (also on a page
    whose run stream is cut). The run belongs to a session (GREENLOOP_SESSION), which the
    sessions page then lists with the run."""
    playwright = pytest.importorskip("playwright.sync_api")
    chromium = find_chromium(os.environ)
    assert chromium, "Debian's chromium is required (scripts/test installs it)"
    ws = workspace(tmp_path, WAITING_SUITE)
    shots = ARTIFACTS / "dashboard"
    shots.mkdir(parents=True, exist_ok=True)
    with serving(ws) as link, playwright.sync_playwright() as p:
        base, token = link.split("/?token=")
        run = subprocess.Popen([sys.executable, "-m", "greenloop", "run", str(ws)], cwd=ws,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "GREENLOOP_SESSION": "sess-browser"})
        try:
            live = ws / ".greenloop" / "live"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not (live.is_dir() and os.listdir(live)):
                time.sleep(0.05)
            assert live.is_dir() and os.listdir(live), "the run never announced itself"
            run_id = os.listdir(live)[0]
            browser = p.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(f"{base}/runs/{run_id}?token={token}")
            # a second page on the same run whose own stream never gets through (a proxy that
            # drops it): the gate's `/events` still tells it the run ended
            cut = context.new_page()
            cut.route("**/stream", lambda route: route.abort())
            cut.goto(f"{base}/runs/{run_id}")
            assert page.evaluate("document.body.className") == "running"
            assert "running" in page.inner_text("#outcome")
            page.wait_for_function(
                "document.getElementById('output').textContent.includes('test_waits_for_the_release_file')",
                timeout=30_000)
            assert page.evaluate("document.body.className") == "running"
            assert run.poll() is None  # still running: it waits for the file
            (ws / "release").write_text("")
            # the outcome element turns red, without a reload
            page.wait_for_selector("#outcome.red", timeout=15_000)
            cut.wait_for_selector("#outcome.red", timeout=15_000)
            ended = run.wait(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
            out = run.communicate()[0]
        assert ended == 1, out
        for each in (page, cut):
            assert each.evaluate("performance.getEntriesByType('navigation').length") == 1
            assert "red" in each.inner_text("#outcome") and each.evaluate("document.body.className") == "red"
        # the finished run's page is swapped in: the outcome turns red first, the swap follows it
        cut.wait_for_function("document.getElementById('output') === null", timeout=15_000)
        assert cut.locator("#output").count() == 0
        page.wait_for_selector("details.failure", timeout=10_000)
        assert "test_total_with_discount" in page.inner_text("details.failure .test-name")
        page.screenshot(path=str(shots / "run-opened-live-red.png"), full_page=True)
        # the session that made the run, with it (no hook event was ever sent)
        page.goto(f"{base}/sessions")
        row = page.locator("tr", has_text="sess-browser")
        assert row.count() == 1 and "✗" in row.inner_text()
        page.goto(f"{base}/sessions/sess-browser")
        assert page.locator(f'#session-runs a[href="/runs/{run_id}"]').count() == 1
        # its verdict: held, owing the failed test, made owed by this run
        assert page.inner_text("#verdict-state").startswith("held")
        owed = page.locator("#owed tr", has_text="test_total_with_discount")
        assert owed.locator(f'a[href="/runs/{run_id}"]').count() == 1
        page.screenshot(path=str(shots / "session-verdict.png"), full_page=True)
        browser.close()
