"""What every part of a hint reads: the row of the hint table, the failure's fields a row
reads, the hint languages, and the bounds on the text a hint quotes.

A row (`Rule`) is plain data: the fields of the failure it reads, the regular expressions that
must all match there, an optional HTTP status condition on (expected, got), and a message
template in English and Chinese kept side by side, so a reader sees both sentences of one
cause together (tests/test_hints.py checks they use the same placeholders).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from greenloop.errors import UsageError
from greenloop.model import Failure

__all__ = [
    "ALL_FIELDS",
    "LANGUAGES",
    "MAX_MESSAGE",
    "MESSAGE",
    "MESSAGE_AND_STACK",
    "Field",
    "Rule",
    "check_language",
    "fields_text",
    "quote",
    "short",
]

Field = Literal["message", "stack", "expected", "got", "kind"]
LANGUAGES: tuple[str, ...] = ("en", "zh")
MAX_VALUE = 60  # characters of an expected/got value quoted inside a hint
MAX_MESSAGE = 8000  # characters of a message the rules look at (a long diff ends well before)


@dataclass(frozen=True)
class Rule:
    """One row of the hint table (plain data)."""

    id: str
    fields: tuple[Field, ...]
    patterns: tuple[str, ...]  # all must match the joined fields (re.IGNORECASE | re.DOTALL)
    en: str
    zh: str
    # (expected, got) HTTP status condition: an exact code ("401"), a class ("4xx") or "*".
    status: tuple[str, str] | None = None
    # only for a test whose stack reaches the user's code outside the test file (else skipped)
    needs_code_frame: bool = False
    # lowercase words one of which the text must hold: a substring test that spares the
    # case-insensitive patterns (the slowest part of a hint) on the many failures they cannot match
    words: tuple[str, ...] = ()


MESSAGE_AND_STACK: tuple[Field, ...] = ("message", "stack")
MESSAGE: tuple[Field, ...] = ("message",)
ALL_FIELDS: tuple[Field, ...] = ("message", "stack", "expected", "got")


def check_language(language: str) -> None:
    """Refuse a hint language the table has no sentences for (a usage error naming the choices)."""
    if language not in LANGUAGES:
        raise UsageError(f"hint_language must be one of {', '.join(LANGUAGES)}, not {language!r}")


def fields_text(failure: Failure, fields: Iterable[Field]) -> str:
    """The named fields of `failure` joined by newlines, each cut to MAX_MESSAGE characters."""
    return "\n".join((getattr(failure, f) or "")[:MAX_MESSAGE] for f in fields)


def short(value: str | None) -> str:
    """A value as a hint quotes it: whitespace folded, cut to MAX_VALUE characters."""
    text = " ".join((value or "")[: MAX_VALUE * 4].split())
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def quote(code: str | None, limit: int = 70) -> str:
    """` (`a source line`)`, shortened, or empty without one."""
    if not code:
        return ""
    text = code if len(code) <= limit else code[: limit - 1] + "…"
    return f" (`{text}`)"
