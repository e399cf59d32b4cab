"""greenloop's own files stay out of a user's `git status`: in a real `git init` workspace a red
run (which opens a bug and writes the timeline) leaves `git status --porcelain` empty, because
the bug log and the timeline live in the workspace's `.greenloop/`, which ignores itself. A log
already at the old place (the workspace's root) is still read and appended, never lost; the
config's `records_dir` moves them; a DevLoop project keeps `bugs.ndjson` at its root.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from greenloop import api
from greenloop.bugs.log import BugLog
from greenloop.errors import ConfigError

from .helpers import cli, write_files

pytestmark = pytest.mark.e2e

RED = {"pytest.ini": "[pytest]\n",
       "test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2\n"}


def _git(ws: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ws, capture_output=True, text=True, check=True)
    return done.stdout


def _repo(ws: Path, files: dict[str, str]) -> Path:
    write_files(ws, files)
    _git(ws, "init", "-q")
    _git(ws, "add", "-A")
    _git(ws, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "suite")
    assert _git(ws, "status", "--porcelain") == ""
    return ws


def test_a_red_run_and_its_bug_leave_git_status_empty(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", RED)
    red = api.test_run(ws, session_id="s", sandbox="full-access")
    assert red.outcome == "red" and len(red.bugs_opened) == 1
    assert _git(ws, "status", "--porcelain", "--untracked-files=all") == ""
    log = ws / ".greenloop" / "bugs.ndjson"
    assert BugLog(log).get(red.bugs_opened[0]).status == "open"
    assert (ws / ".greenloop" / "timeline.ndjson").is_file()
    assert not (ws / "bugs.ndjson").exists() and not (ws / "timeline.ndjson").exists()
    # a bug opened by hand (`greenloop bugs open`) goes to the same place
    opened = cli("bugs", "open", "--unit", "ws", "--test", "t", "--title", "by hand", cwd=ws)
    assert opened.code == 0, opened.stderr
    assert _git(ws, "status", "--porcelain", "--untracked-files=all") == ""
    assert len(BugLog(log).fold().bugs) == 2


def test_a_log_at_the_old_place_is_still_read_and_appended(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", RED)
    first = api.test_run(ws, session_id="s", sandbox="full-access")
    old = ws / "bugs.ndjson"  # a workspace from before .greenloop/: its log at the root
    (ws / ".greenloop" / "bugs.ndjson").rename(old)
    (ws / ".greenloop" / "timeline.ndjson").rename(ws / "timeline.ndjson")
    again = api.test_run(ws, session_id="s", sandbox="full-access")
    assert again.failures[0].bug_id == first.failures[0].bug_id  # the same bug, found at the old place
    assert not (ws / ".greenloop" / "bugs.ndjson").exists()
    assert len((ws / "timeline.ndjson").read_text().splitlines()) > 3


def test_records_dir_moves_them_and_is_validated(tmp_path: Path) -> None:
    ws = _repo(tmp_path / "ws", {**RED, "greenloop.toml": 'records_dir = "."\n'})
    red = api.test_run(ws, session_id="s", sandbox="full-access")
    assert BugLog(ws / "bugs.ndjson").get(red.bugs_opened[0]).status == "open"
    (ws / "greenloop.toml").write_text('records_dir = "../elsewhere"\n')
    with pytest.raises(ConfigError, match=r"records_dir.*inside the workspace"):
        api.test_run(ws, session_id="s", sandbox="full-access")


def test_a_devloop_project_keeps_bugs_ndjson_at_its_root(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    (root / "units.json").parent.mkdir(parents=True)
    (root / "units.json").write_text(json.dumps({"units": [{"id": "calc"}]}))
    unit = write_files(root / "units" / "calc", RED)
    red = api.test_run(unit, session_id="s", sandbox="full-access")
    assert BugLog(root / "bugs.ndjson").get(red.bugs_opened[0]).unit_id == "calc"
    assert not (unit / ".greenloop" / "bugs.ndjson").exists()
