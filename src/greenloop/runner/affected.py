"""`--affected`: the tests the changed files can break, plus every test the session owes.

Two halves. `changes` (api.test_run calls it) asks git which files changed since the
session's last green whole-suite run (affected_base.py keeps what the tree was then), or,
with none, since HEAD (staged, unstaged and untracked: `git status --porcelain`), relative
to the workspace; no git repository, or a deleted file, is a reason to run the whole suite.
`select` (plan.py calls it) maps those files to the runner's own selection, one small
function a runner family (so each can move into its runner's package later, issue 28):

- pytest, unittest: the static import graph of the workspace's Python modules (affected_py.py),
  for pytest narrowed by the per-test coverage map of the last whole-suite run (affected_cov.py);
- vitest: `vitest related <files> --run`; jest: `--findRelatedTests <files>` (the runner's own graph);
- node:test, mocha, bun: the import graph of the test files (affected_js.py);
- go: the packages whose tests depend on a changed package (`go list`: affected_go.py);
- cargo: the changed crates and the workspace crates that depend on them (`cargo metadata`:
  affected_cargo.py), each as `-p NAME`;
- npm-test: not mapped (the script's runner is unknown): the whole suite, with a note.

A file greenloop cannot map safely (a lockfile, package.json, a runner or Python config, a
non-code file, a deleted file, a file outside the graph) runs the whole suite, with a note
naming the file. Nothing changed and nothing owed: nothing runs, and the run says so (it is
not green).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from typing import NamedTuple

from greenloop.layout import NOT_CODE_DIRS
from greenloop.model import AffectedInfo

__all__ = ["Changes", "Selection", "changes", "record_green", "select", "status"]

PY_RUNNERS = ("pytest", "unittest")
RELATED_RUNNERS = ("vitest", "jest")
JS_GRAPH_RUNNERS = ("node:test", "mocha", "bun")
GO_RUNNERS = ("go",)
CARGO_RUNNERS = ("cargo",)
_JS_CODE = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")
_SKIP_FILES = frozenset({"bugs.ndjson", "timeline.ndjson"})  # greenloop's own logs


class Changes(NamedTuple):
    """The changed files (relative to the workspace) and the owed tests' files and names."""

    changed: tuple[str, ...] = ()
    since: str = "HEAD"
    fallback: str | None = None  # a reason the whole suite must run (no git, a deleted file)
    owed: tuple[str, ...] = ()  # owed test names
    owed_files: tuple[str, ...] = ()  # their files, relative to the workspace
    note: str | None = None  # why the changes count from HEAD although the session has a baseline


class Selection(NamedTuple):
    """What plan.py adds: `args` (None: the whole suite), the record, the notes."""

    args: list[str] | None
    info: AffectedInfo
    notes: list[str]
    nothing: str | None = None  # set when nothing is to run


def _git(root: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def status(root: str) -> tuple[list[str], str | None] | None:
    """The files that differ from git HEAD (staged, unstaged, untracked), relative to `root`,
    and a reason the whole suite must run (a file changed outside the workspace); None when
    `root` is not in a git repository or git fails."""
    top = _git(root, "rev-parse", "--show-toplevel")
    out = _git(root, "status", "--porcelain", "-z", "--untracked-files=all", "--no-renames")
    if top is None or out is None:
        return None
    here = os.path.realpath(root)
    dirty: list[str] = []
    outside: str | None = None
    for entry in out.split("\0"):
        if len(entry) < 4:
            continue
        path = entry[3:]
        rel = os.path.relpath(os.path.realpath(os.path.join(top.strip(), path)), here).replace(os.sep, "/")
        parts = rel.split("/")
        if rel.startswith("../"):
            outside = outside or f"{path} changed outside the workspace, outside the graph"
        elif (not any(p in NOT_CODE_DIRS for p in parts[:-1]) and parts[-1] not in _SKIP_FILES
              and not _cargo_output(here, parts)):
            dirty.append(rel)  # (not greenloop's own state, not dependencies, not build output)
    return sorted(set(dirty)), outside


def _cargo_output(root: str, parts: list[str]) -> bool:
    """Whether a path (its parts, relative to `root`) is in cargo's build output: a `target`
    folder beside a Cargo.toml (a project that does not ignore it)."""
    return any(
        part == "target" and os.path.isfile(os.path.join(root, *parts[:i], "Cargo.toml"))
        for i, part in enumerate(parts[:-1])
    )


def changes(root: str, owed: Sequence[tuple[str, str | None]] = (), session_id: str | None = None) -> Changes:
    """The files changed since the session's last green whole-suite run (else since git HEAD),
    relative to `root`, and the owed tests (name, file) folded in; `fallback` says why the
    whole suite must run instead (affected_base keeps the baseline)."""
    owed_names = tuple(dict.fromkeys(name for name, _ in owed))
    owed_files: list[str] = []
    for name, file in owed:
        rel = _owed_file(root, name, file)
        if rel is None:
            return Changes(fallback=f"owed test {name!r} has no known file", owed=owed_names)
        if rel not in owed_files:
            owed_files.append(rel)
    found = status(root)
    if found is None:
        return Changes(fallback="the workspace is not in a git repository (or `git status` failed), so "
                       "its changes are unknown", owed=owed_names, owed_files=tuple(owed_files))
    dirty, outside = found
    changed, since, note = dirty, "HEAD", None
    if session_id is not None:
        from greenloop.runner import affected_base

        base = affected_base.load(root, session_id)
        if base is None:
            affected_base.start(root, session_id)  # from now on its green whole-suite runs are kept
        elif base:
            head = _git(root, "rev-parse", "HEAD")
            head = head.strip() if head else None
            changed, why = affected_base.since_baseline(root, base, head, dirty, _git)
            if why is None:
                since = str(base["run_id"])
            else:
                changed, note = dirty, f"affected: counted changes from git HEAD: {why}"
    gone = next((rel for rel in changed if not os.path.lexists(os.path.join(root, rel))), None)
    fallback = outside or (f"{gone} was deleted" if gone else None)
    return Changes(tuple(changed), since, fallback, owed_names, tuple(owed_files), note)


def record_green(root: str, session_id: str, run_id: str) -> None:
    """After a green whole-suite run: the session's new baseline, if it uses `--affected`."""
    from greenloop.runner import affected_base

    if not os.path.exists(affected_base.path_of(root, session_id)):
        return  # a session that never asked for --affected: one stat, nothing written
    found = status(root)
    head = _git(root, "rev-parse", "HEAD")
    if found is not None and head is not None:
        affected_base.record(root, session_id, run_id, head.strip(), found[0])


def _owed_file(root: str, name: str, file: str | None) -> str | None:
    """The workspace-relative file of an owed test: its row's file, else a node id's path."""
    for cand in (file, name.split("::", 1)[0] if "::" in name else None):
        if not cand:
            continue
        path = cand if os.path.isabs(cand) else os.path.join(root, cand)
        if os.path.isfile(path):
            return os.path.relpath(path, root).replace(os.sep, "/")
    return None


def _unmappable(rel: str, code_suffixes: tuple[str, ...]) -> str | None:
    """Why a changed file forces the whole suite (a config, a lockfile, non-code), or None."""
    name = rel.rsplit("/", 1)[-1]
    if not name.endswith(code_suffixes):
        return f"{rel} is not a code file greenloop maps (a config, lockfile, fixture or data file)"
    if name.startswith(("vitest.config", "vite.config", "vitest.workspace", "jest.config", "babel.config",
                        ".mocharc", "bunfig", "tsconfig", "setup.py", "noxfile")):
        return f"{rel} configures the runner or the build"
    return None


def _fallback(info: AffectedInfo, reason: str) -> Selection:
    note = f"affected: ran the whole suite because {reason}"
    return Selection(None, info._replace(fallback=reason), [note])


def select(framework: str, root: str, found: Changes) -> Selection:
    """The runner's arguments for the affected tests (see the module docstring)."""
    info = AffectedInfo(changed=found.changed, owed=found.owed, since=found.since)
    if found.note is not None:
        picked = select(framework, root, found._replace(note=None))
        return picked._replace(notes=[found.note, *picked.notes])
    if found.fallback is not None:
        return _fallback(info, found.fallback)
    if framework not in (*PY_RUNNERS, *RELATED_RUNNERS, *JS_GRAPH_RUNNERS, *GO_RUNNERS, *CARGO_RUNNERS):
        return _fallback(info, f"--affected is not mapped for {framework} yet")
    if not found.changed and not found.owed_files:
        return Selection([], info, ["affected: nothing changed since "
                                    f"{found.since} and no test is owed; no test ran"],
                         nothing="--affected found nothing to run: no file changed since "
                                 f"{found.since} and the session owes no test; this is not a green run")
    suffixes = {**dict.fromkeys(PY_RUNNERS, (".py",)), **dict.fromkeys(GO_RUNNERS, (".go",)),
                **dict.fromkeys(CARGO_RUNNERS, (".rs",))}.get(framework, _JS_CODE)
    for rel in found.changed:
        why = _unmappable(rel, suffixes)
        if why is not None:
            return _fallback(info, why)
    if framework in PY_RUNNERS:
        return _python(framework, root, found, info)
    if framework in RELATED_RUNNERS:
        return _related(framework, found, info)
    if framework in GO_RUNNERS:
        return _go(root, found, info)
    if framework in CARGO_RUNNERS:
        return _cargo(root, found, info)
    return _js_graph(framework, root, found, info)


def _done(args: list[str], tests: list[str], info: AffectedInfo, found: Changes,
          unit: str = "test file(s)") -> Selection:
    info = info._replace(tests=tuple(tests))
    if not args:
        return Selection([], info, [], nothing=(
            f"--affected: no test depends on the {len(found.changed)} changed file(s) and the session "
            "owes no test; no test ran (this is not a green run)"))
    note = (f"affected: {len(tests)} {unit} for {len(found.changed)} changed file(s) since "
            f"{found.since}" + (f" and {len(found.owed)} owed test(s)" if found.owed else ""))
    return Selection(args, info, [note])


def _python(framework: str, root: str, found: Changes, info: AffectedInfo) -> Selection:
    from greenloop.runner import affected_cov, affected_py

    tests, why = affected_py.select(root, framework, found.changed)
    if why is not None:
        return _fallback(info, why)
    tests, narrowed = affected_cov.refine(root, framework, found.changed, tests)
    tests = sorted({*tests, *found.owed_files})
    done = _done(list(tests), tests, info, found)
    return done._replace(notes=[*done.notes, narrowed]) if narrowed else done


def _related(framework: str, found: Changes, info: AffectedInfo) -> Selection:
    files = sorted({*found.changed, *found.owed_files})
    # vitest: `related` replaces `run` (plan.py); jest: the list goes last, it takes every word
    # (no related test is an empty run that exits 0, which the verdict reports as not green)
    args = ["--passWithNoTests", "--findRelatedTests", *files] if framework == "jest" and files else files
    return _done(args, files, info, found)


def _go(root: str, found: Changes, info: AffectedInfo) -> Selection:
    from greenloop.runner import affected_go

    packages, why = affected_go.select(root, found.changed)
    if why is not None:
        return _fallback(info, why)
    owed = {"./" + os.path.dirname(f) if os.path.dirname(f) else "." for f in found.owed_files}
    packages = sorted({*packages, *owed})
    return _done(packages, packages, info, found, "package(s)")


def _cargo(root: str, found: Changes, info: AffectedInfo) -> Selection:
    from greenloop.runner import affected_cargo

    # an owed test's file maps to its crate like a changed one (the crate's tests rerun)
    crates, why = affected_cargo.select(root, sorted({*found.changed, *found.owed_files}))
    if why is not None:
        return _fallback(info, why)
    return _done(crates, crates, info, found, "crate(s)")


def _js_graph(framework: str, root: str, found: Changes, info: AffectedInfo) -> Selection:
    from greenloop.runner import affected_js

    tests, why = affected_js.select(root, framework, found.changed)
    if why is not None:
        return _fallback(info, why)
    tests = sorted({*tests, *found.owed_files})
    return _done(list(tests), tests, info, found)
