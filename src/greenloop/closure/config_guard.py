"""A session cannot loosen its own gate: config edited during the session applies from the next one.

An agent can get past the gate without touching a test by editing greenloop's config:
`enabled = false`, `stale_green = "note"`, `require_run = false` or a smaller
`max_intercept_rounds` in `greenloop.toml`, `[tool.greenloop]`, the user config or a patch.
A config file (any layer) modified after the session's first hook event that sets one of
these keys looser than its built-in default does not loosen that session's gate: the key
keeps its default for the session, and the steer says so. A session that began after the
edit (a person's next session) gets the config as written; so does every key that is not
one of these four, and every edit that makes the gate stricter.

Pure apart from reading the layer files' modification times.
"""

from __future__ import annotations

import os

from greenloop.config import Config

TYPE_CHECKING = False  # no typing on the Stop hook's path (tests/test_import_budget.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    from greenloop.config import Layer

__all__ = ["GATE_KEYS", "loosening_layers", "session_config"]

_DEFAULT = Config()
# The keys that decide whether a Stop is held, and when a value is looser than the default.
GATE_KEYS: dict[str, Callable[[Any], bool]] = {
    "enabled": lambda v: v is False,
    "stale_green": lambda v: v != _DEFAULT.stale_green,
    "require_run": lambda v: v is False,
    "max_intercept_rounds": lambda v: isinstance(v, int) and v < _DEFAULT.max_intercept_rounds,
}


def loosening_layers(layers: Sequence[Layer]) -> tuple[Layer, ...]:
    """The layers that set a gate key looser than its default (none: nothing to check)."""
    return tuple(
        layer for layer in layers if any(k in GATE_KEYS and GATE_KEYS[k](v) for k, v in layer.values)
    )


def _mtime(path: str) -> float | None:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def session_config(config: Config, layers: Sequence[Layer], started_at: float | None) -> tuple[Config, str]:
    """The config a session that started at `started_at` is judged by, and a note naming
    the keys set aside ("" when none): the keys that a layer modified since then loosened
    keep their defaults."""
    if started_at is None:
        return config, ""
    edited = [layer for layer in loosening_layers(layers) if (_mtime(layer.path) or 0.0) > started_at]
    keys = sorted({k for layer in edited for k, v in layer.values if k in GATE_KEYS and GATE_KEYS[k](v)})
    restore = {k: getattr(_DEFAULT, k) for k in keys if GATE_KEYS[k](getattr(config, k))}
    if not restore:
        return config, ""
    paths = ", ".join(sorted({layer.path for layer in edited}))
    said = ", ".join(f"{k} = {_toml(getattr(config, k))}" for k in sorted(restore))
    note = (
        f"({said} in {paths} was written during this session: it applies from the next session, "
        "not to the session that wrote it)"
    )
    return config._replace(**restore), note


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)
