"""Strict checks of what an MCP client sends, with the standard library only.

Two jobs, both done before the SDK (or greenloop's own fast lane) sees a message:

- `check_message`: is one line of the wire a JSON-RPC 2.0 message MCP accepts? Invalid JSON
  is a parse error (-32700, id null); an array is a batch, which MCP 2025-06-18 removed from
  the protocol (-32600); anything else that is not a request, notification or response
  object is an invalid request (-32600), answered with the request's id when it has a valid
  one. JSON-RPC says an invalid message must still be answered: a client waiting on an id
  would otherwise hang until its own timeout.
- `argument_problems`: a tool's arguments against its JSON input schema, strictly: "5" is
  not an integer and "true" not a boolean (pydantic would coerce both silently), unknown
  names are refused. Each problem names the argument, what it accepts and what it got.

Only the schema keywords greenloop's tool schemas use are understood (type, enum, anyOf,
minLength, minimum, maximum, items, properties, required, additionalProperties).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "argument_problems",
    "bad_arguments",
    "check_message",
    "error_reply",
    "tool_call_problem",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_TYPE_WORDS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def error_reply(rid: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _valid_id(value: Any) -> bool:
    # MCP: "a string or integer", never null (JSON-RPC's fractional ids are not allowed either)
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def check_message(line: bytes | str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the message, None) when the line is a message MCP accepts, else (None, the error reply)."""
    try:
        msg = json.loads(line)
    except ValueError as exc:
        return None, error_reply(None, PARSE_ERROR, f"parse error: the line is not valid JSON ({exc})")
    if isinstance(msg, list):
        return None, error_reply(
            None,
            INVALID_REQUEST,
            "invalid request: JSON-RPC batches (arrays) are not supported; MCP 2025-06-18 removed "
            "batching, so send one message object per line",
        )
    if not isinstance(msg, dict):
        return None, error_reply(
            None, INVALID_REQUEST, f"invalid request: a message must be a JSON object, got {_kind(msg)}"
        )
    rid = msg.get("id")
    answer_id = rid if _valid_id(rid) else None

    def invalid(why: str) -> tuple[None, dict[str, Any]]:
        return None, error_reply(answer_id, INVALID_REQUEST, f"invalid request: {why}")

    if msg.get("jsonrpc") != "2.0":
        return invalid(f'"jsonrpc" must be "2.0", got {_shown(msg.get("jsonrpc"))}')
    if "id" in msg and not _valid_id(rid):
        return invalid(f'"id" must be a string or an integer, got {_shown(rid)}')
    if "method" in msg:
        if not isinstance(msg["method"], str) or not msg["method"]:
            return invalid(f'"method" must be a non-empty string, got {_shown(msg["method"])}')
        if "params" in msg and not isinstance(msg["params"], dict):
            return invalid(f'"params" must be an object, got {_shown(msg["params"])}')
        return msg, None
    if "id" in msg and ("result" in msg or "error" in msg):
        return msg, None  # a response to a request the server sent
    if "id" in msg:
        return invalid('a request needs a "method" (a response needs "result" or "error")')
    return invalid('a message needs a "method" (request, notification) or an "id" with "result" or "error"')


def tool_call_problem(params: Mapping[str, Any] | None, tools: Sequence[str]) -> str | None:
    """Why a tools/call's params are not a call at all (-32602), or None when they are."""
    params = params or {}
    name = params.get("name")
    if not isinstance(name, str) or not name:
        known = f" (one of: {', '.join(tools)})" if tools else ""
        return f'tools/call needs "params.name", the tool\'s name as a string{known}; got {_shown(name)}'
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        return (
            f'tools/call "params.arguments" must be an object mapping argument names to values, '
            f"got {_shown(arguments)}"
        )
    return None


def argument_problems(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """Every way `arguments` breaks the tool's input `schema`, one sentence each, in order."""
    problems: list[str] = []
    properties: Mapping[str, Any] = schema.get("properties") or {}
    for name in arguments:
        if name not in properties:
            problems.append(f"unknown argument '{name}'")
    for name in schema.get("required") or ():
        if name not in arguments:
            problems.append(f"'{name}': missing (it is required)")
    for name, value in arguments.items():
        if name in properties:
            why = _value_problem(properties[name], value)
            if why is not None:
                problems.append(f"'{name}': {why}")
    return problems


def bad_arguments(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> str | None:
    """The tool error a model reads for bad arguments (every problem, the accepted names), or None."""
    problems = argument_problems(schema, arguments)
    if not problems:
        return None
    known = list(schema.get("properties") or {})
    return (
        f"{tool}: bad arguments: "
        + "; ".join(problems)
        + f". Accepted arguments: {', '.join(known) or 'none'}. Fix them and call {tool} again."
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    text = json.dumps(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{_kind(value)} {text}"


def _is(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def _expected(schema: Mapping[str, Any]) -> str:
    """What a schema accepts, in words."""
    if "anyOf" in schema:
        return " or ".join(_expected(s) for s in schema["anyOf"])
    if "enum" in schema:
        return "one of " + ", ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    words = _TYPE_WORDS.get(kind, "a value") if isinstance(kind, str) else "a value"
    if "minimum" in schema:
        words += f" >= {schema['minimum']}"
    if "maximum" in schema:
        words += f" <= {schema['maximum']}"
    if schema.get("minLength") == 1:
        words = "a non-empty string"
    if kind == "array" and isinstance(schema.get("items"), dict):
        words += " of " + _expected(schema["items"]).replace("a ", "", 1).replace("an ", "", 1) + "s"
    return words


def _value_problem(schema: Mapping[str, Any], value: Any) -> str | None:
    """None when `value` fits `schema`, else what it should be and what it was."""
    if "anyOf" in schema:
        options = schema["anyOf"]
        if any(_value_problem(s, value) is None for s in options):
            return None
        typed = [s for s in options if isinstance(s.get("type"), str) and _is(value, s["type"])]
        if len(typed) == 1 and ("items" in typed[0] or "minimum" in typed[0] or "enum" in typed[0]):
            return _value_problem(typed[0], value)  # the right type, a wrong value: say which
        return f"expected {_expected(schema)}, got {_shown(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"expected {_expected(schema)}, got {_shown(value)}"
    kind = schema.get("type")
    if isinstance(kind, str) and not _is(value, kind):
        return f"expected {_expected(schema)}, got {_shown(value)}"
    if isinstance(value, str) and len(value) < int(schema.get("minLength", 0)):
        return f"expected {_expected(schema)}, got {_shown(value)}"
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"expected {_expected(schema)}, got {_shown(value)}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"expected {_expected(schema)}, got {_shown(value)}"
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            why = _value_problem(schema["items"], item)
            if why is not None:
                return f"item {i}: {why}"
    return None
