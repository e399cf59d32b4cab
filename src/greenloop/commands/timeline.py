"""`greenloop timeline`: the project's timeline.ndjson, as a table or JSON, or followed live."""

from __future__ import annotations

import argparse
import json
import sys

from greenloop.errors import ExitCode, UsageError

__all__ = ["timeline"]


def _line(e: object) -> str:
    from greenloop.devloop.timeline import Event

    assert isinstance(e, Event)
    return f"{e.at}  {e.kind:<20} {e.unit_id:<16} {e.ref:<34} {e.summary}"


def timeline(args: argparse.Namespace) -> int:
    """`greenloop timeline [--follow]`: the DevLoop's events in order."""
    from greenloop.commands.run import _path
    from greenloop.devloop import timeline as tl

    path = tl.timeline_path(_path(args.path))
    kinds = tuple(args.kind or ())
    bad = [k for k in kinds if k not in tl.KINDS]
    if bad:
        raise UsageError(f"--kind {bad[0]!r} is not an event kind: use one of {', '.join(tl.KINDS)}")
    last = None
    if args.last is not None:
        if not args.last.isdigit() or int(args.last) < 1:
            raise UsageError(f"--last must be a positive number of events, got {args.last!r}")
        last = int(args.last)
    events, warnings = tl.read(path, unit=args.unit, kinds=kinds, last=last)
    for w in warnings:
        print(f"greenloop: {w}", file=sys.stderr)
    out = sys.stdout

    def show(e: tl.Event) -> None:
        out.write((json.dumps(e.to_json(), ensure_ascii=False) if args.json else _line(e)) + "\n")
        out.flush()

    if args.json and not args.follow:
        out.write(json.dumps({"timeline": str(path), "events": [e.to_json() for e in events],
                              "warnings": warnings}, ensure_ascii=False, indent=2) + "\n")
        return ExitCode.OK
    if not events and not args.follow:
        print(f"no events yet in {path}")
    for e in events:
        show(e)
    if args.follow:
        try:
            for e in tl.follow(path, start_at_end=True):
                if (args.unit is None or e.unit_id == args.unit) and (not kinds or e.kind in kinds):
                    show(e)
        except KeyboardInterrupt:
            return ExitCode.OK
    return ExitCode.OK
