"""Every doctor check for this machine and one workspace, area by area (see greenloop.doctor)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from greenloop.doctor.browser import browser_checks
from greenloop.doctor.executable import greenloop_checks
from greenloop.doctor.harness import harness_checks
from greenloop.doctor.report import Report
from greenloop.doctor.runner import runner_checks
from greenloop.doctor.sandbox import sandbox_checks
from greenloop.doctor.state import state_checks

__all__ = ["diagnose"]

def diagnose(workspace: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Report:
    """Every check for this machine and `workspace` (an existing folder; the caller checks)."""
    env = os.environ if env is None else env
    root = os.path.realpath(os.fspath(workspace))
    checks = [
        *greenloop_checks(env),
        *runner_checks(root, env),
        *sandbox_checks(root, env),
        *browser_checks(root, env),
        *harness_checks(root, env),
        *state_checks(root),
    ]
    return Report(root, tuple(checks))
