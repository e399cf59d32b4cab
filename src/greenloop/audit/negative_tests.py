"""The audit's negative_tests check: at least one test provokes a 4xx or asserts an error."""

from __future__ import annotations

import re

from greenloop.audit.check import Check
from greenloop.audit.contract_coverage import asserted_statuses
from greenloop.audit.sources import Unit

__all__ = [
    "check",
]

_ERROR_ASSERT = re.compile(
    r"\.toThrow|\.rejects\b|assert\.(?:throws|rejects)|\.toBeInstanceOf\(\s*\w*Error"
    r"|\bpytest\.raises\b|assertRaises|\.body\.error\b|\[['\"]error['\"]\]|\"error\"\s*:|'error'\s*:"
    r"|\berror\s*:\s*['\"]"
)


def check(unit: Unit) -> Check:
    """The negative_tests verdict: how many tests provoke a 4xx or assert an error (a few named)."""
    negatives = [
        t
        for t in unit.tests
        if any(400 <= s < 500 for _, s in asserted_statuses(t.code)) or _ERROR_ASSERT.search(t.code)
    ]
    details = [f"{len(negatives)} of {len(unit.tests)} tests provoke a 4xx or assert an error"]
    details += [f"negative: {t.where} {t.name}" for t in negatives[:5]]
    if not negatives:
        details.append(
            "fix: add at least one negative test (invalid input answering 400, a missing resource "
            "answering 404, or an expected error) so an always-green suite cannot pass"
        )
    return Check("negative_tests", bool(negatives), len(negatives), tuple(details))
