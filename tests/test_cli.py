"""The CLI tree: every subcommand is listed in COMMANDS, and parsing one call with only its
own subcommand's parser gives the same namespace as the whole tree."""

from __future__ import annotations

import argparse

import pytest

from greenloop import cli

CALLS = [
    ["probe", "ws", "--json"],
    ["run", "ws", "--framework", "pytest", "--last-failed", "--timeout-ms", "5", "--sandbox", "read-only"],
    ["parse", "--framework", "vitest", "out.txt"],
    ["schema", "run-result"],
    ["check", "--session", "s1", "--json"],
    ["job", "job-1", "--wait"],
    ["config", "show", "ws"],
    ["hook", "codex"],
    ["init", "claude-code", "ws"],
    ["sandbox", "set", "read-only", "--session", "s"],
    ["bugs", "transition", "bug-1", "--to", "fixing", "--fix-ref", "r1"],
    ["integrate", "proj", "--case", "c1", "--case", "c2"],
    ["audit", "units/u", "--json"],
    ["mcp", "--workspace", "ws"],
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
