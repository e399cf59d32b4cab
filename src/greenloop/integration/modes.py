"""The modes of `greenloop integrate` beyond a plain run: retry (the previous run's failed cases
first) and resume (continue a run that was cut short, `integrate(resume_token=...)`)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from greenloop.errors import UsageError
from greenloop.integration.result import IntegrationResult, runs_dir
from greenloop.integration.run import integrate
from greenloop.integration.spec.loading import load_spec

__all__ = ["MODES", "latest", "retry"]

MODES = ("run", "retry", "resume")


def latest(project: str | os.PathLike[str]) -> IntegrationResult | None:
    """The newest integration run of a project that has a result.json."""
    folder = runs_dir(Path(load_spec(project).root))
    for name in sorted((n for n in os.listdir(folder) if not n.startswith(".")), reverse=True) \
            if folder.is_dir() else ():
        try:
            return IntegrationResult.from_json(json.loads((folder / name / "result.json").read_text("utf-8")))
        except (OSError, ValueError):
            continue
    return None


def retry(project: str | os.PathLike[str], **options: Any) -> IntegrationResult:
    """mode retry: the previous run's failed (and unrun) cases first, then, if they all pass, every
    case, each as a run of its own; the returned result says which cases that was."""
    previous = latest(project)
    if previous is None:
        raise UsageError(f"mode retry needs an earlier integration run in {project}: run it once first")
    again = [c["id"] for c in previous.cases if c.get("status") not in ("passed", None)]
    if not again:
        result = integrate(project, **options)
        note = f"retry: {previous.run_id} had no failed case; every case ran"
        return replace(result, notes=(*result.notes, note))
    first = integrate(project, cases=tuple(again), **options)
    if not first.ok:
        note = (f"retry of {previous.run_id}: its failed cases ({', '.join(again)}) ran first and did "
                "not all pass; the other cases did not run")
        return replace(first, notes=(*first.notes, note))
    result = integrate(project, **options)
    return replace(result, notes=(*result.notes, f"retry of {previous.run_id}: its failed cases "
                                  f"({', '.join(again)}) passed in {first.run_id}; then every case ran"))
