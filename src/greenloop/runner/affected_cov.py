"""The per-test coverage map that narrows a pytest `--affected` run (as pytest-testmon does).

Recorded on whole-suite pytest runs where the workspace's Python has coverage.py, the
config's `coverage_map` is on and the workspace runs `--affected` (`wanted`): greenloop's
coverage plugin (frameworks/pytest_plugin/_greenloop_pytest_coverage.py) records the lines
each test file runs; `fold` keeps, per test file, the lines of each workspace file its tests
ran, and, per workspace file, a fingerprint: the hash of its skeleton (the module with every
function's body left out: imports, constants, classes, signatures, defaults, decorators) and
of each function's body with the body's lines.
It goes to `.greenloop/coverage-map.json`, replaced by each whole-suite run.

`refine` narrows the static import graph's choice (affected_py.py) and never widens it. For a
changed file it compares the file as it is now with its fingerprint: a function whose body
changed reaches the test files that ran one of that body's lines. Anything the lines cannot
answer keeps every test file the graph chose for all changed files (the note names the file):

- a changed skeleton (module-level code, a signature, a default, a decorator, a new or removed
  function) reaches every test that imports the file, running one of its lines or not;
- a changed body that imports or collection ran (a parametrize list built by calling it), or a
  session- or package-scoped fixture (shared by other files' tests), or that no test ran (dead
  code, or code run before coverage started or in a subprocess, which coverage does not see);
- a file the map never measured, a conftest.py, a file that does not parse.

Always kept: a test file that changed, one the map has no record of (new since the map), and
one that had a failing test when the map was recorded (its tests stopped early: their lines
are not all there). A map older than the change is fine: the fingerprints are the map's own,
and every file that differs from what the map measured counts as changed (a commit since, an
edit before the session's baseline), so a test whose recorded lines ran changed code is kept.
What the map cannot see, like the graph: a test that depends on a file it reads or on state
another file's test left behind (a cache filled by an earlier test).
"""

from __future__ import annotations

import ast
import contextlib
import glob
import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from greenloop import layout
from greenloop.model import Plan
from greenloop.result import RunResult

__all__ = ["MAP_NAME", "PLUGIN_NAME", "fingerprint", "fold", "fold_run", "recordable", "refine", "wanted"]

MAP_NAME = "coverage-map.json"
PLUGIN_NAME = "_greenloop_pytest_coverage"
DATA_NAME = "covmap"  # the coverage data files' prefix in the run folder
_DATA_VAR = "GREENLOOP_COVMAP"  # the plugin's variable: where it writes them
_SHARED = ("", "greenloop:shared")  # contexts outside one test: they reach every test
_VERSION = 2


def map_path(root: str) -> Path:
    """Where the workspace's coverage map lives."""
    return layout.state_dir(root) / MAP_NAME


def plan_parts(report_dir: str) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    """What a whole-suite pytest plan adds to record the map: pytest arguments, variables."""
    return ["-p", PLUGIN_NAME], ((_DATA_VAR, os.path.join(report_dir, DATA_NAME)),)


def wanted(root: str, affected_default: bool) -> bool:
    """Is the map worth its cost here: does this workspace run `--affected`? (The config makes
    it the agents' default, a session has run it (its baseline folder is there), or a map is
    there to keep up to date.) Recording makes a whole-suite run about 1.9x as long (26,921
    tests: 18.9 s without, 35.1 s with), so a workspace that never narrows never pays it."""
    if affected_default:
        return True
    from greenloop.runner import affected_base

    return map_path(root).is_file() or os.path.isdir(affected_base.folder(root))


def recordable(python: str) -> bool:
    """Can the workspace's Python record a map: is coverage.py installed in its virtualenv?
    (A file check, not a process: it runs on every whole-suite plan.)"""
    from greenloop.runner.toolchain import venv_has

    venv = Path(python).parent.parent
    return (venv / "pyvenv.cfg").is_file() and venv_has(venv, "coverage")


def _skeleton_and_bodies(tree: ast.Module) -> tuple[str, dict[str, tuple[str, int, int]]]:
    """The module's skeleton hash and each function's (body hash, first line, last line),
    by qualified name (a repeated name gets #N)."""
    bodies: dict[str, tuple[str, int, int]] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                while name in bodies:
                    name += "#"
                body = "\n".join(ast.dump(stmt) for stmt in child.body)
                first = child.body[0].lineno if child.body else child.lineno
                bodies[name] = (_hash(body), first, child.end_lineno or child.lineno)
                walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(tree, "")
    blank = _Blank().visit(tree)  # (after the walk: it changes the tree)
    return _hash(ast.dump(blank)), bodies


class _Blank(ast.NodeTransformer):
    """Every function's body as one `...`: what is left is the module's skeleton."""

    def _blank(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.AST:
        node.body = [ast.Expr(ast.Constant(...))]
        return node

    visit_FunctionDef = _blank
    visit_AsyncFunctionDef = _blank


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha1(fh.read()).hexdigest()
    except OSError:
        return None


def fingerprint(path: str) -> dict[str, Any] | None:
    """A file's content hash, skeleton hash and function bodies; None when it does not parse."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        tree = ast.parse(data, filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    skeleton, bodies = _skeleton_and_bodies(tree)
    return {"sha": hashlib.sha1(data).hexdigest(), "skeleton": skeleton,
            "bodies": {k: list(v) for k, v in bodies.items()}}


def _lines(numbits: bytes) -> Iterable[int]:
    for index, byte in enumerate(numbits):
        for bit in range(8):
            if byte & (1 << bit):
                yield index * 8 + bit


Lines = dict[str, set[int]]  # workspace file -> line numbers


def _read_data(files: Sequence[str], root: str) -> tuple[dict[str, Lines], Lines]:
    """(test file -> workspace file -> lines, workspace file -> lines run outside one test)."""
    import sqlite3  # (here: every run imports this module for fold_run's first line)

    tests: dict[str, Lines] = {}
    shared: Lines = {}
    real_root = os.path.realpath(root)
    for data in files:
        try:
            db = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
            try:
                rows = db.execute("SELECT c.context, f.path, l.numbits FROM line_bits l JOIN file f "
                                  "ON f.id = l.file_id JOIN context c ON c.id = l.context_id").fetchall()
            finally:
                db.close()
        except sqlite3.Error:
            continue
        for context, path, numbits in rows:
            rel = os.path.relpath(os.path.realpath(path), real_root).replace(os.sep, "/")
            if rel.startswith("../"):
                continue
            lines = set(_lines(numbits))
            if context in _SHARED:
                shared.setdefault(rel, set()).update(lines)
            else:
                test_file = str(context).split("::", 1)[0]
                tests.setdefault(test_file, {}).setdefault(rel, set()).update(lines)
    return tests, shared


def fold(root: str, report_dir: str, run_id: str, failing: Iterable[str]) -> str | None:
    """Fold a whole-suite run's coverage data into the workspace's map (replacing it); the
    data files are removed. `failing`: the run's failing test names. None, or a note."""
    files = sorted(glob.glob(os.path.join(glob.escape(report_dir), DATA_NAME + ".*")))
    if not files:
        return None
    try:
        tests, shared = _read_data(files, root)
    finally:
        for data in files:
            with contextlib.suppress(OSError):
                os.unlink(data)
    measured = sorted({rel for per in tests.values() for rel in per} | set(shared))
    prints = {rel: fingerprint(os.path.join(root, rel)) for rel in measured}
    doc = {
        "version": _VERSION,
        "run_id": run_id,
        "tests": {t: {rel: sorted(lines) for rel, lines in per.items()}
                  for t, per in sorted(tests.items())},
        "shared": {rel: sorted(lines) for rel, lines in sorted(shared.items())},
        "files": {rel: fp for rel, fp in prints.items() if fp is not None},
        "failing": sorted({name.split("::", 1)[0] for name in failing}),
    }
    from greenloop.system.atomic import write_text

    try:
        write_text(map_path(root), json.dumps(doc, separators=(",", ":")))
    except OSError as exc:
        return f"coverage map: could not write {MAP_NAME} ({exc.strerror or exc})"
    return None


def load(root: str) -> dict[str, Any] | None:
    """The workspace's map, or None (none yet, unreadable, another version)."""
    try:
        doc = json.loads(map_path(root).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("version") == _VERSION else None


def _reached(rel: str, root: str, doc: dict[str, Any], is_test: Any) -> set[str] | str:
    """The test files a change to `rel` reaches by the map, or why the map cannot say."""
    if is_test(rel):
        return {rel}
    if rel.rsplit("/", 1)[-1] == "conftest.py":
        return f"{rel} is a conftest.py"
    old = doc["files"].get(rel)
    if old is None:
        return f"the coverage map never measured {rel}"
    new = fingerprint(os.path.join(root, rel))
    if new is None:
        return f"{rel} does not parse"
    if new["skeleton"] != old["skeleton"]:
        return f"{rel} changed outside function bodies"
    changed: set[int] = set()
    for name, (digest, first, last) in old["bodies"].items():
        now = new["bodies"].get(name)
        if now is None or now[0] != digest:
            changed.update(range(int(first), int(last) + 1))
    if not changed:
        return set()  # only comments or formatting: nothing any test runs is different
    if changed & set(doc["shared"].get(rel, ())):
        return f"{rel}: a changed function ran outside one test (imports, collection or a shared fixture)"
    reached = {t for t, per in doc["tests"].items() if changed & set(per.get(rel, ()))}
    if not reached:
        return f"{rel}: no test ran a changed function when the map was recorded"
    return reached


def fold_run(result: RunResult, plan: Plan, root: str, report_dir: str) -> RunResult:
    """After a whole-suite pytest run that recorded coverage: the map folded (a run stopped
    before its end keeps the map it had), a failure to write it a note on the result."""
    if _DATA_VAR not in dict(plan.env) or result.timed_out or result.aborted:
        return result
    note = fold(root, report_dir, result.run_id, [f.test for f in result.failures])
    return result._replace(notes=(*result.notes, note)) if note else result


def refine(root: str, framework: str, changed: Sequence[str],
           chosen: Sequence[str]) -> tuple[list[str], str | None]:
    """The graph's `chosen` test files narrowed by the map, and a note; `chosen` unchanged (and
    the note saying why) when the map cannot answer for a changed file, or there is no map."""
    if framework != "pytest" or not chosen:
        return list(chosen), None
    doc = load(root)
    if doc is None:
        return list(chosen), None
    from greenloop.runner import affected_py

    patterns = affected_py.test_patterns(root, framework)
    reached: set[str] = set()
    # every file that differs from what the map measured, not only those git calls changed:
    # a test whose recorded lines ran code that changed since (a commit after the map, an
    # edit before the session's baseline) may run other code now, so it is kept
    drifted = [rel for rel, fp in doc["files"].items() if _digest(os.path.join(root, rel)) != fp.get("sha")]
    for rel in sorted({*changed, *drifted}):
        found = _reached(rel, root, doc, lambda r: affected_py.is_test_file(r, framework, patterns))
        if isinstance(found, str):
            return list(chosen), (f"affected: the coverage map cannot narrow this change ({found}); "
                                  "the import graph's choice runs")
        reached |= found
    keep = set(doc["failing"]) | reached
    picked = [t for t in chosen if t in keep or t not in doc["tests"]]
    return picked, (f"affected: the coverage map of {doc.get('run_id')} narrowed {len(chosen)} test file(s) "
                    f"to {len(picked)}")
