"""A cheap fingerprint of a working tree, so `check` can say "files changed since the last run".

The gate never watches files; the fingerprint is taken when a run is recorded and again when
someone asks `check`, and a difference only adds a note. Two strategies:

- in a git work tree: HEAD plus, for every changed or untracked path (``git status``), its
  size and modification time (so editing an already-modified file again still shows);
- elsewhere: a bounded walk of the workspace (sizes and modification times), skipping
  dependency, build, cache and virtualenv folders.

greenloop's own state (`.greenloop/`, `bugs.ndjson`, `timeline.ndjson`) never counts as a change
(each run appends to the logs: counting them, no two runs would share a fingerprint), nor does
prose (`.md`, `.markdown`, `.rst`, `.adoc`: tree_digest.PROSE_SUFFIXES), so a changelog written
after a green run is not "files changed since the last run".
"""

from __future__ import annotations

import contextlib
import os
import shutil

from greenloop.layout import git_root
from greenloop.system import proc
from greenloop.system.tree_digest import (
    GIT_ARGS,
    GIT_TIMEOUT_S,
    SKIP_DIRS,
    SKIP_FILES,
    WALK_BUDGET,
    git_digest,
    walk,
)

__all__ = ["SKIP_DIRS", "SKIP_FILES", "WALK_BUDGET", "Pending", "start", "working_tree"]


class Pending:
    """A fingerprint being taken: `git status` runs as its own process from `start()` on, so
    the caller's work overlaps it (no thread: nothing waits for the GIL); `result()` reads it.

    Outside a git work tree, or when git cannot answer, `result()` walks the tree instead.
    `close()` stops git and removes its output if `result()` is never asked for.
    """

    def __init__(self, workspace: str | os.PathLike[str]) -> None:
        self.workspace = os.path.abspath(os.fspath(workspace))
        self._started = False
        self._root: str | None = None
        self._child: proc.Child | None = None
        self._tmp: str | None = None

    def start(self) -> Pending:
        """Start hashing the working tree in the background (git, else a walk); returns itself."""
        if self._started:
            return self
        self._started = True
        self._root = git_root(self.workspace) if os.path.isdir(self.workspace) else None
        git = shutil.which("git") if self._root is not None else None
        if git is None:
            return self
        import tempfile  # (loads random and hashlib: not before a full-access run starts)

        self._tmp = tempfile.mkdtemp(prefix="greenloop-fp-")
        with contextlib.suppress(OSError):
            self._child = proc.spawn(
                [git, *GIT_ARGS],
                cwd=self.workspace,
                env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
                stdout_path=os.path.join(self._tmp, "out"),
                stderr_path=os.path.join(self._tmp, "err"),
            )
        return self

    def _git_answer(self) -> bytes | None:
        child, self._child = self._child, None
        if child is None or self._tmp is None:
            return None
        code = child.wait(GIT_TIMEOUT_S)
        if code is None:  # git hung: stop it. A finished git is not swept: a status may start
            child.stop(grace_s=0.2)  # the user's fsmonitor daemon, which is meant to stay.
        if code != 0:
            return None
        try:
            with open(os.path.join(self._tmp, "out"), "rb") as fh:
                return fh.read()
        except OSError:
            return None

    def result(self) -> str | None:
        """The fingerprint; None when the workspace is not a folder."""
        self.start()
        try:
            data = self._git_answer()
        finally:
            self.close()
        if data is not None and self._root is not None:
            return git_digest(data, self._root)
        return walk(self.workspace) if os.path.isdir(self.workspace) else None

    def close(self) -> None:
        """Stop a hash still running; nothing starts after this."""
        self._started = True  # nothing starts after a close
        child, self._child = self._child, None
        if child is not None:
            child.stop(grace_s=0.2)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def start(workspace: str | os.PathLike[str]) -> Pending:
    """Begin taking the fingerprint of `workspace`; read it with `.result()`."""
    return Pending(workspace).start()


def working_tree(workspace: str | os.PathLike[str]) -> str | None:
    """A short string that changes when files in the workspace change; None if unavailable."""
    return start(workspace).result()
