"""`greenloop run --affected` against the whole suite, on real projects, edit by edit.

For each project (a pinned release from its package registry, or a pinned commit of a public
repository's snapshot), the bench makes a scratch workspace outside this repository (the
source, the project's test dependencies, a git repository of its own), then applies each of
the project's scripted single-file edits (bench/affected_edits/<project>.json, committed: each
one either breaks at least one test or breaks nothing) and runs, on the same edited tree:

- `greenloop run --affected --json` (the files changed since git HEAD: the edited one);
- `greenloop run --json` (the whole suite);

then undoes the edit. It prints, side by side in one run, each side's wall time, the tests each
ran, and **missed failures**: tests the whole suite fails, and did not fail before the edit,
that the affected run did not fail (it did not run them). Then, over every edit: the median of
affected time / whole time (target <= 20%) and the missed failures (target 0). An edit said to
break a test that breaks none, or said to break nothing that breaks one, is reported as a
wrong edit list (the list is the bench's own claim, and the bench checks it).

Sources (third-party code is never committed here):
- `pypi:NAME==VERSION`: the sdist from PyPI (`pip download --no-binary`), which ships its tests;
  the workspace gets a `.venv` with pytest, the tests' own dependencies and the project
  installed in editable mode (so the edits are what the tests import);
- `git:OWNER/NAME@COMMIT[:SUBDIR]`: that commit of a repository's snapshot, read from a local
  git directory (`--mirrors DIR` holds `OWNER+NAME/repo`, or `--snapshot NAME=GITDIR`; this
  machine has no network but the package registries); the npm packages the tests need are
  installed with npm.

    python bench/affected.py [--project NAME ...] [--work DIR] [--mirrors DIR] [--limit N]
                             [--check] [--json FILE]

`--check` runs only the whole suite per edit (to write or verify an edit list). The scratch
workspaces are kept in `--work` (default ~/.cache/greenloop-bench/affected) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EDITS = Path(__file__).resolve().parent / "affected_edits"
IGNORE = "\n".join([".venv/", "node_modules/", ".greenloop/", "runs/", "bugs.ndjson*", "timeline.ndjson",
                    "__pycache__/", ".pytest_cache/", "*.egg-info/", ""])


@dataclass(frozen=True)
class Project:
    """One real project: where its source comes from and what its tests need."""

    name: str
    source: str
    pip: tuple[str, ...] = ()  # the tests' Python dependencies (pytest included)
    npm: tuple[str, ...] = ()  # the tests' npm packages
    npm_own: bool = False  # npm install the package.json's own dependencies instead
    files: dict[str, str] = field(default_factory=dict)  # files the bench writes (named in the note)
    note: str = ""


PROJECTS = {
    p.name: p for p in (
        # (coverage: the tests' own requirements list it; greenloop records its map with it)
        Project("packaging", "pypi:packaging==24.2", pip=("pytest", "pretend", "coverage")),
        Project("dateutil", "pypi:python-dateutil==2.9.0.post0",
                # pytest 8: its setup.cfg turns warnings into errors, and pytest 9 warns of its
                # generator parametrize; pytest-cov registers the no_cover mark its conftest.py sets
                pip=("pytest==8.3.5", "pytest-cov", "freezegun", "hypothesis", "six")),
        Project("remeda", "git:remeda/remeda@3b72f9fb6e5174243954467186301d352b742699:packages/remeda",
                npm=("vitest@4.1.12", "@fast-check/vitest@0.4", "fast-check@4", "type-fest@5",
                     "typescript@6")),
        Project("date-fns", "git:date-fns/date-fns@dd66398305c2b015fba3c1b3d31ccff42ee8d4cf",
                npm=("vitest@3.2.4", "@date-fns/tz@1", "@date-fns/utc@2", "sinon@7", "lodash@4",
                     "fp-ts@2", "js-fns@2", "typescript@5.9.2"),
                # the git submodules (not in a snapshot) that tsconfig.json refers to: empty
                # projects, so that vite can read the references (the tests use npm's @date-fns/tz)
                files={f"submodules/{m}/tsconfig.json": '{"files": []}\n'
                       for m in ("tz", "utc", "docs", "build")}),
    )
}


class BenchError(Exception):
    """Something the bench cannot do, with what to do about it."""


def _run(argv: list[str], cwd: Path, timeout: float = 1800, **kw: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, **kw)
    if done.returncode != 0:
        raise BenchError(f"{' '.join(argv)} failed in {cwd} (exit {done.returncode}):\n"
                         f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done


def _unpack_sdist(spec: str, into: Path) -> None:
    download = into.parent / (into.name + ".download")
    shutil.rmtree(download, ignore_errors=True)
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
          "-d", str(download), spec], cwd=into.parent)
    (archive,) = list(download.glob("*.tar.gz"))
    with tarfile.open(archive) as tar:
        tar.extractall(download, filter="data")
    (top,) = [p for p in download.iterdir() if p.is_dir()]
    top.rename(into)
    shutil.rmtree(download)


def _snapshot(owner_name: str, mirrors: Path | None, snapshots: dict[str, str]) -> Path:
    name = owner_name.split("/")[1]
    if name in snapshots:
        return Path(snapshots[name])
    where = (mirrors or Path(os.environ.get("GREENLOOP_BENCH_MIRRORS", "/nonexistent"))) \
        / owner_name.replace("/", "+") / "repo"
    if not where.exists():
        raise BenchError(f"no snapshot of {owner_name}: pass --mirrors DIR (holding "
                         f"{owner_name.replace('/', '+')}/repo, e.g. `git clone --mirror "
                         f"https://github.com/{owner_name} DIR/{owner_name.replace('/', '+')}/repo`) "
                         f"or --snapshot {name}=GITDIR")
    return where


def _unpack_git(spec: str, into: Path, mirrors: Path | None, snapshots: dict[str, str]) -> None:
    repo_commit, _, sub = spec.partition(":")
    owner_name, _, commit = repo_commit.partition("@")
    gitdir = _snapshot(owner_name, mirrors, snapshots)
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "--git-dir", str(gitdir), "archive", "--format=tar", commit,
                              *([sub] if sub else [])], capture_output=True, timeout=600)
    if archive.returncode != 0:
        shutil.rmtree(into)
        said = archive.stderr.decode(errors="replace").strip()
        raise BenchError(f"{gitdir} has no commit {commit} ({said}): fetch the snapshot again")
    strip = ["--strip-components", str(sub.count("/") + 1)] if sub else []
    subprocess.run(["tar", "x", "-C", str(into), *strip], input=archive.stdout, check=True, timeout=600)


def prepare(project: Project, work: Path, mirrors: Path | None, snapshots: dict[str, str]) -> Path:
    """The project's scratch workspace: made once (source, dependencies, a git commit), then reused."""
    ws = work / project.name
    if (ws / ".git").is_dir():
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=ws, check=True)
        return ws
    shutil.rmtree(ws, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    kind, _, spec = project.source.partition(":")
    if kind == "pypi":
        _unpack_sdist(spec, ws)
    else:
        _unpack_git(spec, ws, mirrors, snapshots)
    for rel, text in project.files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    if project.pip:
        venv.create(ws / ".venv", with_pip=True)
        pip = [str(ws / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q",
               "--disable-pip-version-check"]
        _run([*pip, *project.pip], cwd=ws)
        _run([*pip, "--no-deps", "-e", "."], cwd=ws)
    if project.npm:
        package = json.loads((ws / "package.json").read_text())
        for key in ("devDependencies", "dependencies", "peerDependencies", "optionalDependencies"):
            package.pop(key, None)  # the monorepo's own tools: the tests need only what npm installs below
        (ws / "package.json").write_text(json.dumps(package, indent=2) + "\n")
        _run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--save-dev", *project.npm],
             cwd=ws)
    if project.npm_own:
        _run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts"], cwd=ws)
    (ws / ".gitignore").write_text(IGNORE)
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    _run([*git, "init", "-q"], cwd=ws)
    _run([*git, "add", "-A"], cwd=ws)
    _run([*git, "commit", "-q", "-m", f"{project.source}"], cwd=ws)
    return ws


@dataclass(frozen=True)
class Side:
    """One greenloop run: wall seconds, tests run, failing test names, its selection."""

    wall: float
    total: int
    failed: frozenset[str]
    status: str
    affected: dict[str, Any] | None
    notes: tuple[str, ...] = ()


def greenloop(ws: Path, *extra: str, timeout_s: float = 1200) -> Side:
    """`greenloop run --json` on the workspace (greenloop from this checkout); a run past
    `timeout_s` is stopped by greenloop (an edit that makes a test loop forever)."""
    agents = ("CLAUDECODE", "AI_AGENT", "CURSOR_AGENT", "FORCE_COLOR")
    env = {k: v for k, v in os.environ.items() if k not in agents}
    env.update(PYTHONPATH=str(REPO / "src"), CI="1", NO_COLOR="1")
    start = time.perf_counter()
    argv = [sys.executable, "-m", "greenloop", "run", str(ws), "--json", "--sandbox", "full-access",
            "--timeout-ms", str(int(timeout_s * 1000)), *extra]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL,
                          timeout=timeout_s + 300)
    wall = time.perf_counter() - start
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError as e:
        raise BenchError(f"greenloop run {' '.join(extra)} printed no JSON (exit {done.returncode}):\n"
                         f"{done.stdout[-1500:]}{done.stderr[-1500:]}") from e
    failed = frozenset(str(f.get("test")) for f in data.get("failures") or ())
    summary = data.get("summary") or {}
    return Side(wall, int(summary.get("total") or 0), failed, str(data.get("outcome")), data.get("affected"),
                tuple(str(n) for n in data.get("notes") or ()))


def load_edits(name: str) -> list[dict[str, Any]]:
    path = EDITS / f"{name}.json"
    if not path.exists():
        raise BenchError(f"no edit list for {name}: write {path.relative_to(REPO)}")
    edits = json.loads(path.read_text())["edits"]
    for i, e in enumerate(edits):
        missing = {"file", "find", "replace", "breaks"} - set(e)
        if missing:
            raise BenchError(f"{path.name} edit {i}: fields {sorted(missing)} are missing")
    return list(edits)


def apply(ws: Path, edit: dict[str, Any]) -> None:
    path = ws / edit["file"]
    text = path.read_text()
    if text.count(edit["find"]) != 1:
        count = text.count(edit["find"])
        raise BenchError(f"edit of {edit['file']}: {edit['find']!r} occurs {count} times, not once")
    path.write_text(text.replace(edit["find"], edit["replace"]))


def undo(ws: Path, edit: dict[str, Any]) -> None:
    subprocess.run(["git", "checkout", "-q", "--", edit["file"]], cwd=ws, check=True)


def bench_project(project: Project, ws: Path, limit: int | None, check: bool) -> dict[str, Any]:
    edits = load_edits(project.name)[:limit]
    baseline = greenloop(ws)
    deadline = max(60.0, 5 * baseline.wall)
    # the coverage map greenloop recorded on the committed tree (pytest, with coverage.py): put
    # back before each affected run, so that each edit is measured against the same map, not
    # against the one the edited whole run just recorded
    map_file = ws / ".greenloop" / "coverage-map.json"
    recorded = map_file.read_bytes() if map_file.exists() else None
    print(f"\n{project.name} ({project.source}): whole suite {baseline.total} tests, {baseline.wall:.2f} s, "
          f"{len(baseline.failed)} failing before any edit")
    rows: list[dict[str, Any]] = []
    for i, edit in enumerate(edits):
        apply(ws, edit)
        try:
            whole = greenloop(ws, timeout_s=deadline)
            session = f"bench-{project.name}-{i}-{time.time_ns()}"
            if recorded is not None:
                map_file.write_bytes(recorded)
            ours = None if check else greenloop(ws, "--affected", "--session", session, timeout_s=deadline)
        finally:
            undo(ws, edit)
        broken = whole.failed - baseline.failed
        row: dict[str, Any] = {"edit": i, "file": edit["file"], "breaks": bool(edit["breaks"]),
                               "whole_s": round(whole.wall, 3), "whole_tests": whole.total,
                               "broken": sorted(broken)}
        wrong = bool(broken) != bool(edit["breaks"])
        row["wrong_label"] = wrong
        line = (f"  {i:2} {edit['file'][:44]:44} whole {whole.wall:6.2f} s {whole.total:6} tests, "
                f"broke {len(broken):3}")
        if ours is not None:
            missed = sorted(broken - ours.failed)
            fallback = (ours.affected or {}).get("fallback")
            row.update(affected_s=round(ours.wall, 3), affected_tests=ours.total, missed=missed,
                       ratio=round(ours.wall / whole.wall, 3), fallback=fallback, status=ours.status)
            mapped = next((n.split("(", 1)[-1].split(")")[0] if "cannot" in n else "map"
                           for n in ours.notes if "coverage map" in n), None)
            row.update(coverage_map=mapped)
            line += (f" | affected {ours.wall:6.2f} s {ours.total:6} tests ({ours.wall / whole.wall:5.1%})"
                     f" missed {len(missed)}" + (f" [whole suite: {fallback}]" if fallback else "")
                     + (f" [{mapped}]" if mapped else ""))
        if wrong:
            line += "  WRONG LABEL: " + ("breaks nothing" if edit["breaks"] else "breaks a test")
        print(line, flush=True)
        rows.append(row)
    return {"project": project.name, "source": project.source, "baseline_tests": baseline.total,
            "baseline_s": round(baseline.wall, 3), "baseline_failing": sorted(baseline.failed), "edits": rows}


def summary(results: list[dict[str, Any]], check: bool) -> int:
    rows = [r for res in results for r in res["edits"]]
    wrong = [r for r in rows if r["wrong_label"]]
    print()
    if wrong:
        print(f"wrong edit labels: {len(wrong)} of {len(rows)} edits")
    if check or not rows:
        return 1 if wrong else 0
    for res in results:
        ratios = [r["ratio"] for r in res["edits"]]
        print(f"{res['project']:10} {len(ratios):3} edits: median affected/whole "
              f"{statistics.median(ratios):6.1%}, "
              f"affected {statistics.median(r['affected_s'] for r in res['edits']):.2f} s vs whole "
              f"{statistics.median(r['whole_s'] for r in res['edits']):.2f} s (medians), "
              f"missed {sum(len(r['missed']) for r in res['edits'])}")
    missed = sum(len(r["missed"]) for r in rows)
    median = statistics.median(r["ratio"] for r in rows)
    print(f"all        {len(rows):3} edits: median affected/whole {median:6.1%} (target <= 20%), "
          f"missed failures {missed} (target 0)")
    return 1 if missed or wrong else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--project", action="append", choices=sorted(PROJECTS),
                    help="only this project (repeatable)")
    ap.add_argument("--work", type=Path, default=Path.home() / ".cache" / "greenloop-bench" / "affected")
    ap.add_argument("--mirrors", type=Path, help="a folder holding OWNER+NAME/repo git snapshots")
    ap.add_argument("--snapshot", action="append", default=[], metavar="NAME=GITDIR")
    ap.add_argument("--limit", type=int, help="only the first N edits of each project")
    ap.add_argument("--check", action="store_true",
                    help="run only the whole suite per edit (check the edit list)")
    ap.add_argument("--json", type=Path, help="also write every row to this file")
    args = ap.parse_args()
    snapshots = dict(s.split("=", 1) for s in args.snapshot)
    work = args.work.resolve()
    if work.is_relative_to(REPO):
        print(f"--work {work} is inside this repository; third-party code stays outside it", file=sys.stderr)
        return 2
    results = []
    try:
        for name in args.project or list(PROJECTS):
            project = PROJECTS[name]
            ws = prepare(project, work, args.mirrors, snapshots)
            results.append(bench_project(project, ws, args.limit, args.check))
    except BenchError as e:
        print(f"affected bench: {e}", file=sys.stderr)
        return 2
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return summary(results, args.check)


if __name__ == "__main__":
    sys.exit(main())
