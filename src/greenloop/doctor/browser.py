"""Doctor checks of the browser: Chromium and Playwright for Python, for integration browser steps."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from collections.abc import Mapping

from greenloop.doctor.report import Check, Status

__all__ = ["browser_checks"]

def _has_browser_steps(workspace: str) -> bool:
    from greenloop.errors import GreenloopError
    from greenloop.layout import find_project_root

    project = find_project_root(workspace)
    if project is None or not (project / "integration" / "spec.json").is_file():
        return False
    try:
        from greenloop.integration.spec.loading import load_spec

        return load_spec(project).has_browser_steps
    except (GreenloopError, OSError, ValueError):
        return False  # a broken spec is `greenloop integrate`'s to report, with its own fix


def browser_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    """Chromium and Playwright: a failure when the project has browser steps, else advice."""
    from greenloop.integration.chromium import find_chromium

    needed = _has_browser_steps(workspace)
    missing: Status = "fail" if needed else "warn"
    why = "the project's integration spec has browser steps" if needed else "needed only for browser steps"
    checks: list[Check] = []
    chromium = find_chromium(env)
    if chromium:
        checks.append(Check("browser", "chromium", "ok", chromium))
    else:
        checks.append(
            Check(
                "browser",
                "chromium",
                missing,
                f"Chromium not found (/usr/bin/chromium, PATH, $GREENLOOP_CHROMIUM); {why}",
                "install Debian's chromium (apt-get install chromium); Playwright's own browser "
                "download is never used",
            )
        )
    if importlib.util.find_spec("playwright") is None:
        checks.append(
            Check(
                "browser",
                "playwright",
                missing,
                f"Playwright for Python is not importable by {sys.executable}; {why}",
                "install it beside greenloop: `pip install 'greenloop[browser]'` "
                "(as a tool: `pipx inject greenloop playwright`)",
            )
        )
    else:
        try:
            version = importlib.metadata.version("playwright")
        except importlib.metadata.PackageNotFoundError:
            version = "version unknown"
        checks.append(Check("browser", "playwright", "ok", f"playwright {version}"))
    return checks
