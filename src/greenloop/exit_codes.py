"""The exit codes every greenloop command uses (README, "Exit codes"); importable as
`greenloop.errors.ExitCode`. Its own module so that the hook path, which imports
greenloop.errors, does not import `enum`."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode"]


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
