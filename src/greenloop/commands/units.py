"""`greenloop units`: a DevLoop project's units with their status and last run."""

from __future__ import annotations

import argparse
import json
import sys

from greenloop.errors import ExitCode

__all__ = ["units"]


def units(args: argparse.Namespace) -> int:
    """`greenloop units`: each DevLoop unit's status and its last run."""
    from greenloop import layout
    from greenloop.commands.run import _path
    from greenloop.devloop import units as registry
    from greenloop.errors import UsageError

    folder = _path(args.path)
    project = layout.find_project_root(folder)
    if project is None or not (project / "units.json").is_file():
        raise UsageError(f"{folder} is not in a DevLoop project: no units.json here or above")
    rows = registry.registry(project)
    if args.json:
        doc = {"project": str(project), "units": rows}
        sys.stdout.write(json.dumps(doc, ensure_ascii=False, indent=2) + "\n")
        return ExitCode.OK
    print(f"{'UNIT':<20} {'KIND':<5} {'STATUS':<8} {'RUN':<34} {'AT':<21} DEPENDS ON")
    for r in rows:
        print(f"{r['id']:<20} {r['kind'] or '':<5} {r['status'] or '-':<8} {r['run_id'] or '':<34} "
              f"{r['at'] or '':<21} {', '.join(r['depends_on'])}")
    return ExitCode.OK
