"""Integration runs: real units on loopback ports, cross-unit HTTP cases, trace, logs, no survivors.

`integrate(project)` is the entry point; importing this package starts nothing.
"""

from __future__ import annotations

from greenloop.integration.run import IntegrationFailure, IntegrationResult, integrate
from greenloop.integration.spec import Spec, load_spec

__all__ = ["IntegrationFailure", "IntegrationResult", "Spec", "integrate", "load_spec"]
