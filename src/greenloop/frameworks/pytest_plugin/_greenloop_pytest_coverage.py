"""greenloop's per-test coverage recorder, for `--affected` (greenloop.runner.affected_cov).

Loaded by a whole-suite `greenloop run` with `-p _greenloop_pytest_coverage` when the
workspace's Python has coverage.py (and the config's `coverage_map` is on). Like the report
plugin beside it, it imports nothing from greenloop and keeps to Python 3.8+ syntax.

    GREENLOOP_COVMAP=<path>   the coverage data file to write; each process that runs tests
                              (every pytest-xdist worker) writes its own, `<path>.<suffix>`

Coverage starts before the first conftest.py is imported. Every line run while a test
runs (its setup, call and teardown) is recorded under that test's file (the node id up to
`::`), as a coverage.py dynamic context: the map is kept per test file, and a context per
test would cost a switch per test, each one a write of what coverage gathered. What runs
outside any test, the imports and collection (a parametrize list built by calling the
code), is recorded under the empty context; what a session- or
package-scoped fixture runs, which other files' tests then share, under `greenloop:shared`:
greenloop treats both as reaching every test.

Only the workspace (pytest's working folder) is measured (coverage's `source`), without
branch data, and the data file is written once, when pytest ends. A coverage that cannot
start (another tracer, a bad config) leaves the run as it would be without this plugin.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pytest

_VAR = "GREENLOOP_COVMAP"
SHARED = "greenloop:shared"


class _Recorder:
    def __init__(self, cov: Any) -> None:
        self.cov = cov
        self.context = ""

    def _switch(self, context: str) -> None:
        self.context = context
        self.cov.switch_context(context)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Any:
        here = _test_file(item)
        if self.context != here:
            self._switch(here)
        try:
            yield
        finally:
            # the context changes only where the test file does: each switch makes coverage
            # write what it gathered (26,921 switches per node id cost 22 s on a 16 s suite)
            if nextitem is None or _test_file(nextitem) != here:
                self._switch("")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Any:
        if getattr(fixturedef, "scope", "function") not in ("session", "package"):
            yield
            return
        before = self.context
        self._switch(SHARED)
        try:
            yield
        finally:
            self._switch(before)

    def pytest_unconfigure(self, config: Any) -> None:
        with contextlib.suppress(Exception):
            self.cov.stop()
            self.cov.save()


def _test_file(item: Any) -> str:
    """The test file of an item, as its node id names it (`tests/test_x.py::test_y`)."""
    return str(item.nodeid).split("::", 1)[0]


_started: list[Any] = []  # the Coverage this process started, once


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Any) -> None:
    """Start before the first conftest.py is imported (what it runs is then seen)."""
    path = os.environ.get(_VAR)
    if not path or _started:
        return
    try:
        import coverage  # type: ignore[import-not-found,unused-ignore]

        cov = coverage.Coverage(data_file=path, data_suffix=True, branch=False, config_file=False,
                                source=[os.getcwd()], omit=["*/site-packages/*", "*/.venv/*"])
        cov.start()
    except Exception:
        return
    _started.append(cov)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: Any) -> None:
    if not _started or config.pluginmanager.has_plugin("_greenloop_pytest_coverage_recorder"):
        return
    cov = _started[0]
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        with contextlib.suppress(Exception):  # pytest-xdist's controller runs no test: its workers
            cov.stop()  # record (and it saves nothing: erase() would remove their files too)
        return
    config.pluginmanager.register(_Recorder(cov), "_greenloop_pytest_coverage_recorder")
