"""Browser steps: a real headless Chromium, driven by Playwright for Python, checks the UI.

- The browser (`chromium.find_chromium`, kept off the network by `chromium.CHROMIUM_ARGS`) is
  launched only when a case reaches a browser step. Playwright gives each launch a fresh
  temporary profile, and each case gets its own browser context (cookies, storage) and page.
- Playwright's sync API runs in one thread of its own (`_Worker`), so the caller may be any
  thread, with or without an asyncio loop; every Playwright object lives in that thread.
- `page_driver.PageDriver` runs a step's actions and expectations, each within its wait; a
  failing step saves a screenshot and the page's HTML in the run folder.
- The page's own requests to the backends go to http-trace.ndjson (`browser_trace`), its
  console errors and uncaught exceptions to process.log under the unit's name.
- Chromium carries a greenloop process token: after the browser is closed, a sweep by token
  kills anything of it that is still alive, and `survivors()` reports what could not be killed.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from greenloop.integration.browser_trace import origin, trace_entry, traced
from greenloop.integration.cases import StepResult
from greenloop.integration.chromium import CHROMIUM_ARGS
from greenloop.integration.page_driver import DEFAULT_WAIT_MS, PageDriver, StepCut, first_line
from greenloop.integration.placeholders import as_text, resolve
from greenloop.integration.response_checks import Mismatch
from greenloop.integration.spec.records import Action, Case, PageExpect, Step
from greenloop.integration.trace import TraceWriter
from greenloop.system import proc
from greenloop.system.procfs import cmdline

__all__ = ["BrowserSession"]

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CLOSE_WAIT_S = 5.0


class _Worker:
    """One thread that runs every Playwright call, in order."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], Any], Future[Any]] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="greenloop-browser", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, fut = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn())
            except BaseException as exc:  # handed to the caller
                fut.set_exception(exc)

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        fut: Future[Any] = Future()
        self._jobs.put((fn, fut))
        return fut

    def stop(self, timeout: float) -> None:
        self._jobs.put(None)
        self._thread.join(timeout)


class BrowserSession:
    """The browser of one integration run; `step()` runs one browser step of a case."""

    def __init__(
        self,
        *,
        executable: str,
        run_folder: Path,
        run_ref: str,
        urls: Mapping[str, str],
        backends: Sequence[str],
        trace: TraceWriter | None = None,
        log: Callable[[str, str], None] = lambda _label, _text: None,
        labels: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.executable = executable
        self.run_folder = run_folder
        self.run_ref = run_ref
        self.urls = dict(urls)
        self.backend_origins = {origin(self.urls[b]) for b in backends if b in self.urls}
        self.trace = trace
        self.log = log
        self.labels = dict(labels or {})
        self.env = dict(os.environ if env is None else env)
        self.clock = clock
        self.token = f"{proc.TOKEN_VAR.lower()}-{os.getpid()}-browser-{os.urandom(4).hex()}"
        self.launched = False
        self.launch_error: str | None = None  # why Chromium could not start (the run is broken)
        self._busy = threading.Event()  # a step is running in the worker
        # Set by close(): a step still polling the page stops at its next poll. Killing Chromium
        # does not always make the page's calls raise "closed" at once (a renderer killed before
        # the browser reads as a crash first), and the poll must not run on to its wait_ms.
        self._closing = threading.Event()
        self._driver = PageDriver(clock, self._closing)
        self._worker: _Worker | None = None
        self._left: tuple[int, ...] | None = None  # what close()'s sweep could not kill
        # Owned by the worker thread:
        self._pw: Any = None
        self._browser: Any = None
        self._context: Any = None
        self._page: Any = None
        self._case: Case | None = None
        self._step = 0
        self._unit = ""
        self._pending: list[tuple[int, str, Any, str | None]] = []

    # ---- the caller's side ---------------------------------------------------------------
    def step(self, case: Case, step: Step, responses: Sequence[Any], remaining_s: float) -> StepResult:
        """Run one browser step within `remaining_s`; raises cases.Unresolved for placeholders."""
        def text(template: str, *, url_path: bool = False) -> str:
            return as_text(resolve(template, responses, url_path=url_path))

        page = None if step.page is None else text(step.page, url_path=True)
        actions = [
            Action(a.verb, text(a.selector), text(a.value, url_path=a.verb == "goto"), text(a.text))
            for a in step.actions
        ]
        checks = [
            PageExpect(text(c.selector), None if c.text is None else text(c.text), c.count)
            for c in step.checks
        ]
        deadline = self.clock() + remaining_s
        if self._worker is None:
            self._worker = _Worker()

        def busy() -> StepResult:  # close() kills Chromium at once while a step holds the worker
            self._busy.set()
            try:
                return self._run(case, step, page, actions, checks, deadline)
            finally:
                self._busy.clear()

        fut = self._worker.submit(busy)
        try:
            result: StepResult = fut.result(timeout=remaining_s + 10.0)
        except TimeoutError:
            return StepResult(
                None,
                Mismatch("timeout", f"step within the case's {remaining_s:.1f} s", None,
                         f"step {step.index} (browser) did not finish within the case's deadline"),
            )
        return result

    def end_case(self) -> None:
        """Close the case's browser context (its page, cookies and storage)."""
        if self._worker is not None:
            with contextlib.suppress(Exception):
                self._worker.submit(self._close_context).result(timeout=_CLOSE_WAIT_S)

    def close(self) -> None:
        """Close the browser and Playwright, then sweep Chromium processes by token."""
        self._closing.set()
        # Chromium's crash handler double-forks, so while a run makes greenloop a subreaper it
        # is our child: noted now, reaped below once it has ended (closed or killed).
        started = proc.started_by_token(self.token)
        if self._worker is not None:
            if self._busy.is_set():
                # A step still holds the worker (an interrupt): killing Chromium ends it at once.
                proc.kill_token(self.token)
            done = self._worker.submit(self._shutdown)
            with contextlib.suppress(Exception):
                done.result(timeout=_CLOSE_WAIT_S)
            if not done.done():  # Chromium hangs: kill it, which ends whatever waits on it
                proc.kill_token(self.token)
                with contextlib.suppress(Exception):
                    done.result(timeout=_CLOSE_WAIT_S)
            self._worker.stop(_CLOSE_WAIT_S)
            self._worker = None
        self._left = proc.kill_token(self.token)
        proc.reap_ended(started)

    def survivors(self) -> list[dict[str, Any]]:
        """Chromium processes still alive: of those the sweep in close() could not kill (no
        second /proc scan), or of every process with the token before close()."""
        if self._left is None:
            pids = proc.find_by_token(self.token)
        else:
            pids = [p for p in self._left if proc.carries_token(p, self.token) and proc.alive(p)]
        return [{"pid": pid, "unit": "browser", "cmdline": cmdline(pid)} for pid in pids]

    # ---- the worker's side ---------------------------------------------------------------
    def _launch(self) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        env = dict(self.env)
        env[proc.TOKEN_VAR] = self.token
        self._browser = self._pw.chromium.launch(
            executable_path=self.executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            env=env,
            timeout=30_000,
        )
        self.launched = True

    def _close_context(self) -> None:
        self._drain()
        if self._context is not None:
            with contextlib.suppress(Exception):
                self._context.close()
        self._context = self._page = self._case = None

    def _shutdown(self) -> None:
        self._close_context()
        if self._browser is not None:
            with contextlib.suppress(Exception):
                self._browser.close()
        if self._pw is not None:
            with contextlib.suppress(Exception):
                self._pw.stop()
        self._browser = self._pw = None

    def _label(self, unit: str) -> str:
        return self.labels.get(unit, f"[{unit}]")

    def _open_page(self, case: Case) -> Any:
        if self._case is not None and self._case.id != case.id:
            self._close_context()
        if self._page is None:
            self._context = self._browser.new_context(service_workers="block")
            page = self._context.new_page()
            page.on("requestfinished", lambda r: self._pending.append((self._step, self._unit, r, None)))
            page.on(
                "requestfailed",
                lambda r: self._pending.append((self._step, self._unit, r, r.failure or "failed")),
            )
            page.on("console", self._on_console)
            page.on("pageerror", lambda e: self.log(f"{self._label(self._unit)} console|", f"uncaught {e}"))
            self._page, self._case = page, case
        return self._page

    def _on_console(self, msg: Any) -> None:
        if msg.type == "error":
            where = ""
            with contextlib.suppress(Exception):
                loc = msg.location
                if loc and loc.get("url"):
                    where = f" ({loc['url']}:{loc.get('lineNumber', 0)})"
            self.log(f"{self._label(self._unit)} console|", f"error: {msg.text}{where}")

    def _drain(self) -> None:
        pending, self._pending = self._pending, []
        if self._case is None or self.trace is None:
            return
        for step, unit, request, failure in pending:
            with contextlib.suppress(Exception):
                if traced(request, self.backend_origins):
                    self.trace.write(
                        trace_entry(request, self.urls, case_id=self._case.id, step=step, unit=unit,
                                    failure=failure)
                    )

    def _run(
        self,
        case: Case,
        step: Step,
        page_path: str | None,
        actions: Sequence[Action],
        checks: Sequence[PageExpect],
        deadline: float,
    ) -> StepResult:
        wait_ms = step.wait_ms if step.wait_ms is not None else DEFAULT_WAIT_MS
        try:
            if self._browser is None:
                if self.launch_error is not None:
                    raise RuntimeError(self.launch_error)
                try:
                    self._launch()
                except Exception as exc:
                    first = first_line(exc, strip=True)
                    self.launch_error = f"{self.executable}: {first}"
                    raise
            page = self._open_page(case)
        except Exception as exc:
            first = first_line(exc, strip=True)
            return StepResult(
                None,
                Mismatch("connection_error", "a running browser", {"error": str(exc)[:2000]},
                         f"step {step.index}: the browser could not start: {first}"),
            )
        self._step, self._unit = step.index, step.unit
        base = self.urls.get(step.unit, "")
        try:
            if page_path is not None:
                self._driver.goto(page, base, page_path, step, deadline, wait_ms)
            for i, action in enumerate(actions):
                self._driver.act(page, base, action, i, step, deadline, wait_ms)
            value: dict[str, Any] = {"url": page.url}
            for check in checks:
                value.update(self._driver.expect(page, check, step, deadline, wait_ms))
            self._drain()
            return StepResult(value)
        except StepCut as cut:
            self._drain()
            artifacts = self._evidence(page, case, step)
            return StepResult(
                {"url": page.url}, Mismatch(cut.reason, cut.expected, cut.got, cut.message), artifacts
            )

    def _evidence(self, page: Any, case: Case, step: Step) -> dict[str, str]:
        folder = self.run_folder / "browser"
        folder.mkdir(exist_ok=True)
        stem = f"{_SAFE.sub('_', case.id)}-step{step.index}"
        out: dict[str, str] = {}
        with contextlib.suppress(Exception):
            page.screenshot(path=str(folder / f"{stem}.png"), full_page=True, timeout=5000)
            out["screenshot"] = f"{self.run_ref}/browser/{stem}.png"
        with contextlib.suppress(Exception):
            (folder / f"{stem}.html").write_text(page.content(), encoding="utf-8")
            out["html"] = f"{self.run_ref}/browser/{stem}.html"
        return out

