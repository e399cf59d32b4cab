"""A bug record: one line of `bugs.ndjson`, its statuses and moves, and the checks on its values.

Every line of the log is a whole `Bug`; the current state of a bug is its last line. This
module knows the record's fields, the state machine (open -> fixing -> fixed -> verified,
plus open -> fixed), the results the log's calls return, and how a value read from a line
or given by a caller is checked (a bad one is named with the values allowed).
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, TypeVar, get_args

from greenloop.errors import GreenloopError, UsageError

__all__ = [
    "ACTIVE",
    "ALLOWED_MOVES",
    "DETAIL_LIMIT",
    "FLAKY_CATEGORY",
    "INFRA_TEST_NAME",
    "INTEGRATION_UNIT",
    "SEVERITIES",
    "SOURCES",
    "STATUSES",
    "TITLE_LIMIT",
    "UNRECOGNISED_TEST_NAME",
    "Bug",
    "BugHistory",
    "BugNotFound",
    "Fold",
    "HistoryEntry",
    "Opened",
    "Severity",
    "Source",
    "Status",
    "TransitionRefused",
    "Transitioned",
    "bounded",
    "bug_of_whole_record",
    "checked_choice",
    "dedup_key",
    "filter_choices",
    "guess_severity",
    "iso_time",
]

Status = Literal["open", "fixing", "fixed", "verified"]
Source = Literal["unit_test", "unit_test_infra", "integration_test"]
Severity = Literal["low", "medium", "high", "critical"]
STATUSES: tuple[Status, ...] = get_args(Status)
SOURCES: tuple[Source, ...] = get_args(Source)
SEVERITIES: tuple[Severity, ...] = get_args(Severity)

ALLOWED_MOVES: Mapping[str, tuple[Status, ...]] = MappingProxyType({
    "open": ("fixing", "fixed"),
    "fixing": ("fixed",),
    "fixed": ("verified",),
    "verified": (),
})
ACTIVE: tuple[Status, ...] = ("open", "fixing")  # the statuses dedup reuses

DETAIL_LIMIT = 4000  # characters of stack/detail kept per line: the log stays fast to fold
TITLE_LIMIT = 200
INFRA_TEST_NAME = "(test run broken)"  # the test_name of a unit's infrastructure bug
UNRECOGNISED_TEST_NAME = "(failing tests not recognised)"
FLAKY_CATEGORY = "flaky"  # the category of a test's bug when it failed, then passed on rerun
INTEGRATION_UNIT = "integration"  # the unit_id of integration bugs; the units are in affected_units

ChoiceT = TypeVar("ChoiceT", bound=str)


class BugNotFound(GreenloopError):
    """No bug with that id in the log."""


class TransitionRefused(GreenloopError):
    """An illegal move; the message lists the moves allowed from the bug's status."""


# --------------------------------------------------------------------------- reading one field


def _text_field(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, (str, int, float)) or isinstance(v, bool):
        raise ValueError(f"{key} must be a string, not {type(v).__name__}")
    return str(v)


def _optional_text_field(d: Mapping[str, Any], key: str) -> str | None:
    return None if d.get(key) is None else _text_field(d, key)


def _text_list_field(d: Mapping[str, Any], key: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
    v = d.get(key)
    if v is None:
        return default
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{key} must be a list of strings")
    return tuple(v)


def _one_of_field(
    d: Mapping[str, Any], key: str, allowed: tuple[ChoiceT, ...], default: ChoiceT | None
) -> ChoiceT:
    v = d.get(key, default)
    for choice in allowed:
        if v == choice:
            return choice
    raise ValueError(f"{key} {v!r} is not one of {', '.join(allowed)}")


def dedup_key(unit_id: str, test_name: str) -> str:
    """The key under which a unit's test has at most one open or fixing bug."""
    return f"{unit_id}:{test_name}"


# --------------------------------------------------------------------------- a whole line, in bulk


_RECORD_KEYS = ("id", "source", "unit_id", "run_id", "test_name", "dedup_key", "category", "severity",
                "title", "detail", "affected_units", "status", "fix_refs", "created_at", "updated_at", "by",
                "closed_by", "evidence")
# Lines written before a bug recorded what closed it lack the last two keys.
_CLOSING_KEYS = ("closed_by", "evidence")
_FIELD_VALUES = operator.itemgetter(*_RECORD_KEYS)
_NULLABLE = (str, type(None))
# The value types of a whole record, in _RECORD_KEYS order: run_id, by, closed_by and evidence
# may be null, the lists are lists (of strings: checked apart), everything else a string.
_RECORD_TYPES: frozenset[tuple[type, ...]] = frozenset(
    (str, str, str, run_id, str, str, str, str, str, str, list, str, list, str, str, by, closed, why)
    for run_id in _NULLABLE for by in _NULLABLE for closed in _NULLABLE for why in _NULLABLE
)
_STATUS_SET, _SOURCE_SET, _SEVERITY_SET = frozenset(STATUSES), frozenset(SOURCES), frozenset(SEVERITIES)


def bug_of_whole_record(d: dict[str, Any]) -> Bug | None:
    """A record with every field, each of the right type and value, as a Bug built on `d`
    itself (which it takes over); None for anything else (the careful reader handles it).

    This is the fold's hot path: tens of thousands of calls on a big log, so the checks are
    done in bulk and the frozen __init__ is skipped."""
    if len(d) == len(_RECORD_KEYS) - len(_CLOSING_KEYS):
        d["closed_by"] = d["evidence"] = None  # a line from before these keys existed
    elif len(d) != len(_RECORD_KEYS):
        return None
    try:
        v = _FIELD_VALUES(d)
    except KeyError:
        return None
    if (
        tuple(map(type, v)) not in _RECORD_TYPES
        or not v[0]
        or v[1] not in _SOURCE_SET
        or v[7] not in _SEVERITY_SET
        or v[11] not in _STATUS_SET
    ):
        return None
    try:
        "".join(v[10])  # a TypeError unless every item is a string
        "".join(v[12])
    except TypeError:
        return None
    d["affected_units"] = tuple(v[10])
    d["fix_refs"] = tuple(v[12])
    bug: Bug = object.__new__(Bug)
    object.__setattr__(bug, "__dict__", d)
    return bug


# --------------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Bug:
    """One line of the log: a bug's whole state at one moment."""

    id: str
    source: Source
    unit_id: str
    test_name: str
    title: str
    status: Status = "open"
    severity: Severity = "medium"
    category: str = "unknown"
    detail: str = ""
    run_id: str | None = None
    affected_units: tuple[str, ...] = ()
    fix_refs: tuple[str, ...] = ()
    created_at: str = ""
    updated_at: str = ""
    by: str | None = None
    dedup_key: str = ""
    # The run that moved the bug to fixed or verified, and what it saw: "test_passed" (the
    # run executed the bug's own test and it passed), "suite_passed" (a whole-suite green run
    # whose output names no test), "case_passed" (an integration run passed the bug's case),
    # "integration_passed" (a green integration run covering a unit bug's unit), or "by hand".
    closed_by: str | None = None
    evidence: str | None = None

    def __post_init__(self) -> None:
        if not self.dedup_key:
            object.__setattr__(self, "dedup_key", dedup_key(self.unit_id, self.test_name))

    def to_json(self) -> dict[str, Any]:
        """The record as the log writes it, in the canonical key order."""
        # This key order is the log's canonical form: `id` first, so the fold reads a line's id
        # from its prefix without parsing the line. Never reorder (old logs stay readable
        # either way, but lines in another order are read the slow way).
        return {
            "id": self.id,
            "source": self.source,
            "unit_id": self.unit_id,
            "run_id": self.run_id,
            "test_name": self.test_name,
            "dedup_key": self.dedup_key,
            "category": self.category,
            "severity": self.severity,
            "title": self.title,
            "detail": self.detail,
            "affected_units": list(self.affected_units),
            "status": self.status,
            "fix_refs": list(self.fix_refs),
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "by": self.by,
            "closed_by": self.closed_by,
            "evidence": self.evidence,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Bug:
        """Read a record back; missing optional keys get defaults. Raises ValueError naming the bad key."""
        if type(d) is dict:  # a line as greenloop writes it is checked in bulk
            bug = bug_of_whole_record(dict(d))
            if bug is not None:
                return bug
        return cls._read_field_by_field(d)

    @classmethod
    def _read_field_by_field(cls, d: Mapping[str, Any]) -> Bug:
        """The careful reader: any key may be missing; every value is checked and named."""
        if not isinstance(d, Mapping):
            raise ValueError("the line is not a JSON object")
        bug_id = d.get("id")
        if not isinstance(bug_id, str) or not bug_id:
            raise ValueError("id is missing or not a string")
        unit_id = _text_field(d, "unit_id")
        test_name = _text_field(d, "test_name")
        created = _text_field(d, "created_at")
        return cls(
            id=bug_id,
            source=_one_of_field(d, "source", SOURCES, "unit_test"),
            unit_id=unit_id,
            test_name=test_name,
            title=_text_field(d, "title", test_name),
            status=_one_of_field(d, "status", STATUSES, None),
            severity=_one_of_field(d, "severity", SEVERITIES, "medium"),
            category=_text_field(d, "category", "unknown"),
            detail=_text_field(d, "detail"),
            run_id=_optional_text_field(d, "run_id"),
            affected_units=_text_list_field(d, "affected_units", (unit_id,) if unit_id else ()),
            fix_refs=_text_list_field(d, "fix_refs"),
            created_at=created,
            updated_at=_text_field(d, "updated_at", created),
            by=_optional_text_field(d, "by"),
            dedup_key=_text_field(d, "dedup_key", dedup_key(unit_id, test_name)),
            closed_by=_optional_text_field(d, "closed_by"),
            evidence=_optional_text_field(d, "evidence"),
        )

    def line(self) -> bytes:
        """The record as one line of the log, newline included."""
        return (json.dumps(self.to_json(), ensure_ascii=False) + "\n").encode("utf-8")


# --------------------------------------------------------------------------- what the log's calls return


@dataclass(frozen=True)
class Opened:
    """What `open` did: the bug (new, or the open one it reused) and whether it is new."""

    bug: Bug
    created: bool
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The outcome as JSON (the CLI's and the MCP tool's answer)."""
        return {"bug": self.bug.to_json(), "created": self.created, "log": self.log,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Transitioned:
    """What `transition` did: the bug after the move and the status it left."""

    bug: Bug
    from_status: Status
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The move as JSON (the CLI's and the MCP tool's answer)."""
        return {"bug": self.bug.to_json(), "from": self.from_status, "to": self.bug.status,
                "log": self.log, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Fold:
    """The log folded to current states (in order of first appearance), with its warnings."""

    bugs: tuple[Bug, ...]
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The bugs as JSON, with their count."""
        return {"bugs": [b.to_json() for b in self.bugs], "count": len(self.bugs), "log": self.log,
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class HistoryEntry:
    """One line of a bug's history: where it is in the log and the state it recorded."""

    line: int  # 1-based line number in the log
    bug: Bug

    def to_json(self) -> dict[str, Any]:
        """The record with its line number."""
        return {"line": self.line, **self.bug.to_json()}


@dataclass(frozen=True)
class BugHistory:
    """One bug: its current state and every line it has had, oldest first."""

    bug: Bug
    history: tuple[HistoryEntry, ...]
    log: str
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The bug and its history as JSON."""
        return {"bug": self.bug.to_json(), "history": [h.to_json() for h in self.history],
                "log": self.log, "warnings": list(self.warnings)}


# --------------------------------------------------------------------------- values given by callers


def iso_time(t: float) -> str:
    """Seconds since the epoch as the log's UTC timestamp."""
    from greenloop.timefmt import iso_seconds

    return iso_seconds(t)


def bounded(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


_FIVE_XX = re.compile(r"(?<![0-9])5[0-9]{2}(?![0-9])")
_SECURITY = re.compile(r"secur|auth(?!or(?!i[sz]))", re.IGNORECASE)  # not "author", yes "authorize"


def guess_severity(test_name: str, got: object = None) -> Severity:
    """The seed's guess: a test about security or auth fails critically; a 5xx got is high.

    The seed checks the 5xx first, which would rate an auth test answering 500 as merely
    high; greenloop keeps the more severe of the two guesses. `auth` matches auth,
    authentication, OAuth, unauthorized, but not author.
    """
    if _SECURITY.search(test_name):
        return "critical"
    if got is not None and _FIVE_XX.search(str(got)):
        return "high"
    return "medium"


def checked_choice(value: str, name: str, allowed: tuple[ChoiceT, ...], flag: str) -> ChoiceT:
    """`value` as one of `allowed`; a UsageError naming `flag` and the choices otherwise."""
    for choice in allowed:
        if value == choice:
            return choice
    raise UsageError(f"{flag} {value!r} is not a {name}; use one of: {', '.join(allowed)}")


def filter_choices(value: str | Sequence[str] | None, name: str, allowed: tuple[str, ...],
                   flag: str) -> frozenset[str] | None:
    """A filter value: one name, a comma-separated list, or a sequence of names."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    wanted = frozenset(i.strip() for i in items if i.strip())
    for w in sorted(wanted):
        checked_choice(w, name, allowed, flag)
    return wanted or None
