"""The `greenloop` command: an argparse tree and one call per subcommand. No logic lives here.

Each subcommand's handler is `greenloop.commands.<area>.<name>(args) -> int`, imported only
when that subcommand runs, so `greenloop hook …` (run on every agent turn) stays light.
"""

from __future__ import annotations

import os
import sys

from greenloop import HARNESSES  # re-exported: the one list of harnesses

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import NoReturn

__all__ = ["AGENT_ENV", "HARNESSES", "build_parser", "entry", "main"]

# The variables each agent harness sets for the commands its agent runs (read in each CLI's
# own source or its changelog), and AI_AGENT, which any agent may set: with one of them set,
# `run`, `check`, `job` and `merge` answer in the agent format (commands/output.py).
AGENT_ENV: tuple[tuple[str, str], ...] = (
    ("claude-code", "CLAUDECODE"),  # its shell and MCP servers get CLAUDECODE=1
    ("codex", "CODEX_THREAD_ID"),  # set for every shell command (exec_env's populate_env)
    ("codex", "CODEX_SANDBOX"),  # set by its macOS sandbox (seatbelt)
    ("codex", "CODEX_SANDBOX_NETWORK_DISABLED"),  # set when its sandbox has no network
    ("gemini", "GEMINI_CLI"),  # run_shell_command sets GEMINI_CLI=1
    ("cursor", "CURSOR_AGENT"),  # the Cursor agent's terminals and cursor-agent's shell
    ("qwen", "QWEN_CODE"),  # run_shell_command and its other children get QWEN_CODE=1 (0.24)
    ("copilot", "COPILOT_CLI"),  # the Copilot SDK's subprocess environment: COPILOT_CLI=1
    ("copilot", "COPILOT_AGENT_SESSION_ID"),  # shell commands and MCP servers (1.0 changelog)
    ("opencode", "OPENCODE"),  # opencode sets OPENCODE=1 for itself and what it starts
    ("any", "AI_AGENT"),  # the cross-agent convention (AI_AGENT=<name>)
)
COMMANDS = (
    "probe", "run", "parse", "schema", "check", "accept", "accepted", "job", "config", "hook", "init",
    "sandbox", "bugs", "integrate", "audit", "timeline", "units", "serve", "doctor", "mcp", "merge", "flaky",
)  # fmt: skip


def _parser_class() -> type[argparse.ArgumentParser]:
    """argparse with exit code 2 and a one-line message that says how to get help.

    argparse is imported here, not at module level: the Stop hook's fast path in `main`
    never builds a parser and should not pay for importing it on every agent turn.
    """
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # type: ignore[override]
            self.exit(2, f"greenloop: error: {message} (see '{self.prog} --help')\n")

    return _Parser


def _json_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _format_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("agent", "human"),
                   help="agent: few tokens, for an AI agent (the default when an agent harness runs "
                        "greenloop); human: the full text")


def _handler(p: argparse.ArgumentParser, target: str) -> None:
    p.set_defaults(_handler=target)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole tree, or with `only` just that subcommand (what `main` needs to parse one call)."""
    _Parser = _parser_class()
    parser = _Parser(
        prog="greenloop",
        description="Probe, run and gate a workspace's tests for AI coding agents.",
    )
    from greenloop import __version__

    parser.add_argument("--version", action="version", version=f"greenloop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    # --- probe / run / parse / schema (foundation, exact failures)
    if only in (None, "probe"):
        p = sub.add_parser("probe", help="detect the test framework of a workspace without running anything")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        _json_flag(p)
        _handler(p, "run:probe")

    # The lists in the help texts come from their modules, imported only for the subcommands
    # that show them (`greenloop check` and the hook's fast path import neither).
    if only in (None, "run"):
        from greenloop.config import SANDBOX_MODES
        from greenloop.model import FRAMEWORKS

        p = sub.add_parser("run", help="run the workspace's tests and report a structured result")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        p.add_argument("--framework", help=f"override detection: {', '.join(FRAMEWORKS)}")
        p.add_argument("--target", help="space-separated paths or node ids appended to the command")
        p.add_argument("--last-failed", action="store_true",
                       help="rerun only the failures of this session's previous run (else the "
                            "workspace's latest, with a note naming whose)")
        p.add_argument("--affected", action="store_true",
                       help="run only the tests the files changed since git HEAD can break, plus "
                            "every test this session owes (a file greenloop cannot map: the whole suite)")
        p.add_argument("--command", dest="verbatim_command", help="run this command verbatim (shell)")
        p.add_argument("--mode", default="test",
                       help="test (default); retry: the previous run's failures first, then, if they "
                            "pass, the whole suite, as one result saying what was fixed, remains, is new; "
                            "resume: continue the run --resume-token names")
        p.add_argument("--resume-token", help="with --mode resume: a result's resume_token")
        p.add_argument("--timeout-ms", help="kill the whole process tree after this many milliseconds")
        p.add_argument("--session", help="record the run for this agent session id")
        p.add_argument("--background", action="store_true", help="start as a job and print its id at once")
        p.add_argument("--sandbox", help=f"sandbox mode: {', '.join(SANDBOX_MODES)}")
        p.add_argument("--shard", help="run only shard I of N (e.g. 2/4) of the suite or of --target, "
                                       "in the runner's own dialect; "
                                       "fold the N results with `greenloop merge`")
        p.add_argument("--rerun-failures", metavar="K",
                       help="rerun failing tests up to K times; one that fails, then passes is flaky")
        _json_flag(p)
        _format_flag(p)
        _handler(p, "run:run")

    if only in (None, "parse"):
        from greenloop.model import FRAMEWORKS

        p = sub.add_parser("parse", help="parse captured runner output")
        p.add_argument("file", nargs="?", default="-", help="file with the output, or - for stdin")
        p.add_argument("--framework", required=True, help=f"one of: {', '.join(FRAMEWORKS)}")
        _json_flag(p)
        _handler(p, "parse:parse")

    if only in (None, "schema"):
        p = sub.add_parser("schema", help="print a published JSON Schema")
        p.add_argument("name", help="schema name: run-result")
        _handler(p, "schema:schema")

    # --- closure gate
    if only in (None, "check"):
        p = sub.add_parser("check", help="is this session's last recorded run green? (test_closure_check)")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        p.add_argument("--session", help="session id (default: GREENLOOP_SESSION or the harness's variable)")
        _json_flag(p)
        _format_flag(p)
        _handler(p, "gate:check")

    # A person's way out, never the agent's (refused in an agent's session or without a terminal).
    if only in (None, "accept"):
        p = sub.add_parser("accept", help="a person accepts a skipped or removed test the gate owes "
                                          "(refused inside an agent's session)")
        p.add_argument("test", help="the owed test, as `greenloop check` names it")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        p.add_argument("--reason", required=True, help="why the test may stay skipped or removed")
        p.add_argument("--session", help="accept it for this session only (default: GREENLOOP_SESSION, "
                                         "else every session of the workspace)")
        _json_flag(p)
        _handler(p, "accept:accept")

    if only in (None, "accepted"):
        p = sub.add_parser("accepted", help="the acceptances (who, when, why) and the taken-away tests "
                                            "still owed")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        p.add_argument("--session", help="only what applies to this session")
        _json_flag(p)
        _handler(p, "accept:accepted")

    if only in (None, "job"):
        p = sub.add_parser("job", help="report on a background run")
        p.add_argument("job_id")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        p.add_argument("--wait", action="store_true", help="wait until the job ends")
        _json_flag(p)
        _format_flag(p)
        _handler(p, "gate:job")

    if only in (None, "config"):
        p = sub.add_parser("config", help="inspect the effective configuration")
        csub = p.add_subparsers(dest="config_command", metavar="ACTION", parser_class=_Parser)
        cp = csub.add_parser("show", help="print the effective config and where each value came from")
        cp.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        _json_flag(cp)
        _handler(cp, "gate:config_show")

    if only in (None, "hook"):
        p = sub.add_parser("hook", help="answer a harness's hook event (reads its JSON on stdin)")
        p.add_argument("harness", help=f"one of: {', '.join(HARNESSES)}")
        _handler(p, "gate:hook")

    if only in (None, "init"):
        p = sub.add_parser("init", help="write or merge a harness's hook and MCP configuration")
        p.add_argument("harness", help=f"one of: {', '.join(HARNESSES)}")
        p.add_argument("path", nargs="?", default=".", help="project folder (default: .)")
        p.add_argument("--dry-run", action="store_true", help="print the changes as a diff and write nothing")
        _json_flag(p)
        _handler(p, "gate:init")

    if only in (None, "sandbox"):
        from greenloop.config import SANDBOX_MODES

        p = sub.add_parser("sandbox", help="sandbox policy for a session")
        ssub = p.add_subparsers(dest="sandbox_command", metavar="ACTION", parser_class=_Parser)
        sp = ssub.add_parser("set", help="record a sandbox mode event for a session")
        sp.add_argument("mode", help=f"one of: {', '.join(SANDBOX_MODES)}")
        sp.add_argument("--session", required=True)
        sp.add_argument("--path", default=".", help="workspace folder (default: .)")
        _json_flag(sp)
        _handler(sp, "sandbox:set_mode")
        sp = ssub.add_parser("show", help="print the sandbox policy a run would get and whether bwrap works")
        sp.add_argument("--session", help="session id whose recorded mode applies")
        sp.add_argument("--mode", help="an explicit mode, as a run's --sandbox would pass it")
        sp.add_argument("--path", default=".", help="workspace folder (default: .)")
        _json_flag(sp)
        _handler(sp, "sandbox:show")

    # --- bugs
    if only in (None, "bugs"):
        p = sub.add_parser("bugs", help="the bug log (bugs.ndjson)")
        bsub = p.add_subparsers(dest="bugs_command", metavar="ACTION", parser_class=_Parser)
        bp = bsub.add_parser("open", help="open a bug (or reuse the open one for the same unit and test)")
        bp.add_argument("--unit", required=True)
        bp.add_argument("--test", required=True)
        bp.add_argument("--title", required=True)
        bp.add_argument("--severity")
        bp.add_argument("--source")
        bp.add_argument("--detail")
        bp.add_argument("--run")
        bp.add_argument("--category")
        bp.add_argument("--by")
        bp.add_argument("--project", help="project folder (default: found by walking up from .)")
        _json_flag(bp)
        _handler(bp, "bugs:open_cmd")
        bp = bsub.add_parser("transition", help="move a bug to another status")
        bp.add_argument("bug_id")
        bp.add_argument("--to", required=True, dest="to_status")
        bp.add_argument("--by")
        bp.add_argument("--fix-ref", action="append", default=[])
        bp.add_argument("--project")
        _json_flag(bp)
        _handler(bp, "bugs:transition_cmd")
        bp = bsub.add_parser("list", help="list bugs in their current state")
        bp.add_argument("--unit")
        bp.add_argument("--status")
        bp.add_argument("--source")
        bp.add_argument("--severity")
        bp.add_argument("--project")
        _json_flag(bp)
        _handler(bp, "bugs:list_cmd")
        bp = bsub.add_parser("show", help="one bug's whole history")
        bp.add_argument("bug_id")
        bp.add_argument("--project")
        _json_flag(bp)
        _handler(bp, "bugs:show_cmd")

    # --- integration, audit, mcp, demo
    if only in (None, "integrate"):
        from greenloop.config import SANDBOX_MODES

        p = sub.add_parser("integrate", help="start the project's services and run the integration cases")
        p.add_argument("project", nargs="?", default=".", help="DevLoop project folder (default: .)")
        p.add_argument("--case", action="append", default=[], help="run only this case id (repeatable)")
        p.add_argument("--junit", help="also write JUnit XML to this file")
        p.add_argument("--mode", default="run",
                       help="run (default); retry: the previous run's failed cases first, then every case "
                            "if they pass; resume: continue the run --resume-token names")
        p.add_argument("--resume-token", help="with --mode resume: the resume_token of the run to continue")
        p.add_argument("--sandbox", help=f"sandbox mode for the units: {', '.join(SANDBOX_MODES)}")
        _json_flag(p)
        _handler(p, "integrate:integrate")

    if only in (None, "audit"):
        p = sub.add_parser("audit", help="self-check a DevLoop unit's tests")
        p.add_argument("unit", help="unit folder, e.g. units/todo-be")
        p.add_argument(
            "--baseline",
            default="auto",
            help="sandbox comparison: auto (git when inside a work tree), git, or snapshot (previous audit)",
        )
        _json_flag(p)
        _handler(p, "audit:audit")

    if only in (None, "timeline"):
        p = sub.add_parser("timeline", help="what happened in the project, in order (timeline.ndjson)")
        p.add_argument("path", nargs="?", default=".", help="workspace or project folder (default: .)")
        p.add_argument("--follow", action="store_true", help="keep printing events as they are appended")
        p.add_argument("--unit", help="only this unit's events")
        p.add_argument("--kind", action="append", help="only events of this kind (repeatable)")
        p.add_argument("--last", help="only the last N events")
        _json_flag(p)
        _handler(p, "timeline:timeline")

    if only in (None, "units"):
        p = sub.add_parser("units", help="a DevLoop project's units and their status (testing/passed/failed)")
        p.add_argument("path", nargs="?", default=".", help="project folder or a folder in it (default: .)")
        _json_flag(p)
        _handler(p, "units:units")

    if only in (None, "serve"):
        p = sub.add_parser("serve", help="the live dashboard in the browser: runs, failures, sessions, bugs")
        p.add_argument("path", nargs="?", default=".", help="workspace or project folder (default: .)")
        p.add_argument("--port", help="port to listen on (default 0: a free one)")
        p.add_argument("--host", help="address to listen on (default 127.0.0.1)")
        p.add_argument("--open", action="store_true", help="open the dashboard in the browser")
        _handler(p, "serve:serve")

    if only in (None, "doctor"):
        p = sub.add_parser("doctor", help="check this machine and a workspace: runner, sandbox, hooks, state")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        _json_flag(p)
        _handler(p, "doctor:doctor")

    if only in (None, "mcp"):
        p = sub.add_parser("mcp", help="serve the model tools over MCP (stdio)")
        p.add_argument("--workspace", default=".", help="workspace folder (default: .)")
        _handler(p, "mcp:serve")

    # --- scale: shards of a suite split across CI machines, flaky tests
    if only in (None, "merge"):
        p = sub.add_parser("merge", help="fold the result.json files of a suite's shards into one run")
        p.add_argument("results", nargs="+", metavar="RESULT.json", help="one result.json per shard")
        p.add_argument("--path", default=".", help="workspace the merged run is recorded in (default: .)")
        p.add_argument("--session", help="record the merged run for this agent session id")
        _json_flag(p)
        _format_flag(p)
        _handler(p, "merge:merge")

    if only in (None, "flaky"):
        p = sub.add_parser("flaky", help="tests whose outcome changed without a code change (run history)")
        p.add_argument("path", nargs="?", default=".", help="workspace folder (default: .)")
        _json_flag(p)
        _handler(p, "merge:flaky")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run greenloop with `argv` (default: the process's arguments); return the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"] and not {"-h", "--help"} & set(args_list):
        # Fast path: `greenloop hook HARNESS` runs on every agent turn; skip building the tree.
        # It also never exits 2 on a bad command line: to a harness, exit 2 can mean "block".
        from greenloop.hooks import hook_main

        return hook_main(args_list[1] if len(args_list) > 1 else "", extra=args_list[2:])
    # Parsing one call needs only its own subcommand's parser; building all of them costs a few
    # milliseconds on every invocation, which an agent pays on each tool call.
    from greenloop.errors import ExitCode, GreenloopError

    first = args_list[0] if args_list else None
    parser = build_parser(first if first in COMMANDS else None)
    args = parser.parse_args(args_list)
    target = getattr(args, "_handler", None)
    if target is None:
        parser.print_help(sys.stderr if args_list else sys.stdout)
        return ExitCode.USAGE if args_list else ExitCode.OK
    module_name, func_name = target.split(":")

    import importlib

    try:
        module = importlib.import_module(f"greenloop.commands.{module_name}")
        code: int = getattr(module, func_name)(args)
        return code
    except GreenloopError as exc:
        print(f"greenloop: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("greenloop: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED


def entry() -> NoReturn:
    """The program itself (the `greenloop` script, `python -m greenloop`): `main`, then exit.

    The exit skips the interpreter's teardown of every loaded module, which takes ~14 ms once
    a run has loaded the store, the bug log and the parsers: time an agent waits for after the
    answer is already written. Everything a normal exit does that matters still happens:
    `atexit` callbacks run (weakref finalizers, logging), stdout and stderr are flushed, and a
    non-daemon thread still running gets the normal exit, which waits for it. Files and
    databases are closed by their `with` blocks before `main` returns.
    """
    if sys.argv[1:2] == ["hook"]:
        # A hook process lives for milliseconds and is nearly all imports: collecting cycles
        # while the modules load costs it ~2 ms, and the process exits before garbage matters.
        import gc

        gc.disable()
    code = main()
    threading = sys.modules.get("threading")
    if threading is not None and any(
        t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()
    ):
        sys.exit(code)
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said there
            code = code or 120  # what Python's own exit gives when stdout cannot be flushed
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
