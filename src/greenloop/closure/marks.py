"""Tests taken away: the skip, xfail, only, todo and ignore marks an agent adds, and the tests it removes.

The gate asks two things (docs/closure-gate.md, "What counts as taking a test away"):

- `snapshot(root)` at a session's first hook event: a compact JSON text of every test file's
  marks and test declarations, with each file's size and modification time;
- `taken_away(root, baseline)` at a turn's end: the marks present now that the baseline lacks,
  and the test declarations the baseline had that are gone (a commented-out test, a deleted
  function, a deleted file, a renamed test: each reads as removed; the gate decides what that
  means). A file whose size and modification time match the snapshot is not read again. With
  no baseline the comparison is against git HEAD's version of each test file (one
  `git ls-tree` and one `git show`, through system/proc.py), and outside git only `.only`
  marks are reported, since any of them narrows every later run.

Test files are those the probe's walk finds (runner/test_paths.py: breadth-first, 20,000
entries, never node_modules, virtualenvs, hidden or build folders), plus `conftest.py`, Go's
`*_test.go` and Rust's `.rs` files. What each language's marks look like is mark_rules.py.

Bounds: a file over MAX_FILE_BYTES (1 MB) is not read, nor are test files after the first
MAX_FILES (2,000) of the walk; a snapshot keeps at most MAX_DECLS (20,000) declarations (a
file past that keeps its marks, and its removed tests are not reported). In a file at most
1,000 lines holding a mark's word are read (mark_rules.MAX_MARK_LINES), and a match more than
4,000 characters into its line is not (MAX_PREFIX). Lines are cut at 200 characters.

Speed (bench/marks_snapshot.py, one run, a 2-core machine at load 0.4, files of ten tests):
`snapshot` of 200 test files (0.4 MB) takes 19 ms in a plain folder (reading them alone
takes 1.2 ms), of 2,000 (4.2 MB) 174-179 ms; in a git work tree, where a file whose bytes
are the blob in git's index is hashed and not scanned, 200 files take 9 ms and 2,000 take
36 ms. Given the previous snapshot (`reuse`): 2.4 ms for 200, 12-32 ms for 2,000.
`taken_away` against a snapshot after one edit: 1.5 ms for 200 files, 14-27 ms for 2,000;
against git HEAD (no snapshot) about 100 ms for 2,000. Importing the rules (their patterns)
costs a fresh process about 5 ms.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from greenloop.closure.mark_rules import MAX_TEXT, Found, language_of, scan
from greenloop.layout import git_root
from greenloop.runner.test_paths import MAX_DEPTH, Walk, is_test_file, skipped_dir

__all__ = ["KINDS", "MAX_DECLS", "MAX_FILES", "MAX_FILE_BYTES", "Mark", "snapshot", "taken_away"]

KINDS = ("skip", "xfail", "only", "todo", "ignore", "removed")
MAX_FILE_BYTES = 1_000_000
MAX_FILES = 2_000
MAX_DECLS = 20_000
# Test files to read at which a snapshot asks git's index first. Measured in one process: 50
# files 4.2 ms through git against 4.9 ms scanned, 100 files 6.8 against 13.7, 200 files 10.1
# against 19.8; a fresh process also pays for importing system/proc (the session's first
# hook event takes the working-tree fingerprint, which imports it anyway).
GIT_FROM_FILES = 100
SNAPSHOT_VERSION = 1


class Mark(NamedTuple):
    """One way a test was taken away, at its file and line."""

    file: str  # path relative to the workspace root, '/'-separated
    line: int  # 1-based line in the current file (for "removed": its line in the baseline)
    kind: str  # "skip" | "xfail" | "only" | "todo" | "ignore" | "removed"
    test: str | None  # the test's name as written in source, when known
    text: str  # the line, stripped, bounded to 200 characters

    def to_json(self) -> dict[str, Any]:
        """The mark as a JSON object (the keys are the field names)."""
        return {"file": self.file, "line": self.line, "kind": self.kind, "test": self.test, "text": self.text}


class _File(NamedTuple):
    rel: str
    lang: str
    path: str
    size: int
    mtime_ns: int


class _Tree(NamedTuple):
    """The test files of a workspace that are read, and those that are not (bounds)."""

    files: tuple[_File, ...]
    too_big: tuple[str, ...]
    over_limit: int
    truncated: bool


def _tree(root: str) -> _Tree:
    files: list[_File] = []
    too_big: list[str] = []
    over = 0
    walk = Walk(root)
    for _folder, rel, entry in walk:
        lang = language_of(rel, is_test_file(rel))
        if lang is None:
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        if st.st_size > MAX_FILE_BYTES:
            too_big.append(rel)
        elif len(files) >= MAX_FILES:
            over += 1
        else:
            files.append(_File(rel, lang, entry.path, st.st_size, st.st_mtime_ns))
    return _Tree(tuple(files), tuple(too_big), over, walk.truncated)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None


def _scan(data: bytes, lang: str) -> Found:
    return scan(data.decode("utf-8", "replace"), lang)


def snapshot(root: str, reuse: str | None = None) -> str:
    """A compact JSON text of the workspace's test files' marks and test declarations (bounded).

    `{"v": 1, "files": {rel: [size, mtime_ns, marks, decls]}, "too_big": [rel…], "over_limit": n,
    "truncated": bool}`, marks as `[line, kind, test, text]`, decls as `[line, name, text]`
    (decls null past MAX_DECLS). In a git work tree with GIT_FROM_FILES test files or more, a
    file whose bytes are the index's blob is kept as `[size, mtime_ns, blob_id, null]` instead
    of being scanned (mark_git.py). Only `taken_away` needs to read it. `reuse`, an earlier
    snapshot of the same workspace, saves reading the files whose size and modification time
    it already holds.
    """
    tree = _tree(root)
    earlier = _earlier_files(reuse)
    kept: dict[str, list[Any]] = {}
    for f in tree.files:
        entry = earlier.get(f.rel)
        if entry is not None and entry[0] == f.size and entry[1] == f.mtime_ns:
            kept[f.rel] = entry
    in_git = _in_git(root, [f for f in tree.files if f.rel not in kept])
    out: dict[str, list[Any]] = {}
    decls_left = MAX_DECLS
    for f in tree.files:
        entry = kept.get(f.rel) or in_git.get(f.rel)
        if entry is None:
            data = _read(f.path)
            if data is None:
                continue
            found = _scan(data, f.lang)
            entry = [f.size, f.mtime_ns, [list(m) for m in found.marks], [list(d) for d in found.decls]]
        if isinstance(entry[3], list):
            if len(entry[3]) <= decls_left:
                decls_left -= len(entry[3])
            else:
                entry = [*entry[:3], None]
        out[f.rel] = entry
    body = {
        "v": SNAPSHOT_VERSION,
        "files": out,
        "too_big": list(tree.too_big),
        "over_limit": tree.over_limit,
        "truncated": tree.truncated,
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _in_git(root: str, files: list[_File]) -> dict[str, list[Any]]:
    """The snapshot entries of the files whose bytes are their blob in git's index (read and
    hashed while `git ls-files` runs). Below GIT_FROM_FILES files, scanning them all is
    cheaper than starting git, and nothing is asked."""
    if len(files) < GIT_FROM_FILES or git_root(root) is None:
        return {}
    from greenloop.closure.mark_git import IndexIds, blob_id

    ids = IndexIds(root, [f.rel for f in files]).start()
    digests: dict[str, str] = {}
    for f in files:
        data = _read(f.path)
        if data is not None and len(data) == f.size:
            digests[f.rel] = blob_id(data)
    index = ids.result()
    return {
        f.rel: [f.size, f.mtime_ns, oid, None]
        for f in files
        if (oid := index.get(f.rel)) is not None and digests.get(f.rel) == oid
    }


def _earlier_files(reuse: str | None) -> dict[str, list[Any]]:
    """The files of an earlier snapshot, as stored; nothing when it is not one of this version."""
    if not reuse:
        return {}
    try:
        data = json.loads(reuse)
        files = data["files"] if isinstance(data, dict) and data.get("v") == SNAPSHOT_VERSION else {}
    except (ValueError, KeyError):
        return {}
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(v, list) and len(v) == 4}


class _Base(NamedTuple):
    """One file as the baseline saw it; decls None when the baseline did not keep them."""

    marks: tuple[tuple[int, str, str | None, str], ...]
    decls: tuple[tuple[int, str, str], ...] | None
    stat: tuple[int, int] | None = None  # (size, mtime_ns) for a snapshot's files
    blob: str | None = None  # a snapshot's file kept as its git blob: marks and decls are in it


def _parse(baseline: str) -> dict[str, list[Any]] | None:
    """A snapshot's files as stored, or None when the text is not a snapshot of this version.
    Entries are turned into baselines (`_entry`) only for the files that changed."""
    try:
        data = json.loads(baseline)
    except ValueError:
        return None
    if (
        not isinstance(data, dict)
        or data.get("v") != SNAPSHOT_VERSION
        or not isinstance(data.get("files"), dict)
    ):
        return None
    return {str(k): v for k, v in data["files"].items() if isinstance(v, list) and len(v) == 4}


def _entry(entry: list[Any]) -> _Base | None:
    """One stored file as a baseline; None for an entry of the wrong shape."""
    try:
        size, mtime, marks, decls = entry
        if isinstance(marks, str):
            return _Base((), None, (int(size), int(mtime)), marks)
        return _Base(
            tuple((int(ln), str(k), None if t is None else str(t), str(x)) for ln, k, t, x in marks),
            None if decls is None else tuple((int(ln), str(n), str(x)) for ln, n, x in decls),
            (int(size), int(mtime)),
        )
    except (ValueError, TypeError):
        return None


def _new_marks(rel: str, base: Sequence[tuple[int, str, str | None, str]], now: Found) -> list[Mark]:
    """Marks in `now` beyond those of the baseline; lines move, so a mark is its kind, test and text."""
    left = Counter((k, t, x) for _ln, k, t, x in base)
    out: list[Mark] = []
    for ln, kind, test, text in now.marks:
        key = (kind, test, text)
        if left[key] > 0:
            left[key] -= 1
        else:
            out.append(Mark(rel, ln, kind, test, text))
    return out


def _removed(rel: str, base: Iterable[tuple[int, str, str]] | None, now: Found | None) -> list[Mark]:
    """Declarations of the baseline missing now (by name, counting repeats), at their old lines."""
    if base is None:
        return []
    left = Counter(name for _ln, name, _x in now.decls) if now is not None else Counter[str]()
    out: list[Mark] = []
    for ln, name, text in base:
        if left[name] > 0:
            left[name] -= 1
        else:
            out.append(Mark(rel, ln, "removed", name, text[:MAX_TEXT]))
    return out


def _compare(rel: str, base: _Base | None, now: Found | None) -> list[Mark]:
    base = base or _Base((), ())
    added = _new_marks(rel, base.marks, now) if now is not None else []
    return added + _removed(rel, base.decls, now)


def _at(mark: Mark) -> tuple[int, bool]:
    return (mark.line, mark.kind == "removed")


def _gone(root: str, rel: str) -> bool:
    return not os.path.lexists(os.path.join(root, *rel.split("/")))


def taken_away(root: str, baseline: str | None) -> tuple[Mark, ...]:
    """Marks present now that the baseline lacks, and test declarations the baseline had that are
    gone. With baseline None: compared against git HEAD's version of each test file when the root is
    in git; otherwise only `.only` marks are reported."""
    root = os.path.abspath(root)
    tree = _tree(root)
    stored = _parse(baseline) if baseline is not None else None
    current = {f.rel for f in tree.files}
    if stored is not None:
        same = {
            f.rel for f in tree.files if (e := stored.get(f.rel)) and e[0] == f.size and e[1] == f.mtime_ns
        }
        changed = [rel for rel in stored if rel not in same and (rel in current or _gone(root, rel))]
        base = {rel: b for rel in changed if (b := _entry(stored[rel])) is not None}
        same |= {rel for rel in changed if rel not in base}  # an entry of the wrong shape: not compared
        same |= _from_blobs(root, base)
    else:
        from greenloop.closure.mark_git import head_versions  # (git only when there is no snapshot)

        head = head_versions(root, {f.rel: f.path for f in tree.files}, _accepts, MAX_FILE_BYTES)
        if head is None:  # not in git, or no commit yet: only what narrows every later run
            return tuple(m for f in tree.files if f.lang == "js" for m in _only_marks(f))
        base = {rel: _Base(*_scan(data, lang)) for rel, (lang, data) in head.changed.items()}
        same = set(head.unchanged)
    out: list[Mark] = []
    for f in tree.files:
        if f.rel in same:
            continue  # untouched since the baseline
        data = _read(f.path)
        if data is not None:
            out.extend(sorted(_compare(f.rel, base.get(f.rel), _scan(data, f.lang)), key=_at))
    for rel, was in base.items():
        if rel not in current and _gone(root, rel):
            out.extend(_compare(rel, was, None))
    return tuple(out)


def _from_blobs(root: str, base: dict[str, _Base]) -> set[str]:
    """Fill in, from git, the baseline files a snapshot kept as blobs; returns those git could
    not give (they are not compared)."""
    need = [(rel, b) for rel, b in base.items() if b.blob is not None and b.stat is not None]
    if not need:
        return set()
    from greenloop.closure.mark_git import blobs

    got = blobs(root, [(b.blob, b.stat[0]) for _rel, b in need if b.blob and b.stat])
    if got is None:
        return {rel for rel, _b in need}
    lost: set[str] = set()
    for (rel, b), data in zip(need, got, strict=True):
        lang = _accepts(rel)
        if lang is None:
            lost.add(rel)  # (a stub compared would make every mark of the file look new)
        else:
            base[rel] = _Base(*_scan(data, lang), b.stat)
    return lost


def _only_marks(f: _File) -> list[Mark]:
    data = _read(f.path)
    if data is None:
        return []
    marks = [Mark(f.rel, ln, k, t, x) for ln, k, t, x in _scan(data, f.lang).marks if k == "only"]
    return sorted(marks, key=_at)


def _accepts(rel: str) -> str | None:
    """The rules a baseline path is read with, when the walk would have read it (None otherwise)."""
    parts = rel.split("/")
    if len(parts) - 1 > MAX_DEPTH or any(skipped_dir(p) for p in parts[:-1]):
        return None
    return language_of(rel, is_test_file(rel))
