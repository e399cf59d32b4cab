"""A cheap fingerprint of a working tree, so `check` can say "files changed since the last run".

The gate never watches files; the fingerprint is taken when a run is recorded and again when
someone asks `check`, and a difference only adds a note. Two strategies:

- in a git work tree: HEAD plus, for every changed or untracked path (``git status``), its
  size and modification time (so editing an already-modified file again still shows);
- elsewhere: a bounded walk of the workspace (sizes and modification times), skipping
  dependency, build, cache and virtualenv folders.

greenloop's own state (`.greenloop/`, `bugs.ndjson`) never counts as a change.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

from greenloop.layout import NOT_CODE_DIRS

__all__ = ["SKIP_DIRS", "SKIP_FILES", "WALK_BUDGET", "working_tree"]

WALK_BUDGET = 20_000
# greenloop's own outputs in a workspace: they change with every run and are not code.
SKIP_FILES = frozenset({"bugs.ndjson"})
SKIP_DIRS = NOT_CODE_DIRS


def _git_root(start: str) -> str | None:
    folder = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _stat_token(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "gone"
    return f"{st.st_size}:{st.st_mtime_ns}"


def _git(workspace: str, root: str) -> str | None:
    git = shutil.which("git")
    if git is None:
        return None
    from greenloop import proc

    with tempfile.TemporaryDirectory(prefix="greenloop-fp-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        raw = proc.run_to_completion(
            [
                git,
                "status",
                "--porcelain=v2",
                "--branch",
                "-z",
                "--untracked-files=all",
                "--",
                ".",
                ":(exclude,glob)**/.greenloop/**",
                ":(exclude,glob)**/bugs.ndjson",
            ],
            cwd=workspace,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
            timeout_s=10.0,
            stdout_path=out,
            stderr_path=err,
            grace_s=0.2,
        )
        if raw.exit_code != 0:
            return None
        with open(out, "rb") as fh:
            data = fh.read()
    h = hashlib.sha256()
    for entry in data.split(b"\0"):
        if not entry:
            continue
        text = entry.decode("utf-8", "surrogateescape")
        h.update(entry + b"\0")
        if text.startswith("# branch.oid"):
            continue
        if text[:1] in ("1", "2", "u", "?"):
            # The path is the last space-separated field (renames carry the old path in the next entry).
            fields_before_path = {"1": 8, "2": 9, "u": 10}.get(text[0])
            rel = text[2:] if fields_before_path is None else text.split(" ", fields_before_path)[-1]
            h.update(_stat_token(os.path.join(root, rel)).encode())
    return "git:" + h.hexdigest()[:20]


def _walk(workspace: str) -> str:
    h = hashlib.sha256()
    seen = 0
    queue = [workspace]
    while queue and seen < WALK_BUDGET:
        folder = queue.pop(0)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > WALK_BUDGET:
                break
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIP_DIRS and not entry.name.endswith(".egg-info"):
                        queue.append(entry.path)
                    continue
                if entry.name in SKIP_FILES:
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(entry.path, workspace)
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return "walk:" + h.hexdigest()[:20]


def working_tree(workspace: str | os.PathLike[str]) -> str | None:
    """A short string that changes when files in the workspace change; None if unavailable."""
    ws = os.path.abspath(os.fspath(workspace))
    if not os.path.isdir(ws):
        return None
    root = _git_root(ws)
    if root is not None:
        try:
            fp = _git(ws, root)
        except OSError:
            fp = None
        if fp is not None:
            return fp
    return _walk(ws)
