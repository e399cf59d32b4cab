"""`greenloop bugs open|transition|list|show`: the bug log for people (a table) and programs (--json).

The log is found from `--project DIR` or by walking up from the current folder to the
DevLoop project root (`units.json` or `bugs.ndjson`); elsewhere it is `./bugs.ndjson`.
Warnings about skipped lines go to stderr (and into the JSON as `warnings`).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import operator
import os
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from greenloop.bugs.log import BugLog, bug_log_path
from greenloop.bugs.record import SEVERITIES, SOURCES, STATUSES, Bug, Fold
from greenloop.errors import ExitCode, UsageError

__all__ = ["list_cmd", "open_cmd", "show_cmd", "transition_cmd"]


def _log(args: argparse.Namespace) -> BugLog:
    project = getattr(args, "project", None)
    if project is not None:
        folder = Path(project)
        if not folder.is_dir():
            raise UsageError(f"--project {project!r} is not a folder; pass the project's folder")
        return BugLog(bug_log_path(folder))
    return BugLog(bug_log_path(Path.cwd()))


def _validate(pairs: Iterable[tuple[str, str | None, tuple[str, ...]]]) -> None:
    """Name the CLI flag in the message (the library names its own parameter)."""
    for flag, value, allowed in pairs:
        if value is None:
            continue
        for item in value.split(","):
            if item.strip() not in allowed:
                raise UsageError(f"{flag} {item.strip()!r} is not one of: {', '.join(allowed)}; pick one")


def _by(args: argparse.Namespace) -> str | None:
    return getattr(args, "by", None) or os.environ.get("USER") or os.environ.get("LOGNAME") or None


def _emit(data: dict[str, Any], out: TextIO) -> None:
    out.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def _emit_list(found: Fold, out: TextIO) -> None:
    """The list as JSON, one bug a line: greppable, and fast (the C encoder needs no indent)."""
    data = found.to_json()
    encode = json.JSONEncoder(ensure_ascii=False).encode  # one encoder for every bug
    rows = ",\n".join(["    " + encode(b) for b in data.pop("bugs")])
    rest = json.dumps(data, ensure_ascii=False, indent=2)
    out.write('{\n  "bugs": [' + (f"\n{rows}\n  ]," if rows else "],") + rest[1:] + "\n")


def _warn(warnings: Iterable[str]) -> None:
    for w in warnings:
        print(f"greenloop: warning: {w}", file=sys.stderr)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


_COLUMNS = operator.attrgetter("id", "status", "severity", "unit_id", "source", "updated_at", "title")
_HEADS = ("ID", "STATUS", "SEVERITY", "UNIT", "SOURCE", "UPDATED", "TITLE")


def table(found: Sequence[Bug], width: int | None = None) -> str:
    """A fixed-column table of bugs; with `width`, titles are clipped to fit it. A title
    with a newline or tab is put on one line."""
    rows = list(map(_COLUMNS, found))
    cols = list(zip(*rows, strict=True)) or [()] * len(_HEADS)
    widths = [max(len(h), max(map(len, c), default=0)) for h, c in zip(_HEADS[:-1], cols, strict=False)]
    title_w = max(width - (sum(widths) + 2 * len(widths)), 20) if width else 1 << 30
    titles = "\0".join(cols[6])  # one search for a newline or tab in any title
    if max(map(len, cols[6]), default=0) > title_w or "\n" in titles or "\t" in titles:
        rows = [r if len(r[6]) <= title_w and "\n" not in r[6] and "\t" not in r[6]
                else (*r[:6], _clip(r[6], title_w)) for r in rows]
    # one format call for the whole table: no per-row Python work on a 100,000-line log
    fmt = "  ".join(f"%-{w}s" for w in widths) + "  %s\n"
    return (fmt * (len(rows) + 1)) % (*_HEADS, *itertools.chain.from_iterable(rows))


def _summary(found: Sequence[Bug]) -> str:
    counts: Counter[str] = Counter(b.status for b in found)
    parts = [f"{counts[s]} {s}" for s in STATUSES if s in counts]
    return f"{len(found)} bug{'s' if len(found) != 1 else ''}" + (f" ({', '.join(parts)})" if parts else "")


def open_cmd(args: argparse.Namespace) -> int:
    """`greenloop bugs open`: append a new bug (or the existing one it duplicates)."""
    _validate([("--severity", args.severity, SEVERITIES), ("--source", args.source, SOURCES)])
    if args.severity is not None and "," in args.severity:
        raise UsageError("--severity takes one severity, not a list; pick one")
    blog = _log(args)
    opened = blog.open(
        unit_id=args.unit, test_name=args.test, title=args.title, severity=args.severity,
        source=args.source or "unit_test", category=getattr(args, "category", None),
        detail=args.detail, run_id=args.run, by=_by(args),
    )
    _warn(opened.warnings)
    if args.json:
        _emit(opened.to_json(), sys.stdout)
        return ExitCode.OK
    b = opened.bug
    if opened.created:
        print(f"opened {b.id} [{b.severity}] {b.unit_id}: {b.title}")
    else:
        print(f"reused {b.id} ({b.status}) for {b.dedup_key}: {b.title} (nothing written)")
    print(f"  log: {opened.log}")
    return ExitCode.OK


def transition_cmd(args: argparse.Namespace) -> int:
    """`greenloop bugs transition ID --to STATUS`: move a bug along its lifecycle."""
    _validate([("--to", args.to_status, STATUSES)])
    blog = _log(args)
    done = blog.transition(args.bug_id, args.to_status, by=_by(args), fix_refs=args.fix_ref or ())
    _warn(done.warnings)
    if args.json:
        _emit(done.to_json(), sys.stdout)
        return ExitCode.OK
    b = done.bug
    extra = f"; fix refs: {', '.join(b.fix_refs)}" if b.fix_refs else ""
    print(f"{b.id}: {done.from_status} -> {b.status}" + (f" (by {b.by}{extra})" if b.by else extra))
    return ExitCode.OK


def list_cmd(args: argparse.Namespace) -> int:
    """`greenloop bugs list`: the folded bug log, filtered."""
    # Folding a big log builds many objects and no cycles: the collector's passes over them
    # are wasted (a third of the time on a 100,000-line log), here and in the fold.
    was = gc.isenabled()
    gc.disable()
    try:
        return _list(args)
    finally:
        if was:
            gc.enable()


def _list(args: argparse.Namespace) -> int:
    _validate([("--status", args.status, STATUSES), ("--source", args.source, SOURCES),
               ("--severity", args.severity, SEVERITIES)])
    blog = _log(args)
    found = blog.list(unit=args.unit, status=args.status, source=args.source, severity=args.severity)
    _warn(found.warnings)
    out = sys.stdout
    if args.json:
        _emit_list(found, out)
        return ExitCode.OK
    if not found.bugs:
        where = found.log if blog.path.exists() else f"{found.log} (not written yet)"
        out.write(f"no bugs match in {where}\n")
        return ExitCode.OK
    # Clip titles to a terminal's width; a pipe (grep, less -S, a file) gets them whole.
    out.write(table(found.bugs, shutil.get_terminal_size().columns if out.isatty() else None))
    out.write(f"{_summary(found.bugs)} in {found.log}\n")
    return ExitCode.OK


def show_cmd(args: argparse.Namespace) -> int:
    """`greenloop bugs show ID`: one bug and its history."""
    blog = _log(args)
    shown = blog.show(args.bug_id)
    _warn(shown.warnings)
    if args.json:
        _emit(shown.to_json(), sys.stdout)
        return ExitCode.OK
    b = shown.bug
    affected = [u for u in b.affected_units if u != b.unit_id]
    lines = [
        f"{b.id}  {b.status}  {b.severity}",
        f"  title:    {b.title}",
        f"  unit:     {b.unit_id}" + (f"  (also affects {', '.join(affected)})" if affected else ""),
        f"  test:     {b.test_name}",
        f"  source:   {b.source}  category: {b.category}",
        f"  run:      {b.run_id or '-'}",
        f"  fix refs: {', '.join(b.fix_refs) or '-'}",
        f"  created:  {b.created_at}  updated: {b.updated_at}",
    ]
    if b.detail:
        lines.append("  detail:")
        lines.extend(f"    {d}" for d in b.detail.splitlines())
    lines.append("history:")
    prev: str | None = None
    for h in shown.history:
        move = h.bug.status if prev is None else f"{prev} -> {h.bug.status}"
        who = f" by {h.bug.by}" if h.bug.by else ""
        refs = f"  fix refs: {', '.join(h.bug.fix_refs)}" if h.bug.fix_refs and prev is not None else ""
        lines.append(f"  line {h.line:<6} {h.bug.updated_at}  {move}{who}{refs}")
        prev = h.bug.status
    print("\n".join(lines))
    return ExitCode.OK
