"""One node:test failure from what the runner wrote about it: the TAP YAML diagnostics
(`error`, `expected`/`actual`, `stack`, `location`, `name`) or the spec reporter's lines
under the failing test, read by frameworks/node_test.py."""

from __future__ import annotations

import re
from typing import Literal

from greenloop.frameworks.common import bounded_join, first_user_frame, relativize, trim_stack
from greenloop.model import Failure

__all__ = ["failure_of", "unquote"]


def unquote(v: str) -> str:
    """A YAML scalar without its quotes (`'it''s'` reads it's)."""
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
        return v[1:-1].replace("''", "'")
    return v


def _yaml_value(v: str) -> str:
    """A TAP diagnostic value as the test wrote it: YAML's `~` is JavaScript's null."""
    v = unquote(v)
    return "null" if v == "~" else v


def failure_of(
    name: str,
    kind: Literal["test", "load", "hook"],
    body: list[str],
    y: dict[str, str],
    message: str,
    root: str | None,
) -> Failure:
    """The failure of test `name`: `y` is its YAML diagnostics (each key's lines joined), `body`
    the lines printed under it, `message` the error text."""
    stack_text = y.get("stack", "") or "\n".join(body)
    exp = got = None
    if "expected" in y or "actual" in y:
        exp = _yaml_value(y["expected"]) if "expected" in y else None
        got = _yaml_value(y["actual"]) if "actual" in y else None
    else:
        for body_line in body:
            s = body_line.strip()
            if s.startswith("actual: ") and got is None:
                got = s[8:].rstrip(",")
            elif s.startswith("expected: ") and exp is None:
                exp = s[10:].rstrip(",")
    msg_lines: list[str] = []
    for text in message.splitlines():
        s = text.strip()
        if s.startswith("at ") or s == "{":
            break
        msg_lines.append(s)
    while msg_lines and not msg_lines[-1]:
        msg_lines.pop()
    if "name" in y and msg_lines and not msg_lines[0].startswith(unquote(y["name"])):
        msg_lines[0] = f"{unquote(y['name'])}: {msg_lines[0]}"
    ufile, uline = first_user_frame(stack_text)
    loc = unquote(y.get("location", ""))
    file: str | None = ufile
    line: int | None = uline
    if file is None and loc:
        m = re.match(r"^(.*):(\d+):(\d+)$", loc)
        if m:
            file, line = m.group(1), int(m.group(2))
    return Failure(
        test=name,
        file=relativize(file, root) if file else None,
        line=line,
        message=bounded_join([m for m in msg_lines if m][:20]),
        expected=exp,
        got=got,
        stack=trim_stack(stack_text, root),
        kind=kind,
    )
