"""`greenloop doctor [PATH] [--json]`: the checks of greenloop.doctor, rendered.

Exit 0 all well, 1 a fix needed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from greenloop.errors import ExitCode, UsageError

__all__ = ["doctor"]


def doctor(args: argparse.Namespace) -> int:
    """Check PATH (exit 2 when it is no folder), run every check, print the report."""
    from greenloop import render
    from greenloop.doctor.diagnose import diagnose

    path = str(args.path)
    if not os.path.exists(path):
        raise UsageError(f"PATH {path!r} does not exist: pass the workspace folder (default: .)")
    if not os.path.isdir(path):
        raise UsageError(f"PATH {path!r} is not a folder: pass the workspace folder (default: .)")
    report = diagnose(path)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        print(render.doctor_text(report, colour=render.use_colour(sys.stdout)))
    return ExitCode.OK if report.ok else ExitCode.FAILED
