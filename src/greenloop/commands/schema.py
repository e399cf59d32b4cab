"""`greenloop schema NAME`: print a published JSON Schema."""

from __future__ import annotations

import argparse
import json

from greenloop.errors import ExitCode
from greenloop.schema import load_schema

__all__ = ["schema"]


def schema(args: argparse.Namespace) -> int:
    """Print the schema called `args.name`; an unknown name is a UsageError (exit 2) listing names."""
    print(json.dumps(load_schema(str(args.name)), indent=2, ensure_ascii=False))
    return ExitCode.OK
