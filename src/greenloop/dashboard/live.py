"""What a running `greenloop serve` and a run in progress tell each other, through files.

`serve` writes `.greenloop/serve.json` (`{url, token, pid}`) in the state root it watches and
removes it when it stops. A run that finds that file (one `stat` when no dashboard runs)
announces itself in `.greenloop/live/<run_id>` (the path of its run folder), so the dashboard
can stream a run that has not finished, and prints the dashboard's link to it.
Nothing here imports web code: the run path uses it.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import NamedTuple

__all__ = [
    "LIVE_DIR",
    "SERVE_FILE",
    "Serving",
    "announce",
    "announced",
    "find_serving",
    "finished",
    "serving",
    "write_serving",
]

SERVE_FILE = "serve.json"
LIVE_DIR = "live"


class Serving(NamedTuple):
    """A dashboard serving a state root: its base URL and access token."""

    url: str
    token: str
    pid: int

    def link(self, path: str) -> str:
        """The dashboard's address of `path`, with the token a browser trades for its cookie."""
        return f"{self.url}{path}?token={self.token}"


def _state(root: str) -> str:
    return os.path.join(root, ".greenloop")


def serving(root: str) -> Serving | None:
    """The dashboard serving `root` (a state root), or None (none runs, or it died)."""
    path = os.path.join(_state(root), SERVE_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        pid = int(data["pid"])
        os.kill(pid, 0)  # a dashboard that died without cleaning up is not serving
        return Serving(str(data["url"]), str(data["token"]), pid)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_serving(start: str) -> tuple[str, Serving] | None:
    """The dashboard serving `start` or a folder above it (its state root), if one runs."""
    folder = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(folder, ".greenloop", SERVE_FILE)):
            found = serving(folder)
            return (folder, found) if found is not None else None
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def write_serving(root: str, info: Serving) -> str:
    """Record a dashboard for `root` (atomically); returns the file to remove when it stops."""
    folder = _state(root)
    from greenloop.layout import make_state_dir

    make_state_dir(folder)
    path = os.path.join(folder, SERVE_FILE)
    from greenloop.system.atomic import write_text

    write_text(path, json.dumps(info._asdict()), mode=0o600)  # the token is the dashboard's only lock
    return path


def announce(root: str, run_id: str, run_dir: str, framework: str | None) -> None:
    """Tell a serving dashboard that `run_id` has started in `run_dir` (never raises)."""
    folder = os.path.join(_state(root), LIVE_DIR)
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, run_id), "w", encoding="utf-8") as fh:
            json.dump({"run_dir": run_dir, "framework": framework}, fh)
    except OSError:
        pass  # the dashboard shows the run when it ends


def announced(path: str) -> tuple[str, str | None] | None:
    """An announcement's (run folder, framework), or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return str(data["run_dir"]), (str(data["framework"]) if data.get("framework") else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def finished(root: str, run_id: str) -> None:
    """The run has its result.json: drop its announcement (never raises)."""
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(_state(root), LIVE_DIR, run_id))
