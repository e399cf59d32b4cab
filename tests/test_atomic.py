"""greenloop.system.atomic.write_text: whole files, modes, and nothing left behind on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from greenloop.system.atomic import write_text


def test_it_makes_the_folder_and_replaces_whole(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "x.json"
    write_text(target, "one")
    write_text(target, "two", fsync=True)
    assert target.read_text() == "two"
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.json"]  # no temporary file left


def test_modes(tmp_path: Path) -> None:
    secret = tmp_path / "serve.json"
    write_text(secret, "token", mode=0o600)
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    script = tmp_path / "hook.sh"
    script.write_text("old")
    script.chmod(0o750)
    write_text(script, "new", keep_mode=True)
    assert stat.S_IMODE(script.stat().st_mode) == 0o750 and script.read_text() == "new"


def test_a_failed_replace_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a folder where the file should go: the rename fails
    (target / "inside").write_text("kept")
    with pytest.raises(OSError):
        write_text(target, "text")
    assert (target / "inside").read_text() == "kept"
    assert sorted(os.listdir(tmp_path)) == ["taken"]
