"""`greenloop probe` and `greenloop run`: argument checks, one API call, rendering, exit code."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from greenloop.errors import ExitCode, UsageError
from greenloop.result import RunResult

__all__ = ["exit_code", "print_result", "probe", "run"]

def exit_code(result: RunResult) -> int:
    """0 green, 1 red, 3 broken (crashed, timed out, no tests ran, not installed)."""
    return ExitCode.for_outcome(result.outcome)


def _path(value: str) -> str:
    if not os.path.exists(value):
        raise UsageError(f"PATH {value!r} does not exist: pass the workspace folder (default: .)")
    if not os.path.isdir(value):
        raise UsageError(f"PATH {value!r} is not a folder: pass the workspace folder (files go in --target)")
    return value


def _timeout(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip().replace("_", "")
    if not re.fullmatch(r"[+-]?\d+", text):
        raise UsageError(
            f"--timeout-ms must be a whole number of milliseconds, got {value!r} (e.g. --timeout-ms 60000)"
        )
    n = int(text)
    if n < 1:
        raise UsageError(f"--timeout-ms must be at least 1, got {value!r} (e.g. --timeout-ms 60000)")
    return n


def _rerun_failures(value: str) -> int:
    text = value.strip()
    if not re.fullmatch(r"\d+", text):
        raise UsageError(f"--rerun-failures must be a whole number of reruns >= 0, got {value!r} "
                         "(e.g. --rerun-failures 2)")
    return int(text)


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def probe(args: argparse.Namespace) -> int:
    """`greenloop probe [PATH]`: the workspace's test framework and the command `run` would use."""
    from greenloop import api, render

    detection = api.test_probe(_path(args.path))
    if args.json:
        _print_json(detection.to_json())
    else:
        print(render.detection_text(detection, colour=render.use_colour(sys.stdout)))
    return ExitCode.OK


def run(args: argparse.Namespace) -> int:
    """`greenloop run [PATH]`: run the suite (or a target, or the last failures) and record the verdict."""
    from greenloop import api

    path = _path(args.path)
    options: dict[str, Any] = {
        "framework": args.framework,
        "target": args.target,
        "last_failed": bool(args.last_failed),
        "command": args.verbatim_command,
        "timeout_ms": _timeout(args.timeout_ms),
        "session_id": args.session,
        "sandbox": args.sandbox,
    }
    if args.mode != "test":
        options["mode"] = args.mode
    if getattr(args, "affected", False):
        options["affected"] = True
    if getattr(args, "shard", None) is not None:
        options["shard"] = args.shard
    if getattr(args, "rerun_failures", None) is not None:
        options["rerun_failures"] = _rerun_failures(args.rerun_failures)
    if args.resume_token is not None:
        options["resume_token"] = args.resume_token
    from greenloop.commands.output import chosen

    form = chosen(args)
    if args.background:
        return _background(path, options, as_json=form == "json")
    with _stop_on_signals() as cancel:
        if form != "human":  # no live progress: an agent reads only the answer
            result = api.test_run(path, cancel=cancel, **options)
        else:
            from greenloop import render

            with render.LiveProgress(sys.stderr) as live:
                result = api.test_run(path, on_progress=live.update, cancel=cancel, **options)
    print_result(result, form, path=args.path)
    return 130 if result.aborted else exit_code(result)


def print_result(result: RunResult, form: str, *, path: str = ".") -> None:
    """A run as `--json`, the agent format or the human text (`run`, `merge`)."""
    if form == "json":
        _print_json(result.to_json())
        return
    if form == "agent":
        from greenloop.commands.output import rerun_command, run_agent_text

        print(run_agent_text(result, rerun=rerun_command(path), cwd=os.getcwd()))
        return
    from greenloop import render

    print(render.run_text(result, colour=render.use_colour(sys.stdout), cwd=os.getcwd()))
    from greenloop.api import dashboard_link

    link = dashboard_link(result.workspace or path, f"/runs/{result.run_id}")
    if link:
        print(f"  dashboard: {link}")


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """Ctrl-C, SIGTERM or SIGHUP stop the run's whole process tree and still store its result.

    The runner lives in its own session, so a signal to greenloop would not reach it: the
    handler sets the cancel event instead, and the run ends as `aborted` (exit 130).
    """
    cancel = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, lambda *_: cancel.set())
    try:
        yield cancel
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _background(path: str, options: dict[str, Any], *, as_json: bool) -> int:
    try:
        from greenloop.closure import jobs
    except ImportError as exc:  # the background-jobs module ships separately
        raise UsageError("--background is not available in this installation: run without it") from exc
    from greenloop.closure.session import resolve

    # Resolved here, by the process the agent started: the detached worker has left the
    # agent's process tree by the time its run ends.
    session_id = resolve(options.pop("session_id"), workspace=path)
    job_id: str = jobs.start(path, session_id=session_id, **options)
    if as_json:
        _print_json({"job_id": job_id, "background": True, "session_id": session_id})
    else:
        print(f"started job {job_id}: follow it with `greenloop job {job_id} --wait`")
    return ExitCode.OK
