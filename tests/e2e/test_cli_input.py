"""Bad input to `greenloop run` and `greenloop probe`: one line naming the problem and the fix,
exit 2, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import cli, py_workspace

pytestmark = pytest.mark.e2e


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--framework", "ava"],
            ["unknown framework 'ava'", "vitest, jest, npm-test, pytest, node:test"],
        ),
        (["--timeout-ms", "soon"], ["--timeout-ms", "whole number", "60000"]),
        (["--timeout-ms", "-5"], ["--timeout-ms", "at least 1"]),
        (["--timeout-ms", "0"], ["--timeout-ms", "at least 1"]),
        (["--timeout-ms", "1.5"], ["--timeout-ms", "whole number"]),
        (["--sandbox", "wide-open"], ["unknown sandbox mode 'wide-open'", "full-access"]),
        (["--target", "  "], ["target", "non-empty"]),
    ],
)
def test_bad_arguments_exit_2_with_one_line_and_write_nothing(
    tmp_path: Path, args: list[str], words: list[str]
) -> None:
    ws = py_workspace(tmp_path / "ws", {"test_a.py": "def test_a():\n    assert True\n"})
    before = tree(ws)
    done = cli("run", str(ws), *args)
    assert done.code == 2, done
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert tree(ws) == before


def test_missing_path_exits_2(tmp_path: Path) -> None:
    for command in ("run", "probe"):
        done = cli(command, str(tmp_path / "nope"))
        assert done.code == 2
        assert (
            done.stderr.strip()
            == f"greenloop: PATH '{tmp_path / 'nope'}' does not exist: pass the workspace folder (default: .)"
        )


def test_file_instead_of_folder_exits_2(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("")
    done = cli("run", str(tmp_path / "test_a.py"))
    assert done.code == 2 and "is not a folder" in done.stderr and "--target" in done.stderr


def test_nothing_to_test_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("no tests here")
    done = cli("run", str(tmp_path))
    assert done.code == 2, done
    assert "nothing to test" in done.stderr and "--framework" in done.stderr and "--command" in done.stderr
    assert tree(tmp_path) == ["README.md"]


def test_probe_json_and_human(tmp_path: Path) -> None:
    ws = py_workspace(tmp_path / "ws", {"tests/test_a.py": "def test_a():\n    pass\n"})
    done = cli("probe", str(ws), "--json")
    assert done.code == 0
    d = done.json
    assert (d["framework"], d["config_path"], d["test_files"]) == (
        "pytest",
        "pytest.ini",
        ["tests/test_a.py"],
    )
    assert set(d) >= {"framework", "config_path", "test_files", "command", "package_manager", "root", "notes"}
    human = cli("probe", str(ws))
    assert human.code == 0 and "pytest" in human.stdout and "tests/test_a.py" in human.stdout
    assert tree(ws) == [".git", "pytest.ini", "tests", "tests/test_a.py"]
