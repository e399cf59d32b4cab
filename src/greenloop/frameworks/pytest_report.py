"""greenloop's own pytest report (written by the plugin in pytest_plugin/, planned by plan.py).

A module of its own, light to import: reading a green run's report needs no regular
expressions and no XML; the junit module's failure builder is imported only when something
failed (a pytest failure's long representation is the same text in both reports).
"""

from __future__ import annotations

import json
from typing import Literal, NamedTuple

from greenloop.frameworks.common import MAX_DETAILED_FAILURES, strip_ansi
from greenloop.frameworks.results import (
    closing_result,
    read_json_object,
    undetailed,
)
from greenloop.model import Failure, ParseResult

__all__ = ["Partial", "parse_report", "read_stream"]


def _failure(item: object, root: str | None) -> Failure | None:
    """One failure of the report (or of the partial stream) as a Failure."""
    if not isinstance(item, dict):
        return None
    nodeid = str(item.get("nodeid") or "")
    when = item.get("when")
    kind: Literal["test", "load", "hook"] = (
        "load" if when == "collect" else "hook" if when in ("setup", "teardown") else "test"
    )
    text = strip_ansi(str(item.get("longrepr") or ""))
    message = strip_ansi(str(item.get("message") or "")) or (text.strip().splitlines() or [""])[-1]
    file = nodeid.split("::", 1)[0] or (str(item["file"]) if item.get("file") else None)
    from greenloop.frameworks.junit import pytest_failure  # (xml.etree only when something failed)

    f = pytest_failure(nodeid or (file or "?"), file, kind, message, text, root)
    if f.line is None and isinstance(item.get("line"), int):
        f = f._replace(line=int(item["line"]))
    if isinstance(item.get("expected"), str) and isinstance(item.get("got"), str):
        # the failing comparison's operands, whole (the plugin read them): pytest's message
        # shortens long reprs, and two shortened ones may read the same
        f = f._replace(expected=item["expected"], got=item["got"])
    return f


class Partial(NamedTuple):
    """What the plugin's stream recorded before the run stopped."""

    failures: tuple[Failure, ...]
    # the tests started and not ended (node id, line where defined), in the order they
    # started: one, or one per pytest-xdist worker
    running: tuple[tuple[str, int | None], ...]
    started: int  # tests started


# the phase pytest-xdist gives the report of a test whose worker died while running it
_CRASH_PHASE = "???"


def read_stream(path: str, root: str | None = None) -> Partial | None:
    """The plugin's partial stream (GREENLOOP_PYTEST_STREAM); None when it is missing. A line
    torn by the kill is skipped. Under pytest-xdist the workers' starts and ends interleave,
    and a test whose worker crashed has a failure but no end: its failure closes it."""
    failures: list[Failure] = []
    running: dict[str, int | None] = {}
    lines: dict[str, int | None] = {}
    started = 0
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:
        return None
    with fh:
        for raw in fh:
            try:
                item = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(item, dict):
                continue
            if "start" in item:
                nodeid = str(item["start"])
                line = item["line"] if isinstance(item.get("line"), int) else None
                running[nodeid] = lines[nodeid] = line
                started += 1
            elif "end" in item:
                running.pop(str(item["end"]), None)
            elif "failure" in item:
                detail = item["failure"]
                if isinstance(detail, dict) and detail.get("when") == _CRASH_PHASE:
                    nodeid = str(detail.get("nodeid") or "")
                    running.pop(nodeid, None)
                    if detail.get("line") is None:
                        detail = {**detail, "line": lines.get(nodeid)}
                if len(failures) < MAX_DETAILED_FAILURES:
                    f = _failure(detail, root)
                    if f is not None:
                        failures.append(f)
    return Partial(tuple(failures), tuple(running.items()), started)


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """greenloop's pytest report (the plugin in pytest_plugin/); missing or invalid gives
    recognized=False with a note. Counted as pytest's closing line counts."""
    data = read_json_object(
        path, "counts", "it crashed, was killed or did not load greenloop's plugin",
        "greenloop's pytest report",
    )
    if isinstance(data, ParseResult):
        return data
    counts = {str(k): int(v) for k, v in data["counts"].items() if isinstance(v, int)}
    failed = counts.get("failed", 0) + counts.get("error", 0)
    passed = counts.get("passed", 0) + counts.get("xpassed", 0)
    skipped = counts.get("skipped", 0) + counts.get("xfailed", 0)
    failures: list[Failure] = []
    load_errors: list[str] = []
    for item in data.get("failures") or ():
        f = _failure(item, root)
        if f is None:
            continue
        if f.kind == "load":
            last = f.message.splitlines()[-1] if f.message else "failed to load"
            load_errors.append(f"{f.test}: {last}")
        failures.append(f if len(failures) < MAX_DETAILED_FAILURES else undetailed(f))
    notes: tuple[str, ...] = ()
    omitted = data.get("omitted")
    if isinstance(omitted, int) and omitted > 0:
        notes = (f"{omitted} more failure(s) are counted but not detailed in the report",)
    duration = data.get("duration")
    return closing_result(
        (passed, failed, skipped),
        failures,
        notes=notes,
        duration_ms=int(duration * 1000) if isinstance(duration, int | float) else None,
        load_errors=load_errors,
        passed_names=(str(n) for n in data.get("passed") or () if isinstance(n, str)),
        skipped_names=(str(n) for n in data.get("skipped") or () if isinstance(n, str)),
    )
