"""Collecting every violation of a spec file into one SpecError, and reading its JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from greenloop.errors import SpecError

__all__ = ["Problems", "quoted", "read_json"]


class Problems:
    """Collects violations so that one error can name all of them."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, message: str) -> None:
        """Note one violation: where it is (file, unit, case, step) and what to fix."""
        self.items.append(f"{where}: {message}")

    def raise_if_any(self, what: str) -> None:
        """Raise one SpecError naming every violation noted so far in the file `what`."""
        if not self.items:
            return
        if len(self.items) == 1:
            raise SpecError(f"{what} is invalid: {self.items[0]}")
        lines = "\n".join(f"  - {p}" for p in self.items)
        raise SpecError(f"{what} is invalid ({len(self.items)} problems):\n{lines}")


def read_json(path: Path, rel: str, what: str) -> Any:
    """The JSON of a spec file, or a SpecError naming `rel` (`what` says what belongs there)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{rel} not found in {path.parent}: {what}") from None
    except OSError as exc:
        raise SpecError(f"cannot read {rel}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"{rel} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); fix the syntax"
        ) from None


def quoted(s: object) -> str:
    """A value as JSON, the way messages show what a file holds."""
    return json.dumps(s, ensure_ascii=False)

