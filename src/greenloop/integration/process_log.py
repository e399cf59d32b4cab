"""process.log: every unit's output lines, prefixed with time, unit and port, capped in size."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from pathlib import Path

from greenloop.closure.transitions import iso

__all__ = ["LOG_CAP_BYTES", "MAX_LINE", "ProcessLog"]

LOG_CAP_BYTES = 10 * 1024 * 1024
MAX_LINE = 16 * 1024


class ProcessLog:
    """process.log: prefixed lines from every unit, capped at `cap_bytes`, keeping start and end."""

    def __init__(
        self, path: Path, *, cap_bytes: int = LOG_CAP_BYTES, wall: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.wall = wall
        self._lock = threading.Lock()
        self._fh = open(path, "ab")  # noqa: SIM115 - closed by close()
        self._head_left = cap_bytes // 2
        self._tail_cap = cap_bytes - cap_bytes // 2 - 256  # room for the omission marker
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_bytes = 0
        self._dropped_bytes = 0
        self._dropped_lines = 0
        self._closed = False

    def write(self, label: str, text: str) -> None:
        """Add one line, `<time> <label> <text>`; past the cap only the newest lines are kept."""
        if len(text) > MAX_LINE:
            text = text[:MAX_LINE] + f" …[line cut, {len(text) - MAX_LINE} more chars]"
        line = f"{iso(self.wall())} {label} {text}\n".encode("utf-8", "replace")
        with self._lock:
            if self._closed:
                return
            if self._head_left >= len(line) and not self._tail:
                self._fh.write(line)
                self._head_left -= len(line)
                return
            self._head_left = 0
            self._tail.append(line)
            self._tail_bytes += len(line)
            while self._tail_bytes > self._tail_cap and self._tail:
                gone = self._tail.popleft()
                self._tail_bytes -= len(gone)
                self._dropped_bytes += len(gone)
                self._dropped_lines += 1

    def note(self, text: str) -> None:
        """A line from greenloop itself (starts, health, teardown); flushed at once."""
        self.write("[greenloop]", text)
        self.flush()

    def flush(self) -> None:
        """Make what was written so far visible to someone tailing the file."""
        with self._lock:
            if not self._closed:
                self._fh.flush()

    def close(self) -> None:
        """Write the kept end of the log (after a note of what was left out) and close the file."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._dropped_lines:
                self._fh.write(
                    f"… {self._dropped_lines} lines ({self._dropped_bytes} bytes) omitted: process.log keeps "
                    "its start and its end …\n".encode()
                )
            for line in self._tail:
                self._fh.write(line)
            self._fh.close()

