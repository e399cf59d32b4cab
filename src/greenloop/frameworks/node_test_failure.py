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


_BLOCK_MARKS = ("|-", "|", ">-", ">", "|+", ">+")
_KEY = re.compile(r"^(\s*)([^:]+?):(?: (.*))?$")


def js_string(text: str) -> str:
    """A string as node's util.inspect prints it: in single quotes, or in double quotes (then
    backticks) when it holds single quotes."""
    if "'" not in text:
        return "'" + text.replace("\\", "\\\\").replace("\n", "\\n") + "'"
    if '"' not in text:
        return '"' + text.replace("\\", "\\\\").replace("\n", "\\n") + '"'
    if "`" not in text:
        return "`" + text + "`"
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def _scalar(v: str) -> str:
    """A YAML scalar of node's TAP as node prints the JavaScript value: a quoted YAML scalar is a
    string (`'ab'`, and `'1234567890'` is no number), `~` is null, the rest as written."""
    v = v.strip()
    if v == "~":
        return "null"
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return js_string(v[1:-1].replace("''", "'"))
    if len(v) >= 2 and v[0] == v[-1] == '"':
        try:
            import json

            return js_string(str(json.loads(v)))
        except ValueError:
            return v
    return v


def _mapping(lines: list[str]) -> str | None:
    """A YAML mapping of node's TAP (an object; an array is one keyed 0, 1, …) as node's
    util.inspect prints it on one line, `{ id: 1, tags: [ 'x' ] }`; None when it is not one."""
    def block(i: int, indent: int) -> tuple[str, int] | None:
        items: list[tuple[str, str]] = []
        while i < len(lines):
            m = _KEY.match(lines[i])
            if not m or len(m.group(1)) < indent:
                break
            if len(m.group(1)) > indent:
                return None
            key, value = m.group(2), m.group(3)
            i += 1
            if value is None or value == "":
                nxt = _KEY.match(lines[i]) if i < len(lines) else None
                deeper = len(nxt.group(1)) if nxt else -1
                if deeper <= indent:
                    items.append((key, "{}"))
                    continue
                inner = block(i, deeper)
                if inner is None:
                    return None
                rendered, i = inner
                items.append((key, rendered))
            else:
                items.append((key, _scalar(value)))
        if not items:
            return None
        if [k for k, _ in items] == [str(n) for n in range(len(items))]:
            return "[ " + ", ".join(v for _, v in items) + " ]", i
        return "{ " + ", ".join(f"{k}: {v}" for k, v in items) + " }", i

    done = block(0, 0)
    return done[0] if done is not None and done[1] == len(lines) else None


def _yaml_value(v: str) -> str:
    """A TAP diagnostic value as node prints it: strings in their quotes, null for YAML's `~`,
    an object or array in node's one-line form, a string of several lines with its `\\n`s."""
    lines = v.split("\n")
    if lines[0].strip() in _BLOCK_MARKS:  # a string of several lines: 'one\ntwo', as node prints it
        return js_string("\n".join(lines[1:]))
    if len(lines) == 1 and (v.strip()[:1] in ("'", '"') or ": " not in v):
        return _scalar(v)  # (a string with ": " in it is quoted in YAML: unquoted, it is an object)
    return _mapping(lines) or v


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
