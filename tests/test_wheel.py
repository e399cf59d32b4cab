"""greenloop installed as a tool: build the wheel, `pipx install` it (pipx's home and bin folder
in a fresh folder under /tmp) and use it on a real pytest workspace. Nothing may be read from
the source tree at run time: the pytest report plugin, the schemas and every data file must
travel in the wheel. (.ci/run does the same with plain pip into a clean virtualenv.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "greenloop"

# one worker builds and installs the wheel once for the whole module (scripts/test: --dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("wheel")]


def run(argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, f"{argv} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def clean_env() -> dict[str, str]:
    """This shell's environment without anything that points Python at the source tree."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def installed() -> Iterator[tuple[Path, Path]]:
    """(the greenloop that `pipx install <wheel>` put on its bin folder, the wheel itself)."""
    with tempfile.TemporaryDirectory(prefix="greenloop-wheel-") as tmp_name:
        tmp = Path(tmp_name)
        # Build from a copy: a build inside the checkout would leave build/ there, and a stale
        # build/lib could carry files the source no longer has.
        source = tmp / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md"):
            shutil.copy(REPO / name, source / name)
        shutil.copytree(
            REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
        dist = tmp / "dist"
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)], cwd=tmp,
            env=clean_env())  # fmt: skip
        (wheel,) = dist.glob("greenloop-*.whl")
        venv = tmp / "tool-venv"
        run([sys.executable, "-m", "venv", str(venv)], cwd=tmp, env=clean_env())
        run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp, env=clean_env()
        )
        yield venv / "bin" / "greenloop", wheel


def test_the_wheel_carries_every_file_of_the_package(installed: tuple[Path, Path]) -> None:
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    source = {
        str(p.relative_to(PACKAGE.parent))
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert source - names == set()
    assert "greenloop/frameworks/pytest_plugin/_greenloop_pytest_report.py" in names
    assert "greenloop/schemas/run-result.json" in names


def test_the_installed_tool_probes_and_runs_a_workspace_without_the_source_tree(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    greenloop, _ = installed
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / ".git").mkdir()
    (ws / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    (ws / "tests" / "test_calc.py").write_text(
        "def test_adds():\n    assert 1 + 1 == 2\n\n\ndef test_doubles():\n    assert 2 * 3 == 5\n"
    )
    # The workspace's own runner, as a user's project has it.
    run([sys.executable, "-m", "venv", str(ws / ".venv")], cwd=tmp_path, env=clean_env())
    run([str(ws / ".venv" / "bin" / "python"), "-m", "pip", "install", "-q", "pytest"], cwd=tmp_path,
        env=clean_env())  # fmt: skip
    env = clean_env()
    env["PATH"] = os.pathsep.join([str(greenloop.parent), env.get("PATH", "")])
    outputs: list[str] = []

    probe = json.loads(run([str(greenloop), "probe", str(ws), "--json"], cwd=tmp_path, env=env))
    outputs.append(json.dumps(probe))
    assert probe["framework"] == "pytest"
    assert probe["command"][0] == str(ws / ".venv" / "bin" / "python")

    done = subprocess.run(
        [str(greenloop), "run", str(ws), "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    outputs += [done.stdout, done.stderr]
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert (result["outcome"], result["summary"]["passed"], result["summary"]["failed"]) == ("red", 1, 1)
    (failure,) = result["failures"]
    assert failure["test"] == "tests/test_calc.py::test_doubles"
    assert (failure["file"], failure["line"]) == ("tests/test_calc.py", 6)
    # The report came from greenloop's own pytest plugin, loaded from the installed package.
    run_dir = Path(result["result_ref"]).parent
    assert (run_dir / "report.json").is_file()
    assert not any("text output" in n or "junit" in n.lower() for n in result["notes"]), result["notes"]

    schema = run([str(greenloop), "schema", "run-result"], cwd=tmp_path, env=env)
    assert json.loads(schema)["title"]
    outputs.append(schema)
    doctor = subprocess.run(
        [str(greenloop), "doctor", str(ws), "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    outputs.append(doctor.stdout)
    checks = {(c["area"], c["name"]): c for c in json.loads(doctor.stdout)["checks"]}
    assert checks[("runner", "pytest")]["status"] == "ok"
    assert checks[("greenloop", "executable")]["detail"].endswith(str(greenloop))

    for text in outputs:
        assert str(REPO) not in text, "the installed tool pointed into the source tree"
