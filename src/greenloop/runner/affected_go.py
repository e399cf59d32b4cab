"""The packages a change reaches, for `--affected` go runs: `go list` of the workspace's packages.

`go list -e -f …` over the whole run's patterns gives each package's folder, its transitive
dependencies (Deps) and its tests' own imports (TestImports, XTestImports). A package's tests
are affected when the package changed, a package it depends on changed, or a package its tests
import (or one that package depends on) changed. A changed .go file in a folder `go list` does
not list (build tags, a folder outside every module) makes the caller run the whole suite.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["select"]

_FORMAT = "\t".join(("{{.ImportPath}}", "{{.Dir}}", '{{join .Deps " "}}', '{{join .TestImports " "}}',
                     '{{join .XTestImports " "}}'))


def select(root: str, changed: Sequence[str],
           env: Mapping[str, str] | None = None) -> tuple[list[str], str | None]:
    """(the affected packages as `./dir` arguments of `go test`, sorted; why the whole suite
    must run instead, or None). `changed`: .go files relative to `root`."""
    from greenloop.frameworks.go_workspace import workspace_env, workspace_patterns

    child = dict(os.environ if env is None else env)
    extra, _notes = workspace_env(root, child)
    child.update(extra)
    try:
        argv = ["go", "list", "-e", "-f", _FORMAT, *workspace_patterns(root)]
        done = subprocess.run(argv, cwd=root, env=child, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"`go list` could not run ({exc})"
    if done.returncode != 0:
        return [], f"`go list` failed: {done.stderr.strip()[:200]}"
    here = os.path.realpath(root)
    by_dir: dict[str, str] = {}
    deps: dict[str, set[str]] = {}
    test_imports: dict[str, set[str]] = {}
    for line in done.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) != 5:
            continue
        path, folder, dep, timp, ximp = parts
        rel = os.path.relpath(os.path.realpath(folder), here).replace(os.sep, "/")
        by_dir[rel] = path
        deps[path] = set(dep.split())
        test_imports[path] = set(timp.split()) | set(ximp.split())
    hit: set[str] = set()
    for rel in changed:
        folder = os.path.dirname(rel) or "."
        if folder not in by_dir:
            return [], f"{rel} is in no package `go list` lists, outside the graph"
        hit.add(by_dir[folder])
    picked: list[str] = []
    for folder, path in by_dir.items():
        reach = {path} | deps[path]
        for imp in test_imports[path]:
            reach |= {imp} | deps.get(imp, set())
        if reach & hit:
            picked.append("." if folder == "." else f"./{folder}")
    return sorted(picked), None
