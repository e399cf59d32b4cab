"""Work that overlaps the suite: importing what the after-steps need while the runner runs."""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Callable

__all__ = ["REPORT_MODULES", "Preload", "parser_modules"]

REPORT_MODULES: dict[str, tuple[str, ...]] = {
    "pytest-json": ("greenloop.frameworks.pytest_report",),
    "vitest-json": ("greenloop.frameworks.vitest_report",),
    "jest-json": ("greenloop.frameworks.jest",),
    "junit": ("greenloop.frameworks.junit",),
    "node-tap": ("greenloop.frameworks.node_test",),
    "go-json": ("greenloop.frameworks.go_report",),
    "nextest-junit": ("greenloop.frameworks.cargo",),
    "mocha-json": ("greenloop.frameworks.mocha",),
    "unittest-json": ("greenloop.frameworks.unittest",),
    "bun-junit": ("greenloop.frameworks.bun",),
}


def parser_modules(report_format: str | None, framework: str | None) -> tuple[str, ...]:
    """The modules that will parse a run's output: its report's reader, or, for a runner read
    from its text output (cargo without nextest, a verbatim command), the runner's module.
    Imported while the suite runs, they are not paid for after it has ended."""
    if report_format:
        return REPORT_MODULES.get(report_format, ())
    if framework:
        return (f"greenloop.frameworks.{framework.replace(':', '_').replace('-', '_')}",)
    return ()


class Preload:
    """Imports what the after-steps need (report parser, bug log, store, hints, hashlib, tempfile) in a
    thread once the suite has started, so they are ready when it ends, then does `then`
    (pruning old runs)."""

    def __init__(self, modules: tuple[str, ...], then: Callable[[], object]) -> None:
        self._modules = (
            *modules,
            "greenloop.bugs.bridge",
            "greenloop.closure.store",
            "greenloop.closure.session",
            "greenloop.hints.hint",
            "hashlib",  # the fingerprint's digest (~5 ms: OpenSSL), which fingerprint imports late
            "tempfile",  # the fingerprint's output folder and the result's atomic write
        )
        self._then = then
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def started(self) -> bool:
        """Has the thread been started (the runner started)?"""
        return self._thread.ident is not None

    def start(self) -> None:
        """Begin (run.execute calls it once the runner has started)."""
        if not self.started:
            self._thread.start()

    def _run(self) -> None:
        for name in self._modules:
            with contextlib.suppress(Exception):  # a failed import shows where it is needed
                importlib.import_module(name)
        with contextlib.suppress(Exception):
            self._then()

    def join(self) -> None:
        """Wait for the imports and `then` to finish (nothing to wait for when never started)."""
        if self.started:
            self._thread.join()
