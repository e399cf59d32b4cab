"""The crates a change reaches, for `--affected` cargo runs: `cargo metadata` of the workspace.

`cargo metadata --no-deps` (offline: it resolves nothing) lists the workspace's packages, each
with its manifest and its dependencies; a dependency with a `path` inside the workspace is a
member the package builds on (normal, dev and build dependencies alike: a dev-dependency is
what its tests use). A changed file belongs to the package whose folder holds it (the deepest,
for a package nested in another's folder); the affected packages are those, and every package
that depends on one of them, directly or not. A changed .rs file in no package's folder makes
the caller run the whole suite.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["select"]


def select(root: str, changed: Sequence[str],
           env: Mapping[str, str] | None = None) -> tuple[list[str], str | None]:
    """(the affected package names, sorted: `-p NAME` each; why the whole suite must run
    instead, or None). `changed`: .rs files relative to `root`."""
    try:
        done = subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
            cwd=root, env=dict(os.environ if env is None else env), capture_output=True, text=True,
            timeout=120, stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return [], f"`cargo metadata` could not run ({exc})"
    if done.returncode != 0:
        return [], f"`cargo metadata` failed: {done.stderr.strip()[:200]}"
    try:
        packages = json.loads(done.stdout)["packages"]
        folders = {str(p["name"]): os.path.realpath(os.path.dirname(p["manifest_path"]))
                   for p in packages}
        needs = {str(p["name"]): {os.path.realpath(d["path"]) for d in p.get("dependencies") or []
                                  if d.get("path")}
                 for p in packages}
    except (ValueError, KeyError, TypeError) as exc:
        return [], f"`cargo metadata` printed what greenloop cannot read ({type(exc).__name__}: {exc})"
    by_folder = {folder: name for name, folder in folders.items()}
    here = os.path.realpath(root)
    hit: set[str] = set()
    for rel in changed:
        path = os.path.join(here, rel)
        owner = max((f for f in by_folder if path.startswith(f + os.sep)), key=len, default=None)
        if owner is None:
            return [], f"{rel} is in no package of the cargo workspace, outside the graph"
        hit.add(by_folder[owner])
    users: dict[str, set[str]] = {name: set() for name in folders}  # package -> who depends on it
    for name, deps in needs.items():
        for dep in deps:
            if dep in by_folder:
                users[by_folder[dep]].add(name)
    picked, todo = set(hit), list(hit)
    while todo:
        for user in users[todo.pop()]:
            if user not in picked:
                picked.add(user)
                todo.append(user)
    return sorted(picked), None
