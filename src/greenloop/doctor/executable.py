"""Doctor checks of greenloop itself: the `greenloop` executable hooks and the MCP server call by name."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

from greenloop.doctor.report import Check

__all__ = ["greenloop_checks"]

def greenloop_checks(env: Mapping[str, str]) -> list[Check]:
    """This greenloop, and whether `greenloop` on PATH is one."""
    from greenloop import __version__

    here = f"greenloop {__version__} (Python {sys.version.split()[0]} at {sys.executable})"
    found = shutil.which("greenloop", path=env.get("PATH") or os.defpath)
    if found is None:
        return [
            Check(
                "greenloop",
                "executable",
                "warn",
                f"{here}; `greenloop` is not on PATH, and harness hooks and the MCP server call it by name",
                "install greenloop as a tool (`pipx install greenloop` or `uv tool install greenloop`) "
                "or put its virtualenv's bin/ on PATH",
            )
        ]
    return [Check("greenloop", "executable", "ok", f"{here}; `greenloop` on PATH is {found}")]
