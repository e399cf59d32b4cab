"""The CLI tree: every subcommand is listed in COMMANDS, and parsing one call with only its
own subcommand's parser gives the same namespace as the whole tree."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop import cli

CALLS = [
    ["probe", "ws", "--json"],
    ["run", "ws", "--framework", "pytest", "--last-failed", "--timeout-ms", "5", "--sandbox", "read-only",
     "--shard", "2/4", "--rerun-failures", "2"],
    ["parse", "--framework", "vitest", "out.txt"],
    ["schema", "run-result"],
    ["check", "--session", "s1", "--json"],
    ["accept", "t.py::test_a", "ws", "--reason", "why", "--session", "s1", "--json"],
    ["accepted", "ws", "--session", "s1", "--json"],
    ["job", "job-1", "--wait"],
    ["config", "show", "ws"],
    ["hook", "codex"],
    ["init", "claude-code", "ws"],
    ["sandbox", "set", "read-only", "--session", "s"],
    ["bugs", "transition", "bug-1", "--to", "fixing", "--fix-ref", "r1"],
    ["integrate", "proj", "--case", "c1", "--case", "c2"],
    ["audit", "units/u", "--json"],
    ["timeline", "proj", "--follow", "--kind", "bug_opened", "--last", "5"],
    ["units", "proj", "--json"],
    ["serve", "ws", "--port", "0", "--host", "127.0.0.1", "--open"],
    ["mcp", "--workspace", "ws"],
    ["merge", "a.json", "b.json", "--path", "ws", "--session", "s", "--json"],
    ["flaky", "ws", "--json"],
    ["doctor", "ws", "--json"],
]


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def test_commands_lists_every_subcommand_in_order() -> None:
    assert _subcommands(cli.build_parser()) == list(cli.COMMANDS)
    assert sorted(c[0] for c in CALLS) == sorted(cli.COMMANDS)


@pytest.mark.parametrize("argv", CALLS, ids=[c[0] for c in CALLS])
def test_one_subcommand_parses_like_the_whole_tree(argv: list[str]) -> None:
    assert _subcommands(cli.build_parser(argv[0])) == [argv[0]]
    assert vars(cli.build_parser(argv[0]).parse_args(argv)) == vars(cli.build_parser().parse_args(argv))


def test_unknown_command_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["nosuch"])
    assert exc.value.code == 2
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err


# --- the program's exit (cli.entry) --------------------------------------------------------
# `entry` skips the interpreter's teardown; these run it as a real process and check that what a
# normal exit does still happens.


def _program(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_entry_runs_atexit_callbacks_flushes_output_and_keeps_the_exit_code(tmp_path: Path) -> None:
    done = _program(
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "sys.argv = ['greenloop', 'run', '--timeout-ms', 'soon']\n"
        "from greenloop.cli import entry\n"
        "print('buffered before exit', end='')\n"
        "entry()\n",
        tmp_path,
    )
    assert done.returncode == 2
    assert list(tmp_path.iterdir()) == []
    assert done.stdout == "buffered before exitatexit ran\n"
    assert "--timeout-ms" in done.stderr


def test_entry_waits_for_a_non_daemon_thread_still_running(tmp_path: Path) -> None:
    done = _program(
        # the thread outlives main() for sure: it prints only after main has returned
        "import sys, threading, time\n"
        "from greenloop import cli\n"
        "returned = threading.Event()\n"
        "real_main = cli.main\n"
        "def main(argv=None):\n"
        "    try:\n"
        "        return real_main(argv)\n"
        "    finally:\n"
        "        returned.set()\n"
        "cli.main = main\n"
        "def late():\n"
        "    returned.wait()\n"
        "    time.sleep(0.2)\n"
        "    print('thread finished', flush=True)\n"
        "threading.Thread(target=late).start()\n"
        "sys.argv = ['greenloop', 'schema', 'run-result']\n"
        "cli.entry()\n",
        tmp_path,
    )
    assert done.returncode == 0
    assert done.stdout.rstrip().endswith("thread finished")


def test_python_dash_m_greenloop_goes_through_entry() -> None:
    argv = [sys.executable, "-m", "greenloop", "schema", "run-result"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    assert json.loads(done.stdout)["title"]
