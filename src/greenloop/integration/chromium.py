"""Finding the Chromium that browser steps drive, and the flags that keep it off the network.

The browser is Debian's `chromium` (or `$GREENLOOP_CHROMIUM`), never Playwright's own download,
with flags that keep it off the network: every host name except 127.0.0.1 and localhost
resolves to nothing, no proxy, no background, update, sync or QUIC traffic.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping

from greenloop.errors import ConfigError

__all__ = ["CHROMIUM_ARGS", "CHROMIUM_ENV", "CHROMIUM_PATHS", "find_chromium", "require_browser"]

CHROMIUM_ENV = "GREENLOOP_CHROMIUM"
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium")
CHROMIUM_ARGS = (
    "--headless=new",
    "--no-sandbox",  # greenloop often runs as root in containers, where the sandbox cannot start
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--no-proxy-server",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--metrics-recording-only",
    "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
)
_INSTALL = "pip install 'greenloop[browser]'"


def find_chromium(env: Mapping[str, str]) -> str | None:
    """The Chromium executable: $GREENLOOP_CHROMIUM, else Debian's chromium, else None."""
    chosen = env.get(CHROMIUM_ENV)
    if chosen:
        return chosen if os.access(chosen, os.X_OK) else None
    for path in CHROMIUM_PATHS:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium", path=env.get("PATH")) or shutil.which(
        "chromium-browser", path=env.get("PATH")
    )


def require_browser(env: Mapping[str, str]) -> str:
    """Check, before anything starts, that browser steps can run; return the Chromium path.

    Raises ConfigError (exit 2) naming the missing piece and how to install it.
    """
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"integration/spec.json has browser steps, but Playwright for Python is not installed: "
            f"run {_INSTALL}"
        ) from None
    exe = find_chromium(env)
    if exe is None:
        chosen = env.get(CHROMIUM_ENV)
        if chosen:
            raise ConfigError(
                f"{CHROMIUM_ENV}={chosen!r} is not an executable file; point it at a Chromium "
                "executable or unset it"
            )
        raise ConfigError(
            "integration/spec.json has browser steps, but no Chromium was found "
            f"(looked for {', '.join(CHROMIUM_PATHS)} and chromium on PATH): install Debian's "
            f"chromium package (apt-get install chromium) or set {CHROMIUM_ENV} to its executable"
        )
    return exe
