"""The unit registry: status in greenloop's state, `greenloop units`, and the opt-in write-back
into units.json that keeps every other field and the file's formatting."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop.devloop import jsonedit, units

UNITS_JSON = """{
  "units": [
    {
      "id": "auth",
      "kind": "be",
      "start": ["python3", "code/server.py"],
      "depends_on": []
    },
    {"id": "todo-api", "kind": "be", "depends_on": ["auth"], "status": "failed"},
    {
        "id": "web",   "kind": "fe"
    }
  ]
}
"""


def test_set_members_replaces_in_place_and_adds_in_the_objects_own_layout() -> None:
    doc = jsonedit.scan(UNITS_JSON)
    items = next(n for k, _, n in doc.members if k == "units").items
    text = UNITS_JSON
    for item, value in reversed(list(zip(items, ("passed", "testing", "failed"), strict=True))):
        text = jsonedit.set_members(text, item, {"status": value, "status_run": "run-1"})
    assert json.loads(text)["units"][1] == {"id": "todo-api", "kind": "be", "depends_on": ["auth"],
                                            "status": "testing", "status_run": "run-1"}
    # every line of the original is still there, unchanged, except the replaced value
    original = UNITS_JSON.splitlines()
    changed = ('"status": "failed"', "[]", '"fe"')
    kept = [ln for ln in original if not any(c in ln for c in changed)]
    assert all(ln in text.splitlines() for ln in kept)
    assert '      "depends_on": [],\n      "status": "passed",\n      "status_run": "run-1"\n    }' in text
    assert '"depends_on": ["auth"], "status": "testing", "status_run": "run-1"}' in text
    # members laid out several to a line get the new ones on that line
    assert '"id": "web",   "kind": "fe", "status": "failed", "status_run": "run-1"\n    }' in text
    assert jsonedit.set_members("{}", jsonedit.scan("{}"), {"a": 1}) == '{"a": 1}'
    with pytest.raises(ValueError):
        jsonedit.scan('{"a": ')


def test_status_is_kept_in_state_and_written_back_only_on_opt_in(tmp_path: Path) -> None:
    (tmp_path / "units.json").write_text(UNITS_JSON)
    assert units.set_status(tmp_path, "auth", "testing", "run-1") is None
    assert units.read_status(tmp_path)["auth"]["status"] == "testing"
    assert (tmp_path / "units.json").read_text() == UNITS_JSON  # not opted in: untouched
    assert units.set_status(tmp_path, "auth", "passed", "run-1", write_back=True) is None
    data = json.loads((tmp_path / "units.json").read_text())
    assert data["units"][0]["status"] == "passed" and data["units"][0]["status_run"] == "run-1"
    note = units.set_status(tmp_path, "nope", "failed", "run-2", write_back=True)
    assert note is not None and "no unit 'nope'" in note
    rows = {r["id"]: r for r in units.registry(tmp_path)}
    assert rows["auth"]["status"] == "passed" and rows["web"]["status"] is None


def _mark(project: str, unit: str) -> None:
    for i in range(30):
        units.set_status(project, unit, "passed" if i % 2 else "testing", f"run-{unit}-{i}", write_back=True)


def test_concurrent_units_never_lose_each_others_status(tmp_path: Path) -> None:
    names = [f"u{i}" for i in range(6)]
    (tmp_path / "units.json").write_text(json.dumps({"units": [{"id": n} for n in names]}, indent=2))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_mark, args=(str(tmp_path), n)) for n in names]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    state = units.read_status(tmp_path)
    written = {u["id"]: u for u in json.loads((tmp_path / "units.json").read_text())["units"]}
    for n in names:
        assert state[n]["run_id"] == f"run-{n}-29" and written[n]["status_run"] == f"run-{n}-29"


@pytest.mark.e2e
def test_a_unit_run_moves_testing_to_passed_or_failed(tmp_path: Path) -> None:
    from greenloop import api

    root = tmp_path / "proj"
    unit = root / "units" / "calc"
    (unit / "tests").mkdir(parents=True)
    (root / "units.json").write_text('{\n  "units": [\n    {"id": "calc", "kind": "be"}\n  ]\n}\n')
    (root / ".git").mkdir()  # the project config is found up to the git root
    (root / "greenloop.toml").write_text("write_unit_status = true\n")
    (unit / "pytest.ini").write_text("[pytest]\n")
    test_file = unit / "tests" / "test_calc.py"
    test_file.write_text("import json, pathlib\n\n"
                         "def test_status_while_running():\n"
                         "    state = pathlib.Path(__file__).parents[3] / '.greenloop' / 'unit-status.json'\n"
                         "    data = json.loads(state.read_text())\n"
                         "    assert data['calc']['status'] == 'testing'\n"
                         "    assert 2 - 3 == 5\n")
    red = api.test_run(unit, timeout_ms=60_000, sandbox="full-access")
    assert red.outcome == "red" and "(2 - 3) == 5" in red.failures[0].message  # it saw `testing`
    assert units.read_status(root)["calc"] == {**units.read_status(root)["calc"], "status": "failed",
                                              "run_id": red.run_id}
    test_file.write_text("def test_adds():\n    assert 2 + 3 == 5\n")
    green = api.test_run(unit, timeout_ms=60_000, sandbox="full-access")
    text = (root / "units.json").read_text()
    assert text == ('{\n  "units": [\n    {"id": "calc", "kind": "be", "status": "passed", '
                    f'"status_run": "{green.run_id}"}}\n  ]\n}}\n')
    out = subprocess.run([sys.executable, "-m", "greenloop", "units", str(unit), "--json"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["units"][0]["status"] == "passed"
    table = subprocess.run([sys.executable, "-m", "greenloop", "units", str(root)],
                           capture_output=True, text=True, check=True).stdout
    assert "calc" in table and "passed" in table and green.run_id in table
    # the integration spec loader accepts the status fields greenloop wrote
    from greenloop.integration.spec import units as spec_units

    assert "status" in spec_units._UNIT_KEYS and "status_run" in spec_units._UNIT_KEYS
