"""`greenloop bugs …` as a person or a program runs it: a real subprocess, from inside a project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def gl(*args: str, cwd: Path, user: str = "ana") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "USER": user, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "greenloop", "bugs", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "units" / "todo-be" / "code").mkdir(parents=True)
    (root / "units.json").write_text('{"units": [{"id": "todo-be"}]}')
    return root


def test_open_list_transition_show(proj: Path) -> None:
    inside = proj / "units" / "todo-be" / "code"
    r = gl("open", "--unit", "todo-be", "--test", "missing title gives 400", "--title", "500 not 400",
           "--detail", "TypeError: x\n  at server.js:12", "--run", "run-1", cwd=inside)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("opened bug-") and "[medium] todo-be: 500 not 400" in r.stdout
    log = proj / "bugs.ndjson"  # found by walking up to units.json
    bug_id = json.loads(log.read_text())["id"]
    again = gl("open", "--unit", "todo-be", "--test", "missing title gives 400", "--title", "t", "--json",
               cwd=inside)
    data = json.loads(again.stdout)
    assert (data["created"], data["bug"]["id"], data["bug"]["by"]) == (False, bug_id, "ana")
    assert len(log.read_text().splitlines()) == 1
    gl("open", "--unit", "todo-fe", "--test", "auth header is sent", "--title", "no header",
       "--source", "unit_test", cwd=proj)

    table = gl("list", cwd=inside)
    assert table.returncode == 0
    head, row1, row2, summary = table.stdout.splitlines()
    assert head.split() == ["ID", "STATUS", "SEVERITY", "UNIT", "SOURCE", "UPDATED", "TITLE"]
    assert row1.split()[:5] == [bug_id, "open", "medium", "todo-be", "unit_test"]
    assert row2.split()[1:4] == ["open", "critical", "todo-fe"]
    assert summary.startswith("2 bugs (2 open) in ") and summary.endswith("bugs.ndjson")
    listed = json.loads(gl("list", "--unit", "todo-be", "--json", cwd=proj).stdout)
    assert listed["count"] == 1 and listed["bugs"][0]["id"] == bug_id and listed["warnings"] == []
    assert json.loads(gl("list", "--status", "fixed,verified", "--json", cwd=proj).stdout)["count"] == 0

    moved = gl("transition", bug_id, "--to", "fixing", "--by", "coder", cwd=inside)
    assert moved.returncode == 0 and moved.stdout.strip() == f"{bug_id}: open -> fixing (by coder)"
    done = json.loads(gl("transition", bug_id, "--to", "fixed", "--fix-ref", "abc", "--fix-ref", "run-2",
                         "--json", cwd=inside).stdout)
    assert (done["from"], done["to"], done["bug"]["fix_refs"], done["bug"]["by"]) == (
        "fixing", "fixed", ["abc", "run-2"], "ana")

    shown = gl("show", bug_id, cwd=inside)
    assert shown.returncode == 0
    text = shown.stdout
    assert text.startswith(f"{bug_id}  fixed  medium")
    assert "    TypeError: x\n      at server.js:12" in text
    assert "open -> fixing by coder" in text and "fixing -> fixed by ana  fix refs: abc, run-2" in text
    hist = json.loads(gl("show", bug_id, "--json", "--project", str(proj), cwd=Path("/")).stdout)["history"]
    assert [(h["line"], h["status"]) for h in hist] == [(1, "open"), (3, "fixing"), (4, "fixed")]


def test_refusals_and_bad_input_exit_2_and_write_nothing(proj: Path) -> None:
    r = gl("open", "--unit", "todo-be", "--test", "t", "--title", "x", "--json", cwd=proj)
    bug_id = json.loads(r.stdout)["bug"]["id"]
    log = proj / "bugs.ndjson"
    before = log.read_bytes()
    cases = [
        (("transition", bug_id, "--to", "verified"), "is open and cannot move to verified; it can move to "
                                                      "fixing or fixed"),
        (("transition", bug_id, "--to", "done"), "--to 'done' is not one of: open, fixing, fixed, verified"),
        (("transition", "bug-nope", "--to", "fixed"), "no bug 'bug-nope'"),
        (("show", "bug-nope"), "no bug 'bug-nope'"),
        (("list", "--status", "closed"), "--status 'closed' is not one of"),
        (("list", "--severity", "urgent"), "--severity 'urgent'"),
        (("list", "--source", "e2e"), "--source 'e2e'"),
        (("open", "--unit", "u", "--test", "t", "--title", "x", "--severity", "huge"), "--severity 'huge'"),
        (("open", "--unit", "", "--test", "t", "--title", "x"), "unit is empty"),
        (("list", "--project", str(proj / "nope")), "--project"),
        (("open", "--unit", "u", "--title", "x"), "--test"),  # argparse: a required argument
    ]
    for args, message in cases:
        out = gl(*args, cwd=proj)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert message in out.stderr, (args, out.stderr)
        assert out.stdout == ""
    assert log.read_bytes() == before


def test_warnings_no_log_and_plain_folders(tmp_path: Path, proj: Path) -> None:
    empty = tmp_path / "plain"
    empty.mkdir()
    r = gl("list", cwd=empty)
    assert r.returncode == 0 and "no bugs match" in r.stdout and "not written yet" in r.stdout
    assert not (empty / ".greenloop" / "bugs.ndjson").exists()  # reading never creates the log
    assert json.loads(gl("list", "--json", cwd=empty).stdout)["count"] == 0
    # outside a DevLoop project the log is the folder's own, in its .greenloop/
    gl("open", "--unit", "lib", "--test", "t", "--title", "x", cwd=empty)
    assert (empty / ".greenloop" / "bugs.ndjson").is_file() and not (empty / "bugs.ndjson").exists()
    # a torn line: the rest loads, stderr names the line, the exit code stays 0
    gl("open", "--unit", "todo-be", "--test", "a", "--title", "a", cwd=proj)
    with (proj / "bugs.ndjson").open("a") as fh:
        fh.write('{"id": "bug-20261129-1200-dead", "source": "unit_te')
    listed = gl("list", "--json", cwd=proj)
    assert listed.returncode == 0
    data = json.loads(listed.stdout)
    assert data["count"] == 1 and "line 2: incomplete" in data["warnings"][0]
    assert "greenloop: warning: bugs.ndjson line 2: incomplete" in listed.stderr
