"""The audit's sandbox check: nothing outside tests/ and runs/ changed.

Compared against git (uncommitted changes) when the unit is in a work tree, else against the
file hashes the previous audit stored in `.greenloop/audit/<unit>.json`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from greenloop.audit.check import Check, nothing_found
from greenloop.audit.sources import SKIP_DIRS, Unit, walk_files
from greenloop.layout import STATE_DIR, find_project_root, git_root
from greenloop.timefmt import iso_seconds

__all__ = [
    "Baseline",
    "check",
    "state_root_of",
]

Baseline = Literal["auto", "git", "snapshot"]
_GIT_TIMEOUT_S = 30.0


def _tester_may_change(rel: str) -> bool:
    """tests/ and runs/ are the Tester's; tool state and caches (.greenloop/, __pycache__/) are nobody's."""
    if rel == "tests" or rel == "runs" or rel.startswith(("tests/", "runs/")):
        return True
    return any(part in SKIP_DIRS for part in rel.split("/")[:-1])


def _run_git(args: list[str], cwd: Path) -> tuple[int | None, str]:
    from greenloop.system import proc

    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    with tempfile.TemporaryDirectory(prefix="greenloop-audit-") as tmp:
        raw = proc.run_to_completion(
            ["git", *args],
            cwd=str(cwd),
            env=env,
            timeout_s=_GIT_TIMEOUT_S,
            stdout_path=os.path.join(tmp, "out"),
            stderr_path=os.path.join(tmp, "err"),
        )
        out = Path(raw.stdout_path).read_text(encoding="utf-8", errors="replace")
        err = Path(raw.stderr_path).read_text(encoding="utf-8", errors="replace")
    if raw.spawn_error:
        return None, raw.spawn_error
    return raw.exit_code, out if raw.exit_code == 0 else err


def _sandbox_git(root: Path) -> tuple[list[str], str] | None:
    code, prefix = _run_git(["rev-parse", "--show-prefix"], root)
    if code != 0:
        return None
    prefix = prefix.strip()
    code, out = _run_git(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "."], root)
    if code != 0:
        return None
    entries = out.split("\0")
    changed: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        if "R" in status or "C" in status:
            i += 1  # the original path of a rename/copy follows
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        if not _tester_may_change(rel):
            kind = {"??": "added", " D": "deleted", "D ": "deleted"}.get(status, "changed")
            changed.append(f"{rel} {kind} (uncommitted)")
    return changed, "compared with git HEAD"


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _snapshot(root: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in walk_files(root):
        rel = path.relative_to(root).as_posix()
        if _tester_may_change(rel) or path.is_symlink() or not path.is_file():
            continue
        files[rel] = _hash_file(path)
    return files


def state_root_of(unit_root: Path) -> Path:
    """Where the audit keeps its snapshots: the project root, else the folder above units/."""
    project = find_project_root(unit_root)
    if project is not None:
        return project
    if unit_root.parent.name == "units":
        return unit_root.parent.parent
    return unit_root.parent


def _sandbox_snapshot(
    root: Path, unit: str, state_root: Path, clock: Callable[[], float]
) -> tuple[bool, list[str]]:
    store = state_root / STATE_DIR / "audit" / f"{unit}.json"
    current = _snapshot(root)
    previous: dict[str, str] | None = None
    problems: list[str] = []
    if store.exists():
        try:
            data = json.loads(store.read_text(encoding="utf-8"))
            previous = {str(k): str(v) for k, v in data["files"].items()}
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            problems.append(f"the stored snapshot {store} was unreadable; recorded a new one")
    record = {
        "version": 1,
        "unit": unit,
        "unit_path": str(root),
        "recorded_at": iso_seconds(clock()),
        "files": current,
    }
    from greenloop.system.atomic import write_text

    write_text(store, json.dumps(record, indent=1, sort_keys=True) + "\n")
    if previous is None:
        return True, [
            *problems,
            f"first audit outside git: recorded a baseline in {store}; the next audit compares against it",
        ]
    changes = [f"{p} changed" for p in sorted(current) if p in previous and previous[p] != current[p]]
    changes += [f"{p} added" for p in sorted(set(current) - set(previous))]
    changes += [f"{p} deleted" for p in sorted(set(previous) - set(current))]
    return False, [*problems, f"compared with the previous audit's snapshot ({store})", *changes]


def check(unit: Unit, baseline: Baseline, state_root: Path, clock: Callable[[], float]) -> Check:
    """The sandbox verdict: the files changed outside tests/ and runs/, against git or the snapshot."""
    details: list[str] = []
    # unit.root is resolved (audit_unit), so git_root walks the same folders as Path.parents.
    # Only whether there is a root matters: `git rev-parse --show-prefix` gives the unit's place.
    if baseline in ("auto", "git") and git_root(unit.root) is not None:
        result = _sandbox_git(unit.root)
        if result is not None:
            changed, how = result
            return nothing_found(
                "sandbox",
                how,
                changed,
                "fix: only tests/ and runs/ may change; restore the other files "
                "(git checkout -- <file>) and let the Coder change code/, contract.json and spec.json",
            )
        details.append("git could not be asked; fell back to the audit snapshot")
    elif baseline == "git":
        details.append(f"{unit.root} is not inside a git work tree; fell back to the audit snapshot")
    _first, lines = _sandbox_snapshot(unit.root, unit.name, state_root, clock)
    changes = [ln for ln in lines if ln.endswith((" changed", " added", " deleted"))]
    details += lines
    if changes:
        details.append(
            "fix: only tests/ and runs/ may change between audits; restore code/, contract.json, "
            "spec.json and the other files, or have their owner make the change"
        )
    return Check("sandbox", not changes, len(changes), tuple(details))
