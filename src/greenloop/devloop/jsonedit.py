"""Edit one JSON document's values in place, keeping everything else byte for byte: the other
fields, their order, the indentation, the line breaks. Used to write a unit's status back into
a project's own `units.json`, a file people edit and review.

`json` gives values, not where they are in the text, so a small scanner finds the spans:
objects record each member's key and value span, arrays each item's span.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

__all__ = ["Node", "scan", "set_members"]

_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SCALAR = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")


class Node(NamedTuple):
    """A value's span [start, end) and, for objects, members (key, key_start, value node);
    for arrays, items."""

    kind: str  # "object" | "array" | "scalar"
    start: int
    end: int
    members: tuple[tuple[str, int, Node], ...] = ()
    items: tuple[Node, ...] = ()


def _skip(text: str, i: int) -> int:
    m = _WS.match(text, i)
    return m.end() if m else i


def _value(text: str, i: int) -> Node:
    i = _skip(text, i)
    if i >= len(text):
        raise ValueError("unexpected end of the document")
    c = text[i]
    if c == "{":
        members: list[tuple[str, int, Node]] = []
        j = _skip(text, i + 1)
        if text[j] == "}":
            return Node("object", i, j + 1)
        while True:
            j = _skip(text, j)
            m = _STRING.match(text, j)
            if not m:
                raise ValueError(f"a key was expected at offset {j}")
            key = json.loads(m.group(0))
            j = _skip(text, m.end())
            if text[j] != ":":
                raise ValueError(f"':' was expected at offset {j}")
            node = _value(text, j + 1)
            members.append((key, m.start(), node))
            j = _skip(text, node.end)
            if text[j] == ",":
                j += 1
                continue
            if text[j] == "}":
                return Node("object", i, j + 1, tuple(members))
            raise ValueError(f"',' or '}}' was expected at offset {j}")
    if c == "[":
        items: list[Node] = []
        j = _skip(text, i + 1)
        if text[j] == "]":
            return Node("array", i, j + 1)
        while True:
            node = _value(text, j)
            items.append(node)
            j = _skip(text, node.end)
            if text[j] == ",":
                j += 1
                continue
            if text[j] == "]":
                return Node("array", i, j + 1, items=tuple(items))
            raise ValueError(f"',' or ']' was expected at offset {j}")
    m = _STRING.match(text, i) or _SCALAR.match(text, i)
    if not m:
        raise ValueError(f"a value was expected at offset {i}")
    return Node("scalar", i, m.end())


def scan(text: str) -> Node:
    """The document's top value with the spans of everything in it (ValueError if not JSON)."""
    json.loads(text)  # the real parser decides what is valid JSON
    return _value(text, 0)


def set_members(text: str, obj: Node, values: Mapping[str, Any]) -> str:
    """`text` with the object `obj`'s members `values` set: an existing member's value is
    replaced where it stands; a new one goes after the last member, laid out like it (on its
    own line at the same indentation in a multi-line object, inline otherwise)."""
    edits: list[tuple[int, int, str]] = []
    existing = {key: node for key, _, node in obj.members}
    new = {k: v for k, v in values.items() if k not in existing}
    for key, value in values.items():
        if key in existing:
            node = existing[key]
            edits.append((node.start, node.end, json.dumps(value, ensure_ascii=False)))
    if new:
        if obj.members:
            _, key_start, last = obj.members[-1]
            line_start = text.rfind("\n", 0, key_start) + 1
            indent = text[line_start:key_start]
            multiline = "\n" in text[obj.start:key_start] and not indent.strip()
            sep = f",\n{indent}" if multiline else ", "
            added = "".join(f"{sep}{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                            for k, v in new.items())
            edits.append((last.end, last.end, added))
        else:
            added = ", ".join(f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in new.items())
            edits.append((obj.start + 1, obj.end - 1, added))
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text
