"""greenloop.mcp.args: the wire's message check and the strict argument check, on their own.
(tests/test_mcp.py drives the same checks through a real `greenloop mcp` process.)"""

from __future__ import annotations

from typing import Any

import pytest

from greenloop.mcp.args import argument_problems, bad_arguments, check_message, tool_call_problem

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timeout_ms": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}], "default": None},
        "wait": {"type": "boolean", "default": False},
        "framework": {"anyOf": [{"enum": ["pytest", "jest"], "type": "string"}, {"type": "null"}]},
        "job_id": {"type": "string", "minLength": 1},
        "units": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
    },
    "required": ["job_id"],
}


@pytest.mark.parametrize(
    ("line", "code", "rid"),
    [
        ("hello world", -32700, None),
        ('{"jsonrpc":"2.0","id":1,', -32700, None),
        ("[1,2,3]", -32600, None),
        ("[]", -32600, None),
        ('"x"', -32600, None),
        ('{"id":3,"method":"ping"}', -32600, 3),
        ('{"jsonrpc":"2.0","id":true,"method":"ping"}', -32600, None),
        ('{"jsonrpc":"2.0","id":"a","method":"ping","params":[1]}', -32600, "a"),
        ('{"jsonrpc":"2.0","id":4}', -32600, 4),
        ('{"jsonrpc":"2.0"}', -32600, None),
    ],
)
def test_a_line_that_is_no_message_gets_its_error(line: str, code: int, rid: Any) -> None:
    msg, error = check_message(line)
    assert msg is None and error is not None
    assert error["error"]["code"] == code and error["id"] == rid and error["error"]["message"]


@pytest.mark.parametrize(
    "line",
    [
        '{"jsonrpc":"2.0","id":1,"method":"ping"}',
        '{"jsonrpc":"2.0","id":"x","method":"tools/list","params":{}}',
        '{"jsonrpc":"2.0","method":"notifications/initialized"}',
        '{"jsonrpc":"2.0","id":7,"result":{}}',
        '{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}',
    ],
)
def test_messages_pass(line: str) -> None:
    msg, error = check_message(line)
    assert error is None and isinstance(msg, dict)


def test_strict_arguments_name_the_field_what_it_takes_and_what_came() -> None:
    problems = argument_problems(
        SCHEMA, {"timeout_ms": "5", "wait": "true", "framework": "mocha", "units": ["a", 1], "x": 1}
    )
    text = "; ".join(problems)
    assert "unknown argument 'x'" in text
    assert "'job_id': missing" in text
    assert "'timeout_ms': expected an integer >= 1 or null, got a string \"5\"" in text
    assert "'wait': expected a boolean" in text
    assert "'framework'" in text and '"pytest"' in text
    assert "'units': item 1" in text
    assert argument_problems(SCHEMA, {"job_id": "j", "timeout_ms": 5, "wait": True, "units": None}) == []
    assert argument_problems(SCHEMA, {"job_id": "j", "timeout_ms": True}) != []  # a bool is no integer
    assert argument_problems(SCHEMA, {"job_id": "j", "timeout_ms": 0}) != []
    assert argument_problems(SCHEMA, {"job_id": ""}) != []
    message = bad_arguments("test_job", SCHEMA, {"job_id": "j", "timeout_ms": "5"}) or ""
    assert message.startswith("test_job: bad arguments:") and "Accepted arguments: timeout_ms" in message


def test_a_tools_call_needs_a_name_and_object_arguments() -> None:
    assert "params.name" in (tool_call_problem({}, ["test_run"]) or "")
    assert "test_run" in (tool_call_problem({"name": 5}, ["test_run"]) or "")
    assert "params.arguments" in (tool_call_problem({"name": "t", "arguments": "x"}, []) or "")
    assert tool_call_problem({"name": "t", "arguments": {}}, []) is None
    assert tool_call_problem({"name": "t"}, []) is None
