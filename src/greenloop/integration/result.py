"""The record of one integration run (result.json) and its JUnit XML for CI.

`IntegrationFailure` is one failed case (or a unit that could not start); `IntegrationResult`
is the whole run, as `integrate` returns it and as result.json holds it.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from greenloop.errors import ExitCode

__all__ = ["IntegrationFailure", "IntegrationResult", "atomic_write", "runs_dir", "write_junit"]


def runs_dir(project: str | os.PathLike[str]) -> Path:
    """The folder holding a project's integration runs, one sub-folder per run id."""
    return Path(project) / "integration" / "runs"


@dataclass(frozen=True)
class IntegrationFailure:
    """One failed case (or a unit that failed to start, as case `startup:<unit>`)."""

    case_id: str
    failed_step: int | None
    reason: str
    expected: Any
    got: Any
    involves: tuple[str, ...]
    stderr_excerpt: str
    message: str = ""
    unit: str | None = None
    bug_id: str | None = None
    artifacts: Mapping[str, str] = field(default_factory=dict)  # a browser step's screenshot, html

    def to_json(self) -> dict[str, Any]:
        """The failure as result.json holds it."""
        out: dict[str, Any] = {
            "case_id": self.case_id,
            "failed_step": self.failed_step,
            "reason": self.reason,
            "expected": self.expected,
            "got": self.got,
            "involves": list(self.involves),
            "stderr_excerpt": self.stderr_excerpt,
            "message": self.message,
            "unit": self.unit,
            "bug_id": self.bug_id,
        }
        if self.artifacts:
            out["artifacts"] = dict(self.artifacts)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IntegrationFailure:
        """Read back what `to_json` wrote (missing fields get their defaults)."""
        step = d.get("failed_step")
        return cls(
            case_id=str(d.get("case_id", "")),
            failed_step=None if step is None else int(step),
            reason=str(d.get("reason", "")),
            expected=d.get("expected"),
            got=d.get("got"),
            involves=tuple(str(u) for u in d.get("involves") or ()),
            stderr_excerpt=str(d.get("stderr_excerpt") or ""),
            message=str(d.get("message") or ""),
            unit=None if d.get("unit") is None else str(d["unit"]),
            bug_id=None if d.get("bug_id") is None else str(d["bug_id"]),
            artifacts={str(k): str(v) for k, v in (d.get("artifacts") or {}).items()},
        )


@dataclass(frozen=True)
class IntegrationResult:
    """The result of one integration run: where the evidence is and what happened per case."""

    ok: bool
    run_id: str
    result_ref: str
    cases_total: int
    cases_passed: int
    cases_failed: int
    cases_timeout: int
    failures: tuple[IntegrationFailure, ...]
    ports_used: Mapping[str, int]
    surviving_processes: tuple[Mapping[str, Any], ...]
    category_hint: str | None
    crashed: bool
    duration_ms: int
    project: str = ""
    started_at: str = ""
    cases: tuple[Mapping[str, Any], ...] = ()
    startup_failure: Mapping[str, Any] | None = None
    interrupted: bool = False
    aborted: bool = False
    process_log: str = ""
    http_trace: str = ""
    env_ref: str = ""
    junit: str | None = None
    notes: tuple[str, ...] = ()
    bugs_opened: tuple[str, ...] = ()
    bugs_transitioned: tuple[Mapping[str, str], ...] = field(default_factory=tuple)
    resume_token: str | None = None  # continues this run (mode resume) if it did not finish
    attempts: int = 1  # how many attempts ran its cases (each case row names its own)

    @property
    def exit_code(self) -> int:
        """0 all passed; 1 cases failed; 3 infrastructure, crash or survivors; 130 interrupted
        (Ctrl-C) or aborted (the caller's cancel event)."""
        if self.interrupted or self.aborted:
            return ExitCode.INTERRUPTED
        if self.crashed or self.surviving_processes:
            return ExitCode.BROKEN
        return ExitCode.OK if self.ok else ExitCode.FAILED

    def to_json(self) -> dict[str, Any]:
        """The run as result.json holds it."""
        return {
            "ok": self.ok,
            "run_id": self.run_id,
            "result_ref": self.result_ref,
            "cases_total": self.cases_total,
            "cases_passed": self.cases_passed,
            "cases_failed": self.cases_failed,
            "cases_timeout": self.cases_timeout,
            "failures": [f.to_json() for f in self.failures],
            "ports_used": dict(self.ports_used),
            "surviving_processes": [dict(p) for p in self.surviving_processes],
            "category_hint": self.category_hint,
            "crashed": self.crashed,
            "duration_ms": self.duration_ms,
            "project": self.project,
            "started_at": self.started_at,
            "cases": [dict(c) for c in self.cases],
            "startup_failure": None if self.startup_failure is None else dict(self.startup_failure),
            "interrupted": self.interrupted,
            "aborted": self.aborted,
            "process_log": self.process_log,
            "http_trace": self.http_trace,
            "env_ref": self.env_ref,
            "junit": self.junit,
            "notes": list(self.notes),
            "bugs_opened": list(self.bugs_opened),
            "bugs_transitioned": [dict(t) for t in self.bugs_transitioned],
            "resume_token": self.resume_token,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IntegrationResult:
        """Read back what `to_json` wrote (missing fields get their defaults)."""
        return cls(
            ok=bool(d.get("ok", False)),
            run_id=str(d.get("run_id", "")),
            result_ref=str(d.get("result_ref", "")),
            cases_total=int(d.get("cases_total") or 0),
            cases_passed=int(d.get("cases_passed") or 0),
            cases_failed=int(d.get("cases_failed") or 0),
            cases_timeout=int(d.get("cases_timeout") or 0),
            failures=tuple(IntegrationFailure.from_json(f) for f in d.get("failures") or ()),
            ports_used={str(k): int(v) for k, v in (d.get("ports_used") or {}).items()},
            surviving_processes=tuple(dict(p) for p in d.get("surviving_processes") or ()),
            category_hint=None if d.get("category_hint") is None else str(d["category_hint"]),
            crashed=bool(d.get("crashed", False)),
            duration_ms=int(d.get("duration_ms") or 0),
            project=str(d.get("project") or ""),
            started_at=str(d.get("started_at") or ""),
            cases=tuple(dict(c) for c in d.get("cases") or ()),
            startup_failure=None if d.get("startup_failure") is None else dict(d["startup_failure"]),
            interrupted=bool(d.get("interrupted", False)),
            aborted=bool(d.get("aborted", False)),
            process_log=str(d.get("process_log") or ""),
            http_trace=str(d.get("http_trace") or ""),
            env_ref=str(d.get("env_ref") or ""),
            junit=None if d.get("junit") is None else str(d["junit"]),
            notes=tuple(str(n) for n in d.get("notes") or ()),
            bugs_opened=tuple(str(b) for b in d.get("bugs_opened") or ()),
            bugs_transitioned=tuple(
                {str(k): str(v) for k, v in t.items()} for t in d.get("bugs_transitioned") or ()
            ),
            resume_token=None if d.get("resume_token") is None else str(d["resume_token"]),
            attempts=int(d.get("attempts") or 1),
        )


def atomic_write(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a reader never sees half a file)."""
    from greenloop.system.atomic import write_text

    write_text(path, text)



def write_junit(result: IntegrationResult, path: str | os.PathLike[str]) -> None:
    """JUnit XML for CI: one testcase per case, a failure element for each failed one."""
    failures = {f.case_id: f for f in result.failures}
    suite = ET.Element(
        "testsuite",
        name="greenloop.integration",
        tests=str(result.cases_total),
        failures=str(result.cases_failed + result.cases_timeout),
        errors="1" if result.crashed else "0",
        time=f"{result.duration_ms / 1000:.3f}",
        timestamp=result.started_at,
    )
    for case in result.cases:
        cid = str(case.get("id"))
        tc = ET.SubElement(
            suite,
            "testcase",
            classname="integration",
            name=cid,
            time=f"{int(case.get('duration_ms') or 0) / 1000:.3f}",
        )
        status = case.get("status")
        if status == "not_run":
            ET.SubElement(tc, "skipped", message="not run: the run stopped before this case")
        elif status == "aborted":
            ET.SubElement(tc, "skipped", message="aborted: the run was cancelled during this case")
        elif status != "passed":
            f = failures.get(cid)
            el = ET.SubElement(
                tc, "failure", message=(f.message if f else str(status)), type=str(f.reason if f else status)
            )
            if f is not None:
                el.text = (
                    f"expected: {json.dumps(f.expected, ensure_ascii=False)}\n"
                    f"got: {json.dumps(f.got, ensure_ascii=False)}\n"
                    + (f"stderr:\n{f.stderr_excerpt}\n" if f.stderr_excerpt else "")
                )
    if result.startup_failure is not None:
        tc = ET.SubElement(suite, "testcase", classname="integration", name="startup")
        el = ET.SubElement(
            tc,
            "error",
            message=str(result.startup_failure.get("message")),
            type=str(result.startup_failure.get("reason")),
        )
        el.text = str(result.startup_failure.get("stderr_excerpt") or "")
    root = ET.Element("testsuites", name="greenloop")
    root.append(suite)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    tree.write(str(path), encoding="utf-8", xml_declaration=True)
