"""How a runner is started in a workspace, or why it cannot be: the one source for both.

`runner_command` is what `greenloop run` starts (before greenloop's reporter flags, which
plan.py adds) and what `greenloop probe` shows. The workspace's own installs come first: a
JavaScript runner from node_modules/.bin (here or in a parent up to the repository root, where
a monorepo hoists it); pytest from the workspace's own virtualenv, the active one, one in a
parent up to the project's root (never above it), `uv run` or `poetry run` by lockfile, then
this interpreter, with a note saying which and why. Pure except for looking at files and PATH.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "CARGO_MISSING",
    "GO_MISSING",
    "Toolchain",
    "Which",
    "js_runner",
    "npm_test_command",
    "python_runner",
    "runner_command",
    "unittest_prefix",
]

Which = Callable[[str], "str | None"]

GO_MISSING = "go is not on PATH: install Go (`apt-get install golang-go` or https://go.dev/dl/)"
CARGO_MISSING = "cargo is not on PATH: install Rust with rustup (https://rustup.rs)"


class Toolchain(NamedTuple):
    """How a runner is started in this workspace, or why it cannot be."""

    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()
    unavailable: str | None = None



def _upwards(root: Path, limit: int = 8) -> list[Path]:
    """`root` and its parents up to the repository root (a monorepo hoists node_modules)."""
    out = [root]
    here = root
    for _ in range(limit):
        if (here / ".git").exists() or here.parent == here:
            break
        here = here.parent
        out.append(here)
    return out


def _install_hint(manager: str | None, package: str) -> str:
    return {
        "pnpm": f"pnpm add -D {package}",
        "yarn": f"yarn add -D {package}",
        "bun": f"bun add -d {package}",
    }.get(manager or "npm", f"npm install -D {package}")


def js_runner(root: str, binary: str, manager: str | None) -> Toolchain:
    """The workspace's own `binary` from node_modules/.bin (or Yarn Plug'n'Play), never a global one."""
    base = Path(root)
    for folder in _upwards(base):
        candidate = folder / "node_modules" / ".bin" / binary
        if os.access(candidate, os.X_OK):
            return Toolchain((str(candidate),))
        if (folder / ".pnp.cjs").is_file():
            return Toolchain(("yarn", binary), notes=(f"{binary} runs through Yarn Plug'n'Play",))
    return Toolchain(
        (binary,),
        unavailable=(
            f"{binary} is not installed in {root}: run `{_install_hint(manager, binary)}` "
            f"(or `{manager or 'npm'} install` if package.json already lists it)"
        ),
    )


def _venv_python(venv: Path) -> Path | None:
    for rel in ("bin/python", "Scripts/python.exe"):
        if (venv / rel).exists():
            return venv / rel
    return None


def venv_has(venv: Path, module: str) -> bool:
    """Is `module` installed in the virtualenv (or visible through its system site-packages)?"""
    if any(venv.glob(f"lib/python*/site-packages/{module}")):
        return True
    if (venv / "Lib" / "site-packages" / module).exists():
        return True
    try:
        cfg = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    # A venv made with --system-site-packages sees the base interpreter's packages; trust it.
    return re.search(r"^\s*include-system-site-packages\s*=\s*true\s*$", cfg, re.M | re.I) is not None


def _python_project_root(base: Path, limit: int = 8) -> Path:
    """Where a search for the workspace's Python environment stops: the git root around `base`,
    else the nearest folder holding pyproject.toml or setup.cfg, else `base` itself (a folder
    above an unmarked workspace is someone else's: a `venv` there is not this project's)."""
    nearest: Path | None = None
    here = base
    for _ in range(limit + 1):
        if (here / ".git").exists():
            return here
        if nearest is None and any((here / name).is_file() for name in ("pyproject.toml", "setup.cfg")):
            nearest = here
        if here.parent == here:
            break
        here = here.parent
    return nearest or base


def _folders_to(base: Path, top: Path) -> list[Path]:
    """`base` and its parents up to `top` (inclusive)."""
    out = [base]
    while out[-1] != top and out[-1].parent != out[-1]:
        out.append(out[-1].parent)
    return out if out[-1] == top else [base]


def python_runner(
    root: str,
    env: Mapping[str, str],
    which: Which | None = None,
    *,
    interpreter: str | None = None,
    needs: str | None = "pytest",
) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """(argv that starts pytest, notes, unavailable reason) for a Python workspace.

    Order: the workspace's own `.venv`/`venv`, the active VIRTUAL_ENV, a `.venv`/`venv` in a
    parent up to the project's root (`_python_project_root`), `uv run` with uv.lock, `poetry
    run` with poetry.lock (up to the same root), then this interpreter. The first virtualenv
    found is the answer, and when it lacks `needs` (pytest) the reason the run cannot start,
    except the active one, which is passed over with a note (the caller may only happen to be
    in it). `needs=None` (unittest) asks for no module. The notes say which interpreter was
    chosen and why.
    """
    which = which or shutil.which
    base = Path(root)
    top = _python_project_root(base)
    # (virtualenv, its name in an error, what a note calls it)
    candidates = [(base / name, name, f"the workspace's virtualenv {name}") for name in (".venv", "venv")]
    active = env.get("VIRTUAL_ENV")
    if active:
        candidates.append((Path(active), active, f"the active virtualenv {active} (VIRTUAL_ENV)"))
    for folder in _folders_to(base, top)[1:]:
        for name in (".venv", "venv"):
            rel = os.path.relpath(folder / name, base)
            candidates.append((folder / name, rel, f"the virtualenv {rel} above the workspace, within "
                               f"its project root {folder}"))
    tool = needs or "python"
    notes: list[str] = []
    for venv, shown, label in candidates:
        venv_python = _venv_python(venv)
        if venv_python is None:
            continue
        argv = (str(venv_python), "-m", "pytest")
        if needs is None or venv_has(venv, needs):
            notes.append(f"{tool} runs in {label}")
            return argv, tuple(notes), None
        if venv == Path(active or ""):  # an environment the caller happens to be in: look further
            notes.append(f"{label} was passed over: {needs} is not installed there")
            continue
        # the project's own environment: its packages are what the tests import
        why_not = f"{needs} is not installed in {shown}: run `{argv[0]} -m pip install {needs}`"
        return argv, tuple(notes), why_not
    for lockfile, runner in (("uv.lock", "uv"), ("poetry.lock", "poetry")):
        if any((folder / lockfile).is_file() for folder in _folders_to(base, top)):
            if which(runner):
                notes.append(f"{tool} runs through `{runner} run` ({lockfile})")
                return (runner, "run", "pytest"), tuple(notes), None
            notes.append(f"{lockfile} found but {runner} is not on PATH; using this interpreter")
    python: str = interpreter or _current_python()
    if interpreter is None and needs is not None and importlib.util.find_spec(needs) is None:
        return (python, "-m", "pytest"), tuple(notes), (
            f"{needs} is not installed for {python}: run `{python} -m pip install {needs}` "
            "or create the workspace's .venv with it"
        )
    if interpreter is None:  # (a caller that names the interpreter knows why)
        notes.append(f"{tool} runs with greenloop's own interpreter {python}: no virtualenv in the "
                     f"workspace or up to its project root {top}, none active")
    return (python, "-m", "pytest"), tuple(notes), None


def unittest_prefix(pytest_argv: Sequence[str]) -> tuple[str, ...]:
    """The interpreter part of `python_runner`'s pytest argv: `<python> -m pytest` -> `<python>`,
    `uv run pytest` -> `uv run python` (the same environment, without needing pytest)."""
    argv = tuple(pytest_argv)
    if argv[-2:] == ("-m", "pytest"):
        return argv[:-2]
    if argv[-1:] == ("pytest",):
        return (*argv[:-1], "python")
    return argv


def _current_python() -> str:
    return sys.executable or "python3"


def npm_test_command(manager: str | None) -> tuple[str, ...]:
    """How the package manager runs package.json's test script (npm when none is known)."""
    return {"yarn": ("yarn", "test"), "pnpm": ("pnpm", "test"), "bun": ("bun", "run", "test")}.get(
        manager or "npm", ("npm", "test")
    )


def runner_command(
    framework: str,
    root: str,
    manager: str | None,
    env: Mapping[str, str],
    which: Which | None = None,
    *,
    interpreter: str | None = None,
) -> Toolchain:
    """The command that runs `framework` in the workspace at `root`, before greenloop's
    reporter flags: what `greenloop run` starts and `greenloop probe` shows (one source)."""
    which = which or shutil.which
    if framework in ("vitest", "jest"):
        tool = js_runner(root, framework, manager)
        return tool._replace(argv=(*tool.argv, "run")) if framework == "vitest" else tool
    if framework == "pytest":
        argv, notes, unavailable = python_runner(root, env, which, interpreter=interpreter)
        return Toolchain(argv, notes, unavailable)
    if framework == "node:test":
        node = which("node")
        missing = None if node else "node is not on PATH: install Node.js 20 or later"
        return Toolchain((node or "node", "--test"), unavailable=missing)
    if framework == "go":
        from greenloop.frameworks.go_workspace import workspace_patterns  # local: only Go needs it

        go = which("go")
        missing = None if go else GO_MISSING
        return Toolchain(("go", "test", *workspace_patterns(root)), unavailable=missing)
    if framework == "cargo":
        cargo = which("cargo")
        missing = None if cargo else CARGO_MISSING
        nextest = cargo is not None and which("cargo-nextest") is not None
        return Toolchain(("cargo", "nextest", "run") if nextest else ("cargo", "test"), unavailable=missing)
    if framework == "mocha":
        return js_runner(root, "mocha", manager)
    if framework == "bun":
        tool = js_runner(root, "bun", manager)
        found = which("bun")
        if tool.unavailable and found:
            tool = Toolchain((found,), ("bun runs from PATH (a global install)",))
        elif tool.unavailable:
            why = (f"bun is not installed in {root} nor on PATH: run `{_install_hint(manager, 'bun')}` "
                   "(the npm package carries bun's binary) or install bun on PATH")
            tool = tool._replace(unavailable=why)
        return tool._replace(argv=(*tool.argv, "test"))
    if framework == "unittest":
        # the workspace's interpreter as pytest would have it, without needing pytest
        argv, notes, _ = python_runner(root, env, which, interpreter=interpreter, needs=None)
        py_notes = tuple(n.replace("python runs", "unittest runs") for n in notes)
        return Toolchain((*unittest_prefix(argv), "-m", "unittest"), py_notes)
    pm = manager or "npm"
    missing = None if which(pm) else f"{pm} is not on PATH: install it to run the package.json test script"
    return Toolchain(npm_test_command(pm), unavailable=missing)
