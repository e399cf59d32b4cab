"""Each unit's raw stdout and stderr files, moved line by line into process.log.

The units write to raw files in the run's scratch folder; one thread reads what is new every
50 ms, prefixes each line with the unit and its port, and keeps the unit's last lines for the
excerpt a failure shows.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path

from greenloop.integration.process_log import MAX_LINE, ProcessLog
from greenloop.integration.unit_process import UnitProcess

__all__ = ["RAW_ROLL_BYTES", "OutputPump"]

RAW_ROLL_BYTES = 32 * 1024 * 1024  # a unit's raw output file is emptied past this, once read
_READ_CHUNK = 4 * 1024 * 1024
_STOP_WAIT_S = 10.0  # for the thread's last pass at teardown (a pass reads at most a few MB)


class OutputPump:
    """Moves new output of every unit in `units` into process.log, from a thread of its own."""

    def __init__(
        self,
        log: ProcessLog,
        scratch: Path,
        units: Mapping[str, UnitProcess],
        *,
        raw_roll_bytes: int = RAW_ROLL_BYTES,
    ) -> None:
        self.log = log
        self.scratch = scratch
        self.units = units  # the supervisor's units, also those added after the start
        self.raw_roll_bytes = raw_roll_bytes
        self._stop = threading.Event()
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="greenloop-process-log", daemon=True)

    def raw_path(self, unit_id: str, stream: str) -> str:
        """The raw file a unit's stream (`out` or `err`) is written to."""
        return str(self.scratch / f"{unit_id}.{stream}")

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    @property
    def running(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop the thread and wait for it (its last pass done), at most _STOP_WAIT_S."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(_STOP_WAIT_S)

    def _loop(self) -> None:
        # Orphans adopted by the subreaper stay our children until they die, so one scan at
        # teardown finds them; scanning /proc here would cost a few ms every 50 ms.
        while not self._stop.wait(0.05):
            self.pump()

    def pump(self) -> None:
        """Move new output lines of every unit into process.log (safe from any thread)."""
        with self._lock:
            for up in list(self.units.values()):
                for stream in ("out", "err"):
                    self._pump_file(up, stream, final=False)
        self.log.flush()

    def pump_final(self, up: UnitProcess) -> None:
        """Move everything `up` wrote, its last unfinished line too (it has exited)."""
        with self._lock:
            for stream in ("out", "err"):
                self._pump_file(up, stream, final=True)

    def _pump_file(self, up: UnitProcess, stream: str, *, final: bool) -> None:
        path = self.raw_path(up.unit.id, stream)
        offset = self._offsets.get(path, 0)
        try:
            with open(path, "rb") as fh:
                fh.seek(offset)
                data = fh.read(_READ_CHUNK)
        except OSError:
            return
        if not data and not (final and self._partial.get(path)):
            return
        self._offsets[path] = offset + len(data)
        if len(data) < _READ_CHUNK and offset + len(data) > self.raw_roll_bytes:
            # A chatty unit must not fill the disk (or a tmpfs /tmp) with output that
            # process.log drops anyway: the unit appends (O_APPEND), so once read to the end the
            # raw file is emptied and its next writes land at offset 0. Lines written in the
            # instant between the read and the truncate are lost, and only from the middle.
            with contextlib.suppress(OSError):
                os.truncate(path, 0)
                self._offsets[path] = 0
        buf = self._partial.get(path, b"") + data
        *lines, rest = buf.split(b"\n")
        if final and rest:
            lines.append(rest)
            rest = b""
        if len(rest) > MAX_LINE:  # a line that never ends is still logged, in pieces
            lines.append(rest)
            rest = b""
        self._partial[path] = rest
        label = f"[{up.unit.id}:{up.port}] {stream}|"
        tail = up.stderr_tail if stream == "err" else up.stdout_tail
        for raw in lines:
            text = raw.decode("utf-8", "replace").rstrip("\r")
            self.log.write(label, text)
            tail.append(text[:500])
