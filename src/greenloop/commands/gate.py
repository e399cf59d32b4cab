"""`greenloop check | job | config show | hook | init`: one library call each, rendering, exit code.

`hook` is on every agent turn's path: cli.main routes `greenloop hook HARNESS` straight to
`greenloop.hooks.hook_main` (no argparse tree, not even this module), which always exits 0.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check", "config_show", "hook", "hook_main", "init", "job"]  # noqa: F822 (hook_main: __getattr__)


def _print_json(data: Any) -> None:
    import json

    print(json.dumps(data, indent=2, ensure_ascii=False))


def _folder(value: str, what: str = "PATH") -> str:
    from greenloop.errors import UsageError

    if not os.path.isdir(value):
        raise UsageError(
            f"{what} {value!r} is not an existing folder: pass the workspace folder (default: .)"
        )
    return value


def hook(args: Any) -> int:
    """`greenloop hook HARNESS`: answer one hook event of an agent harness (never exits 2)."""
    from greenloop.hooks import hook_main

    return hook_main(args.harness)


def __getattr__(name: str) -> Any:
    # hook_main lives in greenloop.hooks (the hook's entry path does not import this module).
    if name == "hook_main":
        from greenloop.hooks import hook_main as main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check(args: Any) -> int:
    """`greenloop check [PATH] [--session S] [--json]`: 0 satisfied, 1 not (tests owed, the last
    run red, files changed since it, or changed with no run)."""
    from greenloop.closure.gate import closure_check
    from greenloop.closure.session import resolve
    from greenloop.commands.output import chosen
    from greenloop.errors import ExitCode

    form = chosen(args)
    path = _folder(args.path)
    result = closure_check(path, resolve(args.session, workspace=path))
    if form == "json":
        _print_json(result.to_json())
    elif form == "agent":
        from greenloop.agent_format import check_text

        print(check_text(result.to_json()))
    else:
        data = result.to_json()
        verdict = "satisfied" if result.satisfied else "NOT satisfied"
        who = f"session {result.session_id}" if result.session_id else "workspace"
        print(f"{who}: {verdict}")
        run = data["last_run"]
        if run:
            s = run["summary"]
            print(
                f"  last run {run['run_id']} at {run['at']}: {run['outcome']} "
                f"({s['failed']} failed, {s['passed']} passed of {s['total']})"
            )
        else:
            print("  no recorded run")
        for owed in data["owed"]:
            print(f"  owed: {owed['test']} ({owed['why']})")
        if result.owed_count > len(result.owed):
            print(f"  owed: +{result.owed_count - len(result.owed)} more")
        for a in data["accepted"]:
            print(
                f"  accepted: {a['test']} ({a['why']}): by {a['accepted_by']} at {a['accepted_at']}, "
                f"{a['accepted_reason']!r}"
            )
        taken = next((o["test"] for o in data["owed"] if o["reason"] != "failed"), None)
        if taken is not None:
            # People read this form; the agent's (agent_format.check_text) never names the command.
            print(f"  a person can accept a skipped or removed test: greenloop accept {_quoted(taken)} "
                  '--reason "…" (from their own terminal)')
        print(f"  interceptions this turn: {result.intercepts_this_turn} of {result.budget}")
        if result.unresolved:
            why = result.unresolved_reason or "red"
            print(f"  unresolved ({why}): a turn ended after its interception budget")
        for note in result.notes:
            if not note.startswith(("owed: ", "accepted: ")):  # listed above
                print(f"  note: {note}")
    return ExitCode.OK if result.satisfied else ExitCode.FAILED


def _quoted(test: str) -> str:
    import shlex

    return shlex.quote(test)


def job(args: Any) -> int:
    """`greenloop job ID [PATH] [--wait]`: 0 running or green, 1 red, 3 broken/failed/lost."""
    from greenloop.closure import jobs
    from greenloop.commands.output import chosen
    from greenloop.errors import ExitCode

    form = chosen(args)
    path = _folder(args.path)
    status = jobs.status(path, args.job_id, wait=bool(args.wait))
    if form == "json":
        _print_json(status.to_json())
    elif form == "agent":
        _print_job_for_agent(status, path)
    else:
        line = f"job {status.job_id}: {status.status}"
        if status.run_id:
            line += f" (run {status.run_id})"
        print(line)
        if status.result:
            s = status.result.get("summary") or {}
            print(
                f"  {status.result.get('outcome')}: {s.get('failed', 0)} failed, "
                f"{s.get('passed', 0)} passed of {s.get('total', 0)}"
            )
            for failure in (status.result.get("failures") or [])[:5]:
                print(f"  FAILED {failure.get('test')}")
        if status.error:
            print(f"  error: {status.error}")
        if not status.finished:
            print(f"  follow it with `greenloop job {status.job_id} --wait`")
    if not status.finished:
        return ExitCode.OK
    if status.status == "done" and status.result is not None:
        return ExitCode.for_outcome(str(status.result.get("outcome")))
    return ExitCode.INTERRUPTED if status.status == "cancelled" else ExitCode.BROKEN


def _print_job_for_agent(status: Any, path: str) -> None:
    from greenloop.agent_format import job_text

    if status.finished and status.result is not None:
        from greenloop.commands.output import rerun_command, run_agent_text
        from greenloop.result import RunResult

        run = RunResult.from_json(dict(status.result))
        print(run_agent_text(run, rerun=rerun_command(path), cwd=os.getcwd()))
        return
    print(job_text(status.to_json(), None, follow=f"`greenloop job {status.job_id} --wait`"))


def config_show(args: Any) -> int:
    """`greenloop config show [PATH] [--json]`: the effective config and where each value came from."""
    import json

    from greenloop.config import FIELDS, load_layers
    from greenloop.errors import ExitCode

    path = _folder(args.path)
    loaded = load_layers(path)
    if args.json:
        _print_json(loaded.to_json())
        return ExitCode.OK
    values = loaded.config.to_json()
    width = max(len(name) for name in FIELDS)
    for name in FIELDS:
        print(f"{name.ljust(width)} = {json.dumps(values[name])}    # {loaded.source_of(name)}")
    for note in loaded.notes:
        print(f"# note: {note}")
    return ExitCode.OK


def init(args: Any) -> int:
    """`greenloop init HARNESS [PATH] [--dry-run] [--json]`."""
    import sys

    from greenloop.errors import ExitCode
    from greenloop.hooks.install import init as do_init

    report = do_init(args.harness, args.path, dry_run=args.dry_run)
    if args.json:
        _print_json(report.to_json())
        return ExitCode.OK
    if report.dry_run:
        for change in report.files:
            if change.diff:
                sys.stdout.write(change.diff)
        changed = sum(1 for change in report.files if change.diff)
        print(f"dry run: nothing written ({changed} of {len(report.files)} file(s) would change)")
        for change in report.files:
            action = {"created": "would create", "updated": "would update"}.get(change.action, change.action)
            print(f"{action:12} {os.path.relpath(change.path)}  ({change.what})")
    else:
        for change in report.files:
            print(f"{change.action:9} {os.path.relpath(change.path)}  ({change.what})")
    for note in report.notes:
        print(f"note: {note}")
    return ExitCode.OK
