"""`greenloop parse --framework F [FILE|-] [--json]`: parse captured runner output.

Exit codes: 0 the output shows a green run, 1 it shows failing tests,
2 bad input (unknown framework, unreadable file; nothing parsed), 3 nothing recognisable
or no tests ran. Paths under the current folder are shown relative to it.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys

from greenloop.errors import ExitCode, UsageError
from greenloop.frameworks import MODULES, parse_text
from greenloop.model import ParseResult

__all__ = ["parse", "render_text"]

_SHOW_FAILURES = 20


def render_text(framework: str, res: ParseResult) -> str:
    """The human summary of a parse: counts, then each failure with its place and message."""
    s = res.summary
    out = [
        f"{framework}: {s.total} tests, {s.passed} passed, {s.failed} failed, {s.skipped} skipped"
        + (f" in {res.duration_ms} ms" if res.duration_ms is not None else "")
    ]
    if not res.recognized:
        out.append("(the runner's closing summary was not found: counts are what was seen)")
    if res.load_error:
        out.append(f"could not load: {res.load_error}")
    for f in res.failures[:_SHOW_FAILURES]:
        where = f"{f.file}:{f.line}" if f.file and f.line else (f.file or "")
        label = {"load": "LOAD ", "hook": "HOOK ", "timeout": "TIMED OUT ", "cancelled": "CANCELLED ",
                 "test": ""}.get(f.kind, "")
        out.append(f"  ✗ {label}{f.test}" + (f"  ({where})" if where else ""))
        first = f.message.splitlines()[0] if f.message else ""
        if first:
            out.append(f"      {first[:200]}")
        if f.expected is not None or f.got is not None:
            exp = (f.expected or "").replace("\n", " ")[:120]
            got = (f.got or "").replace("\n", " ")[:120]
            out.append(f"      expected {exp}  got {got}")
    if len(res.failures) > _SHOW_FAILURES:
        out.append(f"  … and {len(res.failures) - _SHOW_FAILURES} more (use --json for all)")
    out.extend(f"note: {n}" for n in res.notes)
    return "\n".join(out)


def parse(args: argparse.Namespace) -> int:
    """`greenloop parse`: turn a runner's saved output into a structured result without running it."""
    framework = str(args.framework)
    if framework not in MODULES:
        raise UsageError(
            f"--framework {framework!r} is not known; use one of: {', '.join(MODULES)}"
        )
    path = str(args.file or "-")
    if path == "-":
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="") \
            if hasattr(sys.stdin, "buffer") else sys.stdin
        res = parse_text(framework, stdin, root=os.getcwd())
    else:
        try:
            fh = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115
        except FileNotFoundError:
            raise UsageError(f"FILE {path!r} does not exist; pass a file with captured output or - "
                             "for stdin") from None
        except IsADirectoryError:
            raise UsageError(f"FILE {path!r} is a folder; pass a file with captured output") from None
        except OSError as exc:
            raise UsageError(
                f"FILE {path!r} cannot be read ({exc.strerror}); check its permissions"
            ) from None
        with fh:
            res = parse_text(framework, fh, root=os.getcwd())
    text = json.dumps(res.to_json(), ensure_ascii=False, indent=2) if getattr(args, "json", False) \
        else render_text(framework, res)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `greenloop parse … | head`: the reader left; that is not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if res.summary.failed > 0:
        return ExitCode.FAILED
    if not res.recognized or res.summary.total == 0:
        return ExitCode.BROKEN
    return ExitCode.OK
