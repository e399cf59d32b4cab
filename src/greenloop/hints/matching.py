"""Which row of the hint table explains a failure: the first whose status condition, words and
patterns all hold on the fields it reads (the fallback row always does)."""

from __future__ import annotations

import re

from greenloop.hints import rules
from greenloop.hints.frames import Evidence, evidence
from greenloop.hints.rule import Field, Rule, fields_text
from greenloop.hints.status import status_matches, status_pair
from greenloop.model import Failure

__all__ = ["find", "match"]

# Every rule's patterns, compiled on first use (once per process: a run with thousands of
# failures tries them all per failure; a green run never compiles them).
_COMPILED: dict[str, tuple[re.Pattern[str], ...]] = {}


def _patterns(rule: Rule) -> tuple[re.Pattern[str], ...]:
    found = _COMPILED.get(rule.id)
    if found is None:
        found = tuple(re.compile(p, re.IGNORECASE | re.DOTALL) for p in rule.patterns)
        _COMPILED[rule.id] = found
    return found


def find(failure: Failure, ev: Evidence | None = None) -> tuple[Rule, dict[str, str]]:
    """The first row that explains `failure`, with the named groups its patterns captured."""
    pair = status_pair(failure)
    if pair is not None and _from_elsewhere(failure, ev):
        pair = None  # two numbers from 100 to 599 (bytes_to_int's 193 vs 192) are not a response
    texts: dict[tuple[Field, ...], str] = {}
    lowered: dict[tuple[Field, ...], str] = {}
    for rule in rules.RULES:  # (read through the module: a test swaps the table)
        groups: dict[str, str] = {}
        if rule.status is not None:
            if pair is None or not status_matches(rule.status, pair):
                continue
            groups.update(expected=str(pair[0]), got=str(pair[1]))
        # (a setup hook's or a load's own error is said by the hook and load rules below)
        if rule.needs_code_frame and (ev is None or ev.code is None or failure.kind != "test"):
            continue
        if rule.fields not in texts:
            texts[rule.fields] = fields_text(failure, rule.fields)
        text = texts[rule.fields]
        if rule.words:
            if rule.fields not in lowered:
                lowered[rule.fields] = text.lower()
            if not any(w in lowered[rule.fields] for w in rule.words):
                continue
        matched = True
        for pattern in _patterns(rule):
            m = pattern.search(text)
            if m is None:
                matched = False
                break
            groups.update({k: v for k, v in m.groupdict().items() if v is not None})
        if matched:
            return rule, groups
    raise AssertionError("the fallback rule always matches")  # pragma: no cover


_WHERE_CALL = re.compile(r"^\s*\+\s*where \d{3} = (.+)$", re.M)
_HTTP = re.compile(
    r"status|response|\bres\b|http|request|route|\bapi\b|endpoint|handler|supertest|fetch|\b(?:GET|POST|PUT|PATCH|DELETE)\b"
    r"|\b(?:get|post|put|patch|delete)\(",
    re.IGNORECASE,
)


def _from_elsewhere(failure: Failure, ev: Evidence | None) -> bool:
    """Whether the two numbers are shown to come from code that is not about HTTP: pytest's
    `where 193 = bytes_to_int(enc)` or the call the test's line makes, when neither it nor the
    test's name speaks of a status, a response or a request. Without such a sign the pair is
    read as a status (a runner's expected/got of 401 and 500)."""
    calls = [m.group(1) for m in _WHERE_CALL.finditer(failure.message[:2000])]
    if ev is not None and ev.call is not None:
        calls.append(ev.call.text)
    if not calls:
        return False
    return _HTTP.search("\n".join([*calls, failure.test])) is None


def match(failure: Failure) -> str:
    """The id of the rule that explains `failure` ("fallback" when none does)."""
    return find(failure, evidence(failure, None))[0].id
