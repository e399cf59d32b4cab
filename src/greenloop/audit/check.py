"""One check's verdict, the record every audit check returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Check",
    "nothing_found",
]


@dataclass(frozen=True)
class Check:
    """One check's verdict. `details` say what was found and, when it fails, what to do."""

    name: str
    ok: bool
    value: float | int | str | None
    details: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON."""
        return {"name": self.name, "ok": self.ok, "value": self.value, "details": list(self.details)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Check:
        """Read a verdict back from its JSON."""
        return cls(
            name=str(d["name"]),
            ok=bool(d["ok"]),
            value=d.get("value"),
            details=tuple(str(x) for x in d.get("details") or ()),
        )



def nothing_found(name: str, header: str, found: Sequence[str], fix: str) -> Check:
    """A check that passes when `found` is empty: the header, each finding, then the fix if any."""
    details = [header, *found]
    if found:
        details.append(fix)
    return Check(name, not found, len(found), tuple(details))

