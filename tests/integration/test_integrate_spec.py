"""Validation before anything starts: each error names case, step and field, exits 2, and
neither starts a process nor writes a run folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop.cli import main
from greenloop.errors import SpecError
from greenloop.integration.spec.loading import load_spec
from greenloop.integration.spec.records import Endpoint, env_var_name

from .itkit import step, write_project

TODO_CONTRACT = {
    "exports": {
        "http": {
            "GET /api/health": {"responses": {"200": "ok"}},
            "POST /api/notes": {"responses": {"201": "created"}},
            "GET /api/notes/:id": {"responses": {"200": "the note", "404": "not_found"}},
        }
    }
}


def tripwire(uid: str, folder: Path, **extra: Any) -> dict[str, Any]:
    """A unit whose start leaves a file behind: its absence proves nothing was started."""
    code = f"open({str(folder / ('started-' + uid))!r}, 'w').close()"
    return {"id": uid, "kind": "be", "start": [sys.executable, "-c", code], **extra}


def good_case() -> dict[str, Any]:
    return {
        "id": "ok-case",
        "steps": [
            step("notes", "POST /api/notes", body={"text": "hi"}, expect={"status": 201}),
            step(
                "notes",
                "GET /api/notes/{{step0.id}}",
                expect={
                    "status": [200, 404],
                    "json": {"$.text": "hi"},
                    "assert": ["$.tags.length >= 0", "$.id exists"],
                },
            ),
        ],
    }


def project_with(
    tmp_path: Path,
    cases: list[dict[str, Any]],
    units: list[dict[str, Any]] | None = None,
    contract: dict[str, Any] | None = TODO_CONTRACT,
) -> Path:
    root = tmp_path / "p"
    units = units if units is not None else [tripwire("notes", tmp_path), tripwire("auth", tmp_path)]
    return write_project(root, units, cases, {"notes": contract} if contract is not None else None)


def assert_rejected(tmp_path: Path, project: Path, *fragments: str, cases: tuple[str, ...] = ()) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(project, cases)
    message = info.value.message
    for fragment in fragments:
        assert fragment in message, message
    # The CLI: exit 2, the same message, nothing started, no run folder.
    argv = ["integrate", str(project), "--json"] + [a for c in cases for a in ("--case", c)]
    assert main(argv) == 2
    assert not list(tmp_path.glob("started-*"))
    assert not (project / "integration" / "runs").exists()
    return message


def test_a_valid_spec_loads_into_typed_records(tmp_path: Path) -> None:
    project = project_with(tmp_path, [good_case()])
    spec = load_spec(project)
    [case] = spec.cases
    assert case.involves == ("notes",)
    assert [s.call for s in case.steps] == ["POST /api/notes", "GET /api/notes/{{step0.id}}"]
    assert case.steps[1].expect.status == (200, 404)
    assert [a.op for a in case.steps[1].expect.asserts] == [">=", "exists"]
    assert case.steps[1].expect.asserts[0].length
    assert [u.id for u in spec.needed_units()] == ["notes"]
    assert spec.unit("notes").health == "/api/health"


def test_path_parameters_match_literal_and_placeholder_segments() -> None:
    ep = Endpoint("GET", "/api/notes/:id")
    assert ep.matches("GET", "/api/notes/7")
    assert ep.matches("GET", "/api/notes/{{step0.id}}?full=1")
    assert not ep.matches("GET", "/api/notes")
    assert not ep.matches("GET", "/api/notes/7/tags")
    assert not ep.matches("POST", "/api/notes/7")
    assert not Endpoint("GET", "/api/notes").matches("GET", "/api/{{step0.kind}}")


def test_env_var_name_of_dependencies() -> None:
    assert env_var_name("todo-be") == "TODO_BE_URL"
    assert env_var_name("auth.v2") == "AUTH_V2_URL"


def test_unknown_unit_in_a_step(tmp_path: Path) -> None:
    project = project_with(tmp_path, [{"id": "c1", "steps": [step("billing", "GET /api/x")]}])
    assert_rejected(
        tmp_path, project, 'case "c1", step 0', 'field "unit"', 'unknown unit "billing"', "auth, notes"
    )


def test_endpoint_missing_from_the_contract(tmp_path: Path) -> None:
    project = project_with(
        tmp_path, [{"id": "c2", "steps": [good_case()["steps"][0], step("notes", "DELETE /api/notes/3")]}]
    )
    assert_rejected(
        tmp_path,
        project,
        'case "c2", step 1',
        'field "call"',
        '"DELETE /api/notes/3"',
        "units/notes/contract.json",
        "GET /api/notes/:id",
        "add it to the contract",
    )


def test_units_without_a_contract_accept_any_endpoint(tmp_path: Path) -> None:
    project = project_with(tmp_path, [{"id": "c", "steps": [step("auth", "DELETE /anything/9")]}])
    assert load_spec(project).cases[0].steps[0].method == "DELETE"


def test_placeholder_referring_to_a_later_step(tmp_path: Path) -> None:
    case = {
        "id": "c3",
        "steps": [
            step("notes", "POST /api/notes", headers={"Authorization": "Bearer {{step1.token}}"}),
            step("notes", "POST /api/notes"),
        ],
    }
    assert_rejected(
        tmp_path,
        project_with(tmp_path, [case]),
        'case "c3", step 0',
        'field "headers"',
        "{{step1.token}}",
        "not an earlier step",
    )


def test_malformed_placeholder_in_the_body(tmp_path: Path) -> None:
    case = {
        "id": "c4",
        "steps": [
            step("notes", "POST /api/notes"),
            step("notes", "POST /api/notes", body={"x": "{{previous.id}}"}),
        ],
    }
    assert_rejected(
        tmp_path, project_with(tmp_path, [case]), 'case "c4", step 1', 'field "body"', "{{previous.id}}"
    )


def test_dependency_cycle(tmp_path: Path) -> None:
    units = [
        tripwire("a", tmp_path, depends_on=["c"]),
        tripwire("b", tmp_path, depends_on=["a"]),
        tripwire("c", tmp_path, depends_on=["b"]),
    ]
    project = project_with(tmp_path, [{"id": "x", "steps": [step("a", "GET /")]}], units, contract=None)
    message = assert_rejected(tmp_path, project, 'field "depends_on" has a cycle')
    assert "a -> c -> b -> a" in message


def test_unknown_dependency(tmp_path: Path) -> None:
    units = [tripwire("a", tmp_path, depends_on=["db"])]
    project = project_with(tmp_path, [{"id": "x", "steps": [step("a", "GET /")]}], units, contract=None)
    assert_rejected(tmp_path, project, 'unit "a"', 'field "depends_on"', 'unknown unit "db"')


@pytest.mark.parametrize(
    ("expect", "fragments"),
    [
        ({"status": "201"}, ['field "expect.status"', '"201"']),
        ({"status": 999}, ['field "expect.status"']),
        ({"json": {"title": "x"}}, ['field "expect.json"', "must start with $"]),
        ({"json": {"$.items[": "x"}}, ['field "expect.json"', "RFC 9535"]),
        (
            {"assert": ["$.items.length bigger 0"]},
            ['field "expect.assert[0]"', "<jsonpath> <op> <JSON literal>"],
        ),
        ({"assert": ["$.n > [1]"]}, ['field "expect.assert[0]"', "compares numbers or strings"]),
        ({"assert": ["$.a == not-json"]}, ['field "expect.assert[0]"']),
        ({"body": 1}, ['unknown field "expect.body"']),
    ],
)
def test_bad_expectations(tmp_path: Path, expect: dict[str, Any], fragments: list[str]) -> None:
    case = {"id": "cx", "steps": [step("notes", "POST /api/notes", expect=expect)]}
    assert_rejected(tmp_path, project_with(tmp_path, [case]), 'case "cx", step 0', *fragments)


def test_every_violation_is_listed_at_once(tmp_path: Path) -> None:
    cases: list[dict[str, Any]] = [
        {"id": "dup", "steps": [step("nobody", "GET /x")]},
        {"id": "dup", "steps": [step("notes", "FETCH /api/notes")]},
        {"id": "no-steps", "steps": []},
    ]
    message = assert_rejected(tmp_path, project_with(tmp_path, cases), "problems")
    assert 'unknown unit "nobody"' in message and 'unknown method "FETCH"' in message
    assert "two cases share this id" in message and 'case "no-steps": field "steps"' in message


def test_unknown_case_selected(tmp_path: Path) -> None:
    project = project_with(tmp_path, [good_case()])
    assert_rejected(tmp_path, project, '--case "nope"', "ok-case", cases=("nope",))


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (lambda p: (p / "units.json").unlink(), "units.json not found"),
        (lambda p: (p / "units.json").write_text("{oops"), "units.json is not valid JSON (line 1"),
        (lambda p: (p / "integration" / "spec.json").unlink(), "integration/spec.json not found"),
        (
            lambda p: (p / "integration" / "spec.json").write_text('{"cases": []}'),
            'field "cases" must be a non-empty',
        ),
        (
            lambda p: (p / "units" / "notes" / "contract.json").write_text("[1,"),
            "contract.json is not valid JSON",
        ),
        (
            lambda p: (p / "units.json").write_text(json.dumps({"units": [{"id": "notes", "kind": "db"}]})),
            'field "kind" must be one of be, fe',
        ),
        (
            lambda p: (p / "units.json").write_text(
                json.dumps({"units": [{"id": "notes", "start": "node x.js"}]})
            ),
            'field "start" must be a non-empty argv list',
        ),
        (
            lambda p: (p / "units.json").write_text(
                json.dumps({"units": [{"id": "notes", "path": "nowhere"}]})
            ),
            'folder "nowhere" does not exist',
        ),
    ],
)
def test_broken_files(tmp_path: Path, mutate: Any, fragment: str) -> None:
    project = project_with(tmp_path, [good_case()])
    mutate(project)
    assert_rejected(tmp_path, project, fragment)


def test_browser_steps_go_to_frontend_units(tmp_path: Path) -> None:
    case = {"id": "ui", "steps": [{"unit": "notes", "page": "/", "actions": [{"click": "#add"}]}]}
    assert_rejected(
        tmp_path, project_with(tmp_path, [case]), 'case "ui", step 0', "browser steps", '"kind": "fe"'
    )
