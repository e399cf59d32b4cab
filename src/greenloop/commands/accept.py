"""`greenloop accept TEST [PATH] --reason "…"`: a person accepts a skipped or removed test;
`greenloop accepted [PATH]`: the acceptances and the taken-away tests still owed.

`accept` is refused with exit 2 inside an agent's session or without a terminal
(greenloop.closure.accept.refusal), before anything else is read.
"""

from __future__ import annotations

import json
import os
from typing import Any

from greenloop.errors import ExitCode, UsageError

__all__ = ["accept", "accepted"]


def _folder(value: str) -> str:
    if not os.path.isdir(value):
        raise UsageError(f"PATH {value!r} is not an existing folder: pass the workspace folder (default: .)")
    return value


def _session(explicit: str | None) -> str | None:
    """--session, else GREENLOOP_SESSION (a person's own word), else None: the whole workspace.
    The harnesses' variables and the process tree never get this far (the refusal)."""
    from greenloop.closure.session import resolve

    return resolve(explicit, env={k: v for k, v in os.environ.items() if k == "GREENLOOP_SESSION"})


def accept(args: Any) -> int:
    """Exit 0 recorded, 2 refused (an agent's session, no terminal) or a bad argument."""
    from greenloop.closure import accept as people

    path = os.path.abspath(_folder(args.path))
    why = people.refusal(path)
    if why is not None:
        raise UsageError(why)
    session = _session(args.session)
    record = people.accept(path, args.test, args.reason, people.who(path), session_id=session)
    if args.json:
        print(json.dumps(record.to_json(), indent=2, ensure_ascii=False))
        return ExitCode.OK
    scope = f"session {record.session_id}" if record.session_id else "every session of this workspace"
    print(f"accepted {record.test} for {scope}")
    print(f"  by {record.by} at {_iso(record.at)}: {record.reason}")
    print("  the gate no longer owes it while it stays skipped or removed; if it fails, it is owed again")
    return ExitCode.OK


def _iso(at: float) -> str:
    from greenloop.closure.transitions import iso

    return iso(at)


def accepted(args: Any) -> int:
    """`greenloop accepted [PATH] [--session S] [--json]`: a report; exit 0."""
    from greenloop.closure.accept import listing
    from greenloop.closure.messages import why_owed

    path = os.path.abspath(_folder(args.path))
    found = listing(path, session_id=args.session)
    if args.json:
        print(json.dumps(found.to_json(), indent=2, ensure_ascii=False))
        return ExitCode.OK
    if not found.acceptances:
        print("no acceptance recorded" + (f" for session {args.session}" if args.session else ""))
    for a in found.acceptances:
        scope = f"session {a.session_id}" if a.session_id else "workspace"
        print(f"accepted {a.test} ({scope}) by {a.by} at {_iso(a.at)}: {a.reason}")
    for key, o in found.open:
        where = f"session {key}" if key else "the workspace's runs"
        print(f"taken away, not accepted: {o.test} ({why_owed(o)}; {where})")
    if found.open:
        print('a person can accept one from their own terminal: greenloop accept TEST --reason "…"')
    return ExitCode.OK
