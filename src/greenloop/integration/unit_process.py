"""One running unit of an integration run (its port, process and last output lines) and why
the units could not all start."""

from __future__ import annotations

import collections
import contextlib
import signal
from dataclasses import dataclass, field
from typing import Any

from greenloop.integration.ports import HOST
from greenloop.integration.spec.records import Unit
from greenloop.system import proc

__all__ = ["EXCERPT_LINES", "StartFailure", "UnitProcess", "describe_exit", "unit_exit"]

EXCERPT_LINES = 20


@dataclass
class UnitProcess:
    """One unit of the run with a process: its port, its child once started, its last lines."""

    unit: Unit
    port: int
    child: proc.Child | None = None
    attempts: int = 0
    stderr_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=EXCERPT_LINES)
    )
    stdout_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=EXCERPT_LINES)
    )
    sandboxed: bool = False  # started inside bwrap: its exit code 128+N means killed by signal N

    @property
    def url(self) -> str:
        """Where the unit listens: `http://127.0.0.1:<port>`."""
        return f"http://{HOST}:{self.port}"

    def exit_code(self) -> int | None:
        """The exit code once the unit has stopped (-N when killed by signal N), else None."""
        return None if self.child is None else unit_exit(self.child.poll(), sandboxed=self.sandboxed)

    def excerpt(self) -> str:
        """The unit's last stderr lines (its last stdout lines when stderr was empty)."""
        lines = list(self.stderr_tail) or list(self.stdout_tail)
        return "\n".join(lines)


@dataclass(frozen=True)
class StartFailure:
    """Why the units could not all become healthy."""

    unit: str
    reason: str  # exited | health_timeout | port_unavailable | spawn_error | run_timeout | cancelled
    message: str
    exit_code: int | None = None
    stderr_excerpt: str = ""

    @property
    def infra(self) -> bool:
        """Whether the machine, not the unit's code, is the likely cause (ports, time)."""
        return self.reason in ("health_timeout", "port_unavailable", "run_timeout")

    def to_json(self) -> dict[str, Any]:
        """The failure as result.json writes it."""
        return {
            "unit": self.unit,
            "reason": self.reason,
            "message": self.message,
            "exit_code": self.exit_code,
            "stderr_excerpt": self.stderr_excerpt,
        }


def unit_exit(code: int | None, *, sandboxed: bool) -> int | None:
    """A unit's exit code as if it had run outside the sandbox: bwrap (the unit's pid 1 inside
    its namespace) reports a command killed by signal N as exit code 128+N; greenloop reports
    it as -N, as Popen does for an unsandboxed unit, so the reason reads "killed by SIGKILL"
    in every mode (the same mapping as `enforcers.signal_exit` for test runs)."""
    if sandboxed and code is not None and 128 < code < 128 + 65:
        return -(code - 128)
    return code


def describe_exit(code: int) -> str:
    """An exit code in words: `exited with code 1`, `killed by SIGKILL`."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exited with code {code}"
