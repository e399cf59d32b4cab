"""The baseline an `--affected` run counts changes from: the session's last green whole-suite run.

A session's first `--affected` run leaves `.greenloop/affected/<session digest>.json`; from
then on each green run of the whole suite in that session rewrites it with what the tree was
at that run: git's HEAD commit and the content digest of each file that differed from it
(`git status`, untracked included). Sessions that never ask for `--affected` pay one stat.

The files changed since the baseline are then: those the commits since its HEAD touched,
the files differing from HEAD now whose content is not what the baseline recorded, and the
files that differed then and no longer do (changed back). A baseline that cannot be used (its
commit is gone, the file unreadable) falls back to git HEAD, with a note.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Sequence

from greenloop import layout

__all__ = ["Baseline", "folder", "load", "path_of", "record", "since_baseline", "start"]

Git = Callable[..., "str | None"]
Baseline = dict[str, object]


def folder(root: str) -> str:
    """Where the sessions' baselines are kept: it exists once a session has run `--affected`."""
    return os.path.join(str(layout.state_dir(root)), "affected")


def path_of(root: str, session_id: str) -> str:
    """Where the session's baseline is kept (a digest of its id names the file)."""
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:16]
    return os.path.join(folder(root), f"{digest}.json")


def _digest(root: str, rel: str) -> str | None:
    try:
        with open(os.path.join(root, rel), "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _write(path: str, data: Baseline) -> None:
    from greenloop.system.atomic import write_text

    write_text(path, json.dumps(data))


def load(root: str, session_id: str) -> Baseline | None:
    """The session's baseline, or None (none yet, or unreadable)."""
    try:
        with open(path_of(root, session_id), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def start(root: str, session_id: str) -> None:
    """Mark the session as one that uses `--affected` (an empty baseline: changes count from HEAD)."""
    path = path_of(root, session_id)
    if not os.path.exists(path):
        try:
            layout.make_state_dir(layout.state_dir(root))
            _write(path, {})
        except OSError:
            pass


def record(root: str, session_id: str, run_id: str, head: str | None, dirty: Sequence[str]) -> None:
    """After a green whole-suite run of a session that uses `--affected`: the tree it ran on."""
    path = path_of(root, session_id)
    if not os.path.exists(path) or head is None:
        return
    with contextlib.suppress(OSError):
        _write(path, {"run_id": run_id, "head": head, "dirty": {rel: _digest(root, rel) for rel in dirty}})


def since_baseline(root: str, base: Baseline, head: str | None, dirty: Sequence[str],
                   git: Git) -> tuple[list[str], str | None]:
    """(the files changed since the baseline, relative to `root`; a reason the baseline
    cannot be used, or None). `dirty`: the files that differ from HEAD now."""
    base_head = base.get("head")
    recorded = base.get("dirty")
    ran = base.get("run_id")
    if not (isinstance(base_head, str) and isinstance(recorded, dict) and isinstance(ran, str)):
        return [], "the session has no green whole-suite run yet"
    candidates = set(dirty)
    if base_head != head:
        out = git(root, "diff", "--name-only", "-z", "--no-renames", "--relative", base_head, "HEAD")
        if out is None:
            return [], f"the commit {base_head[:12]} of the last green whole-suite run is gone"
        candidates.update(rel for rel in out.split("\0") if rel)
    # a file that differed from HEAD then and no longer does may have changed back
    candidates.update(rel for rel in recorded if isinstance(rel, str))
    # unchanged since the run: it differed from that HEAD then and holds the same bytes now
    # (or was missing then and still is)
    same = {rel for rel in candidates if rel in recorded and recorded[rel] == _digest(root, rel)}
    return sorted(candidates - same), None
