"""`greenloop audit`: real DevLoop units (tests/fixtures/audit/), a complete one per language that
passes every check, and one variant per failing check built by copying it and changing one thing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop.audit.report import CHECK_NAMES, AuditReport, audit_unit
from greenloop.audit.sources import find_tests
from greenloop.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures" / "audit"
JS, PY = "todo-be", "todo-py"
JS_SPEC = "tests/todo-be.spec.js"
PY_TESTS = "tests/test_todos.py"


def make_unit(tmp_path: Path, name: str) -> Path:
    """A copy of a fixture unit inside a DevLoop project folder (units.json beside units/)."""
    project = tmp_path / "project"
    (project / "units").mkdir(parents=True, exist_ok=True)
    (project / "units.json").write_text(json.dumps({"units": [{"id": name, "kind": "be"}]}))
    unit = project / "units" / name
    shutil.copytree(FIXTURES / name, unit)
    return unit


def edit(unit: Path, rel: str, old: str, new: str) -> None:
    path = unit / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}"
    path.write_text(text.replace(old, new, 1))


def append(unit: Path, rel: str, text: str) -> None:
    path = unit / rel
    path.write_text(path.read_text() + text)


def failing(report: AuditReport) -> set[str]:
    return {c.name for c in report.checks if not c.ok}


def details(report: AuditReport, name: str) -> str:
    return "\n".join(report.check(name).details)


# ----------------------------------------------------------------------------- complete units


@pytest.mark.parametrize("name", [JS, PY])
def test_complete_unit_passes_every_check(tmp_path: Path, name: str) -> None:
    unit = make_unit(tmp_path, name)
    report = audit_unit(unit)
    assert report.ok, json.dumps(report.to_json(), indent=1)
    doc = report.to_json()
    assert list(doc) == ["unit", "ok", "acceptance_coverage", "contract_coverage", "checks"]
    assert doc["unit"] == name
    assert [c["name"] for c in doc["checks"]] == list(CHECK_NAMES)
    assert all(list(c) == ["name", "ok", "value", "details"] for c in doc["checks"])
    assert doc["acceptance_coverage"] == 1.0 and doc["contract_coverage"] == 1.0
    assert AuditReport.from_json(json.loads(json.dumps(doc))) == report
    assert "recorded a baseline" in details(report, "sandbox")
    assert (tmp_path / "project" / ".greenloop" / "audit" / f"{name}.json").is_file()
    again = audit_unit(unit)
    assert again.ok and "compared with the previous audit" in details(again, "sandbox")


def test_tests_are_found_with_describe_path_and_line(tmp_path: Path) -> None:
    tests = find_tests(make_unit(tmp_path, JS))
    names = [(t.name, t.line) for t in tests]
    assert ("GET /api/todos > created todos can be listed", 30) in names
    assert ("GET /api/todos/:id > an unknown todo answers 404", 46) in names
    assert len(tests) == 6
    py = find_tests(make_unit(tmp_path / "py", PY))
    assert [t.name for t in py][:2] == [
        "test_post_answers_201_with_the_created_todo",
        "test_created_todos_can_be_listed",
    ]


def test_complete_python_unit_really_passes_under_pytest(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=unit,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "7 passed" in proc.stdout


RUNNERS = Path(__file__).parent / "runners" / "node_modules"


@pytest.mark.skipif(not (RUNNERS / "supertest").is_dir(), reason="npm ci in tests/runners installs supertest")
def test_complete_js_unit_really_passes_under_vitest_with_supertest(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    (tmp_path / "project" / "node_modules").symlink_to(RUNNERS)  # express, supertest, vitest
    proc = subprocess.run(
        [str(RUNNERS / ".bin" / "vitest"), "run", "--reporter=dot"],
        cwd=unit,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "CI": "1", "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"Tests\s+6 passed", proc.stdout), proc.stdout


# ----------------------------------------------------------------------------- 1. acceptance


def test_uncovered_criterion_fails_acceptance(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    edit(unit, JS_SPEC, "it('created todos can be listed'", "it('lists todos'")
    report = audit_unit(unit)
    assert failing(report) == {"acceptance_coverage"}
    assert report.acceptance_coverage == 0.75
    assert "uncovered: created todos can be listed" in details(report, "acceptance_coverage")


def test_python_criterion_covered_by_id_in_docstring_only(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    edit(unit, PY_TESTS, '"""Covers AC-2."""', '"""Empty titles."""')
    report = audit_unit(unit)
    assert failing(report) == {"acceptance_coverage"}
    assert "uncovered: AC-2: an empty title is refused with 400" in details(report, "acceptance_coverage")


def test_a_test_claiming_several_criteria_fails_acceptance(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    edit(unit, JS_SPEC, "it('answers 201 with the created todo'", "it('AC-2 and AC-3 in one go'")
    report = audit_unit(unit)
    assert failing(report) == {"acceptance_coverage"}
    assert report.acceptance_coverage == 1.0
    assert "tests/todo-be.spec.js:12 claims 2 criteria" in details(report, "acceptance_coverage")


def test_commented_out_test_does_not_count(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    edit(unit, JS_SPEC, "  it('created todos can be listed'", "  it('lists todos'")
    append(
        unit,
        JS_SPEC,
        "\n// it('created todos can be listed', () => {});\n/* it('created todos can be listed') */\n",
    )
    assert "acceptance_coverage" in failing(audit_unit(unit))


def test_invalid_spec_json_is_reported_not_raised(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    (unit / "spec.json").write_text('{"acceptance_criteria": [')
    report = audit_unit(unit)
    assert "acceptance_coverage" in failing(report)
    assert "spec.json is not valid JSON (line 1" in details(report, "acceptance_coverage")


# ----------------------------------------------------------------------------- 2. contract


def test_missing_negative_case_fails_contract(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    edit(unit, JS_SPEC, "get('/api/todos/999')", "get('/api/todo/999')")
    report = audit_unit(unit)
    assert failing(report) == {"contract_coverage"}
    assert report.contract_coverage == 0.8
    assert "missing: GET /api/todos/:id 404 (a negative case)" in details(report, "contract_coverage")


def test_missing_success_case_fails_contract_python(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    edit(unit, PY_TESTS, "    assert r.status_code == 201\n", "")
    report = audit_unit(unit)
    assert failing(report) == {"contract_coverage"}
    assert "missing: POST /api/todos 201 (its success case)" in details(report, "contract_coverage")


def test_status_asserted_after_another_call_is_attributed_to_that_call(tmp_path: Path) -> None:
    # 'created todos can be listed' POSTs (201) then GETs (200); remove the other GET /api/todos 200 source
    # by making the list test assert only the POST: the GET's 200 is then missing.
    unit = make_unit(tmp_path, JS)
    edit(
        unit,
        JS_SPEC,
        "    expect(res.status).toBe(200);\n    expect(res.body.items",
        "    expect(res.body.items",
    )
    report = audit_unit(unit)
    assert "missing: GET /api/todos 200 (its success case)" in details(report, "contract_coverage")


def test_500_is_not_required_and_no_contract_is_vacuous(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    contract = json.loads((unit / "contract.json").read_text())
    assert "500" in contract["exports"]["http"]["POST /api/todos"]["responses"]
    assert audit_unit(unit).check("contract_coverage").ok
    (unit / "contract.json").unlink()
    check = audit_unit(unit).check("contract_coverage")
    assert check.ok and check.value == 1.0 and "no contract.json" in check.details[0]


# ----------------------------------------------------------------------------- 3. mocks


def test_mocking_the_module_under_test_fails(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    edit(
        unit,
        JS_SPEC,
        "// A fresh app",
        "vi.mock('../code/service.js', () => ({ createStore: () => ({}) }));\n// A fresh app",
    )
    report = audit_unit(unit)
    assert failing(report) == {"no_whole_module_mocks"}
    assert "tests/todo-be.spec.js:5: vi.mock('../code/service.js'" in details(report, "no_whole_module_mocks")


def test_mocking_external_modules_is_allowed_and_comments_are_ignored(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    edit(
        unit, JS_SPEC, "// A fresh app", "vi.mock('axios');\n// vi.mock('../code/server.js')\n// A fresh app"
    )
    assert audit_unit(unit).check("no_whole_module_mocks").ok


@pytest.mark.parametrize(
    "snippet",
    [
        'from unittest import mock\n\n\ndef test_x():\n    with mock.patch("app"):\n        pass\n',
        'import sys\n\n\ndef test_x(monkeypatch):\n    monkeypatch.setitem(sys.modules, "app", object())\n',
        'from unittest import mock\nimport conftest\n\n\n@mock.patch.object(conftest, "app")\n'
        "def test_x(m):\n    pass\n",
    ],
)
def test_python_whole_module_mocks_fail(tmp_path: Path, snippet: str) -> None:
    unit = make_unit(tmp_path, PY)
    (unit / "tests" / "test_mocked.py").write_text(snippet)
    report = audit_unit(unit)
    assert "no_whole_module_mocks" in failing(report)
    assert "tests/test_mocked.py:" in details(report, "no_whole_module_mocks")


def test_python_patching_one_function_is_allowed(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    (unit / "tests" / "test_partial.py").write_text(
        'from unittest import mock\n\n# mock.patch("app") would be wrong\n\n'
        'def test_x():\n    with mock.patch("app.create_app"):\n        pass\n'
    )
    assert audit_unit(unit).check("no_whole_module_mocks").ok


# ----------------------------------------------------------------------------- 4. network, clock


def test_real_host_and_unstubbed_clock_fail(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    append(
        unit,
        JS_SPEC,
        "\nit('charges the card', async () => {\n"
        "  const res = await fetch('https://api.payments.example.com/charge');\n"
        "  expect(Date.now()).toBeGreaterThan(0);\n"
        "  expect(res.status).toBe(200);\n});\n",
    )
    report = audit_unit(unit)
    assert "no_network_or_clock" in failing(report)
    text = details(report, "no_network_or_clock")
    assert "tests/todo-be.spec.js:53: reaches the real host api.payments.example.com" in text
    assert "tests/todo-be.spec.js:54: Date.now(" in text


def test_loopback_and_stubbed_clock_are_allowed(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    append(
        unit,
        JS_SPEC,
        "\nit('uses a fake clock', async () => {\n  vi.useFakeTimers();\n"
        "  const url = 'http://127.0.0.1:4000/api/health';\n  expect(Date.now()).toBe(0);\n});\n",
    )
    assert audit_unit(unit).check("no_network_or_clock").ok


def test_python_network_and_randomness(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    bad = (
        'import random\nimport requests\n\n\ndef test_x():\n    requests.get("https://api.stripe.com/v1")\n'
        "    assert random.randint(1, 6) > 0\n"
    )
    (unit / "tests" / "test_external.py").write_text(bad)
    text = details(audit_unit(unit), "no_network_or_clock")
    assert "tests/test_external.py:6: reaches the real host api.stripe.com" in text
    assert "tests/test_external.py:7: random.randint(" in text
    (unit / "tests" / "test_external.py").write_text(
        "import random\n\n\ndef test_x():\n    random.seed(7)\n    assert random.randint(1, 6) > 0\n"
    )
    assert audit_unit(unit).check("no_network_or_clock").ok


# ----------------------------------------------------------------------------- 5. sandbox


def test_snapshot_sandbox_flags_changes_outside_tests_and_runs(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    assert audit_unit(unit, baseline="snapshot").ok  # records the baseline
    (unit / "tests" / "extra.spec.js").write_text("it('x', () => {});\n")
    (unit / "runs" / "run-2").mkdir()
    (unit / "runs" / "run-2" / "stdout.txt").write_text("out")
    assert audit_unit(unit, baseline="snapshot").check("sandbox").ok
    edit(unit, "contract.json", '"200": "{items}"', '"200": "{items, total}"')
    (unit / "notes.md").write_text("written by the Tester")
    (unit / "code" / "service.js").unlink()
    report = audit_unit(unit, baseline="snapshot")
    assert failing(report) == {"sandbox"}
    text = details(report, "sandbox")
    assert "contract.json changed" in text and "notes.md added" in text and "code/service.js deleted" in text
    assert report.check("sandbox").value == 3
    # the comparison is between two audits: the next one starts from this state
    assert audit_unit(unit, baseline="snapshot").check("sandbox").ok


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        timeout=60,
    )


def test_git_sandbox_compares_with_head(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, PY)
    project = tmp_path / "project"
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "unit")
    report = audit_unit(unit)
    assert report.check("sandbox").ok and "compared with git HEAD" in details(report, "sandbox")
    (unit / "tests" / "test_more.py").write_text("def test_more():\n    assert True\n")
    (unit / "runs" / "run-1").mkdir(parents=True, exist_ok=True)
    (unit / "runs" / "run-1" / "stdout.txt").write_text("x")
    assert audit_unit(unit).check("sandbox").ok
    # running the tests leaves caches and greenloop's own state behind: not a violation
    (unit / "code" / "__pycache__").mkdir()
    (unit / "code" / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"x")
    (unit / ".greenloop" / "runs").mkdir(parents=True)
    (unit / ".greenloop" / "runs" / "result.json").write_text("{}")
    assert audit_unit(unit).check("sandbox").ok
    append(unit, "code/app.py", "\n# touched by the Tester\n")
    (unit / "scratch.txt").write_text("x")
    report = audit_unit(unit)
    assert failing(report) == {"sandbox"}
    text = details(report, "sandbox")
    assert "code/app.py changed (uncommitted)" in text and "scratch.txt added (uncommitted)" in text
    assert not (project / ".greenloop" / "audit").exists()  # git mode stores no snapshot


# ----------------------------------------------------------------------------- 6. result.json


def test_no_run_yet_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    shutil.rmtree(unit / "runs")
    check = audit_unit(unit).check("result_json")
    assert check.ok and check.value is None and check.details[0].startswith("warning: no run yet")


def _result(unit: Path) -> tuple[Path, dict[str, object]]:
    path = unit / "runs" / "run-20260513-103100-a1b2c3" / "result.json"
    return path, json.loads(path.read_text())


def test_failure_without_hint_fails_result_json(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    path, doc = _result(unit)
    failure = {
        "test": "POST /api/todos > missing title gives 400",
        "file": JS_SPEC,
        "line": 18,
        "message": "m",
        "expected": "400",
        "got": "500",
        "stack": "",
        "hint": " ",
        "bug_id": None,
    }
    doc.update(
        ok=False,
        outcome="red",
        failures=[failure],
        summary={"total": 6, "passed": 5, "failed": 1, "skipped": 0},
    )
    path.write_text(json.dumps(doc))
    report = audit_unit(unit)
    assert failing(report) == {"result_json"}
    assert "failures[0] (POST /api/todos > missing title gives 400) has no hint" in details(
        report, "result_json"
    )


def test_schema_violation_and_latest_run_is_used(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    _, doc = _result(unit)
    del doc["outcome"]
    newer = unit / "runs" / "run-20260514-090000-ffffff"
    newer.mkdir()
    (newer / "result.json").write_text(json.dumps(doc))
    report = audit_unit(unit)
    assert failing(report) == {"result_json"}
    assert report.check("result_json").value == "run-20260514-090000-ffffff"
    assert "'outcome' is a required property" in details(report, "result_json")
    (newer / "result.json").write_text("{not json")
    assert "is not valid JSON" in details(audit_unit(unit), "result_json")


# ----------------------------------------------------------------------------- 7. negative tests


def test_an_always_green_suite_has_no_negative_test(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    (unit / "spec.json").write_text(json.dumps({"acceptance_criteria": ["created todos can be listed"]}))
    (unit / "contract.json").write_text(
        json.dumps({"exports": {"http": {"GET /api/todos": {"responses": {"200": "{items}"}}}}})
    )
    (unit / JS_SPEC).write_text(
        "import request from 'supertest';\nimport { it, expect } from 'vitest';\n"
        "import { createApp } from '../code/server.js';\n\n"
        "it('created todos can be listed', async () => {\n"
        "  const res = await request(createApp()).get('/api/todos');\n"
        "  expect(res.status).toBe(200);\n});\n"
    )
    report = audit_unit(unit)
    assert failing(report) == {"negative_tests"}
    assert report.check("negative_tests").value == 0
    assert "fix: add at least one negative test" in details(report, "negative_tests")


# ----------------------------------------------------------------------------- CLI and bad input


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "greenloop", "audit", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_cli_json_human_and_exit_codes(tmp_path: Path) -> None:
    unit = make_unit(tmp_path, JS)
    ok = _cli(str(unit), "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["ok"] is True
    edit(unit, JS_SPEC, "it('created todos can be listed'", "it('lists todos'")
    bad = _cli(str(unit))
    assert bad.returncode == 1
    assert "audit todo-be: FAIL (1 of 7 checks failed)" in bad.stdout
    assert "FAIL acceptance_coverage" in bad.stdout and "uncovered: created todos can be listed" in bad.stdout
    assert "fix: write one it()/test per uncovered criterion" in bad.stdout


def test_not_a_unit_is_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "units" / "nothing"
    empty.mkdir(parents=True)
    with pytest.raises(UsageError, match="not a DevLoop unit"):
        audit_unit(empty)
    with pytest.raises(UsageError, match="does not exist"):
        audit_unit(tmp_path / "missing")
    with pytest.raises(UsageError, match="baseline"):
        audit_unit(make_unit(tmp_path, JS), baseline="svn")  # type: ignore[arg-type]
    proc = _cli(str(empty))
    assert proc.returncode == 2 and "not a DevLoop unit" in proc.stderr
    assert not (tmp_path / ".greenloop").exists()
