"""Integration runs: real units on loopback ports, cross-unit HTTP cases, trace, logs, no survivors.

`integrate(project)` is the entry point; importing this package starts nothing. The names below
stay importable from the package (`greenloop.integration.integrate`) and load their module on
first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IntegrationFailure", "IntegrationResult", "Spec", "integrate", "load_spec"]

_HOMES = {
    "IntegrationFailure": "greenloop.integration.result",
    "IntegrationResult": "greenloop.integration.result",
    "integrate": "greenloop.integration.run",
    "Spec": "greenloop.integration.spec.records",
    "load_spec": "greenloop.integration.spec.loading",
}


def __getattr__(name: str) -> Any:
    import importlib

    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'greenloop.integration' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
