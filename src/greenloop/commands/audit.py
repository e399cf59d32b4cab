"""`greenloop audit UNIT [--json] [--baseline auto|git|snapshot]`: the Tester's self-check."""

from __future__ import annotations

import argparse
import json

from greenloop.audit.report import AuditReport, audit_unit
from greenloop.errors import ExitCode, UsageError

__all__ = ["audit", "render"]

_BASELINES = ("auto", "git", "snapshot")


def render(report: AuditReport) -> str:
    """The human form: a verdict line, then pass/fail per check with its findings and the fix."""
    failed = [c for c in report.checks if not c.ok]
    head = f"audit {report.unit}: " + (
        "PASS (all 7 checks)" if report.ok else f"FAIL ({len(failed)} of {len(report.checks)} checks failed)"
    )
    lines = [head]
    for check in report.checks:
        warning = check.ok and any(d.startswith("warning:") for d in check.details)
        mark = "WARN" if warning else ("ok  " if check.ok else "FAIL")
        value = (
            f"{check.value:.2f}"
            if isinstance(check.value, float)
            else ("-" if check.value is None else check.value)
        )
        lines.append(f"  {mark} {check.name:<22} {value}")
        shown = check.details if (not check.ok or warning) else check.details[:1]
        lines += [f"       {d}" for d in shown]
    return "\n".join(lines)


def audit(args: argparse.Namespace) -> int:
    """`greenloop audit UNIT`: the Tester's self-checks of a DevLoop unit."""
    baseline = str(getattr(args, "baseline", "auto") or "auto")
    if baseline not in _BASELINES:
        raise UsageError(f"--baseline must be one of {', '.join(_BASELINES)}, not {baseline!r}")
    report = audit_unit(str(args.unit), baseline=baseline)  # type: ignore[arg-type]
    if getattr(args, "json", False):
        print(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        print(render(report))
    return ExitCode.OK if report.ok else ExitCode.FAILED
