"""Filling `{{stepN.a.b}}` placeholders from the responses of a case's earlier steps.

Array indices are written `.0` or `[0]`; a placeholder that is a whole JSON value keeps its
JSON type, inside a string it becomes text (URL-quoted in a path). A placeholder that points at
nothing raises `Unresolved`, which fails the case; it is never sent as literal text.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

from greenloop.integration.spec.records import PLACEHOLDER

__all__ = ["Unresolved", "as_text", "resolve"]

_PART = re.compile(r"\.([A-Za-z0-9_$-]+)|\[(\d+)\]")
_WHOLE = re.compile(r"^\s*\{\{\s*([^{}]*?)\s*\}\}\s*$")


class Unresolved(Exception):
    """A placeholder that points at nothing; `available` lists what was there."""

    def __init__(self, expr: str, available: Sequence[str]) -> None:
        super().__init__(expr)
        self.expr = expr
        self.available = list(available)


def _keys_of(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [str(k) for k in value]
    if isinstance(value, list):
        return [str(i) for i in range(len(value))]
    return []


def _lookup(expr: str, responses: Sequence[Any]) -> Any:
    m = re.match(r"^step(\d+)(.*)$", expr)
    if not m:
        raise Unresolved(expr, [f"step{i}" for i in range(len(responses))])
    n = int(m.group(1))
    if n >= len(responses):
        raise Unresolved(expr, [f"step{i}" for i in range(len(responses))])
    value = responses[n]
    rest = m.group(2)
    pos = 0
    while pos < len(rest):
        pm = _PART.match(rest, pos)
        if not pm:
            raise Unresolved(expr, _keys_of(value))
        key, idx = pm.group(1), pm.group(2)
        pos = pm.end()
        if isinstance(value, dict) and key is not None and key in value:
            value = value[key]
        elif isinstance(value, list) and (idx is not None or (key is not None and key.isdigit())):
            i = int(idx if idx is not None else key)
            if i >= len(value):
                raise Unresolved(expr, _keys_of(value))
            value = value[i]
        else:
            raise Unresolved(expr, _keys_of(value))
    return value


def as_text(value: Any) -> str:
    """A value as text: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def resolve(template: Any, responses: Sequence[Any], *, url_path: bool = False) -> Any:
    """Fill `{{stepN…}}` placeholders from earlier response bodies. Raises Unresolved."""
    if isinstance(template, str):
        whole = _WHOLE.match(template)
        if whole and not url_path:
            return _lookup(whole.group(1), responses)

        def text(m: re.Match[str]) -> str:
            t = as_text(_lookup(m.group(1), responses))
            return urllib.parse.quote(t, safe="") if url_path else t

        return PLACEHOLDER.sub(text, template)
    if isinstance(template, dict):
        return {
            str(resolve(k, responses)) if isinstance(k, str) else k: resolve(v, responses)
            for k, v in template.items()
        }
    if isinstance(template, list):
        return [resolve(v, responses) for v in template]
    return template
