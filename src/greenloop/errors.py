"""The one user-facing error type and the exit codes. Messages name the field, file or
argument and state the fix."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ConfigError", "ExitCode", "GreenloopError", "SpecError", "UsageError"]


class ExitCode(IntEnum):
    """What every greenloop command's exit status means (README, "Exit codes")."""

    OK = 0  # green, satisfied, nothing to fix
    FAILED = 1  # red: tests or cases failed, a check found something to fix
    USAGE = 2  # bad input: an argument, config or spec field is wrong; nothing was started
    BROKEN = 3  # the run could not give a verdict: crash, timeout, no tests, sandbox refused
    INTERRUPTED = 130  # Ctrl-C or a cancel, after a full teardown (128 + SIGINT)

    @classmethod
    def for_outcome(cls, outcome: str) -> ExitCode:
        """The exit status of a run's outcome: green 0, red 1, anything else (broken) 3."""
        return {"green": cls.OK, "red": cls.FAILED}.get(outcome, cls.BROKEN)


class GreenloopError(Exception):
    """An error a person or a model can act on. `exit_code` is an `ExitCode` (2 = bad input)."""

    exit_code: int = ExitCode.USAGE

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


class UsageError(GreenloopError):
    """A CLI argument or tool argument is wrong."""


class ConfigError(GreenloopError):
    """A config field is wrong; the message names every violating field."""


class SpecError(GreenloopError):
    """An integration spec, units.json or contract is wrong; names case, step and field."""
