"""The handshake answers `greenloop mcp` can give before the MCP SDK has loaded, and their keys.

Two sources, both the SDK's own answers to `initialize` and `tools/list` (per protocol
version, enabled or disabled):

- the handshake cache: what the SDK answered on an earlier start, on disk, keyed by
  everything the answers depend on (the files of the tool modules, greenloop, the SDK and
  pydantic, `enabled`, the Python version);
- the snapshot shipped in the package (mcp/handshake.json, written by scripts/mcp_handshake),
  used on a first start (no cache yet, or after an upgrade) when its key matches what is
  installed: the content of every module whose text changes the tools/list answer
  (TOOL_MODULES) and the versions of greenloop, the SDK and pydantic.

Standard library only: it runs on the start-up path, before the SDK (greenloop.mcp.wire).
GREENLOOP_MCP_HANDSHAKE=sdk switches both off (every answer is the SDK's).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["SNAPSHOT_PATH", "TOOL_MODULES", "HandshakeCache", "cache_dir", "snapshot_key"]

CACHE_VERSION = "3"
SNAPSHOT_PATH = Path(__file__).with_name("handshake.json")
# The modules whose text makes the initialize and tools/list answers: the output models (the
# output schemas), the tools (names, input schemas, descriptions, annotations) and the server
# (its name and instructions). Changing one means running scripts/mcp_handshake again.
TOOL_MODULES = ("outputs.py", "tools.py", "server.py")
_HERE = os.path.dirname(os.path.abspath(__file__))


def cache_dir(env: Mapping[str, str]) -> Path:
    """`$XDG_CACHE_HOME/greenloop`, else `~/.cache/greenloop`."""
    base = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return Path(base) / "greenloop"


def _stamp(path: str | None) -> str:
    if not path:
        return "-"
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{path}:{st.st_mtime_ns}:{st.st_size}"


def _dist_version(name: str) -> str:
    """An installed distribution's version from its .dist-info folder's name (no import, and
    none of importlib.metadata's cost on the start-up path); "-" when not found."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "-"
    site = os.path.dirname(os.path.dirname(spec.origin))
    prefix = name + "-"
    try:
        entries = os.listdir(site)
    except OSError:
        return "-"
    for entry in entries:
        if entry.startswith(prefix) and entry.endswith(".dist-info"):
            return entry[len(prefix) : -len(".dist-info")]
    return "-"


def snapshot_key() -> dict[str, str]:
    """What the shipped handshake snapshot's answers depend on: the tools' code (TOOL_MODULES,
    by content: an installed copy has other mtimes) and the versions of what writes them."""
    from greenloop import __version__

    digest = hashlib.sha256()
    try:
        for name in TOOL_MODULES:
            with open(os.path.join(_HERE, name), "rb") as fh:
                digest.update(name.encode() + b"\0" + fh.read() + b"\0")
        code = digest.hexdigest()[:20]
    except OSError:
        code = "-"
    key = {"greenloop": __version__, "tools": code}
    for name in ("mcp", "mcp_types"):
        key[name] = _dist_version(name)
    # pydantic writes the schemas, but a fresh install gets whatever pydantic 2 PyPI serves
    # that day: its minor releases gave identical answers (checked with 2.13 and 2.14), so the
    # snapshot names only the major version; the on-disk cache below still keys on the files.
    key["pydantic"] = _dist_version("pydantic").split(".", 1)[0]
    return key


class HandshakeCache:
    """The SDK's answers to `initialize` and `tools/list` (per protocol version), on disk; on a
    miss, the shipped snapshot's when its key matches what is installed."""

    def __init__(self, folder: Path, *, enabled: bool, env: Mapping[str, str] | None = None) -> None:
        self.enabled = enabled
        self.off = (env or {}).get("GREENLOOP_MCP_HANDSHAKE") == "sdk"
        self._shipped: dict[str, Any] | None = None
        parts = [
            CACHE_VERSION,
            sys.version,
            f"enabled={enabled}",
            *(_stamp(os.path.join(_HERE, name)) for name in (*TOOL_MODULES, "__init__.py")),
        ]
        # The answers are the SDK's, with schemas pydantic wrote: their files are in the key.
        for name in ("mcp", "mcp_types", "pydantic", "pydantic_core"):
            spec = importlib.util.find_spec(name)
            parts.append(_stamp(spec.origin if spec else None))
        key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]
        self.path = folder / f"mcp-handshake-{key}.json"
        self._data: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self._data = data if isinstance(data, dict) else {}
            except (OSError, ValueError):
                self._data = {}
        return self._data

    def _snapshot(self) -> dict[str, Any]:
        """The shipped snapshot's section for `enabled`, or {} when its key does not match."""
        if self._shipped is None:
            self._shipped = {}
            try:
                data = json.loads(SNAPSHOT_PATH.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            if isinstance(data, dict) and data.get("key") == snapshot_key():
                section = data.get("enabled" if self.enabled else "disabled")
                self._shipped = section if isinstance(section, dict) else {}
        return self._shipped

    def can_answer(self) -> bool:
        """Could `initialize` be answered without the SDK (a cache file, a matching snapshot)?"""
        if self.off:
            return False
        return self.path.is_file() or bool(self._snapshot().get("initialize"))

    def _find(self, kind: str, protocol_version: str) -> dict[str, Any] | None:
        if self.off:
            return None
        for source in (self._load(), self._snapshot()):
            answers = source.get(kind, {})
            found = answers.get(protocol_version)
            if isinstance(found, str):  # the snapshot stores a list once: "same as version X"
                found = answers.get(found)
            if isinstance(found, dict):
                return found
        return None

    def initialize(self, protocol_version: str) -> dict[str, Any] | None:
        """The SDK's answer to `initialize` for this protocol version, or None."""
        return self._find("initialize", protocol_version)

    def tools(self, protocol_version: str) -> dict[str, Any] | None:
        """The SDK's answer to `tools/list` (first page) for this protocol version, or None."""
        return self._find("tools_list", protocol_version)

    def remember(self, kind: str, result: dict[str, Any], protocol_version: str | None = None) -> None:
        """Store one answer of the SDK; written atomically, failures ignored (it is a cache)."""
        import tempfile  # only here, once the SDK has answered: keeps it off the start-up path

        if self.off or kind not in ("initialize", "tools_list") or not protocol_version:
            return
        with self._lock:
            data = self._load()
            if data.get(kind, {}).get(protocol_version) == result:
                return
            data.setdefault(kind, {})[protocol_version] = result
            with contextlib.suppress(OSError):
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".mcp-", dir=self.path.parent)
                try:
                    with os.fdopen(fd, "w", encoding="utf-8") as fh:
                        json.dump(data, fh)
                    os.replace(tmp, self.path)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
