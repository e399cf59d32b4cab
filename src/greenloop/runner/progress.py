"""Live progress of a running suite: finished tests counted as they happen."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from greenloop.model import Progress

__all__ = ["ProgressCallback", "ProgressCounter"]

ProgressCallback = Callable[[Progress], None]


class ProgressCounter:
    """Counts finished tests for live progress, from two sources: the NDJSON lines greenloop's
    reporter for the runner appends per finished test (Plan.progress_file), and the runner's
    text output (frameworks.progress_counts) for runs without such a reporter or when it
    could not load. Once the stream has a line it is the count shown (the text output can
    count a suite as a test). The callback gets one snapshot per poll that moved a count."""

    def __init__(self, framework: str, on_progress: ProgressCallback, started: float) -> None:
        from greenloop.frameworks import progress_counts

        self.framework = framework or "npm-test"
        self.on_progress = on_progress
        self.started = started
        self.text = {"pass": 0, "fail": 0, "skip": 0}
        self.events = {"pass": 0, "fail": 0, "skip": 0}
        self.changed = False
        self.lock = threading.Lock()
        self.count_line = progress_counts

    def snapshot(self) -> Progress:
        """The counts so far: the progress stream's once it has a line, else the text output's."""
        with self.lock:
            text, events = dict(self.text), dict(self.events)
        c = events if any(events.values()) else text
        return Progress(
            passed=c["pass"],
            failed=c["fail"],
            skipped=c["skip"],
            elapsed_ms=int((time.monotonic() - self.started) * 1000),
        )

    def line(self, text: str) -> None:
        """One line of the runner's text output."""
        found = self.count_line(self.framework, text)
        if not found:
            return
        with self.lock:
            for kind, n in found.items():
                if kind in self.text:
                    self.text[kind] += n
            self.changed = True

    def event(self, text: str) -> None:
        """One NDJSON line of the progress stream: {"status": "pass"|"fail"|"skip", "count"?: n}."""
        import json

        try:
            record = json.loads(text)
            kind = record["status"]
            n = int(record.get("count", 1))
        except (ValueError, TypeError, KeyError, AttributeError):
            return  # a torn or foreign line: skipped, never fatal
        with self.lock:
            if kind in self.events and n > 0:
                self.events[kind] += n
                self.changed = True

    def flush(self) -> None:
        """After a poll of the files: report once if any count moved."""
        with self.lock:
            changed, self.changed = self.changed, False
        if changed:
            self.on_progress(self.snapshot())
