"""`greenloop merge RESULT.json…`: fold shard results into one run, render it, exit by its outcome."""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["merge"]


def merge(args: argparse.Namespace) -> int:
    from greenloop import api
    from greenloop.commands.run import _path, exit_code

    result = api.merge_results(args.results, workspace=_path(args.path), session_id=args.session)
    if args.json:
        sys.stdout.write(json.dumps(result.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        from greenloop import render

        print(render.run_text(result, colour=render.use_colour(sys.stdout), cwd=os.getcwd()))
    return exit_code(result)
