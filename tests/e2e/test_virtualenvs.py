"""Which Python runs a workspace's pytest, with real virtualenvs: an activated one and the
workspace's own come before anything above the workspace, a search upwards stops at the
project's root, and `probe` and the run's notes say which interpreter was chosen and why.

The layout the bug was seen in: `X/ws` is the workspace, `X/runner-venv` is activated (pytest in
it), and `X/venv` (no pytest: another project's environment) sits in the parent folder, where
the upward search found it first: "broken: runner not installed: pytest is not installed in
../venv".
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import cli, write_files

pytestmark = pytest.mark.e2e

SUITE = {
    "pytest.ini": "[pytest]\n",
    "test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2\n",
}


def _venv(path: Path, *, with_pytest: bool) -> Path:
    """A real virtualenv (no pip: quick); pytest and what it imports linked into its
    site-packages from this interpreter's, so `path/bin/python -m pytest` runs."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    if with_pytest:
        site = path / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
        for name in ("pytest", "pluggy", "iniconfig", "packaging", "pygments", "py"):
            try:
                dist = importlib.metadata.distribution(name)
            except importlib.metadata.PackageNotFoundError:
                continue
            tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
            for top in tops - {"__pycache__"}:
                source = Path(str(dist.locate_file(top)))
                if source.exists() and not (site / top).exists():
                    os.symlink(source, site / top)
        done = subprocess.run([str(path / "bin" / "python"), "-m", "pytest", "--version"],
                              capture_output=True, text=True, env={"PATH": os.environ["PATH"]})
        assert done.returncode == 0, done.stderr
    return path


def _env(active: Path | None) -> dict[str, str]:
    path = os.environ["PATH"]
    if active is None:
        return {"VIRTUAL_ENV": ""}
    return {"VIRTUAL_ENV": str(active), "PATH": f"{active / 'bin'}{os.pathsep}{path}"}


def test_the_activated_virtualenv_wins_over_a_venv_in_the_parent_folder(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    _venv(tmp_path / "venv", with_pytest=False)
    active = _venv(tmp_path / "runner-venv", with_pytest=True)
    ws = write_files(tmp_path / "ws", SUITE)
    r = cli("run", str(ws), "--json", "--sandbox", "full-access", env=_env(active))
    data = r.json
    assert data["outcome"] == "red", (data["outcome"], data.get("crash_reason"))
    assert data["summary"]["total"] == 2 and data["summary"]["failed"] == 1
    assert data["command"].startswith(str(active / "bin" / "python") + " -m pytest")
    assert any(f"the active virtualenv {active}" in n for n in data["notes"]), data["notes"]
    probe = cli("probe", str(ws), "--json", env=_env(active)).json
    assert any(f"pytest runs in the active virtualenv {active}" in n for n in probe["notes"]), probe["notes"]


def test_the_search_upwards_stops_at_the_project_root(tmp_path: Path) -> None:
    """No git anywhere: the workspace's pyproject.toml makes it the project's root, so a venv
    in the folder above it is not looked at; greenloop's own interpreter runs pytest, noted."""
    _venv(tmp_path / "venv", with_pytest=False)
    ws = write_files(tmp_path / "ws", {**SUITE, "pyproject.toml": "[project]\nname = 'ws'\n"})
    r = cli("run", str(ws), "--json", "--sandbox", "full-access", env=_env(None))
    data = r.json
    assert data["outcome"] == "red", (data["outcome"], data.get("crash_reason"))
    assert data["summary"]["total"] == 2 and not data["command"].startswith(str(tmp_path / "venv"))
    own = [n for n in data["notes"] if "greenloop's own interpreter" in n and "none active" in n]
    assert own, data["notes"]


def test_the_workspace_own_venv_comes_before_the_active_one(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    active = _venv(tmp_path / "runner-venv", with_pytest=True)
    ws = write_files(tmp_path / "ws", SUITE)
    own = _venv(ws / ".venv", with_pytest=True)
    probe = cli("probe", str(ws), "--json", env=_env(active)).json
    assert probe["command"][0] == str(own / "bin" / "python"), probe["command"]
    assert any("pytest runs in the workspace's virtualenv .venv" in n for n in probe["notes"]), probe["notes"]


def test_a_venv_at_the_git_root_is_the_project_s_and_named_when_it_lacks_pytest(tmp_path: Path) -> None:
    """Within the project (a monorepo's root venv) the search still finds it; an active
    virtualenv without pytest is passed over with a note rather than chosen."""
    (tmp_path / ".git").mkdir()
    _venv(tmp_path / "venv", with_pytest=False)
    bare = _venv(tmp_path / "bare-venv", with_pytest=False)
    ws = write_files(tmp_path / "packages" / "ws", SUITE)
    probe = cli("probe", str(ws), "--json", env=_env(bare)).json
    notes = " | ".join(probe["notes"])
    assert f"the active virtualenv {bare} (VIRTUAL_ENV) was passed over" in notes, notes
    assert "pytest is not installed in ../../venv" in notes, notes
