"""`greenloop merge RESULT.json…`: fold shard results into one run, render it, exit by its outcome.
`greenloop flaky [PATH]`: the flaky tests the run history shows."""

from __future__ import annotations

import argparse
import json
import sys

from greenloop.errors import ExitCode

__all__ = ["flaky", "merge"]


def merge(args: argparse.Namespace) -> int:
    """`greenloop merge RESULT.json…`: fold a suite's shard results into one recorded run."""
    from greenloop import api
    from greenloop.commands.output import chosen
    from greenloop.commands.run import _path, exit_code, print_result

    form = chosen(args)
    result = api.merge_results(args.results, workspace=_path(args.path), session_id=args.session)
    print_result(result, form, path=args.path)
    return exit_code(result)


def flaky(args: argparse.Namespace) -> int:
    """Exit 0 with or without flaky tests: this is a report, not a verdict."""
    from greenloop import api
    from greenloop.commands.run import _path

    report = api.flaky_tests(_path(args.path))
    if args.json:
        sys.stdout.write(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        return ExitCode.OK
    tests = report["flaky"]
    if not tests:
        print(f"no flaky test found in {report['runs_examined']} recorded run(s)")
    for t in tests:
        how = "; ".join({"rerun": "failed, then passed on rerun",
                            "history": "failed and passed with the same working tree"}[e]
                           for e in t["evidence"])
        print(f"FLAKY {t['test']}  ({how})")
        print(f"    failed in: {', '.join(t['failed_in'][:5])}")
        print(f"    passed in: {', '.join(t['passed_in'][:5])}")
    for note in report["notes"]:
        print(f"  note: {note}")
    return ExitCode.OK
