"""The pure parts of integration runs: placeholders, expectations, redaction, ports, the log cap."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from greenloop.integration.cases import run_case
from greenloop.integration.http_call import HttpResponse
from greenloop.integration.placeholders import Unresolved, resolve
from greenloop.integration.ports import RESERVED, PortPicker, PortUnavailable
from greenloop.integration.process_log import ProcessLog
from greenloop.integration.processes import Supervisor
from greenloop.integration.response_checks import check_expect, json_equal
from greenloop.integration.spec.expectations import parse_assertion
from greenloop.integration.spec.loading import load_spec
from greenloop.integration.spec.records import Assertion, Case, Expect, Step, jsonpath_env
from greenloop.integration.trace import REDACTED, TraceEntry, TraceWriter, bound_body, redact, redact_url

from .itkit import MARK, step, unit, write_project

RESPONSES: list[Any] = [
    {"token": "abc", "user": {"id": 7, "admin": False}, "items": [{"id": 1}, {"id": 2}], "none": None},
    "plain text",
]


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{step0.token}}", "abc"),
        ("{{step0.user.id}}", 7),  # a whole value keeps its JSON type
        ("{{ step0.user.admin }}", False),
        ("{{step0.none}}", None),
        ("{{step0.items.1.id}}", 2),
        ("{{step0.items[0].id}}", 1),
        ("{{step0.items}}", [{"id": 1}, {"id": 2}]),
        ("{{step1}}", "plain text"),
        ("Bearer {{step0.token}}", "Bearer abc"),  # inside a string it is text
        ("id={{step0.user.id}}&admin={{step0.user.admin}}", "id=7&admin=false"),
        (
            {"a": ["{{step0.user.id}}", "x{{step0.token}}"], "{{step0.token}}": 1},
            {"a": [7, "xabc"], "abc": 1},
        ),
        (5, 5),
    ],
)
def test_placeholders_resolve_with_json_types(template: Any, expected: Any) -> None:
    got = resolve(template, RESPONSES)
    assert json_equal(got, expected) and type(got) is type(expected)


def test_placeholders_in_a_url_path_are_escaped_text() -> None:
    assert resolve("/api/x/{{step0.user.id}}", RESPONSES, url_path=True) == "/api/x/7"
    assert resolve("/api/x/{{step1}}", RESPONSES, url_path=True) == "/api/x/plain%20text"


@pytest.mark.parametrize(
    ("template", "missing", "available"),
    [
        ("{{step0.tokne}}", "step0.tokne", ["token", "user", "items", "none"]),
        ("{{step0.items.5.id}}", "step0.items.5.id", ["0", "1"]),
        ("{{step0.user.id.x}}", "step0.user.id.x", []),
        ("{{step2.token}}", "step2.token", ["step0", "step1"]),
        ("Bearer {{step1.token}}", "step1.token", []),
    ],
)
def test_unresolvable_placeholders_name_what_was_there(
    template: str, missing: str, available: list[str]
) -> None:
    with pytest.raises(Unresolved) as info:
        resolve(template, RESPONSES)
    assert info.value.expr == missing and info.value.available == available


def test_json_equal_respects_json_types() -> None:
    assert (
        json_equal(1, 1.0) and not json_equal("1", 1) and not json_equal(True, 1) and not json_equal(0, False)
    )
    assert json_equal({"a": [1, None]}, {"a": [1, None]}) and not json_equal({"a": 1}, {"a": 1, "b": 2})
    assert not json_equal(None, 0) and not json_equal([1], [True])


def _expect(**kw: Any) -> Expect:
    env = jsonpath_env()
    asserts = tuple(parse_assertion(a, env) for a in kw.pop("asserts", ()))
    return Expect(status=tuple(kw.pop("status", ())), json=tuple(kw.pop("json", {}).items()), asserts=asserts)


BODY = {
    "items": [{"id": 1, "done": False}, {"id": 2, "done": False}],
    "empty": [],
    "title": "buy milk",
    "n": 3,
}


@pytest.mark.parametrize(
    ("expect", "ok"),
    [
        (_expect(status=[200]), True),
        (_expect(status=[201, 204]), False),
        (_expect(json={"$.title": "buy milk", "$.n": 3}), True),
        (_expect(json={"$.n": "3"}), False),
        (_expect(json={"$.missing": None}), False),
        (_expect(json={"$.items[*].done": False}), True),
        (_expect(asserts=["$.items.length > 0"]), True),
        (_expect(asserts=["$.items.length == 3"]), False),
        (_expect(asserts=["$.title.length == 8"]), True),
        (_expect(asserts=["$.items[*].done == false"]), True),
        (_expect(asserts=["$.items[*].id == 1"]), False),  # must hold for every element
        (_expect(asserts=["$.empty[*].done == false"]), False),  # fails on an empty list
        (_expect(asserts=["$.items[*].id >= 1", "$.items[*].id <= 2", "$.n != 4", "$.n < 3.5"]), True),
        (_expect(asserts=['$.title > "a"']), True),
        (_expect(asserts=['$.n > "a"']), False),  # no order between a number and a string
        (_expect(asserts=["$.id exists"]), False),
        (_expect(asserts=["$.items[0].id exists", "$.items[?@.id == 2].done == false"]), True),
        (_expect(asserts=['$.title == "buy milk"']), True),
        (_expect(asserts=["$.n.length > 0"]), False),  # a number has no length
    ],
)
def test_expectations(expect: Expect, ok: bool) -> None:
    miss = check_expect(expect, HttpResponse(200, {}, BODY))
    assert (miss is None) == ok, miss


def test_mismatch_details() -> None:
    miss = check_expect(_expect(status=[201]), HttpResponse(400, {}, {"error": "title_required"}))
    assert miss is not None and miss.reason == "status_mismatch"
    assert miss.expected == {"status": 201} and miss.got == {
        "status": 400,
        "body": {"error": "title_required"},
    }
    miss = check_expect(_expect(asserts=["$.items.length > 5"]), HttpResponse(200, {}, BODY))
    assert miss is not None and (miss.reason, miss.expected, miss.got) == (
        "assertion_failed",
        "$.items.length > 5",
        2,
    )


def test_assertions_with_operators_inside_filters_parse() -> None:
    a = parse_assertion('$.items[?@.title == "a > b"].id == 3', jsonpath_env())
    assert (a.path, a.op, a.value) == ('$.items[?@.title == "a > b"].id', "==", 3)
    assert parse_assertion("$.items.length exists", jsonpath_env()) == Assertion(
        "$.items.length exists", "$.items", "exists", None, True
    )


def test_a_case_runs_against_a_transport_seam(tmp_path: Path) -> None:
    """run_case with a plugged-in transport: what is sent is resolved, never literal text."""
    sent: list[tuple[str, str, dict[str, str], Any]] = []

    def transport(method: str, url: str, headers: Any, body: bytes | None, timeout: float) -> HttpResponse:
        sent.append((method, url, dict(headers), None if body is None else json.loads(body)))
        return HttpResponse(201, {"Set-Cookie": "s=1"}, {"token": "t0k3n", "id": 41})

    steps = (
        Step(0, "auth", "POST", "/login", body={"user": "a"}, has_body=True, expect=Expect(status=(201,))),
        Step(
            1,
            "api",
            "GET",
            "/items/{{step0.id}}",
            headers=(("Authorization", "Bearer {{step0.token}}"),),
            expect=Expect(status=(200,)),
        ),
    )
    trace = TraceWriter(tmp_path / "t.ndjson")
    out = run_case(
        Case("c", ("auth", "api"), steps),
        urls={"auth": "http://a", "api": "http://b"},
        transport=transport,
        trace=trace,
    )
    assert sent[1][1] == "http://b/items/41" and sent[1][2]["Authorization"] == "Bearer t0k3n"
    assert sent[0][2]["Content-Type"] == "application/json" and sent[0][3] == {"user": "a"}
    assert (out.status, out.failed_step, out.reason, out.unit) == ("failed", 1, "status_mismatch", "api")
    lines = [json.loads(x) for x in (tmp_path / "t.ndjson").read_text().splitlines()]
    assert lines[0]["response_body"] == {"token": REDACTED, "id": 41}
    assert lines[1]["request_headers"]["Authorization"] == REDACTED
    assert "t0k3n" not in (tmp_path / "t.ndjson").read_text()


def test_redaction_and_bounded_bodies() -> None:
    body = {
        "password": "p",
        "access_token": "a",
        "refreshToken": "r",
        "user": {"apiKey": "k", "name": "n"},
        "tokens": ["kept: a list named tokens is not one token"],
        "session_id": "s",
        "list": [{"secret": 1}],
    }
    red = redact(body)
    assert red["password"] == red["access_token"] == red["session_id"] == REDACTED
    assert red["user"] == {"apiKey": REDACTED, "name": "n"} and red["list"] == [{"secret": REDACTED}]
    assert red["refreshToken"] == REDACTED and red["tokens"] == body["tokens"]
    assert redact_url("http://h/x?token=abc&q=1") == "http://h/x?token=[redacted]&q=1"
    assert redact_url("http://h/x") == "http://h/x"
    assert bound_body({"a": 1}) == {"a": 1}
    cut = bound_body({"big": "x" * 10000}, 100)
    assert isinstance(cut, str) and len(cut) < 140 and "more chars" in cut
    entry = TraceEntry(
        "t",
        "c",
        0,
        "u",
        "GET",
        "http://h/?api_key=zzz",
        {"Cookie": "c=1", "X-Ok": "1"},
        None,
        200,
        {},
        None,
        1,
    )
    js = entry.to_json()
    assert js["request_headers"] == {"Cookie": REDACTED, "X-Ok": "1"} and "zzz" not in js["url"]
    assert TraceEntry.from_json(js).request_headers == js["request_headers"]


def test_port_picker_avoids_reserved_and_repeats() -> None:
    free = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free.append(s.getsockname()[1])
    picker = PortPicker(candidates=iter([3010, 5173, free[0], free[0], 5432, 6379, free[1]]))
    assert picker.pick() == free[0] and picker.pick() == free[1]
    assert picker.handed_out == free
    with pytest.raises(PortUnavailable):
        picker.pick()  # the candidates ran out
    assert {3010, 5173, 5432, 6379} == RESERVED
    kernel = PortPicker()
    ports = {kernel.pick() for _ in range(5)}
    assert len(ports) == 5 and not ports & RESERVED


def test_port_picker_gives_up_after_three_taken_ports() -> None:
    taken = [40001, 40002, 40003, 40004]
    picker = PortPicker(candidates=iter(taken), probe=lambda p: False)
    with pytest.raises(PortUnavailable) as info:
        picker.pick()
    assert "after 3 tries (40001, 40002, 40003)" in str(info.value)


def test_process_log_cap_keeps_start_and_end(tmp_path: Path) -> None:
    log = ProcessLog(tmp_path / "process.log", cap_bytes=4000, wall=lambda: 0.0)
    for i in range(500):
        log.write("[u:1] out|", f"line {i:04d}")
    log.close()
    text = (tmp_path / "process.log").read_text()
    assert len(text.encode()) <= 4000
    assert text.startswith("1970-01-01T00:00:00.000Z [u:1] out| line 0000\n")
    assert text.rstrip().endswith("line 0499")
    assert "lines (" in text and "omitted" in text
    log.write("[u:1] out|", "after close is ignored")
    assert "after close" not in (tmp_path / "process.log").read_text()


def test_raw_output_is_rolled_so_a_chatty_unit_cannot_fill_the_disk(tmp_path: Path, mark: str) -> None:
    project = write_project(
        tmp_path / "p",
        [unit("noisy", "flood", "6")],
        [{"id": "c", "steps": [step("noisy", "GET /api/health")]}],
    )
    spec = load_spec(project)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    log = ProcessLog(tmp_path / "process.log")
    sup = Supervisor(
        log,
        scratch,
        base_env={**os.environ, MARK: mark},
        picker=PortPicker(),
        grace_s=0.5,
        raw_roll_bytes=1024 * 1024,
    )
    with sup:
        sup.assign_ports(spec.units)
        assert sup.start_all(spec.units) is None
        # The pump reads at most a chunk a pass (its thread makes a pass every 50 ms): pass
        # until the 6 MB written before the unit listened have been read and the file rolled.
        raw = scratch / "noisy.out"
        deadline = time.monotonic() + 60
        sup.pump()
        while raw.stat().st_size >= 1024 * 1024 and time.monotonic() < deadline:
            sup.pump()
        raw_size = raw.stat().st_size
        # While the unit runs, the survivor scan sees it (after teardown it must see nothing).
        alive = sup.survivors()
        assert [p["unit"] for p in alive] == ["noisy"] and "fakeunit.py" in alive[0]["cmdline"]
    assert sup.survivors() == []
    log.close()
    assert raw_size < 1024 * 1024  # emptied once read, instead of growing to 6 MB
    text = (tmp_path / "process.log").read_text()
    assert "FIRST-LINE of the flood" in text and "LAST-LINE of the flood" in text
    assert "noisy listening on" in text
