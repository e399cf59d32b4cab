"""The record of tests started and finished that greenloop's mocha reporter and unittest
runner append as they go (`stream.ndjson`), read when a run is stopped at its deadline.

One JSON object a line: `{"start": name, "file": path, "line": n}` when a test (or a mocha
hook) starts, `{"end": name}` when it finishes. A test started and never finished was
running when the run stopped. A runner that runs one thing at a time (mocha) writes starts
alone, each with `"serial": true` (it ends whatever ran before), and `{"done": true}` when
the run ends: half the writes. A line torn by the kill is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from greenloop.frameworks.common import relativize

__all__ = ["json_records", "running_tests"]


def json_records(path: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a one-object-a-line record, in order; a line torn by a kill (or any
    line that is not an object) is skipped, and a missing record yields nothing."""
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:
        return
    with fh:
        for raw in fh:
            try:
                item = json.loads(raw)
            except ValueError:
                continue
            if isinstance(item, dict):
                yield item


def running_tests(path: str, root: str | None = None) -> list[tuple[str, str | None, int | None]]:
    """(name, file, line) of each test started and not finished; empty without a record."""
    open_: dict[str, tuple[str | None, int | None]] = {}
    for item in json_records(path):
        if item.get("done") is True:
            open_.clear()
        elif isinstance(item.get("start"), str):
            if item.get("serial") is True:
                open_.clear()
            file = item.get("file") if isinstance(item.get("file"), str) else None
            line = item.get("line") if isinstance(item.get("line"), int) else None
            open_[item["start"]] = (relativize(file, root) if file else None, line)
        elif isinstance(item.get("end"), str):
            open_.pop(item["end"], None)
    return [(name, file, line) for name, (file, line) in open_.items()]
