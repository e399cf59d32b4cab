"""The published JSON Schemas (src/greenloop/schemas/*.json) and validation against them.

`greenloop schema run-result` prints the schema of result.json; `validate_run_result` checks a
document against it. The `jsonschema` package (draft 2020-12) is used when it is installed; when
it is not, a small built-in checker covers exactly the keywords the published schemas use, so
the runtime path never depends on an optional package.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from greenloop.errors import UsageError

__all__ = ["SCHEMA_NAMES", "builtin_errors", "load_schema", "validate", "validate_run_result"]

SCHEMA_NAMES: tuple[str, ...] = ("run-result",)

# The keywords the built-in checker understands; a schema using others must use jsonschema.
_KNOWN = frozenset(
    {
        "$schema",
        "$id",
        "$defs",
        "$ref",
        "title",
        "description",
        "type",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "minimum",
        "minLength",
    }
)


def load_schema(name: str) -> dict[str, Any]:
    """The schema called `name` (one of SCHEMA_NAMES) as a dict; UsageError names the known ones."""
    if name not in SCHEMA_NAMES:
        raise UsageError(
            f"unknown schema {name!r}: choose one of {', '.join(SCHEMA_NAMES)} "
            f"(e.g. 'greenloop schema run-result')"
        )
    text = (
        resources.files("greenloop").joinpath("schemas").joinpath(f"{name}.json").read_text(encoding="utf-8")
    )
    data: dict[str, Any] = json.loads(text)
    return data


def validate(data: Any, name: str) -> list[str]:
    """Errors of `data` against schema `name`, each `<json path>: <what is wrong>`; [] when valid."""
    schema = load_schema(name)
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - exercised through builtin_errors in the tests
        return builtin_errors(data, schema)
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]


def validate_run_result(data: Any) -> list[str]:
    """Errors of a result.json document against the run-result schema; [] when valid."""
    return validate(data, "run-result")


def _path(parts: Any) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def _is_type(value: Any, type_name: str) -> bool:
    if type_name in ("integer", "number") and isinstance(value, bool):
        return False
    if type_name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[type_name])


def builtin_errors(data: Any, schema: dict[str, Any]) -> list[str]:
    """Validate with the built-in subset checker (the keywords in _KNOWN)."""
    errors: list[str] = []
    _check(data, schema, schema, "$", errors)
    return sorted(errors)


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    result: dict[str, Any] = node
    return result


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str, errors: list[str]) -> None:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} need the jsonschema package")
    if "$ref" in schema:
        _check(value, _resolve(schema["$ref"], root), root, path, errors)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            errors.append(f"{path}: {json.dumps(value)[:80]} is not of type {' or '.join(map(repr, types))}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {json.dumps(value)[:80]} is not one of {schema['enum']}")
    if isinstance(value, str) and "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{path}: {value!r} is shorter than {schema['minLength']}")
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and "minimum" in schema
        and value < schema["minimum"]
    ):
        errors.append(f"{path}: {value} is less than the minimum of {schema['minimum']}")
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                errors.append(f"{path}: {key!r} is a required property")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = f"{path}.{key}"
            if key in props:
                _check(item, props[key], root, sub, errors)
            elif extra is False:
                errors.append(f"{path}: additional property {key!r} is not allowed")
            elif isinstance(extra, dict):
                _check(item, extra, root, sub, errors)
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _check(item, schema["items"], root, f"{path}[{i}]", errors)
