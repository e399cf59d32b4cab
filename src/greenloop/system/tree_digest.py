"""The working-tree fingerprint's digest, and taking it with the standard library alone.

`greenloop.system.fingerprint` takes a run's fingerprint while the suite runs (through
system/proc, beside the runner); the Stop hook takes one more to compare (the gate's stale
green and no-run rules) and may import nothing heavy, so `now` starts `git status` with
`os.posix_spawn` and a pipe, and hashes with the built-in `_sha256` (hashlib loads OpenSSL:
several milliseconds). Both produce the same string for the same tree.
"""

from __future__ import annotations

import os

from greenloop.layout import NOT_CODE_DIRS, git_root

__all__ = [
    "GIT_ARGS", "GIT_TIMEOUT_S", "PROSE_SUFFIXES", "SKIP_DIRS", "SKIP_FILES", "WALK_BUDGET",
    "git_digest", "now", "walk",
]

WALK_BUDGET = 20_000
# greenloop's own outputs in a workspace: they change with every run and are not code.
SKIP_FILES = frozenset({"bugs.ndjson", "timeline.ndjson"})
SKIP_DIRS = NOT_CODE_DIRS
# Prose, not code: a changelog or README edited after a green run leaves the run's verdict
# standing (the gate's stale-green and no-run rules hold on code changes).
PROSE_SUFFIXES = (".md", ".markdown", ".rst", ".adoc")
GIT_ARGS = (
    "status",
    "--porcelain=v2",
    "--branch",
    "-z",
    "--untracked-files=all",
    "--",
    ".",
    ":(exclude,glob)**/.greenloop/**",
    ":(exclude,glob)**/bugs.ndjson",
    ":(exclude,glob)**/timeline.ndjson",
    *(f":(exclude,glob)**/*{suffix}" for suffix in PROSE_SUFFIXES),
)
GIT_TIMEOUT_S = 10.0


def _sha256() -> object:
    try:
        import _sha256  # type: ignore[import-not-found]  # built in: no OpenSSL to load

        return _sha256.sha256()
    except ImportError:  # pragma: no cover - an interpreter built without it
        import hashlib

        return hashlib.sha256()


def _stat_token(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "gone"
    return f"{st.st_size}:{st.st_mtime_ns}"


def git_digest(data: bytes, root: str) -> str:
    """The fingerprint of `git status --porcelain=v2 -z` output: each entry, plus each changed
    path's size and modification time (editing a modified file again still shows)."""
    h = _sha256()
    update = h.update  # type: ignore[attr-defined]
    for entry in data.split(b"\0"):
        if not entry:
            continue
        text = entry.decode("utf-8", "surrogateescape")
        update(entry + b"\0")
        if text.startswith("# branch.oid"):
            continue
        if text[:1] in ("1", "2", "u", "?"):
            # The path is the last space-separated field (renames carry the old path in the next entry).
            fields_before_path = {"1": 8, "2": 9, "u": 10}.get(text[0])
            rel = text[2:] if fields_before_path is None else text.split(" ", fields_before_path)[-1]
            update(_stat_token(os.path.join(root, rel)).encode())
    return "git:" + str(h.hexdigest())[:20]  # type: ignore[attr-defined]


def walk(workspace: str) -> str:
    """The fingerprint outside git: a bounded breadth-first walk of sizes and modification times."""
    h = _sha256()
    update = h.update  # type: ignore[attr-defined]
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
                if entry.name in SKIP_FILES or entry.name.endswith(PROSE_SUFFIXES):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = os.path.relpath(entry.path, workspace)
            update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return "walk:" + str(h.hexdigest())[:20]  # type: ignore[attr-defined]


def _git_status(git: str, workspace: str) -> bytes | None:
    """`git status` through a pipe, read whole; None when git fails or overruns its time."""
    import select
    import time

    read_end, write_end = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        pid = _spawn(git, workspace, devnull, write_end, read_end)
    finally:
        os.close(write_end)
        os.close(devnull)
    chunks: list[bytes] = []
    deadline = time.monotonic() + GIT_TIMEOUT_S
    timed_out = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_end], [], [], left)[0]:
                timed_out = True
                os.kill(pid, 9)
                break
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except BaseException:  # a failed read, an interrupt: git is killed, and still reaped below
        os.kill(pid, 9)
        raise
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)  # never left <defunct> in a long-lived process
    if timed_out:
        return None
    return b"".join(chunks) if os.waitstatus_to_exitcode(status) == 0 else None


def _spawn(git: str, workspace: str, devnull: int, write_end: int, read_end: int) -> int:
    # posix_spawn has no working-directory action before Python 3.13: `git -C` names it.
    return os.posix_spawn(
        git,
        [git, "-C", workspace, *GIT_ARGS],
        {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        file_actions=[
            (os.POSIX_SPAWN_DUP2, devnull, 0),
            (os.POSIX_SPAWN_DUP2, write_end, 1),
            (os.POSIX_SPAWN_DUP2, devnull, 2),
            (os.POSIX_SPAWN_CLOSE, read_end),
        ],
    )


def _which_git() -> str | None:
    # shutil.which, without importing shutil (and its compression modules) on the hook path
    for folder in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(folder or ".", "git")
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def now(workspace: str | os.PathLike[str]) -> str | None:
    """The working tree's fingerprint, taken here and now (the same string
    `greenloop.system.fingerprint.working_tree` gives); None when the workspace is no folder."""
    ws = os.path.abspath(os.fspath(workspace))
    if not os.path.isdir(ws):
        return None
    root = git_root(ws)
    git = _which_git() if root is not None else None
    if root is not None and git is not None:
        try:
            data = _git_status(git, ws)
        except OSError:
            data = None
        if data is not None:
            return git_digest(data, root)
    return walk(ws)
