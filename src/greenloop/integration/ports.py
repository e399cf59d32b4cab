"""Free loopback ports for the units of one integration run.

Each backend unit gets a port on 127.0.0.1 that is free when chosen, never one already handed
out in this run, and never one of the well-known development ports (RESERVED). The kernel
chooses (bind to port 0), which is both fast and free of collisions with other pickers that do
the same; tests pass `candidates` to force particular ports.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable, Iterable, Iterator

__all__ = ["HOST", "MAX_PORT_TRIES", "RESERVED", "PortPicker", "PortUnavailable", "is_free"]

HOST = "127.0.0.1"
RESERVED = frozenset({3010, 5173, 5432, 6379})
MAX_PORT_TRIES = 3  # a port taken between choice and use is retried this often, then infra_flake


class PortUnavailable(Exception):
    """No usable port after MAX_PORT_TRIES tries (the run is an infra_flake)."""


def is_free(port: int, host: str = HOST) -> bool:
    """Can a listener bind `host:port` right now?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_ports(host: str) -> Iterator[int]:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = int(s.getsockname()[1])
        yield port  # after the close: the probe and the unit must be able to bind it


class PortPicker:
    """Hands out distinct free ports for one run; remembers every port it handed out."""

    def __init__(
        self,
        *,
        candidates: Iterable[int] | None = None,
        reserved: Iterable[int] = RESERVED,
        probe: Callable[[int], bool] = is_free,
        host: str = HOST,
    ) -> None:
        self._candidates = iter(candidates) if candidates is not None else _kernel_ports(host)
        self._reserved = frozenset(reserved)
        self._probe = probe
        self.handed_out: list[int] = []

    def pick(self) -> int:
        """A free port not handed out before in this run. Raises PortUnavailable after the tries."""
        tried: list[int] = []
        scanned = 0
        while len(tried) < MAX_PORT_TRIES:
            port = None
            with contextlib.suppress(StopIteration):
                port = next(self._candidates)
            if port is None:
                break
            scanned += 1
            if port in self._reserved or port in self.handed_out:
                if scanned > 1000:  # a broken candidate source must not spin forever
                    break
                continue
            tried.append(port)
            if self._probe(port):
                self.handed_out.append(port)
                return port
        raise PortUnavailable(
            f"no free port on {HOST} after {len(tried)} tries "
            f"({', '.join(map(str, tried)) or 'none offered'})"
        )

    def still_free(self, port: int) -> bool:
        """Check a handed-out port again right before a unit is started on it."""
        return self._probe(port)
