"""`greenloop integrate`: run a DevLoop project's integration cases; a summary or --json.

Exit codes: 0 every case passed; 1 cases failed; 2 bad spec or arguments (nothing started);
3 infrastructure (a unit crashed on start, never became healthy, no free port, the run timed
out, or a process survived teardown); 130 interrupted (after a full teardown).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from greenloop.errors import UsageError

if TYPE_CHECKING:
    from greenloop.integration.result import IntegrationResult

__all__ = ["integrate", "summary_text"]


def _one_line(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary_text(r: IntegrationResult) -> str:
    """The human summary of a run: verdict, counts, each failure with its evidence, file paths."""
    if r.interrupted:
        head = "INTERRUPTED"
    elif r.aborted:
        head = "ABORTED"
    elif r.crashed:
        head = "BROKEN"
    else:
        head = "PASSED" if r.ok else "FAILED"
    lines = [
        f"integration {head}: {r.cases_passed}/{r.cases_total} cases passed"
        + (f", {r.cases_failed} failed" if r.cases_failed else "")
        + (f", {r.cases_timeout} timed out" if r.cases_timeout else "")
        + f" in {r.duration_ms / 1000:.1f} s  (run {r.run_id})"
    ]
    if r.ports_used:
        lines.append("units: " + ", ".join(f"{u} on :{p}" for u, p in r.ports_used.items()))
    if r.startup_failure:
        sf = r.startup_failure
        lines.append(f"startup failed ({sf.get('reason')}): {sf.get('message')}")
        if sf.get("stderr_excerpt"):
            lines.extend("    " + ln for ln in str(sf["stderr_excerpt"]).splitlines()[-10:])
    for f in r.failures:
        if f.case_id.startswith("startup:"):
            continue
        step = "" if f.failed_step is None else f" step {f.failed_step}"
        lines.append(f"✗ {f.case_id}{step} [{f.reason}] {f.message}")
        lines.append(f"    expected: {_one_line(f.expected)}")
        lines.append(f"    got:      {_one_line(f.got)}")
        lines.extend(f"    {name}: {path}" for name, path in f.artifacts.items())
        if f.stderr_excerpt:
            lines.append("    stderr:")
            lines.extend("      " + ln for ln in f.stderr_excerpt.splitlines()[-8:])
        if f.bug_id:
            lines.append(f"    bug: {f.bug_id}")
    for c in r.cases:
        if c.get("status") == "passed":
            lines.append(f"✓ {c.get('id')} ({int(c.get('duration_ms') or 0)} ms)")
        elif c.get("status") == "not_run":
            lines.append(f"- {c.get('id')} (not run)")
        elif c.get("status") == "aborted":
            lines.append(f"- {c.get('id')} (aborted after {int(c.get('duration_ms') or 0)} ms)")
    if r.surviving_processes:
        lines.append(
            f"! {len(r.surviving_processes)} processes survived teardown: "
            + ", ".join(str(p.get("pid")) for p in r.surviving_processes)
        )
    if r.category_hint:
        lines.append(f"category hint: {r.category_hint}")
    lines.extend(f"note: {n}" for n in r.notes)
    lines.append(f"result: {r.result_ref}  log: {r.process_log}  trace: {r.http_trace}")
    if r.junit:
        lines.append(f"junit: {r.junit}")
    return "\n".join(lines)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _interrupts() -> Iterator[threading.Event]:
    """Ctrl-C, SIGTERM or SIGHUP to greenloop itself tear the units down and end in exit 130.

    The handlers are installed for the whole command, SIGINT too when it was inherited as
    ignored (a background job of a shell script starts that way): greenloop owns the units'
    process trees, which no other signal reaches. The first signal sets the returned event,
    which the run polls in every wait (a unit's start, a case: at most 50 ms, so a busy machine
    cannot hold it in a long read), and raises KeyboardInterrupt; later signals only set the
    event, so the teardown they interrupt still runs to its end.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            return
        stop.set()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in _STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def integrate(args: argparse.Namespace) -> int:
    """`greenloop integrate [PATH]`: start a project's units, run its cases, tear everything down."""
    from greenloop.integration.run import integrate as run_integration
    from greenloop.layout import find_project_root

    project = args.project
    if not os.path.isdir(project):
        raise UsageError(f"PROJECT {project!r} is not a folder: pass the DevLoop project folder (default: .)")
    if not os.path.isfile(os.path.join(project, "units.json")):
        # Run from inside a unit (or any subfolder): the project is the folder above with units.json.
        found = find_project_root(project)
        if found is not None and (found / "units.json").is_file():
            project = str(found)
    as_json = bool(getattr(args, "json", False))

    def progress(message: str) -> None:
        if not as_json:
            print(f"greenloop: {message}", file=sys.stderr, flush=True)

    from greenloop.integration.modes import MODES, retry

    mode = getattr(args, "mode", None) or "run"
    token = getattr(args, "resume_token", None)
    if mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    if (mode == "resume") != (token is not None):
        raise UsageError("--mode resume needs --resume-token T (the resume_token of the run to continue), "
                         "and --resume-token goes only with --mode resume")
    if mode != "run" and args.case:
        raise UsageError(f"--mode {mode} chooses the cases itself: drop --case")
    with _interrupts() as stop:
        if mode == "retry":
            sandbox = getattr(args, "sandbox", None)
            result = retry(project, junit=args.junit, on_event=progress, sandbox=sandbox, cancel=stop)
        else:
            result = run_integration(
                project,
                cases=tuple(args.case or ()),
                junit=args.junit,
                on_event=progress,
                sandbox=getattr(args, "sandbox", None),
                resume_token=token,
                cancel=stop,
            )
    if as_json:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        print(summary_text(result))
        from greenloop.api import dashboard_link

        link = dashboard_link(project, f"/integration/{result.run_id}")
        if link:
            print(f"  dashboard: {link}")
    return result.exit_code
