"""The import graph of a workspace's JavaScript test files, for `--affected` node:test, mocha and bun runs.

Each .js/.mjs/.cjs/.ts file (outside node_modules and the folders that are not code) is read
for its relative specifiers: `require('./x')`, `import ... from './x'`, `import './x'`,
`export ... from './x'` and `import('./x')`. A specifier resolves as node and bun do: the
path itself, then with .js/.mjs/.cjs/.ts/.tsx/.jsx added, then its folder's index file. Bare
specifiers (packages, `node:` builtins) are not followed. A test file (the runners' default
names: `*.test.*`, `*.spec.*`, `*_test.*`, `*-test.*`, `test-*`, `test.*`, or any file under
a `test/`, `tests/`, `__tests__/` or `spec/` folder) is selected when it, or a file it
imports transitively, changed.

What the graph cannot see makes the caller run the whole suite: a specifier that is built at
run time (`require(name)`, `import(path)` with a variable) in a file a test file reaches.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from greenloop.layout import NOT_CODE_DIRS

__all__ = ["is_test_file", "select"]

CODE = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".tsx", ".jsx")
_RESOLVE = ("", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".mts", ".cts")
_INDEX = ("index.js", "index.mjs", "index.cjs", "index.ts")
_SPEC = re.compile(
    r"""(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+|^\s*import\s+|\bexport\s+\*\s+from\s+)(['"`])([^'"`]+)\1""",
    re.M,
)
_DYNAMIC = re.compile(r"""\b(?:require|import)\s*\(\s*(?!['"`]|\))""")
_TEST_NAME = re.compile(r"(?:\.|_|-)(?:test|spec)\.[cm]?[jt]sx?$|^(?:test|spec)(?:-[^/]*)?\.[cm]?[jt]sx?$")
_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec"})


def _code_files(root: str) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in NOT_CODE_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(CODE):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(found)


def is_test_file(rel: str) -> bool:
    """Does a runner's default discovery (node --test, mocha's test/, bun test) take `rel`?"""
    parts = rel.split("/")
    return bool(_TEST_NAME.search(parts[-1])) or any(p in _TEST_DIRS for p in parts[:-1])


def _resolve(rel: str, spec: str, files: frozenset[str]) -> str | None:
    base = os.path.normpath(os.path.join(os.path.dirname(rel), spec)).replace(os.sep, "/")
    for ext in _RESOLVE:
        if base + ext in files:
            return base + ext
    for index in _INDEX:
        if f"{base}/{index}" in files:
            return f"{base}/{index}"
    return None


_MOCHA_CONFIGS = (".mocharc.js", ".mocharc.cjs", ".mocharc.mjs", ".mocharc.json", ".mocharc.jsonc",
                  ".mocharc.yaml", ".mocharc.yml", "package.json")


def _mocha_spec(root: str) -> str | None:
    """The mocha config that names its own spec files (greenloop then cannot narrow), if any."""
    for name in _MOCHA_CONFIGS:
        try:
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        if name == "package.json":
            import json

            try:
                data = json.loads(text)
            except ValueError:
                continue
            if isinstance(data, dict) and isinstance(data.get("mocha"), dict) and "spec" in data["mocha"]:
                return name
        elif re.search(r"\bspec\b", text):
            return name
    return None


def select(root: str, framework: str, changed: Sequence[str]) -> tuple[list[str], str | None]:
    """(test files that changed or reach a changed file through relative imports, sorted;
    why the whole suite must run instead, or None). mocha's test files are those under
    test/ (its default spec); a config naming its own spec runs the whole suite."""
    if framework == "mocha":
        config = _mocha_spec(root)
        if config is not None:
            return [], f"{config} names mocha's spec files, which greenloop does not map"
    rels = _code_files(root)
    files = frozenset(rels)
    imports: dict[str, set[str]] = {}
    dynamic: set[str] = set()
    for rel in rels:
        try:
            with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            return [], f"{rel} cannot be read"
        deps: set[str] = set()
        for m in _SPEC.finditer(text):
            spec = m.group(2)
            if spec.startswith((".", "/")):
                hit = _resolve(rel, spec, files)
                if hit is not None:
                    deps.add(hit)
        if _DYNAMIC.search(text):
            dynamic.add(rel)
        imports[rel] = deps
    wanted = set(changed)
    picked: list[str] = []
    for rel in rels:
        if not is_test_file(rel) or (framework == "mocha" and not rel.startswith("test/")):
            continue
        seen: set[str] = set()
        todo = [rel]
        while todo:
            cur = todo.pop()
            if cur not in seen:
                seen.add(cur)
                todo.extend(imports.get(cur, ()))
        hidden = sorted(seen & dynamic)
        if hidden:
            return [], f"{hidden[0]} imports a module named at run time, which the graph cannot follow"
        if seen & wanted:
            picked.append(rel)
    return picked, None
