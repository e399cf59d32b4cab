"""What lets an integration run be continued: each finished case's outcome saved as it ends,
the attempts made so far, and the resume token that names the run.

A run folder (`integration/runs/<run_id>/`) holds `attempts.json` (one entry per attempt:
number, start time, the digest of the spec it ran) and `cases/<n>.json` (a finished case's
whole outcome and the attempt that ran it), written atomically when the case ends. A run
killed by SIGKILL, a reboot or its time budget keeps every case that finished; `resume` starts
the units again on fresh ports and runs only the others, appending to the same trace and
process log, and writes one result.json for the whole run.

The resume token is `<run_id>.<project tag>`: the tag (8 hex digits of the project folder's
SHA-256) tells a token from another project apart from one that does not exist.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from greenloop.errors import UsageError
from greenloop.integration.cases import CaseOutcome

__all__ = [
    "begin_attempt",
    "check_token",
    "load_cases",
    "project_tag",
    "resume_token",
    "save_case",
    "spec_digest",
]

ATTEMPTS = "attempts.json"
CASES = "cases"


def project_tag(root: str | os.PathLike[str]) -> str:
    """8 hex digits of the project folder's SHA-256: the project part of a resume token."""
    return hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:8]


def resume_token(root: str | os.PathLike[str], run_id: str) -> str:
    """The token that continues run `run_id` of this project: `<run_id>.<project tag>`."""
    return f"{run_id}.{project_tag(root)}"


def spec_digest(root: str | os.PathLike[str]) -> str:
    """SHA-256 over what the run was specified by: units.json, integration/spec.json and the
    units' contracts (a resume against a changed spec would mix two different runs)."""
    base = Path(root)
    h = hashlib.sha256()
    files = [base / "units.json", base / "integration" / "spec.json",
             *sorted((base / "units").glob("*/contract.json"))]
    for path in files:
        h.update(str(path.relative_to(base)).encode() + b"\0")
        try:
            h.update(_without_status(path))
        except OSError:
            h.update(b"(missing)")
        h.update(b"\0")
    return h.hexdigest()


def _without_status(path: Path) -> bytes:
    """A file's bytes; for units.json, without the status greenloop itself writes back
    (units.py), which changes with every unit run and says nothing about the spec."""
    raw = path.read_bytes()
    if path.name != "units.json":
        return raw
    try:
        data = json.loads(raw)
        for unit in data.get("units") or ():
            if isinstance(unit, dict):
                unit.pop("status", None)
                unit.pop("status_run", None)
        return json.dumps(data, sort_keys=True).encode()
    except (ValueError, AttributeError):
        return raw


def _atomic(path: Path, data: Any) -> None:
    from greenloop.system.atomic import write_text

    # fsync: a finished case must survive the machine going down
    write_text(path, json.dumps(data, ensure_ascii=False), fsync=True)


def attempts(folder: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads((folder / ATTEMPTS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [a for a in data if isinstance(a, dict)] if isinstance(data, list) else []


def begin_attempt(folder: Path, digest: str, started_at: str, cases: list[str], token: str) -> int:
    """Record a new attempt of the run in `folder`; returns its number (1 for a new run).
    `cases` is the run's case selection (empty: all), which a resume keeps."""
    done = attempts(folder)
    number = len(done) + 1
    entry = {"attempt": number, "started_at": started_at, "spec": digest, "cases": cases,
             "resume_token": token}
    _atomic(folder / ATTEMPTS, [*done, entry])
    return number


def save_case(folder: Path, index: int, outcome: CaseOutcome, attempt: int) -> None:
    """Keep a finished case's whole outcome (and the attempt that ran it) in the run folder."""
    data = asdict(outcome)
    data["involves"] = list(outcome.involves)
    data["artifacts"] = dict(outcome.artifacts)
    _atomic(folder / CASES / f"{index:04d}.json", {"attempt": attempt, "outcome": data})


def load_cases(folder: Path) -> dict[str, tuple[CaseOutcome, int]]:
    """The cases finished in earlier attempts: {case id: (outcome, attempt)}; damaged files are skipped
    (their case runs again)."""
    out: dict[str, tuple[CaseOutcome, int]] = {}
    for path in sorted((folder / CASES).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            o: Mapping[str, Any] = data["outcome"]
            outcome = CaseOutcome(
                case_id=str(o["case_id"]), status=str(o["status"]), duration_ms=int(o["duration_ms"]),
                steps_run=int(o["steps_run"]), failed_step=o.get("failed_step"), reason=o.get("reason"),
                expected=o.get("expected"), got=o.get("got"), message=str(o.get("message") or ""),
                unit=o.get("unit"), involves=tuple(o.get("involves") or ()),
                artifacts=dict(o.get("artifacts") or {}),
            )
            out[outcome.case_id] = (outcome, int(data["attempt"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def check_token(root: str | os.PathLike[str], runs_dir: Path, token: str) -> tuple[str, Path]:
    """The run id and folder a resume token names, or UsageError (exit 2) saying why not."""
    run_id, dot, tag = token.strip().rpartition(".")
    if not dot or not run_id or len(tag) != 8:
        raise UsageError(f"resume token {token!r} is not one greenloop gave: it looks like "
                         "<run_id>.<8 hex digits>, as a result's resume_token shows")
    if tag != project_tag(root):
        raise UsageError(f"resume token {token!r} belongs to another project, not {root}: "
                         "resume it from the project that ran it")
    folder = runs_dir / run_id
    if not (folder / ATTEMPTS).is_file():
        raise UsageError(f"resume token {token!r}: there is no integration run {run_id} in {root} "
                         "(its folder was removed, or it never started)")
    recorded = attempts(folder)[-1].get("spec") if attempts(folder) else None
    if recorded != spec_digest(root):
        raise UsageError(f"resume token {token!r}: units.json, integration/spec.json or a contract "
                         "changed since that run; start a new run (mode run) instead")
    return run_id, folder
