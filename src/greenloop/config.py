"""The config model (DESIGN §3, Config). Declared once, validated at the edge.

This is the minimal shape other modules rely on: `load(workspace) -> Config`. Layered loading
(user, project, patch), validation naming every bad field and `config show` provenance are
built on top of it without changing these names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["Config", "load"]


@dataclass(frozen=True)
class Config:
    max_intercept_rounds: int = 2
    default_timeout_ms: int = 120_000
    summary_tail_chars: int = 3000
    enabled: bool = True
    hint_language: str = "en"  # "en" | "zh"
    sandbox: str = "workspace-write"  # deployment default sandbox mode


def load(workspace: str | os.PathLike[str] = ".") -> Config:
    """The effective config for a workspace."""
    return Config()
