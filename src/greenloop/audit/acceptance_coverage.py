"""The audit's acceptance_coverage check: every acceptance criterion of spec.json has a test
named for it (or carrying its id), and no test claims several criteria.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from greenloop.audit.check import Check
from greenloop.audit.sources import TestCase, Unit, load_json

__all__ = [
    "Criterion",
    "check",
]


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion of spec.json: its id (if it has one), its text, its place."""

    id: str | None
    text: str
    index: int

    @property
    def label(self) -> str:
        """How findings name the criterion."""
        return f"{self.id}: {self.text}" if self.id else self.text


def _normalised(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z\u4e00-\u9fff]+", " ", text.lower()).split())


def _criteria(spec: Any) -> tuple[list[Criterion], list[str]]:
    problems: list[str] = []
    if not isinstance(spec, dict) or not isinstance(spec.get("acceptance_criteria"), list):
        return [], ["spec.json has no acceptance_criteria list"]
    out: list[Criterion] = []
    for i, item in enumerate(spec["acceptance_criteria"], start=1):
        if isinstance(item, str) and item.strip():
            out.append(Criterion(None, item.strip(), i))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            cid = item.get("id")
            out.append(Criterion(str(cid) if cid else None, item["text"].strip(), i))
        else:
            problems.append(
                f"spec.json acceptance_criteria[{i - 1}] must be a string or {{id, text}}, not {item!r}"
            )
    return out, problems


def check(unit: Unit) -> Check:
    """The acceptance_coverage verdict: the share of criteria covered, the uncovered ones and the fix."""
    spec, problem = load_json(unit.root / "spec.json")
    criteria, problems = _criteria(spec) if problem is None else ([], [problem])
    if not criteria:
        return Check(
            "acceptance_coverage",
            False,
            0.0,
            (*problems, "fix: give the unit a spec.json with acceptance_criteria (strings or {id, text})"),
        )
    claims: dict[str, list[Criterion]] = {}
    covered: dict[int, list[TestCase]] = {c.index: [] for c in criteria}
    texts = [_normalised(c.text) for c in criteria]
    for test in unit.tests:
        name = _normalised(test.name)
        # A test refers to a criterion by its id, or by naming its (normalised) text.
        found: list[tuple[Criterion, str, bool]] = []
        for c, text in zip(criteria, texts, strict=True):
            by_id = _refers_by_id(test, c)
            if by_id or (text and text in name):
                found.append((c, text, by_id))
        # a criterion whose text is contained in another hit's text is the less specific one
        hits = [
            c
            for c, text, by_id in found
            if by_id or not any(o is not c and text in o_text for o, o_text, _ in found)
        ]
        for c in hits:
            covered[c.index].append(test)
        if len(hits) > 1:
            claims[test.where] = hits
    uncovered = [c for c in criteria if not covered[c.index]]
    value = round((len(criteria) - len(uncovered)) / len(criteria), 4)
    details = [*problems, f"{len(criteria) - len(uncovered)} of {len(criteria)} criteria covered"]
    details += [f"uncovered: {c.label}" for c in uncovered]
    for where, hits in claims.items():
        details.append(f"{where} claims {len(hits)} criteria ({'; '.join(c.label for c in hits)})")
    ok = not uncovered and not claims and not problems
    if uncovered:
        details.append(
            "fix: write one it()/test per uncovered criterion, named with its text or carrying its id"
        )
    if claims:
        details.append("fix: split tests that claim several criteria into one test per criterion")
    return Check("acceptance_coverage", ok, value, tuple(details))


def _refers_by_id(test: TestCase, crit: Criterion) -> bool:
    return bool(crit.id) and bool(re.search(rf"(?<![\w-]){re.escape(crit.id or '')}(?![\w])", test.raw, re.I))
