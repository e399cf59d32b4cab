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
file past that keeps its marks, and its removed tests are not reported). Lines are cut at
200 characters. Speed (bench/marks_snapshot.py; a 2-core machine at load 7, CPU time):
`snapshot` of 200 test files (0.4 MB) 24 ms, of 2,000 (4.2 MB) 215 ms; `taken_away` against
a snapshot, nothing changed, 2 ms and 34 ms (each file only stat'ed).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from greenloop.closure.mark_rules import MAX_TEXT, Found, language_of, scan
from greenloop.runner.test_paths import MAX_DEPTH, Walk, is_test_file, skipped_dir

__all__ = ["KINDS", "MAX_DECLS", "MAX_FILES", "MAX_FILE_BYTES", "Mark", "snapshot", "taken_away"]

KINDS = ("skip", "xfail", "only", "todo", "ignore", "removed")
MAX_FILE_BYTES = 1_000_000
MAX_FILES = 2_000
MAX_DECLS = 20_000
SNAPSHOT_VERSION = 1
GIT_TIMEOUT_S = 10.0


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


_EMPTY = Found((), ())


def snapshot(root: str) -> str:
    """A compact JSON text of the workspace's test files' marks and test declarations (bounded).

    `{"v": 1, "files": {rel: [size, mtime_ns, marks, decls]}, "too_big": [rel…], "over_limit": n,
    "truncated": bool}`, marks as `[line, kind, test, text]`, decls as `[line, name, text]`
    (decls null past MAX_DECLS). Only `taken_away` needs to read it.
    """
    tree = _tree(root)
    out: dict[str, list[Any]] = {}
    decls_left = MAX_DECLS
    for f in tree.files:
        data = _read(f.path)
        if data is None:
            continue
        found = _scan(data, f.lang)
        decls: list[Any] | None = None
        if len(found.decls) <= decls_left:
            decls_left -= len(found.decls)
            decls = [list(d) for d in found.decls]
        out[f.rel] = [f.size, f.mtime_ns, [list(m) for m in found.marks], decls]
    body = {
        "v": SNAPSHOT_VERSION,
        "files": out,
        "too_big": list(tree.too_big),
        "over_limit": tree.over_limit,
        "truncated": tree.truncated,
    }
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


class _Base(NamedTuple):
    """One file as the baseline saw it; decls None when the baseline did not keep them."""

    marks: tuple[tuple[int, str, str | None, str], ...]
    decls: tuple[tuple[int, str, str], ...] | None
    stat: tuple[int, int] | None = None  # (size, mtime_ns) for a snapshot's files


def _parse(baseline: str) -> dict[str, _Base] | None:
    """A snapshot's files, or None when the text is not a snapshot of this version."""
    try:
        data = json.loads(baseline)
        if not isinstance(data, dict) or data.get("v") != SNAPSHOT_VERSION:
            return None
        files: dict[str, _Base] = {}
        for rel, (size, mtime, marks, decls) in data["files"].items():
            files[str(rel)] = _Base(
                tuple((int(ln), str(k), None if t is None else str(t), str(x)) for ln, k, t, x in marks),
                None if decls is None else tuple((int(ln), str(n), str(x)) for ln, n, x in decls),
                (int(size), int(mtime)),
            )
        return files
    except (ValueError, TypeError, KeyError, AttributeError):
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
    base = _parse(baseline) if baseline is not None else None
    if base is not None:
        same = {f.rel for f in tree.files if f.rel in base and base[f.rel].stat == (f.size, f.mtime_ns)}
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
    current = {f.rel for f in tree.files}
    for rel, was in base.items():
        if rel not in current and _gone(root, rel):
            out.extend(_compare(rel, was, None))
    return tuple(out)


def _only_marks(f: _File) -> list[Mark]:
    data = _read(f.path)
    if data is None:
        return []
    marks = [Mark(f.rel, ln, k, t, x) for ln, k, t, x in _scan(data, f.lang).marks if k == "only"]
    return sorted(marks, key=_at)


def _accepts(rel: str) -> str | None:
    """The rules a baseline path is read with, when the walk would have read it (None otherwise)."""
    parts = rel.split("/")
    if len(parts) - 1 > MAX_DEPTH + 1 or any(skipped_dir(p) for p in parts[:-1]):
        return None
    return language_of(rel, is_test_file(rel))
