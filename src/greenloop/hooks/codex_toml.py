"""Codex's MCP registration: `[mcp_servers.greenloop]` in .codex/config.toml, edited as text.

The file is the user's: only greenloop's table is rewritten (our keys first, then the user's
other lines of the table as they were) and the start-up grace key added when absent; every
other line stays as it is, comments included. An inline `mcp_servers.greenloop` is refused
with a message saying how to fix it.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from greenloop.errors import UsageError
from greenloop.hooks.config_merge import MCP_ARGS, MCP_COMMAND, SERVER_NAME, FileChange, Pending

__all__ = ["codex_mcp"]

_TOML_TABLE = f"[mcp_servers.{SERVER_NAME}]"
_TOML_OWNED = {"command": MCP_COMMAND, "args": list(MCP_ARGS)}  # always ours: refreshed on every init
# Written when absent, then the user's to change. Codex gives an MCP server 10 s to answer its
# handshake by default; a Python server on a loaded machine can need more.
_TOML_DEFAULTS: dict[str, Any] = {"startup_timeout_sec": 30}
# A top-level key, written when absent. `codex exec` starts the model's first turn without any
# optional MCP server still starting (it logs "omitting pending optional MCP server"), so the
# agent would have no test_run at all; this grace makes it wait for them, at most this long.
# (`required = true` in the server's table waits too, but then Codex refuses to start at all
# when `greenloop` is missing or broken, and a broken gate must never lock the user out.)
_GRACE_KEY = "mcp_optional_startup_grace_ms"
_GRACE_MS = 15000
_GRACE_LINES = (
    "# greenloop: let `codex exec` wait for MCP servers that are still starting before its first\n"
    "# turn (otherwise it leaves them out, and the agent has no test_run tool).\n"
    f"{_GRACE_KEY} = {_GRACE_MS}\n"
)
_KEY_LINE = re.compile(r"\s*([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


def _toml_line(key: str, value: Any) -> str:
    # Strings, integers and lists of strings: JSON spells them as TOML does.
    return f"{key} = {json.dumps(value)}\n"


def _server_table(text: str, keep: dict[str, Any]) -> str | None:
    """`text` with greenloop's server table rewritten: our keys first, then the user's other
    lines of the table as they were (None when the table is not a `[header]` table)."""
    body = "".join(_toml_line(k, v) for k, v in {**_TOML_OWNED, **keep}.items())
    out: list[str] = []
    inside = found = False
    skipping_array = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("[") and not skipping_array:
            inside = stripped.replace(" ", "") == _TOML_TABLE
            if inside:
                found = True
                out.append(_TOML_TABLE + "\n" + body)
                continue
        if inside:
            if skipping_array:  # the rest of a multi-line `args = [` … `]` we replace
                skipping_array = "]" not in stripped
                continue
            match = _KEY_LINE.match(line)
            if match and match.group(1).strip('"') in {*_TOML_OWNED, *keep}:
                skipping_array = "[" in line and "]" not in line
                continue
        out.append(line)
    return "".join(out) if found else None


def codex_mcp(path: str) -> Pending:
    """Add or refresh `[mcp_servers.greenloop]` in config.toml (and the start-up grace that makes
    `codex exec` wait for it), leaving every other line as it is."""
    from greenloop.config import read_toml

    what = f"MCP server 'greenloop' ([mcp_servers.greenloop], {_GRACE_KEY})"
    text = ""
    data: dict[str, Any] = {}
    if os.path.exists(path):
        try:
            data, raw = read_toml(path)
        except Exception as exc:
            raise UsageError(f"{exc}; fix {path} by hand, then run init again") from None
        text = raw.decode().replace("\r\n", "\n").replace("\r", "\n")  # as open(path).read() reads it
    servers = data.get("mcp_servers")
    server = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    has_grace = _GRACE_KEY in data
    if isinstance(server, dict):
        keep = {k: server.get(k, v) for k, v in _TOML_DEFAULTS.items()}
        if has_grace and all(server.get(k) == v for k, v in {**_TOML_OWNED, **keep}.items()):
            return FileChange(path, "unchanged", what), None
        new_text = _server_table(text, keep)
        if new_text is None:
            raise UsageError(
                f"{path} defines mcp_servers.{SERVER_NAME} inline; replace it with a "
                f"{_TOML_TABLE} table by hand, then run init again"
            )
    else:
        body = "".join(_toml_line(k, v) for k, v in {**_TOML_OWNED, **_TOML_DEFAULTS}.items())
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        new_text = text + sep + _TOML_TABLE + "\n" + body
    if not has_grace:
        # A top-level key must come before the first table, so it goes first; the user's
        # lines follow as they were.
        new_text = _GRACE_LINES + ("\n" if new_text and not new_text.startswith("\n") else "") + new_text
    return FileChange(path, "updated" if text else "created", what), new_text
