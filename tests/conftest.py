"""Suite-wide rule: on a machine that `scripts/test` prepared, a skipped test is a failure.

Every skip in this suite means "a tool is missing" (a runner not installed, no chromium, the
example's Node unit not installed). scripts/test installs all of them or stops naming what is
missing, and sets GREENLOOP_TEST_NO_SKIP=1, so a skip there means an install step is missing and
CI would be green while not testing something. Run pytest by hand without the variable to get
plain skips.

Tests marked `nobwrap` prove the fallback when bubblewrap is absent; on a machine that has it
they may skip by design (CI runs them again with bubblewrap hidden), so they are exempt while
bwrap is on PATH and executable.

Speed: every test under tests/e2e/ and tests/integration/ (real runners, real services) is
marked `slow`, as is each unit test marked by hand, so `pytest -m "not slow"` is the inner
loop; the README's test command runs everything.

State backends: a test that uses the `state_backend` fixture (test_store, test_gate,
test_jobs name it in `pytestmark`) runs once with the embedded SQLite database and once with
PostgreSQL, on a real server this session starts (tests/pg_server.py) with a fresh schema per
test; a test marked `sqlite_only` checks the file itself and runs once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pg_server import PgServer

NO_SKIP_VAR = "GREENLOOP_TEST_NO_SKIP"


_SLOW_FOLDERS = ("e2e", "integration")
# unit-test files whose every test starts real servers or runners (an MCP server, a suite)
_SLOW_FILES = ("test_mcp.py", "test_mcp_scale.py", "test_progress.py", "test_scenario_closure.py")
# vitest keeps a results cache in node_modules/.vite and runs files that were slow or failing
# first; every JS test workspace links tests/runners/node_modules, so one test's history would
# reorder another's files. Each test starts as on a fresh install.
_VITEST_CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runners", "node_modules", ".vite",
                             "vitest")


@pytest.fixture(autouse=True)
def _fresh_vitest_results_cache() -> None:
    shutil.rmtree(_VITEST_CACHE, ignore_errors=True)


@pytest.fixture(autouse=True)
def _not_under_an_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite run from an agent's shell (Claude Code, Codex, …) would get the agent format
    wherever a test reads greenloop's human text: every test starts as in a person's shell, and
    the tests of the agent format set the variables they mean."""
    from greenloop.cli import AGENT_ENV

    for _harness, name in AGENT_ENV:
        monkeypatch.delenv(name, raising=False)


# What pytest-xdist puts in each worker's environment (scripts/test runs the suite with -n auto);
# a test's own runs of pytest inherit nothing of it, as in a person's shell.
_XDIST_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _not_an_xdist_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _XDIST_ENV:
        monkeypatch.delenv(name, raising=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the end-to-end and integration layers, and the unit-test files that start real servers,
    slow (see the module docstring)."""
    tests_dir = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        relative = os.path.relpath(str(item.path), tests_dir)
        if relative.split(os.sep, 1)[0] in _SLOW_FOLDERS or relative in _SLOW_FILES:
            item.add_marker(pytest.mark.slow)


def _bwrap_present() -> bool:
    path = shutil.which("bwrap")
    return path is not None and os.access(path, os.X_OK)


def _fail_the_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (
        f"skipped on a machine that must have every tool ({NO_SKIP_VAR}=1): {reason}\n"
        "scripts/test installs what the suite needs; add the missing install step there"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if os.environ.get(NO_SKIP_VAR) != "1" or not report.skipped or hasattr(report, "wasxfail"):
        return report
    if item.get_closest_marker("nobwrap") is not None and _bwrap_present():
        return report
    _fail_the_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A whole module skipped at import (`pytest.skip(..., allow_module_level=True)`) counts too."""
    report = yield
    if os.environ.get(NO_SKIP_VAR) == "1" and report.skipped:
        _fail_the_skip(report)
    return report


# --------------------------------------------------------------------------- state backends


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A PostgreSQL server for the whole session (tests/pg_server.py), stopped at its end."""
    import pg_server as pg

    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed: pip install -e '.[dev]' (or '.[postgres]')")
    if pg.find_bin_dir() is None:
        pytest.skip("PostgreSQL is not installed: scripts/system-packages installs it (Debian: postgresql)")
    server = pg.start()
    try:
        yield server
    finally:
        server.stop()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "state_backend" not in metafunc.fixturenames:
        return
    sqlite_only = metafunc.definition.get_closest_marker("sqlite_only") is not None
    kinds = ["sqlite"] if sqlite_only else ["sqlite", "postgres"]
    metafunc.parametrize("state_backend", kinds, indirect=True)


@pytest.fixture
def state_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Which backend holds this test's state: "sqlite" (the default) or "postgres" (through
    $GREENLOOP_STATE_URL, which the processes the test starts inherit)."""
    from greenloop.state.url import STATE_URL_ENV

    kind: str = request.param
    if kind == "postgres":
        server: PgServer = request.getfixturevalue("pg_server")
        monkeypatch.setenv(STATE_URL_ENV, server.fresh_schema())
    else:
        monkeypatch.delenv(STATE_URL_ENV, raising=False)
    return kind
