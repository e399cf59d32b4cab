"""mode retry on real pytest runs: the previous failures first, then the whole suite only when
they pass, one result saying what was fixed, what remains and what is new."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop import api
from greenloop.errors import UsageError

from .helpers import py_workspace

pytestmark = pytest.mark.e2e

SUITE = (
    "import shop\n\n"
    "def test_a():\n    assert shop.a() == 1\n\n"
    "def test_b():\n    assert shop.b() == 2\n\n"
    "def test_c():\n    assert shop.c() == 3\n"
)


def shop(a: int, b: int, c: int) -> str:
    return f"def a():\n    return {a}\n\ndef b():\n    return {b}\n\ndef c():\n    return {c}\n"


def test_retry_runs_the_failures_first_then_the_suite(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"test_shop.py": SUITE, "shop.py": shop(0, 0, 3)})
    with pytest.raises(UsageError, match="previous run"):
        api.test_run(ws, mode="retry", session_id="s", sandbox="full-access")
    first = api.test_run(ws, session_id="s", sandbox="full-access")
    assert sorted(f.test for f in first.failures) == ["test_shop.py::test_a", "test_shop.py::test_b"]

    (ws / "shop.py").write_text(shop(1, 0, 3))  # a fixed, b still wrong
    one = api.test_run(ws, mode="retry", session_id="s", sandbox="full-access")
    assert one.outcome == "red" and one.selection == "last_failed" and one.summary.total == 2
    assert one.retry is not None
    r = one.retry
    assert (r.previous_run, r.fixed, r.remain, r.new, r.full_suite) == (
        first.run_id, ("test_shop.py::test_a",), ("test_shop.py::test_b",), (), False)
    assert any("did not run" in n for n in one.notes)
    stored = json.loads(Path(one.result_ref or "").read_text())
    assert stored["retry"]["remain"] == ["test_shop.py::test_b"]  # the stored result says it too

    (ws / "shop.py").write_text(shop(1, 2, 0))  # b fixed, c broken
    two = api.test_run(ws, mode="retry", session_id="s", sandbox="full-access")
    assert two.retry is not None and two.retry.full_suite and two.selection is None
    assert two.summary.total == 3 and [f.test for f in two.failures] == ["test_shop.py::test_c"]
    assert (two.retry.previous_run, two.retry.fixed, two.retry.remain, two.retry.new) == (
        one.run_id, ("test_shop.py::test_b",), (), ("test_shop.py::test_c",))
    assert two.retry.first_pass_run not in (None, two.run_id)
    with pytest.raises(UsageError, match="drop target"):
        api.test_run(ws, mode="retry", target="test_shop.py")
    with pytest.raises(UsageError, match="mode must be one of"):
        api.test_run(ws, mode="again")
    # the CLI takes --mode, and refuses a bad one with exit 2
    out = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws), "--mode", "retry", "--json",
                          "--session", "s", "--sandbox", "full-access"], capture_output=True, text=True)
    assert out.returncode == 1 and json.loads(out.stdout)["retry"]["remain"] == ["test_shop.py::test_c"]
    bad = subprocess.run([sys.executable, "-m", "greenloop", "run", str(ws), "--mode", "again"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "mode must be one of" in bad.stderr
