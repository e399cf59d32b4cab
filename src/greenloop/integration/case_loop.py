"""The cases of one integration run, in spec order, against units that are all up.

Each case's outcome is saved as it ends (`attempts.save_case`), so an interrupted run can be
resumed without running it again. The loop stops early when the run is cancelled, when the
run's time is up, or when the browser cannot start; it says why in the run's notes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greenloop.integration import attempts
from greenloop.integration.browser import BrowserSession
from greenloop.integration.cases import CaseOutcome, StepExecutor, run_case
from greenloop.integration.http_call import Transport
from greenloop.integration.process_log import ProcessLog
from greenloop.integration.processes import Supervisor
from greenloop.integration.spec.records import Case
from greenloop.integration.trace import TraceWriter

__all__ = ["CaseLoop", "CaseThread"]


class CaseThread:
    """One case run in its own thread, so that a cancel can end the run mid-case: the caller
    stops waiting, tears the units (and the browser) down, which ends the case's in-flight
    request, then joins the thread."""

    def __init__(self, fn: Callable[[], CaseOutcome]) -> None:
        self._fn = fn
        self._outcome: CaseOutcome | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._work, name="greenloop-case", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._outcome = self._fn()
        except BaseException as exc:  # handed to the caller
            self._error = exc
        finally:
            self._done.set()

    def wait(self, cancel: threading.Event) -> CaseOutcome | None:
        """The case's outcome, or None when `cancel` is set first (checked every 50 ms)."""
        while not self._done.wait(0.05):
            if cancel.is_set():
                return None
        if self._error is not None:
            raise self._error
        return self._outcome

    def join(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the thread to end; whether it did."""
        self._thread.join(timeout_s)
        return not self._thread.is_alive()


@dataclass
class CaseLoop:
    """Runs the cases not yet finished; what stopped it is left in its fields.

    `outcomes` and `attempt_of` (case id -> outcome, attempt that ran it) already hold the
    cases finished by earlier attempts of the run and gain each case as it ends; `notes` gains
    the reason the loop stopped early.
    """

    cases: tuple[Case, ...]
    urls: Mapping[str, str]
    sup: Supervisor
    log: ProcessLog
    trace: TraceWriter
    folder: Path  # the run folder, where each finished case is saved
    attempt: int
    deadline: float
    case_timeout_s: float
    run_timeout_s: float
    transport: Transport
    clock: Callable[[], float]
    wall: Callable[[], float]
    say: Callable[[str], None]
    notes: list[str]
    outcomes: dict[str, CaseOutcome]
    attempt_of: dict[str, int]
    browser: BrowserSession | None = None
    cancel: threading.Event | None = None
    crashed: bool = False
    category: str | None = None
    aborted: bool = False
    aborted_case: tuple[str, int] | None = None  # (case id, ms it ran) when cancelled mid-case
    straggler: CaseThread | None = None  # a cancelled case's thread, joined after the teardown
    executors: dict[str, StepExecutor] = field(default_factory=dict)

    def run(self) -> None:
        """Run every case not yet finished, in spec order, until one of the stops."""
        browser, cancel, clock = self.browser, self.cancel, self.clock
        if browser is not None:
            self.executors["browser"] = browser.step
        for index, case in enumerate(self.cases):
            if case.id in self.outcomes:  # finished in an earlier attempt of this run
                continue
            if cancel is not None and cancel.is_set():
                self.aborted = True
                self.notes.append(f"cancelled before case {case.id}; every unit was stopped")
                break
            remaining = self.deadline - clock()
            if remaining <= 0:
                self.crashed, self.category = True, "infra_flake"
                self.notes.append(f"the run exceeded {self.run_timeout_s:g} s; later cases were not run")
                break
            self.say(f"case {case.id}")

            def one(case: Any = case, remaining: float = remaining) -> CaseOutcome:
                return run_case(
                    case,
                    urls=self.urls,
                    timeout_s=min(self.case_timeout_s, remaining),
                    trace=self.trace,
                    crashed=self.sup.crashed,
                    transport=self.transport,
                    clock=clock,
                    wall=self.wall,
                    executors=self.executors,
                )

            if cancel is None:
                o = one()
            else:
                case_start = clock()
                self.straggler = CaseThread(one)
                got = self.straggler.wait(cancel)
                if got is None:
                    self.aborted = True
                    self.aborted_case = (case.id, int((clock() - case_start) * 1000))
                    self.notes.append(f"cancelled during case {case.id}; every unit was stopped")
                    self.log.note(f"case {case.id}: cancelled")
                    break
                o, self.straggler = got, None
            if browser is not None:
                browser.end_case()
                if browser.launch_error is not None:
                    self.crashed, self.category = True, "infra_flake"
                    self.notes.append(
                        f"the browser could not start ({browser.launch_error}); later cases were not run"
                    )
                    self.log.note(f"browser could not start: {browser.launch_error}")
            self.sup.pump()
            self.outcomes[case.id] = o
            self.attempt_of[case.id] = self.attempt
            # kept as it ends, so an interrupted run can be resumed without running it again
            attempts.save_case(self.folder, index, o, self.attempt)
            self.log.note(f"case {case.id}: {o.status}" + (f" ({o.message})" if o.message else ""))
            if browser is not None and browser.launch_error is not None:
                break
            if o.status == "timeout" and clock() >= self.deadline:
                self.crashed, self.category = True, "infra_flake"
                self.notes.append(f"the run exceeded {self.run_timeout_s:g} s during case {case.id}")
                break
