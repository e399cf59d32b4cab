"""git HEAD's version of a workspace's test files: the baseline of closure/marks.py when the gate
has no snapshot.

Two git processes through system/proc.py, whatever the number of files: `git ls-tree -r -l -z
HEAD -- .` names HEAD's files under the workspace with their blob ids and sizes; a file whose
bytes hash to its blob id is unchanged and never sent for; `git show` prints the blobs of the
others back to back, cut apart by the sizes ls-tree gave.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from typing import NamedTuple

from greenloop.layout import git_root
from greenloop.system import proc

__all__ = ["GIT_TIMEOUT_S", "MAX_BLOBS", "HeadVersions", "blob_id", "head_versions"]

GIT_TIMEOUT_S = 10.0
MAX_BLOBS = 2_000  # HEAD versions fetched at most (the rest are not compared)


class HeadVersions(NamedTuple):
    """HEAD's test files: those that differ from the working tree (or are gone from it), with
    their rules and bytes, and those the working tree holds unchanged."""

    changed: dict[str, tuple[str, bytes]]
    unchanged: frozenset[str]


def blob_id(data: bytes, length: int = 40) -> str:
    """git's object id of a blob with these bytes (SHA-1, or SHA-256 for a 64-digit id)."""
    import hashlib  # (only on this path)

    algo = hashlib.sha256 if length == 64 else hashlib.sha1
    return algo(b"blob %d\0" % len(data) + data).hexdigest()


def _git(git: str, cwd: str, args: list[str]) -> bytes | None:
    """git's stdout, or None when it failed or did not finish in time."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="greenloop-marks-")
    try:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
        raw = proc.run_to_completion(
            [git, *args], cwd=cwd, env=env, timeout_s=GIT_TIMEOUT_S, stdout_path=out, stderr_path=err
        )
        if raw.exit_code != 0 or raw.timed_out:
            return None
        with open(out, "rb") as fh:
            return fh.read()
    except OSError:
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read(path: str, limit: int) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit + 1)
    except OSError:
        return None


def head_versions(
    root: str, current: Mapping[str, str], accepts: Callable[[str], str | None], max_bytes: int
) -> HeadVersions | None:
    """HEAD's version of the test files under `root` (`accepts(rel)` gives a path's rules, None
    for a path that is not a test file); `current` maps the working tree's test files to their
    paths. None outside git, before the first commit, or when git fails."""
    git = shutil.which("git")
    if git is None or git_root(root) is None:
        return None
    listing = _git(git, root, ["ls-tree", "-r", "-l", "-z", "HEAD", "--", "."])
    if listing is None:
        return None
    wanted: list[tuple[str, str, str, int]] = []
    unchanged: set[str] = set()
    for record in listing.split(b"\0"):
        meta, _, raw_path = record.partition(b"\t")
        fields = meta.split()
        if len(fields) != 4 or fields[1] != b"blob" or fields[0] == b"120000":
            continue  # a submodule, a symbolic link, or the empty tail
        rel = raw_path.decode("utf-8", "surrogateescape")
        lang = accepts(rel)
        if lang is None:
            continue
        oid, size = fields[2].decode(), int(fields[3])
        path = current.get(rel)
        if path is not None:
            data = _read(path, max_bytes)
            if data is not None and len(data) == size and blob_id(data, len(oid)) == oid:
                unchanged.add(rel)
                continue
        if size > max_bytes or len(wanted) >= MAX_BLOBS:
            unchanged.add(rel)  # not compared: bounded
            continue
        wanted.append((rel, lang, oid, size))
    changed: dict[str, tuple[str, bytes]] = {}
    if wanted:
        blobs = _git(git, root, ["show", "--no-textconv", *(oid for _r, _l, oid, _s in wanted)])
        if blobs is None or len(blobs) != sum(size for *_x, size in wanted):
            return None
        at = 0
        for rel, lang, _oid, size in wanted:
            changed[rel] = (lang, blobs[at : at + size])
            at += size
    return HeadVersions(changed, frozenset(unchanged))
