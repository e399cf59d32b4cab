"""Health checks: poll a started unit's health path until it answers 2xx, exits or times out."""

from __future__ import annotations

import http.client
import queue
import threading
from collections.abc import Callable
from typing import Any

from greenloop.integration.ports import HOST
from greenloop.integration.process_log import ProcessLog
from greenloop.integration.unit_process import UnitProcess

__all__ = ["HEALTH_INTERVAL_S", "HEALTH_TIMEOUT_S", "REFUSED_INTERVAL_S", "health_status", "watch_health"]

HEALTH_TIMEOUT_S = 30.0
HEALTH_INTERVAL_S = 0.2  # between health requests once the port accepts connections
REFUSED_INTERVAL_S = 0.02  # while the port refuses connections (a refused connect costs the unit nothing)


def health_status(up: UnitProcess, timeout: float) -> int | None:
    """The health status code, None when the port refuses connections, -1 when no answer came."""
    conn = http.client.HTTPConnection(HOST, up.port, timeout=max(0.05, timeout))
    try:
        conn.request("GET", up.unit.health, headers={"User-Agent": "greenloop-health"})
        return conn.getresponse().status
    except (ConnectionRefusedError, ConnectionResetError):
        return None
    except (OSError, http.client.HTTPException):
        return -1
    finally:
        conn.close()


def watch_health(
    up: UnitProcess,
    *,
    log: ProcessLog,
    clock: Callable[[], float],
    timeout_s: float,
    interval_s: float,
    abort: threading.Event,
    out: queue.Queue[Any],
) -> None:
    """Poll `up` until it answers 2xx, exits, times out or `abort` is set; put one
    `(unit id, "healthy" | "exited" | "health_timeout" | "aborted", detail)` event on `out`.

    Every change of the answer is noted in process.log."""
    start = clock()
    last_status: int | str | None = "none"
    while True:
        code = up.exit_code()
        if code is not None:
            out.put((up.unit.id, "exited", code))
            return
        if abort.is_set():
            out.put((up.unit.id, "aborted", None))
            return
        remaining = start + timeout_s - clock()
        if remaining <= 0:
            out.put((up.unit.id, "health_timeout", last_status))
            return
        status = health_status(up, min(remaining, 2.0))
        if status != last_status:
            shown = (
                "connection refused" if status is None else ("no answer" if status == -1 else str(status))
            )
            log.note(f"health {up.unit.id} GET {up.url}{up.unit.health} -> {shown}")
            last_status = status
        if status is not None and 200 <= status < 300:
            out.put((up.unit.id, "healthy", status))
            return
        wait = REFUSED_INTERVAL_S if status is None else interval_s
        if abort.wait(wait):
            continue
