"""The unit registry of a DevLoop project: each unit's status (`testing` while a run is in
progress, then `passed` or `failed`, with the run id), kept in greenloop's state and, when the
project opts in (config `write_unit_status = true`), written back into `units.json`.

The state is `.greenloop/unit-status.json` at the project root, changed under an exclusive
lock and replaced atomically, so runs of several units at once never lose each other's status.
Writing back edits only the `status` and `status_run` members of that unit in `units.json`
(greenloop.devloop.jsonedit), keeping every other field and the file's formatting.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from greenloop.errors import UsageError
from greenloop.timefmt import iso_seconds

__all__ = ["STATUSES", "STATUS_FILE", "read_status", "registry", "set_status"]

STATUS_FILE = "unit-status.json"
Status = Literal["testing", "passed", "failed"]
STATUSES = ("testing", "passed", "failed")


def _state_file(project: Path) -> Path:
    return project / ".greenloop" / STATUS_FILE


@contextlib.contextmanager
def _locked(project: Path) -> Iterator[None]:
    from greenloop.layout import make_state_dir

    make_state_dir(project / ".greenloop")
    fd = os.open(project / ".greenloop" / "unit-status.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_status(project: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Each unit's last status record `{status, run_id, at}`; a damaged file reads as empty."""
    try:
        data = json.loads(_state_file(Path(project)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in data.items() if isinstance(v, dict)} if isinstance(data, dict) else {}


def _atomic(path: Path, text: str) -> None:
    from greenloop.system.atomic import write_text

    write_text(path, text)


def set_status(project: str | os.PathLike[str], unit_id: str, status: Status, run_id: str, *,
               write_back: bool = False, now: float | None = None) -> str | None:
    """Record a unit's status; returns a note when units.json could not be updated."""
    root = Path(project)
    at = iso_seconds(time.time() if now is None else now)
    with _locked(root):
        current = read_status(root)
        current[unit_id] = {"status": status, "run_id": run_id, "at": at}
        _atomic(_state_file(root), json.dumps(current, indent=2, ensure_ascii=False) + "\n")
        if not write_back:
            return None
        return _write_back(root / "units.json", unit_id, status, run_id)


def _write_back(path: Path, unit_id: str, status: str, run_id: str) -> str | None:
    from greenloop.devloop import jsonedit

    try:
        text = path.read_text(encoding="utf-8")
        doc = jsonedit.scan(text)
    except (OSError, ValueError) as exc:
        return f"units.json: status not written back ({exc})"
    units = next((node for key, _, node in doc.members if key == "units"), None)
    if units is None or units.kind != "array":
        return "units.json: status not written back (no 'units' list)"
    for item in units.items:
        if item.kind != "object":
            continue
        ident = next((node for key, _, node in item.members if key == "id"), None)
        if ident is not None and json.loads(text[ident.start:ident.end]) == unit_id:
            _atomic(path, jsonedit.set_members(text, item, {"status": status, "status_run": run_id}))
            return None
    return f"units.json: status not written back (no unit {unit_id!r})"


def registry(project: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The units of `units.json` with their status (UsageError when the file is unusable)."""
    path = Path(project) / "units.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{path} does not exist: `greenloop units` needs a DevLoop project (units.json)"
        ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path} cannot be read as JSON ({exc}): fix the file") from None
    units = data.get("units") if isinstance(data, dict) else None
    if not isinstance(units, list):
        raise UsageError(f"{path}: 'units' must be a list of unit objects")
    status = read_status(project)
    out = []
    for u in units:
        if not isinstance(u, dict) or not isinstance(u.get("id"), str):
            continue
        s = status.get(u["id"], {})
        out.append({"id": u["id"], "kind": u.get("kind"), "path": u.get("path") or f"units/{u['id']}",
                    "depends_on": list(u.get("depends_on") or ()), "status": s.get("status"),
                    "run_id": s.get("run_id"), "at": s.get("at")})
    return out
