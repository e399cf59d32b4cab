"""An interrupt stops `greenloop integrate` and exits 130 however busy the machine is.

Each test runs beside a CPU load generator (two spinning processes per core, for the whole
test) and starts greenloop the way a shell script's background job starts: with SIGINT
inherited as ignored. Both once made the interrupt tests fail on a busy 2-core machine: a
Ctrl-C that the process never saw left units behind, or let a case run into its own timeout
(exit 1). The waits here allow for the load; what they check is that the signal is honoured,
that every unit (and Chromium) is gone, and that the exit code is 130.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from greenloop.integration.chromium import find_chromium

from .itkit import MARK, scan, step, unit, wait_for, write_project

SPIN = "while True:\n    pass\n"


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """Two spinning processes per core until the test ends (killed by pid, then reaped)."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL, start_new_session=True)
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        yield
    finally:
        for p in spinners:
            with contextlib.suppress(OSError):
                p.kill()
        for p in spinners:
            p.wait()


def _sigint_ignored() -> None:
    """In the child before exec: SIGINT ignored, as `cmd &` in a non-interactive shell leaves it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start_integrate(project: Path, mark: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "greenloop", "integrate", str(project), "--json", "--sandbox", "full-access"],
        env={**os.environ, MARK: mark},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_sigint_ignored,
    )


@contextlib.contextmanager
def killed_at_the_end(child: subprocess.Popen[bytes]) -> Iterator[None]:
    try:
        yield
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.communicate()


def log_has(runs: Path, text: str) -> bool:
    logs = list(runs.glob("*/process.log")) if runs.is_dir() else []
    return bool(logs) and text in logs[0].read_text()


def interrupted_result(runs: Path) -> dict[str, object]:
    [result_file] = runs.glob("*/result.json")
    result: dict[str, object] = json.loads(result_file.read_text())
    assert result["interrupted"] is True and result["ok"] is False
    assert result["surviving_processes"] == []
    return result


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_mid_case_on_a_busy_machine(
    tmp_path: Path, mark: str, sig: int, busy_machine: None
) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("base"), unit("slow", depends_on=["base"]), unit("daemon", "daemon")],
        [{"id": "long", "steps": [step("slow", "GET /api/slow?s=120")]}],
    )
    runs = project / "integration" / "runs"
    child = start_integrate(project, mark)
    with killed_at_the_end(child):
        assert wait_for(lambda: log_has(runs, "running cases"), 60), "the run did not reach its cases"
        child.send_signal(sig)
        code = child.wait(timeout=60)  # the case alone would wait 30 s: well before that, on a quiet machine
    assert code == 130
    interrupted_result(runs)
    # no_survivors (conftest) scans /proc for this test's marker and folder afterwards.


def test_an_interrupt_while_a_unit_never_gets_healthy_on_a_busy_machine(
    tmp_path: Path, mark: str, busy_machine: None
) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("sick", "never-healthy"), unit("web", depends_on=["sick"])],
        [{"id": "c", "steps": [step("web", "GET /api/items")]}],
    )
    runs = project / "integration" / "runs"
    child = start_integrate(project, mark)
    with killed_at_the_end(child):
        assert wait_for(lambda: log_has(runs, "health sick GET"), 60), "the sick unit was not polled"
        child.send_signal(signal.SIGINT)
        code = child.wait(timeout=60)
    assert code == 130
    result = interrupted_result(runs)
    assert [c["status"] for c in result["cases"]] == ["not_run"]  # type: ignore[attr-defined]


@pytest.mark.skipif(find_chromium(os.environ) is None, reason="Debian's chromium is not installed")
def test_an_interrupt_during_a_browser_step_on_a_busy_machine(
    tmp_path: Path, mark: str, busy_machine: None
) -> None:
    pytest.importorskip("playwright.sync_api", reason="Playwright is a dev extra: pip install -e '.[dev]'")
    from .test_browser import static_project

    never = {"unit": "web", "page": "/", "expect": {"selector": "#never"}, "wait_ms": 90000}
    root = static_project(tmp_path / "p", never)
    runs = root / "integration" / "runs"
    child = start_integrate(root, mark)
    with killed_at_the_end(child):
        assert wait_for(lambda: log_has(runs, '"GET / HTTP/1.1" 200'), 60), "the page did not open"
        assert scan(mark, str(tmp_path)), "Chromium should be running now"
        child.send_signal(signal.SIGINT)
        code = child.wait(timeout=60)
    log = next(runs.glob("*/process.log")).read_text()
    assert code == 130, f"exit {code}; process.log ends:\n{log[-3000:]}"
    interrupted_result(runs)
