"""Driving one page through a browser step: open a path, run actions, wait for expectations.

Actions (`goto`, `fill`, `click`, `press`, `wait_for`) and expectations (`selector`,
`selector` + `text`, `selector` + `count`) wait up to `wait_ms` (5 s by default), never past
the case's deadline; one that never holds is `assertion_failed` (cut by the case's deadline it
is `timeout`). Every call here runs in the browser session's Playwright thread.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from greenloop.integration.spec.records import Action, PageExpect, Step

__all__ = ["DEFAULT_WAIT_MS", "POLL_MS", "PageDriver", "StepCut", "first_line"]

DEFAULT_WAIT_MS = 5000
POLL_MS = 100


def first_line(exc: BaseException, *, strip: bool = False) -> str:
    """The first line of an exception's text (after stripping it, if asked), else its type."""
    text = str(exc).strip() if strip else str(exc)
    return text.splitlines()[0] if text else type(exc).__name__



class StepCut(Exception):
    """A step stops here: why, what was expected, what was there."""

    def __init__(self, reason: str, expected: Any, got: Any, message: str) -> None:
        super().__init__(message)
        self.reason, self.expected, self.got, self.message = reason, expected, got, message


class PageDriver:
    """Runs a step's page path, actions and expectations on one page, each within its budget."""

    def __init__(self, clock: Callable[[], float], closing: threading.Event) -> None:
        self.clock = clock
        # Set when the session closes: a step still polling the page stops at its next poll.
        self.closing = closing

    def _budget(self, deadline: float, wait_ms: int) -> tuple[float, bool]:
        """Milliseconds an operation may wait, and whether the case's deadline is what limits it."""
        left = (deadline - self.clock()) * 1000
        if left <= wait_ms:
            return max(1.0, left), True
        return float(wait_ms), False

    def _timeout_cut(self, what: str, step: Step, cut_by_case: bool, wait_ms: int, got: Any) -> StepCut:
        if cut_by_case:
            return StepCut("timeout", f"{what} within the case's timeout", got,
                        f"step {step.index} (browser): case timed out waiting for {what}")
        return StepCut("assertion_failed", what, got,
                    f"step {step.index} (browser): {what}: still not there after {wait_ms / 1000:g} s")

    def goto(self, page: Any, base: str, path: str, step: Step, deadline: float, wait_ms: int) -> None:
        """Open `path` on the unit's URL `base` (or a full URL) and wait for the page's load."""
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        url = base + path if path.startswith("/") else path
        budget, by_case = self._budget(deadline, max(wait_ms, 10_000))
        try:
            page.goto(url, timeout=budget, wait_until="load")
        except PlaywrightTimeout:
            raise self._timeout_cut(f"page {url} to load", step, by_case, int(budget), None) from None
        except PlaywrightError as exc:
            first = first_line(exc)
            raise StepCut("connection_error", f"page {url}", {"error": first},
                       f"step {step.index} (browser): could not open {url}: {first}") from None

    def act(
        self, page: Any, base: str, action: Action, i: int, step: Step, deadline: float, wait_ms: int
    ) -> None:
        """Run action `i` of the step; a timeout or Playwright error ends the step (StepCut)."""
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        if action.verb == "goto":
            self.goto(page, base, action.value, step, deadline, wait_ms)
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
                raise StepCut(
                    "assertion_failed", what, None, f"step {step.index}: unknown action {action.verb}"
                )
        except PlaywrightTimeout:
            raise self._timeout_cut(what, step, by_case, wait_ms, self._matches(page, action)) from None
        except PlaywrightError as exc:
            first = first_line(exc)
            raise StepCut("assertion_failed", what, {"error": first},
                       f"step {step.index} (browser): {what} failed: {first}") from None

    def _matches(self, page: Any, action: Action) -> Any:
        if not action.selector:
            return None
        with contextlib.suppress(Exception):
            return {"count": page.locator(action.selector).count()}
        return None

    def expect(
        self, page: Any, check: PageExpect, step: Step, deadline: float, wait_ms: int
    ) -> dict[str, Any]:
        """Poll until `check` holds (what held: count and texts), else end the step (StepCut)."""
        from playwright.sync_api import Error as PlaywrightError

        budget, by_case = self._budget(deadline, wait_ms)
        end = self.clock() + budget / 1000
        texts: list[str] = []
        error: str | None = None
        while True:
            if self.closing.is_set():
                raise StepCut("connection_error", check.to_json(), {"error": "the browser was closed"},
                           f"step {step.index} (browser): the run was stopped while waiting")
            try:
                texts = [str(t) for t in page.locator(check.selector).all_inner_texts()]
                error = None
            except PlaywrightError as exc:  # an invalid selector, or a page in the middle of a load
                error = first_line(exc)
                texts = []
                # A closed page, or a crashed one ("Target crashed"; its renderer died): every
                # later call fails the same way, so polling on to wait_ms would only wait.
                if page.is_closed() or "has been closed" in error or "crashed" in error.lower():
                    raise StepCut("connection_error", check.to_json(), {"error": error},
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
            raise StepCut("timeout", expected, got,
                       f"step {step.index} (browser): case timed out waiting for {shown}")
        detail = f"{len(texts)} element(s) match {check.selector!r}"
        if check.text is not None:
            detail += f", {got['count_with_text']} containing {check.text!r}"
        raise StepCut("assertion_failed", expected, got,
                   f"step {step.index} (browser): expected {shown} within {budget / 1000:g} s; {detail}")

