"""Which test framework does a workspace use? Reads files; never runs anything.

First match wins, at the workspace root:
  1. package.json declares vitest      6. pytest markers (pytest.ini, conftest.py, a
  2. package.json declares jest           [tool.pytest…] or pytest dependency in pyproject.toml,
  3. package.json declares mocha, or      [tool:pytest] in setup.cfg, [pytest] in tox.ini)
     a .mocharc.* file is there        7. go.mod or go.work (Go)
  4. scripts.test runs `bun test`      8. Cargo.toml (Rust; cargo nextest when installed)
  5. package.json has scripts.test (npm-test)
Then, when the root declares nothing, nested test roots (a monorepo's packages) are listed as
`suites`; a single one answers for the workspace. Last comes rule 9: `.test.`/`.spec.` files or
test/ folders answer node:test (bun when a bun lockfile is there and a test file imports
bun:test), and Python test files alone answer pytest (unittest when they all use
unittest.TestCase and none imports pytest), since node:test would collect none of them.
Rule 9 reads the first few test files (probe_files.py); the others read only manifests.

The walk is breadth-first with an entry budget, never follows symlinked folders and skips
node_modules, build output, caches and virtualenvs, so a tree of 100,000 files answers at once.
A run (`probe(files=False)`) skips it when the root itself declares a runner (rules 1-6).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from greenloop.model import Detection, Suite
from greenloop.runner.test_paths import ENTRY_BUDGET, SKIP_DIRS, Walk, is_test_file
from greenloop.runner.toolchain import runner_command

__all__ = [
    "ENTRY_BUDGET",
    "SKIP_DIRS",
    "WalkResult",
    "is_test_file",
    "package_manager",
    "probe",
    "read_test_script",
    "test_script",
    "walk",
]

MAX_TEST_FILES = 500  # test files listed in a Detection

_ROOT_MARKERS = frozenset({"package.json", "pytest.ini", "pyproject.toml", "go.mod", "go.work", "Cargo.toml"})

_LOCKFILES: tuple[tuple[str, str], ...] = (
    ("pnpm-lock.yaml", "pnpm"),
    ("yarn.lock", "yarn"),
    ("bun.lockb", "bun"),
    ("bun.lock", "bun"),
    ("package-lock.json", "npm"),
    ("npm-shrinkwrap.json", "npm"),
)
_NPM_DEFAULT_TEST = 'echo "Error: no test specified" && exit 1'


class WalkResult(NamedTuple):
    """What the breadth-first walk saw: test files (relative, /-separated) and nested roots."""

    js_tests: tuple[str, ...]
    py_tests: tuple[str, ...]
    nested_roots: tuple[str, ...]  # folders below the root with a package.json, pytest, Go or Cargo marker
    truncated: bool
    entries: int


def walk(root: str, *, budget: int = ENTRY_BUDGET) -> WalkResult:
    """Breadth-first walk of `root` (test_paths.Walk): test files and nested roots."""
    js: list[str] = []
    py: list[str] = []
    nested: list[str] = []
    walked = Walk(root, budget=budget)
    for rel, child_rel, entry in walked:
        if rel and entry.name in _ROOT_MARKERS:
            nested.append(rel)
        kind = is_test_file(child_rel)
        if kind == "js" and len(js) < MAX_TEST_FILES:
            js.append(child_rel)
        elif kind == "py" and len(py) < MAX_TEST_FILES:
            py.append(child_rel)
    return WalkResult(tuple(js), tuple(py), tuple(dict.fromkeys(nested)), walked.truncated, walked.entries)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _deps(pkg: Mapping[str, Any]) -> set[str]:
    names: set[str] = set()
    for key in ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies"):
        block = pkg.get(key)
        if isinstance(block, dict):
            names.update(str(k) for k in block)
    return names


# A script that only runs another script: `npm run test:unit`, `pnpm run x`, `bun run x`,
# `yarn run x` or `yarn x` (yarn runs a script by its bare name).
_RUN_SCRIPT = re.compile(r"^\s*(?:(?:npm|pnpm|bun)\s+run(?:-script)?|yarn(?:\s+run)?)\s+([\w:.@/-]+)\s*$")


def test_script(pkg: Mapping[str, Any]) -> str | None:
    """The test script, followed through scripts that only run another script
    (`"test": "bun run test:functionality"` is what `test:functionality` says), so that the
    runner at the end of the chain is the one detected."""
    scripts = pkg.get("scripts")
    if not isinstance(scripts, dict):
        return None
    script = scripts.get("test")
    if not isinstance(script, str) or not script.strip() or script.strip() == _NPM_DEFAULT_TEST:
        return None
    seen = {"test"}
    while (m := _RUN_SCRIPT.match(script)) and m.group(1) not in seen:
        target = scripts.get(m.group(1))
        if not isinstance(target, str) or not target.strip():
            break
        seen.add(m.group(1))
        script = target
    return script


def read_test_script(root: str) -> str | None:
    """`test_script` of the package.json in `root`, if it has a readable one."""
    pkg = _read_json(Path(root) / "package.json")
    return test_script(pkg) if pkg is not None else None


def package_manager(root: Path, pkg: Mapping[str, Any] | None = None) -> str | None:
    """npm, pnpm, yarn or bun: from `packageManager` in package.json, else the nearest lockfile.

    Looks at the root and its parents up to the repository root (a monorepo keeps one lockfile
    at the top).
    """
    declared = (pkg or {}).get("packageManager")
    if isinstance(declared, str) and declared:
        name = declared.split("@", 1)[0]
        if name in ("npm", "pnpm", "yarn", "bun"):
            return name
    here = root
    for _ in range(8):
        for lockfile, manager in _LOCKFILES:
            if (here / lockfile).is_file():
                return manager
        if (here / ".git").exists() or here.parent == here:
            break
        here = here.parent
    return None


def _first_existing(root: Path, names: tuple[str, ...]) -> str | None:
    for name in names:
        if (root / name).is_file():
            return name
    return None


_VITEST_CONFIGS = tuple(
    f"{base}.config.{ext}" for base in ("vitest", "vite") for ext in ("ts", "mts", "cts", "js", "mjs", "cjs")
)
_JEST_CONFIGS = tuple(f"jest.config.{ext}" for ext in ("ts", "mts", "cts", "js", "mjs", "cjs", "json"))
_MOCHA_CONFIGS = tuple(f".mocharc.{ext}" for ext in ("js", "cjs", "mjs", "yaml", "yml", "jsonc", "json"))


def _pytest_marker(root: Path) -> str | None:
    """The file that declares pytest at this folder, if any."""
    if (root / "pytest.ini").is_file():
        return "pytest.ini"
    pyproject = _read_text(root / "pyproject.toml")
    if re.search(r"^\[tool\.pytest", pyproject, re.M) or re.search(r"[\"']pytest\b", pyproject):
        return "pyproject.toml"
    if (root / "conftest.py").is_file():
        return "conftest.py"
    if re.search(r"^\[tool:pytest\]", _read_text(root / "setup.cfg"), re.M):
        return "setup.cfg"
    if re.search(r"^\[pytest\]", _read_text(root / "tox.ini"), re.M):
        return "tox.ini"
    return None


class _Marker(NamedTuple):
    framework: str
    config_path: str | None
    pkg: dict[str, Any] | None


def _declared(root: Path, pkg: dict[str, Any] | None) -> _Marker | None:
    """Rules 1-6 at one folder, whose package.json (if any, and valid) is `pkg`."""
    if pkg is not None:
        deps = _deps(pkg)
        script = test_script(pkg) or ""
        if "vitest" in deps or re.search(r"\bvitest\b", script):
            return _Marker("vitest", _first_existing(root, _VITEST_CONFIGS) or "package.json", pkg)
        if "jest" in deps or re.search(r"\bjest\b", script) or isinstance(pkg.get("jest"), dict):
            return _Marker("jest", _first_existing(root, _JEST_CONFIGS) or "package.json", pkg)
        mocharc = _first_existing(root, _MOCHA_CONFIGS)
        if "mocha" in deps or re.search(r"\bmocha\b", script) or mocharc:
            return _Marker("mocha", mocharc or "package.json", pkg)
        if re.search(r"(?:^|[\s;&|(])bun\s+test\b", script):
            return _Marker("bun", "package.json", pkg)
        if script:
            return _Marker("npm-test", "package.json", pkg)
    marker = _pytest_marker(root)
    if marker:
        return _Marker("pytest", marker, pkg)
    go = _first_existing(root, ("go.work", "go.mod"))  # a workspace's go.work covers its modules
    if go:
        return _Marker("go", go, pkg)
    if (root / "Cargo.toml").is_file():
        return _Marker("cargo", "Cargo.toml", pkg)
    return None


def _filter_tests(framework: str, walked: WalkResult) -> tuple[str, ...]:
    return walked.py_tests if framework in ("pytest", "unittest") else walked.js_tests


def _declared_at(root: Path) -> _Marker | None:
    return _declared(root, _read_json(root / "package.json"))


def _manager(framework: str | None, root: Path, pkg: Mapping[str, Any] | None) -> str | None:
    """The package manager, looked up for JavaScript runners or a folder with a package.json."""
    if framework in ("vitest", "jest", "npm-test", "node:test", "mocha", "bun") or pkg is not None:
        return package_manager(root, pkg)
    return None


def probe(
    path: str,
    *,
    budget: int = ENTRY_BUDGET,
    env: Mapping[str, str] | None = None,
    which: Callable[[str], str | None] | None = None,
    files: bool = True,
) -> Detection:
    """Detect the framework of the workspace at `path` (see the module docstring).

    `env` and `which` are seams for the toolchain part of the suggested command (the active
    virtualenv, uv, poetry); they default to this process's. With `files` False and a runner
    declared at the root itself, nothing is walked: the answer carries the framework, root,
    config and package manager (what `plan` needs) but no test_files, suites or command.
    """
    root = Path(path).resolve()
    notes: list[str] = []
    root_pkg = _read_json(root / "package.json")
    if root_pkg is None and (root / "package.json").is_file():
        notes.append("package.json is not a valid JSON object; it was ignored (fix its syntax)")
    marker = _declared(root, root_pkg)
    if marker is not None and not files:
        return Detection(
            framework=marker.framework,
            root=str(root),
            config_path=marker.config_path,
            package_manager=_manager(marker.framework, root, marker.pkg),
            notes=tuple(notes),
        )
    walked = walk(str(root), budget=budget)
    if walked.truncated:
        notes.insert(
            0,
            f"the walk stopped after {budget} entries; test_files is incomplete "
            "(pass a narrower PATH to see all of them)",
        )
    found: list[tuple[Suite, _Marker]] = []
    if marker is None or marker.framework == "npm-test":
        for rel in walked.nested_roots:
            sub = _declared_at(root / rel)
            if sub is not None:
                found.append((Suite(root=rel, framework=sub.framework, config_path=sub.config_path), sub))
    suites = [suite for suite, _ in found]
    framework: str | None = None
    config_path: str | None = None
    pkg: dict[str, Any] | None = None
    answer_root = root
    if marker is not None:
        framework, config_path, pkg = marker.framework, marker.config_path, marker.pkg
    elif len(found) == 1:
        only, sub = found[0]
        answer_root = root / only.root
        framework, config_path, pkg = sub.framework, sub.config_path, sub.pkg
        notes.append(f"the only test root is {only.root}/; greenloop runs the suite there")
        walked = walk(str(answer_root), budget=budget)
    elif suites:
        notes.append(
            f"{len(suites)} test roots found ({', '.join(s.root for s in suites)}); "
            "run one with `greenloop run <root>`"
        )
    elif walked.js_tests:
        from greenloop.runner.probe_files import uses_bun_test  # (reads files: only on this path)

        if package_manager(root, root_pkg) == "bun" and uses_bun_test(root, walked.js_tests):
            framework = "bun"
            notes.append("no runner is declared; a bun lockfile and test files importing bun:test, "
                         "so bun test runs them")
        else:
            framework = "node:test"
            notes.append("no runner is declared; JavaScript test files found, so node:test runs them")
    elif walked.py_tests:
        from greenloop.runner.probe_files import uses_unittest_only

        if uses_unittest_only(root, walked.py_tests):
            framework = "unittest"
            notes.append("no runner is declared; the Python test files use unittest.TestCase and "
                         "nothing declares pytest, so unittest runs them")
        else:
            framework = "pytest"
            notes.append("no runner is declared; only Python test files found, so pytest runs them")
    if framework is None and not suites:
        notes.append(
            "nothing to test: no package.json test runner, pytest marker, go.mod, Cargo.toml or test files "
            "(add tests, or pass --framework / --command to greenloop run)"
        )
    manager = _manager(framework, answer_root, pkg)
    command: tuple[str, ...] = ()
    if framework is not None:
        # the command `greenloop run` starts (without its reporter flags), from the same
        # function run uses; what is missing to start it is a note
        base_env = env if env is not None else os.environ
        tool = runner_command(framework, str(answer_root), manager, base_env, which)
        command = tool.argv
        notes.extend(tool.notes)
        if tool.unavailable:
            notes.append(f"greenloop run would not start: {tool.unavailable}")
    test_files = _filter_tests(framework, walked) if framework else walked.js_tests + walked.py_tests
    return Detection(
        framework=framework,
        root=str(answer_root),
        config_path=config_path,
        test_files=test_files,
        command=command,
        package_manager=manager,
        notes=tuple(notes),
        suites=tuple(suites),
    )


if __name__ == "__main__":  # pragma: no cover - a quick manual check
    print(json.dumps(probe(sys.argv[1] if len(sys.argv) > 1 else ".").to_json(), indent=2))
