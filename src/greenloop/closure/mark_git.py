"""git's copies of a workspace's test files, for closure/marks.py; every process through system/proc.py.

- With no snapshot, the baseline is HEAD: `git ls-tree -r -l -z HEAD -- .` names HEAD's files
  under the workspace with their blob ids and sizes; a file whose bytes hash to its blob id is
  unchanged and never sent for; `git show` prints the blobs of the others back to back, cut
  apart by the sizes (`blobs`).
- A snapshot in a git work tree does not scan a file git already holds: `IndexIds` asks
  `git ls-files -s` for the index's blob ids while the files are read and hashed, and a file
  whose bytes are that blob is kept as the blob's id. Only a file changed at the turn's end
  has its snapshot-time copy read back (`blobs`) and scanned. git keeps those objects: they
  are in HEAD or the index, and an object a later `git add` left unreachable stays until
  `git gc` prunes it (two weeks by default).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping
from typing import NamedTuple

from greenloop.layout import git_root
from greenloop.system import proc

__all__ = ["GIT_TIMEOUT_S", "MAX_BLOBS", "HeadVersions", "IndexIds", "blob_id", "blobs", "head_versions"]

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


_ENV_EXTRA = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_LITERAL_PATHSPECS": "1"}


class IndexIds:
    """`git ls-files -s` of some files, running while the caller reads them; `result()` maps
    each file the index holds to its blob id (empty when git cannot answer)."""

    def __init__(self, root: str, rels: list[str]) -> None:
        self.root = root
        self.rels = rels
        self._child: proc.Child | None = None
        self._tmp: str | None = None

    def start(self) -> IndexIds:
        """Start git, when the root is in a git work tree; returns itself."""
        git = shutil.which("git")
        if git is None or git_root(self.root) is None or not self.rels:
            return self
        import tempfile

        self._tmp = tempfile.mkdtemp(prefix="greenloop-marks-")
        try:
            self._child = proc.spawn(
                [git, "ls-files", "-s", "-z", "--", *self.rels],
                cwd=self.root,
                env={**os.environ, **_ENV_EXTRA},
                stdout_path=os.path.join(self._tmp, "out"),
                stderr_path=os.path.join(self._tmp, "err"),
            )
        except OSError:
            self._child = None
        return self

    def result(self) -> dict[str, str]:
        """rel -> blob id of the files the index holds (stage 0)."""
        child, self._child = self._child, None
        try:
            if child is None or self._tmp is None:
                return {}
            code = child.wait(GIT_TIMEOUT_S)
            if code is None:
                child.stop(grace_s=0.2)
            if code != 0:
                return {}
            with open(os.path.join(self._tmp, "out"), "rb") as fh:
                listing = fh.read()
        except OSError:
            return {}
        finally:
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)
                self._tmp = None
        ids: dict[str, str] = {}
        for record in listing.split(b"\0"):
            meta, _, raw_path = record.partition(b"\t")
            fields = meta.split()
            if len(fields) == 3 and fields[2] == b"0" and fields[0] != b"120000":
                ids[raw_path.decode("utf-8", "surrogateescape")] = fields[1].decode()
        return ids


def blobs(root: str, wanted: list[tuple[str, int]]) -> list[bytes] | None:
    """The bytes of each (blob id, size), in order, from one `git show`; None when git fails."""
    git = shutil.which("git")
    if git is None:
        return None
    if not wanted:
        return []
    data = _git(git, root, ["show", "--no-textconv", *(oid for oid, _size in wanted)])
    if data is None or len(data) != sum(size for _oid, size in wanted):
        return None
    out: list[bytes] = []
    at = 0
    for _oid, size in wanted:
        out.append(data[at : at + size])
        at += size
    return out


def _git(git: str, cwd: str, args: list[str]) -> bytes | None:
    """git's stdout, or None when it failed or did not finish in time."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="greenloop-marks-")
    try:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        env = {**os.environ, **_ENV_EXTRA}
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
    got = blobs(root, [(oid, size) for _r, _l, oid, size in wanted])
    if got is None:
        return None
    changed = {rel: (lang, data) for (rel, lang, _oid, _size), data in zip(wanted, got, strict=True)}
    return HeadVersions(changed, frozenset(unchanged))
