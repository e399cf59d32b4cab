"""greenloop: keeps AI coding agents honest about tests.

The package root stays import-light (the Stop hook imports it on every agent turn);
the public API is loaded lazily on first attribute access.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


__all__ = ["HARNESSES", "__version__"]
__version__ = "0.1.0"  # the one version constant (pyproject.toml reads it)
# The agent harnesses greenloop has hook adapters for (greenloop.hooks.<name with _>), in the
# order the CLI lists them: the one list `hook`, `init` and the adapters all use.
HARNESSES = ("claude-code", "codex", "gemini", "cursor", "qwen", "opencode", "copilot")


def __getattr__(name: str) -> Any:
    # Lazy re-exports keep `import greenloop` cheap for hook processes.
    if name == "Gate":
        from greenloop.closure.gate import Gate

        return Gate
    raise AttributeError(f"module 'greenloop' has no attribute {name!r}")
