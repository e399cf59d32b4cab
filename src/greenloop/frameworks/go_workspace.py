"""A Go workspace as go.mod and go.work describe it: the modules and their folders, the
package patterns of a whole run, and the GOFLAGS a go.work workspace refuses. Planning
(frameworks/go_plan.py, runner/plan.py) and parsing (frameworks/go.py) both read it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["module_dirs", "workspace_env", "workspace_patterns"]

_MODULE = re.compile(r"^\s*module\s+(\S+)", re.M)
_USE = re.compile(r"^\s*use\s+(?:\(([^)]*)\)|(\S+))", re.M)


def _work_uses(root: str) -> list[str] | None:
    """The folders a go.work at `root` uses, or None without a go.work."""
    try:
        with open(os.path.join(root, "go.work"), encoding="utf-8", errors="replace") as fh:
            work = fh.read()
    except OSError:
        return None
    dirs: list[str] = []
    for m in _USE.finditer(work):
        block = m.group(1) if m.group(1) is not None else m.group(2)
        for d in block.splitlines():
            d = d.split("//", 1)[0].strip().strip('"')
            if d:
                dirs.append(d)
    return dirs


def workspace_patterns(root: str) -> list[str]:
    """The package patterns of a whole run: `./...`, or one `./mod/...` per module of go.work
    (`./...` at a go.work root without its own go.mod matches no module)."""
    uses = _work_uses(root)
    if not uses:
        return ["./..."]
    out = []
    for d in uses:
        norm = os.path.normpath(d)
        out.append("./..." if norm == "." else f"./{norm}/...")
    return list(dict.fromkeys(out))


def workspace_env(root: str, env: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(variables for the child, notes): under go.work, Go refuses `-mod=mod`/`-mod=vendor` in
    GOFLAGS ("-mod may only be set to readonly when in workspace mode"), so they are dropped."""
    flags = env.get("GOFLAGS", "")
    if _work_uses(root) is None or "-mod=" not in flags:
        return [], []
    kept = [f for f in flags.split() if not f.startswith("-mod=") or f == "-mod=readonly"]
    note = f"GOFLAGS {flags!r} had -mod, which go.work workspaces refuse; the run used {' '.join(kept)!r}"
    return [("GOFLAGS", " ".join(kept))], [note]


def module_dirs(root: str | None) -> dict[str, str]:
    """Module path -> folder relative to `root`, from go.mod or every `use` of go.work."""
    if not root:
        return {}
    out: dict[str, str] = {}
    dirs = _work_uses(root) or ["."]
    for d in dirs:
        try:
            with open(os.path.join(root, d, "go.mod"), encoding="utf-8", errors="replace") as fh:
                m = _MODULE.search(fh.read())
        except OSError:
            continue
        if m:
            out[m.group(1).strip('"')] = os.path.normpath(d)
    return out
