"""The one user-facing error type and the exit codes. Messages name the field, file or
argument and state the fix."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from greenloop.exit_codes import ExitCode

__all__ = ["ConfigError", "ExitCode", "GreenloopError", "SpecError", "UsageError"]


class GreenloopError(Exception):
    """An error a person or a model can act on. `exit_code` is an `ExitCode` (2 = bad input)."""

    exit_code: int = 2  # ExitCode.USAGE

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


def __getattr__(name: str) -> object:
    # ExitCode lives in greenloop.exit_codes (enum is not imported on the hook path, which
    # raises these errors); `from greenloop.errors import ExitCode` loads it.
    if name == "ExitCode":
        from greenloop.exit_codes import ExitCode

        return ExitCode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
