"""The gate judges the session's evidence (issue 31), on a real pytest suite, everything as real
processes: `greenloop run` runs the suite, `greenloop hook claude-code` answers the harness's
events, `greenloop check --json` reports. Each escape route is held; the honest path is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from test_scenario_closure import check, greenloop, prompt, stop

pytestmark = pytest.mark.e2e

SESSION = "sess-evidence"
CART = """\
from cart import total


def test_discount_code_takes_ten_percent_off():
    assert total(100, "TEN") == 90


def test_quantity_must_be_positive():
    assert total(5, None) == 5


def test_no_code_no_discount():
    assert total(100, None) == 100
"""
BROKEN = "def total(amount, code):\n    return amount\n"
FIXED = "def total(amount, code):\n    return amount * 0.9 if code == 'TEN' else amount\n"
OWED = "test_cart.py::test_discount_code_takes_ten_percent_off"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-p no:cacheprovider'\n")
    (tmp_path / "test_cart.py").write_text(CART)
    (tmp_path / "cart.py").write_text(BROKEN)
    return tmp_path


def run(ws: Path, *args: str) -> dict[str, Any]:
    p = greenloop(ws, "run", "--json", "--session", SESSION, *args)
    assert p.returncode in (0, 1), p.stderr
    result: dict[str, Any] = json.loads(p.stdout)
    return result


def red_first(ws: Path) -> str:
    prompt(ws, SESSION)
    red = run(ws)
    assert red["outcome"] == "red"
    return str(red["run_id"])


def test_narrowing_to_a_passing_test_is_still_held(ws: Path) -> None:
    red_id = red_first(ws)
    green = run(ws, "--target", "test_cart.py::test_quantity_must_be_positive")
    assert green["outcome"] == "green"
    held = stop(ws, SESSION)
    assert held is not None and held["decision"] == "block"
    assert OWED in held["reason"] and f"failed in {red_id}" in held["reason"]
    assert f"greenloop run --target {OWED}" in held["reason"]  # the command that reruns exactly it
    code, verdict = check(ws, SESSION)
    assert code == 1 and verdict["satisfied"] is False and verdict["holding"] == "owed"
    assert [(o["test"], o["run_id"], o["reason"]) for o in verdict["owed"]] == [(OWED, red_id, "failed")]
    # Rerunning exactly the owed test, fixed, clears it.
    (ws / "cart.py").write_text(FIXED)
    assert run(ws, "--target", OWED)["outcome"] == "green"
    assert stop(ws, SESSION) is None
    assert check(ws, SESSION)[1]["satisfied"] is True


def test_a_skip_mark_is_still_held_and_named(ws: Path) -> None:
    red_first(ws)
    (ws / "test_cart.py").write_text(
        "import pytest\n" + CART.replace("def test_discount", "@pytest.mark.skip\ndef test_discount")
    )
    green = run(ws)
    assert green["outcome"] == "green" and green["summary"]["skipped"] == 1
    held = stop(ws, SESSION)
    assert held is not None and held["decision"] == "block" and OWED in held["reason"]
    _, verdict = check(ws, SESSION)
    assert verdict["satisfied"] is False
    (owed,) = verdict["owed"]
    assert owed["test"] == OWED and owed["reason"] == "skipped" and "skipped in this session" in owed["why"]
    # The working tree's marks (greenloop.closure.marks) give the place.
    assert owed["file"] == "test_cart.py" and owed["line"] == 5 and "pytest.mark.skip" in owed["detail"]
    assert "test_cart.py:5" in held["reason"]


def test_an_edit_after_green_is_held_once_then_released_unresolved(ws: Path) -> None:
    prompt(ws, SESSION)
    (ws / "cart.py").write_text(FIXED)
    assert run(ws)["outcome"] == "green"
    assert stop(ws, SESSION) is None  # green and nothing changed since
    prompt(ws, SESSION)
    (ws / "cart.py").write_text(FIXED + "\n# an edit after the green run\n")
    held = stop(ws, SESSION)
    assert held is not None and "files changed since the last run" in held["reason"]
    released = stop(ws, SESSION)
    assert released is not None and "unresolved (stale)" in released["systemMessage"]
    code, verdict = check(ws, SESSION)
    assert code == 1 and verdict["holding"] == "stale" and verdict["unresolved_reason"] == "stale"
    assert run(ws)["outcome"] == "green"  # the tests again: verified, and the record cleared
    _, verdict = check(ws, SESSION)
    assert verdict["satisfied"] is True and verdict["unresolved"] is False


def test_edits_with_no_run_are_held_once(ws: Path) -> None:
    prompt(ws, SESSION)  # the session's first event: the tree as it was
    (ws / "cart.py").write_text(FIXED)
    held = stop(ws, SESSION)
    assert held is not None and "recorded no test run" in held["reason"]
    released = stop(ws, SESSION)
    assert released is not None and "unresolved (not run)" in released["systemMessage"]
    _, verdict = check(ws, SESSION)
    assert verdict["satisfied"] is False and verdict["holding"] == "not_run"


def test_the_honest_path_is_allowed_with_no_extra_round(ws: Path) -> None:
    red_first(ws)
    (ws / "cart.py").write_text(FIXED)
    assert run(ws)["outcome"] == "green"
    assert stop(ws, SESSION) is None
    code, verdict = check(ws, SESSION)
    assert code == 0 and verdict["satisfied"] is True and verdict["owed"] == []


def test_a_session_that_changes_nothing_and_runs_nothing_is_allowed(ws: Path) -> None:
    prompt(ws, SESSION)
    assert stop(ws, SESSION) is None
    assert check(ws, SESSION)[1]["satisfied"] is True


def test_deleting_the_failing_test_is_still_held_naming_where_it_was(ws: Path) -> None:
    red_first(ws)
    kept = CART.split("def test_discount_code_takes_ten_percent_off")[0] + (
        "def test_quantity_must_be_positive" + CART.split("def test_quantity_must_be_positive")[1]
    )
    (ws / "test_cart.py").write_text(kept)
    assert run(ws)["outcome"] == "green"
    held = stop(ws, SESSION)
    assert held is not None and OWED in held["reason"] and "no longer in the suite" in held["reason"]
    (owed,) = check(ws, SESSION)[1]["owed"]
    assert owed["reason"] == "removed" and owed["file"] == "test_cart.py" and owed["line"] == 4


def test_a_dot_only_in_a_js_test_file_is_held_even_when_nothing_failed(ws: Path) -> None:
    prompt(ws, SESSION)
    (ws / "cart.py").write_text(FIXED)
    (ws / "web").mkdir()
    (ws / "web" / "cart.test.js").write_text("describe('cart', () => {\n  it.only('adds', () => {});\n});\n")
    assert run(ws)["outcome"] == "green"
    held = stop(ws, SESSION)
    assert held is not None and ".only web/cart.test.js:2" in held["reason"]
    (ws / "web" / "cart.test.js").write_text("describe('cart', () => {\n  it('adds', () => {});\n});\n")
    assert run(ws)["outcome"] == "green"
    assert stop(ws, SESSION) is None
