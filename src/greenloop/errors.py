"""The one user-facing error type. Messages name the field, file or argument and state the fix."""

from __future__ import annotations

__all__ = ["ConfigError", "GreenloopError", "SpecError", "UsageError"]


class GreenloopError(Exception):
    """An error a person or a model can act on. `exit_code` follows DESIGN §3 (2 = bad input)."""

    exit_code: int = 2

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
