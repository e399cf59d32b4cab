"""Continuing a unit run whose greenloop died (SIGKILL, a reboot, a lost background worker).

While a run's suite runs, `.greenloop/runs/<run_id>/run.json` records what it is: the plan,
the options it was asked with, the session, and the digest of the runner's config file. Every
result carries `resume_token` (`<run_id>.<8 hex digits of the workspace root>`), and
`greenloop run --mode resume --resume-token T` (api.test_run(mode="resume")) continues it:

- the run had finished: its stored result, as it is;
- the runner finished though greenloop did not (its machine report is complete): the result is
  built from that report, then recorded (bugs, closure state, timeline) like any run;
- otherwise (greenloop.runner.resume) the test files that finished are kept and only the
  others run again, as one result under the run's id; when the run's files cannot be known
  the suite runs again with the same options, and the result says so.

run.json also names the greenloop process running the run (pid and start time), so that a
run still going is refused rather than resumed beside itself.

A token greenloop did not give, one from another workspace, one whose run folder is gone, or
one whose runner config changed since, is refused (exit 2) before anything starts.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from greenloop import layout
from greenloop.errors import UsageError
from greenloop.model import Plan, RawRun
from greenloop.result import RunResult, SandboxInfo

__all__ = ["check", "from_report", "read_run_file", "resume_token", "write_run_file"]



def _tag(root: str | os.PathLike[str]) -> str:
    return hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:8]


def resume_token(root: str | os.PathLike[str], run_id: str) -> str:
    """The token that continues run `run_id` of the workspace at `root`: `<run_id>.<8 hex>`."""
    return f"{run_id}.{_tag(root)}"


def config_digest(root: str | os.PathLike[str], config_path: str | None) -> str:
    """What the run's shape depends on besides the code under test: the runner's config file."""
    if not config_path:
        return "no-config"
    try:
        return hashlib.sha256(Path(root, config_path).read_bytes()).hexdigest()
    except OSError:
        return "missing"


def write_run_file(run_dir: str | os.PathLike[str], *, plan: Plan, options: dict[str, Any],
                   session_id: str | None, root: str, config_path: str | None) -> None:
    """Record what a run is while it runs (never raises: a run without it is not resumable)."""
    from greenloop.runner.resume import process_start

    data = {"plan": plan._asdict(), "options": options, "session_id": session_id, "root": root,
            "config_path": config_path, "config": config_digest(root, config_path),
            "greenloop": [os.getpid(), process_start(os.getpid())]}  # is the run still going?
    path = Path(run_dir, layout.RUN_RECORD_NAME)
    try:
        tmp = path.with_name(f".{layout.RUN_RECORD_NAME}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def read_run_file(run_dir: Path) -> dict[str, Any]:
    """The run.json greenloop wrote beside a run while it ran."""
    return dict(json.loads((run_dir / layout.RUN_RECORD_NAME).read_text(encoding="utf-8")))


def check(root: str, token: str) -> Path:
    """The run folder a resume token names, or UsageError (exit 2) saying why not."""
    run_id, dot, tag = token.strip().rpartition(".")
    if not dot or not run_id.startswith("run-") or len(tag) != 8:
        raise UsageError(f"resume token {token!r} is not one greenloop gave: it looks like "
                         "run-…​.<8 hex digits>, as a result's resume_token shows")
    if tag != _tag(root):
        raise UsageError(f"resume token {token!r} belongs to another workspace, not {root}: resume it there")
    run_dir = layout.run_dir(root, run_id)
    if not (run_dir / layout.RUN_RECORD_NAME).is_file():
        raise UsageError(f"resume token {token!r}: there is no run {run_id} in {root} (pruned, or it "
                         "never started)")
    data = read_run_file(run_dir)
    if data.get("config") != config_digest(root, data.get("config_path")):
        raise UsageError(f"resume token {token!r}: the runner's config ({data.get('config_path')}) "
                         "changed since that run; start a new run instead")
    return run_dir


def plan_of(data: dict[str, Any]) -> Plan:
    p = dict(data["plan"])
    p["argv"] = tuple(p.get("argv") or ())
    p["env"] = tuple(tuple(x) for x in p.get("env") or ())
    p["notes"] = tuple(p.get("notes") or ())
    if isinstance(p.get("affected"), list):  # json wrote the NamedTuple as a list
        from greenloop.model import AffectedInfo

        p["affected"] = AffectedInfo.from_json(dict(zip(AffectedInfo._fields, p["affected"], strict=False)))
    fields = set(Plan._fields)
    return Plan(**{k: v for k, v in p.items() if k in fields})


def from_report(run_dir: Path, data: dict[str, Any], workspace: str) -> RunResult | None:
    """The run's result built from its runner's machine report, or None if the report is missing
    or incomplete (the runner did not finish)."""
    from greenloop.runner.results import output_tail, parse_report, with_hints
    from greenloop.runner.verdict import classify

    plan = plan_of(data)
    if not plan.report_file or not os.path.exists(plan.report_file):
        return None
    parsed = parse_report(plan.report_format or "", plan.report_file, plan.cwd)
    if not parsed.recognized:
        return None
    stdout, stderr = str(run_dir / layout.STDOUT_NAME), str(run_dir / layout.STDERR_NAME)
    failed = parsed.summary.failed or len(parsed.failures)
    raw = RawRun(exit_code=1 if failed else 0, timed_out=False, aborted=False,
                 duration_ms=parsed.duration_ms or 0, stdout_path=stdout, stderr_path=stderr)
    verdict = classify(plan, raw, parsed, report_ok=True)
    from greenloop.config import load

    failures = with_hints(parsed.failures, plan.framework, load(workspace).hint_language) \
        if parsed.failures else ()
    note = ("recovered: greenloop stopped before this run ended, but the runner finished and wrote "
            "its report; the result is built from that report (the exit code is inferred from it)")
    return RunResult(
        run_id=run_dir.name, ok=verdict.ok, outcome=verdict.outcome,  # type: ignore[arg-type]
        framework=plan.framework or None, command=plan.command_text, exit_code=raw.exit_code,
        crashed=verdict.crashed, crash_reason=verdict.crash_reason, summary=parsed.summary,
        failures=failures, output_tail=output_tail(stdout, stderr, 3000),
        notes=tuple(dict.fromkeys([*plan.notes, *parsed.notes, *verdict.notes, note])),
        duration_ms=raw.duration_ms, sandbox=SandboxInfo(), result_ref=str(run_dir / layout.RESULT_NAME),
        workspace=workspace, next_action=verdict.next_action, passed_tests=parsed.passed_tests,
        skipped_tests=parsed.skipped_tests, selection=plan.selection, affected=plan.affected,
    )
