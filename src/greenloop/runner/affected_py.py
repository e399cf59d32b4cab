"""The static import graph of a workspace's Python modules, for `--affected` pytest and unittest runs.

Every .py file of the workspace (outside the folders that are not code) is parsed with `ast`;
each `import a.b` / `from a.b import c` / `from . import c` (anywhere in the file: inside a
function too) is resolved to workspace files against the package roots: the workspace, its
`src/` folder, and each file's base folder (the first folder up that is not a package, which
pytest's default import mode puts on sys.path). Importing `a.b.c` runs `a/__init__.py` and
`a/b/__init__.py` too, so they count. A test file depends on what it imports, transitively,
and on every conftest.py in its folder and the folders above it (and what they import): a
changed conftest.py selects every test file below it. Imports that resolve to no workspace
file (the standard library, installed packages) are not followed.

The test files pytest's whole run leaves out stay out: those outside its `testpaths` and
those a conftest.py's literal `collect_ignore` / `collect_ignore_glob` names (one that is
not a literal list runs the whole suite). What the graph cannot see: a file that does not
parse (its imports are unknown) makes every test file that reaches it run; a config that
names other test file patterns (pytest's python_files) makes the caller run the whole suite.
"""

from __future__ import annotations

import ast
import fnmatch
import os
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from greenloop.layout import NOT_CODE_DIRS

__all__ = ["Graph", "build", "is_test_file", "select", "test_patterns", "testpaths"]

PYTEST_PATTERNS = ("test_*.py", "*_test.py")
UNITTEST_PATTERNS = ("test*.py",)


class Graph(NamedTuple):
    """Each workspace .py file (relative path) -> the workspace files it imports directly."""

    imports: dict[str, frozenset[str]]
    unparsed: tuple[str, ...]  # files that do not parse: their imports are unknown
    # each conftest.py's collect_ignore / collect_ignore_glob, as globs relative to the
    # workspace; None when one is not a literal list of strings
    ignored: tuple[str, ...] | None = ()


def _py_files(root: str) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in NOT_CODE_DIRS and not d.startswith(".")
                   and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))]
        for name in files:
            if name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(found)


def _parents(rel: str) -> list[str]:
    parts = rel.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _base_dir(rel: str, files: frozenset[str]) -> str:
    """The first folder up from `rel` that is not a package (pytest's rootdir-less basedir)."""
    folder = os.path.dirname(rel)
    while folder and f"{folder}/__init__.py" in files:
        folder = os.path.dirname(folder)
    return folder


def _module_files(name: str, roots: Iterable[str], files: frozenset[str], dirs: frozenset[str]) -> list[str]:
    """The workspace files importing `name` runs: each package's __init__.py and the module."""
    parts = name.split(".")
    for base in roots:
        prefix = f"{base}/" if base else ""
        found: list[str] = []
        for i in range(1, len(parts) + 1):
            path = prefix + "/".join(parts[:i])
            if f"{path}/__init__.py" in files:
                found.append(f"{path}/__init__.py")
            elif i == len(parts) and f"{path}.py" in files:
                found.append(f"{path}.py")
            elif i < len(parts) and path in dirs:
                continue  # a namespace package folder
            else:
                found = []
                break
        if found:
            return found
    return []


def _package_of(rel: str, level: int) -> list[str] | None:
    """The dotted parts of the package a relative import of `level` dots starts from."""
    parts = rel[:-3].split("/")[:-1]  # a module's package and an __init__'s are its folder
    if level - 1 > len(parts):
        return None
    return parts[: len(parts) - (level - 1)]


def _statements(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Every statement, nested ones too (imports are statements: expressions are not walked)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _statements(inner)
        for handler in getattr(node, "handlers", None) or ():
            yield from _statements(handler.body)
        for case in getattr(node, "cases", None) or ():
            yield from _statements(case.body)


def _imports_of(rel: str, tree: ast.Module, roots: Sequence[str], files: frozenset[str],
                dirs: frozenset[str]) -> frozenset[str]:
    deps: set[str] = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                deps.update(_module_files(alias.name, roots, files, dirs))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = _package_of(rel, node.level)
                if package is None:
                    continue
                base = "/".join(package)
                names = [*(node.module.split(".") if node.module else [])]
                target = "/".join([base, *names]) if base else "/".join(names)
                for path in (f"{target}/__init__.py", f"{target}.py"):
                    if path in files:
                        deps.add(path)
                for alias in node.names:
                    for path in (f"{target}/{alias.name}.py", f"{target}/{alias.name}/__init__.py"):
                        if path.lstrip("/") in files:
                            deps.add(path.lstrip("/"))
                continue
            module = node.module or ""
            deps.update(_module_files(module, roots, files, dirs))
            for alias in node.names:
                deps.update(_module_files(f"{module}.{alias.name}", roots, files, dirs))
    deps.discard(rel)
    return frozenset(deps)


def build(root: str) -> Graph:
    """Parse every .py file of the workspace and resolve its imports to workspace files."""
    rels = _py_files(root)
    files = frozenset(rels)
    dirs = frozenset(d for rel in rels for d in _parents(rel))
    imports: dict[str, frozenset[str]] = {}
    unparsed: list[str] = []
    ignored: list[str] | None = []
    for rel in rels:
        try:
            with open(os.path.join(root, rel), "rb") as fh:
                tree = ast.parse(fh.read(), filename=rel)
        except (SyntaxError, ValueError, OSError):
            unparsed.append(rel)
            imports[rel] = frozenset()
            continue
        roots = list(dict.fromkeys([_base_dir(rel, files), "", "src"]))
        imports[rel] = _imports_of(rel, tree, roots, files, dirs)
        if rel.endswith("conftest.py") and ignored is not None:
            globs = _collect_ignore(tree)
            folder = os.path.dirname(rel)
            ignored = None if globs is None else [*ignored, *(f"{folder}/{g}" if folder else g
                                                              for g in globs)]
    return Graph(imports, tuple(unparsed), None if ignored is None else tuple(ignored))


def _collect_ignore(tree: ast.Module) -> list[str] | None:
    """A conftest.py's collect_ignore and collect_ignore_glob entries; None when not literal."""
    out: list[str] = []
    for node in _statements(tree.body):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        names = ("collect_ignore", "collect_ignore_glob")
        if not any(isinstance(t, ast.Name) and t.id in names for t in targets):
            if any(isinstance(t, ast.Attribute) and t.attr.startswith("collect_ignore") for t in targets):
                return None
            continue
        try:
            given = getattr(node, "value", None)
            value = ast.literal_eval(given) if given is not None else []
        except ValueError:
            return None
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            return None
        out += [v.removeprefix("./") for v in value]
    return out


def _pytest_ini(root: str) -> tuple[str, dict[str, object]] | None:
    """The config file pytest reads in `root` and its options, as pytest finds it: the first of
    pytest.ini, .pytest.ini (always), pyproject.toml ([tool.pytest.ini_options]), tox.ini
    ([pytest]), setup.cfg ([tool:pytest]) that is one; None when none is."""
    import configparser
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue
        if name == "pyproject.toml":
            try:
                with open(path, "rb") as fh:
                    opts = tomllib.load(fh).get("tool", {}).get("pytest", {}).get("ini_options")
            except (OSError, ValueError):
                continue
            if isinstance(opts, dict):
                return name, opts
            continue
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError):
            continue
        section = "tool:pytest" if name == "setup.cfg" else "pytest"
        if parser.has_section(section):
            return name, dict(parser.items(section))
        if name in ("pytest.ini", ".pytest.ini"):
            return name, {}
    return None


def _ini_list(root: str, key: str) -> tuple[str, list[str]] | None:
    """A list option of pytest's config (`testpaths`, `python_files`) and the file naming it."""
    import shlex

    found = _pytest_ini(root)
    if found is None or key not in found[1]:
        return None
    value = found[1][key]
    if isinstance(value, list):
        return found[0], [str(v) for v in value]
    try:
        return found[0], shlex.split(str(value))
    except ValueError:
        return found[0], str(value).split()


def testpaths(root: str) -> list[str] | None:
    """pytest's `testpaths` (folders or globs, relative to the workspace), when a config sets it."""
    found = _ini_list(root, "testpaths")
    return found[1] if found else None


def test_patterns(root: str, framework: str) -> tuple[str, ...]:
    """The file name patterns of the runner's discovery: unittest's (its default, or the
    Makefile test target's `-p`), or pytest's `python_files` (its config's, else test_*.py and
    *_test.py)."""
    if framework == "unittest":  # its default, or the pattern a Makefile's discovery gives it
        from greenloop.runner.make_test import make_args

        chosen = list(make_args(root, "unittest").selection)
        given = [chosen[i + 1] for i, w in enumerate(chosen[:-1]) if w in ("-p", "--pattern")]
        return (given[-1],) if given and chosen[:1] == ["discover"] else UNITTEST_PATTERNS
    found = _ini_list(root, "python_files")
    return tuple(found[1]) if found and found[1] else PYTEST_PATTERNS


def is_test_file(rel: str, framework: str, patterns: Sequence[str] | None = None) -> bool:
    """Does the runner's discovery collect `rel` as a test file? A pattern with a `/` is
    matched against the path's end, as pytest's fnmatch_ex does; others against the name."""
    name = rel.rsplit("/", 1)[-1]
    if patterns is None:
        patterns = UNITTEST_PATTERNS if framework == "unittest" else PYTEST_PATTERNS
    return any(fnmatch.fnmatchcase("/" + rel, "*/" + p.lstrip("/")) if "/" in p
               else fnmatch.fnmatchcase(name, p) for p in patterns)


def _conftests(rel: str, files: Iterable[str]) -> list[str]:
    known = set(files)
    out: list[str] = []
    folder = os.path.dirname(rel)
    while True:
        path = f"{folder}/conftest.py" if folder else "conftest.py"
        if path in known:
            out.append(path)
        if not folder:
            return out
        folder = os.path.dirname(folder)


def _left_out(rel: str, ignored: Sequence[str], paths: Sequence[str] | None) -> bool:
    """Does pytest's whole-suite run leave `rel` out (collect_ignore(_glob), testpaths)?"""
    for glob in ignored:
        if fnmatch.fnmatchcase(rel, glob) or rel == glob or rel.startswith(glob.rstrip("/") + "/"):
            return True
    if paths is None:
        return False
    return not any(rel == p.strip("/") or rel.startswith(p.strip("/") + "/") or fnmatch.fnmatchcase(rel, p)
                   or p.strip("/") in ("", ".") for p in paths)


def select(root: str, framework: str, changed: Sequence[str]) -> tuple[list[str], str | None]:
    """(test files whose transitive imports include a changed file, or which changed,
    sorted; why the whole suite must run instead, or None). `changed` are .py files."""
    graph = build(root)
    patterns = test_patterns(root, framework)
    if framework == "pytest" and graph.ignored is None:
        return [], "a conftest.py sets collect_ignore to something other than a literal list"
    ignored = graph.ignored or () if framework == "pytest" else ()
    paths = testpaths(root) if framework == "pytest" else None
    unparsed = set(graph.unparsed)
    wanted = set(changed)
    picked: list[str] = []
    for rel in graph.imports:
        if not is_test_file(rel, framework, patterns) or _left_out(rel, ignored, paths):
            continue
        seen: set[str] = set()
        todo = [rel, *_conftests(rel, graph.imports)] if framework == "pytest" else [rel]
        while todo:
            cur = todo.pop()
            if cur in seen:
                continue
            seen.add(cur)
            todo.extend(graph.imports.get(cur, ()))
        # a file that does not parse here (another Python's syntax?) has unknown imports: the
        # tests that reach it always run
        if seen & wanted or seen & unparsed:
            picked.append(rel)
    return sorted(picked), None
