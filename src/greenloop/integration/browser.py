"""Browser steps: a real headless Chromium, driven by Playwright for Python, checks the UI.

- The browser is Debian's `chromium` (or `$GREENLOOP_CHROMIUM`), never Playwright's own
  download, launched only when a case reaches a browser step, with flags that keep it off the
  network: every host name except 127.0.0.1 and localhost resolves to nothing, no proxy, no
  background, update, sync or QUIC traffic. Playwright gives each launch a fresh temporary
  profile, and each case gets its own browser context (cookies, storage) and page.
- Playwright's sync API runs in one thread of its own (`_Worker`), so the caller may be any
  thread, with or without an asyncio loop; every Playwright object lives in that thread.
- Actions (`goto`, `fill`, `click`, `press`, `wait_for`) and expectations (`selector`,
  `selector` + `text`, `selector` + `count`) wait up to `wait_ms` (5 s by default), never past
  the case's deadline; one that never holds is `assertion_failed` (cut by the case's deadline it
  is `timeout`). A failing step saves a screenshot and the page's HTML in the run folder.
- The page's own requests to the backends go to http-trace.ndjson (`"source": "browser"`), its
  console errors and uncaught exceptions to process.log under the unit's name.
- Chromium carries a greenloop process token: after the browser is closed, a sweep by token
  kills anything of it that is still alive, and `survivors()` reports what could not be killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from greenloop.closure.transitions import iso
from greenloop.errors import ConfigError
from greenloop.integration.cases import Mismatch, StepResult, as_text, parse_body, resolve
from greenloop.integration.spec.records import Action, Case, PageExpect, Step
from greenloop.integration.static import CONFIG_PATH
from greenloop.integration.trace import TraceEntry, TraceWriter
from greenloop.system import proc
from greenloop.system.procfs import cmdline

__all__ = [
    "CHROMIUM_ARGS",
    "CHROMIUM_ENV",
    "CHROMIUM_PATHS",
    "DEFAULT_WAIT_MS",
    "BrowserSession",
    "find_chromium",
    "require_browser",
]

DEFAULT_WAIT_MS = 5000
POLL_MS = 100
CHROMIUM_ENV = "GREENLOOP_CHROMIUM"
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",  # greenloop often runs as root in containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
)
_INSTALL = "pip install 'greenloop[browser]'"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
_CLOSE_WAIT_S = 5.0


def find_chromium(env: Mapping[str, str]) -> str | None:
    """The Chromium executable: $GREENLOOP_CHROMIUM, else Debian's chromium, else None."""
    chosen = env.get(CHROMIUM_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium", path=env.get("PATH")) or shutil.which(
        "chromium-browser", path=env.get("PATH")
    )


def require_browser(env: Mapping[str, str]) -> str:
    """Check, before anything starts, that browser steps can run; return the Chromium path.

    Raises ConfigError (exit 2) naming the missing piece and how to install it.
    """
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"integration/spec.json has browser steps, but Playwright for Python is not installed: "
            f"run {_INSTALL}"
        ) from None
    exe = find_chromium(env)
    if exe is None:
        chosen = env.get(CHROMIUM_ENV)
        if chosen:
            raise ConfigError(
                f"{CHROMIUM_ENV}={chosen!r} is not an executable file; point it at a Chromium "
                "executable or unset it"
            )
        raise ConfigError(
            "integration/spec.json has browser steps, but no Chromium was found "
            f"(looked for {', '.join(CHROMIUM_PATHS)} and chromium on PATH): install Debian's "
            f"chromium package (apt-get install chromium) or set {CHROMIUM_ENV} to its executable"
        )
    return exe


def _first_line(exc: BaseException, *, strip: bool = False) -> str:
    """The first line of an exception's text (after stripping it, if asked), else its type."""
    text = str(exc).strip() if strip else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _origin(url: str) -> str:
    p = urllib.parse.urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


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


class _Cut(Exception):
    """A step stops here: why, what was expected, what was there."""

    def __init__(self, reason: str, expected: Any, got: Any, message: str) -> None:
        super().__init__(message)
        self.reason, self.expected, self.got, self.message = reason, expected, got, message


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
        self.backend_origins = {_origin(self.urls[b]) for b in backends if b in self.urls}
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

    def _traced(self, request: Any) -> bool:
        url = str(request.url)
        if not url.startswith("http"):
            return False
        if _origin(url) in self.backend_origins:
            return True
        kind = request.resource_type
        return kind in ("fetch", "xhr") and urllib.parse.urlsplit(url).path != CONFIG_PATH

    def _drain(self) -> None:
        pending, self._pending = self._pending, []
        if self._case is None or self.trace is None:
            return
        for step, unit, request, failure in pending:
            with contextlib.suppress(Exception):
                if self._traced(request):
                    self.trace.write(self._entry(self._case.id, step, unit, request, failure))

    def _entry(self, case_id: str, step: int, unit: str, request: Any, failure: str | None) -> TraceEntry:
        timing = request.timing or {}
        start_ms = float(timing.get("startTime") or 0.0)
        end = float(timing.get("responseEnd") or -1.0)
        response = None if failure is not None else request.response()
        status = None
        headers: Mapping[str, str] = {}
        body: Any = None
        if response is not None:
            status = int(response.status)
            headers = dict(response.headers)
            with contextlib.suppress(Exception):
                body = parse_body(response.body().decode("utf-8", "replace"))
        target = _origin(request.url)
        called = next((u for u, url in self.urls.items() if _origin(url) == target), unit)
        return TraceEntry(
            ts=iso(start_ms / 1000 if start_ms > 0 else time.time()),
            case_id=case_id,
            step=step,
            unit=called,
            method=str(request.method),
            url=str(request.url),
            request_headers=dict(request.headers),
            request_body=parse_body(request.post_data) if request.post_data else None,
            status=status,
            response_headers=headers,
            response_body=body,
            duration_ms=max(0, int(end)) if end >= 0 else 0,
            error=None if failure is None else str(failure),
            source="browser",
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
                    first = _first_line(exc, strip=True)
                    self.launch_error = f"{self.executable}: {first}"
                    raise
            page = self._open_page(case)
        except Exception as exc:
            first = _first_line(exc, strip=True)
            return StepResult(
                None,
                Mismatch("connection_error", "a running browser", {"error": str(exc)[:2000]},
                         f"step {step.index}: the browser could not start: {first}"),
            )
        self._step, self._unit = step.index, step.unit
        base = self.urls.get(step.unit, "")
        try:
            if page_path is not None:
                self._goto(page, base, page_path, step, deadline, wait_ms)
            for i, action in enumerate(actions):
                self._act(page, base, action, i, step, deadline, wait_ms)
            value: dict[str, Any] = {"url": page.url}
            for check in checks:
                value.update(self._expect(page, check, step, deadline, wait_ms))
            self._drain()
            return StepResult(value)
        except _Cut as cut:
            self._drain()
            artifacts = self._evidence(page, case, step)
            return StepResult(
                {"url": page.url}, Mismatch(cut.reason, cut.expected, cut.got, cut.message), artifacts
            )

    def _budget(self, deadline: float, wait_ms: int) -> tuple[float, bool]:
        """Milliseconds an operation may wait, and whether the case's deadline is what limits it."""
        left = (deadline - self.clock()) * 1000
        if left <= wait_ms:
            return max(1.0, left), True
        return float(wait_ms), False

    def _timeout_cut(self, what: str, step: Step, cut_by_case: bool, wait_ms: int, got: Any) -> _Cut:
        if cut_by_case:
            return _Cut("timeout", f"{what} within the case's timeout", got,
                        f"step {step.index} (browser): case timed out waiting for {what}")
        return _Cut("assertion_failed", what, got,
                    f"step {step.index} (browser): {what}: still not there after {wait_ms / 1000:g} s")

    def _goto(self, page: Any, base: str, path: str, step: Step, deadline: float, wait_ms: int) -> None:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        url = base + path if path.startswith("/") else path
        budget, by_case = self._budget(deadline, max(wait_ms, 10_000))
        try:
            page.goto(url, timeout=budget, wait_until="load")
        except PlaywrightTimeout:
            raise self._timeout_cut(f"page {url} to load", step, by_case, int(budget), None) from None
        except PlaywrightError as exc:
            first = _first_line(exc)
            raise _Cut("connection_error", f"page {url}", {"error": first},
                       f"step {step.index} (browser): could not open {url}: {first}") from None

    def _act(
        self, page: Any, base: str, action: Action, i: int, step: Step, deadline: float, wait_ms: int
    ) -> None:
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        if action.verb == "goto":
            self._goto(page, base, action.value, step, deadline, wait_ms)
            return
        budget, by_case = self._budget(deadline, wait_ms)
        what = f"actions[{i}] {action.describe()}"
        try:
            if action.verb == "wait_for":
                if action.selector:
                    loc = page.locator(action.selector)
                    if action.text:
                        loc = loc.filter(has_text=action.text)
                else:
                    loc = page.get_by_text(action.text)
                loc.first.wait_for(state="visible", timeout=budget)
            elif action.verb == "fill":
                page.locator(action.selector).first.fill(action.value, timeout=budget)
            elif action.verb == "click":
                page.locator(action.selector).first.click(timeout=budget)
            elif action.verb == "press":
                page.locator(action.selector).first.press(action.value, timeout=budget)
            else:  # validation admits no other verb
                raise _Cut("assertion_failed", what, None, f"step {step.index}: unknown action {action.verb}")
        except PlaywrightTimeout:
            raise self._timeout_cut(what, step, by_case, wait_ms, self._matches(page, action)) from None
        except PlaywrightError as exc:
            first = _first_line(exc)
            raise _Cut("assertion_failed", what, {"error": first},
                       f"step {step.index} (browser): {what} failed: {first}") from None

    def _matches(self, page: Any, action: Action) -> Any:
        if not action.selector:
            return None
        with contextlib.suppress(Exception):
            return {"count": page.locator(action.selector).count()}
        return None

    def _expect(
        self, page: Any, check: PageExpect, step: Step, deadline: float, wait_ms: int
    ) -> dict[str, Any]:
        from playwright.sync_api import Error as PlaywrightError

        budget, by_case = self._budget(deadline, wait_ms)
        end = self.clock() + budget / 1000
        texts: list[str] = []
        error: str | None = None
        while True:
            if self._closing.is_set():
                raise _Cut("connection_error", check.to_json(), {"error": "the browser was closed"},
                           f"step {step.index} (browser): the run was stopped while waiting")
            try:
                texts = [str(t) for t in page.locator(check.selector).all_inner_texts()]
                error = None
            except PlaywrightError as exc:  # an invalid selector, or a page in the middle of a load
                error = _first_line(exc)
                texts = []
                # A closed page, or a crashed one ("Target crashed"; its renderer died): every
                # later call fails the same way, so polling on to wait_ms would only wait.
                if page.is_closed() or "has been closed" in error or "crashed" in error.lower():
                    raise _Cut("connection_error", check.to_json(), {"error": error},
                               f"step {step.index} (browser): the page is gone: {error}") from None
            hits = texts if check.text is None else [t for t in texts if check.text in t]
            held = len(hits) == check.count if check.count is not None else bool(hits)
            if held:
                return {"count": len(hits), "texts": hits[:50]}
            left_ms = (end - self.clock()) * 1000
            if left_ms <= 0:
                break
            try:
                page.wait_for_timeout(min(POLL_MS, max(1.0, left_ms)))
            except PlaywrightError:
                time.sleep(min(POLL_MS, max(1.0, left_ms)) / 1000)
        got: dict[str, Any] = {"count": len(texts), "texts": [t[:200] for t in texts[:10]]}
        if check.text is not None:
            got["count_with_text"] = len([t for t in texts if check.text in t])
        if error is not None:
            got["error"] = error
        expected = check.to_json()
        shown = json.dumps(expected, ensure_ascii=False)
        if by_case:
            raise _Cut("timeout", expected, got,
                       f"step {step.index} (browser): case timed out waiting for {shown}")
        detail = f"{len(texts)} element(s) match {check.selector!r}"
        if check.text is not None:
            detail += f", {got['count_with_text']} containing {check.text!r}"
        raise _Cut("assertion_failed", expected, got,
                   f"step {step.index} (browser): expected {shown} within {budget / 1000:g} s; {detail}")

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
