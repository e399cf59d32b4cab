"""Flaky tests: tests that failed and then passed with no change to the code.

Two sources, both pure here (api.py runs the reruns and reads the files):

- `fold_reruns`: a run with `rerun_failures=K` reran its failing tests up to K times in the
  runner's own dialect; a test that failed and then passed is marked `flaky: true` in its
  failure record and counted in `summary.flaky`, apart from passed and failed. The run stays
  red (config `flaky = "fail"`, the default) or, when flaky tests were its only failures and
  the config says `flaky = "warn"`, is green with a note.
- `from_history`: the store's runs (failing names and the working-tree fingerprint taken when
  each run was recorded) and their result.json files (passed_tests): a test that one run
  failed and another passed with the same fingerprint changed its outcome without a code
  change (`greenloop flaky`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from greenloop.result import RunResult

__all__ = ["FlakyTest", "RunEvidence", "fold_reruns", "from_history", "passed_in"]


def passed_in(rerun: RunResult, names: Iterable[str]) -> set[str]:
    """Which of `names` this rerun ran and passed: named in its passed tests and not failing;
    where the runner names no passed test (a text fallback), a green rerun passed them all."""
    failing = {f.test for f in rerun.failures}
    names = [n for n in names if n not in failing]
    if rerun.passed_tests:
        passed = set(rerun.passed_tests)
        return {n for n in names if n in passed}
    return set(names) if rerun.ok else set()


def fold_reruns(
    result: RunResult,
    flaky_names: set[str],
    *,
    policy: str,
    last_exit_code: int | None,
    notes: Sequence[str] = (),
) -> RunResult:
    """The first run's result with the reruns' verdict: `flaky_names` failed, then passed."""
    if not flaky_names:
        return result._replace(notes=(*result.notes, *notes))
    failures = tuple(f._replace(flaky=True) if f.test in flaky_names else f for f in result.failures)
    marked = sum(1 for f in failures if f.flaky)
    s = result.summary
    summary = s._replace(failed=max(0, s.failed - marked), flaky=s.flaky + marked)
    out = list(notes)
    names = ", ".join(sorted(flaky_names)[:5]) + (" …" if len(flaky_names) > 5 else "")
    out.append(f"flaky: {marked} test(s) failed, then passed when rerun: {names}")
    hard = [f for f in failures if not f.flaky]
    if hard:
        return result._replace(failures=failures, summary=summary, notes=(*result.notes, *out))
    if policy == "warn":
        out.append('flaky: its only failures are flaky, so the run is green (config flaky = "warn"); '
                   "each flaky test has a bug of category flaky")
        return result._replace(
            failures=failures, summary=summary, notes=(*result.notes, *out),
            ok=True, outcome="green", next_action=None, exit_code=last_exit_code,
        )
    out.append('flaky: the run stays red (config flaky = "fail", the default; "warn" makes a run '
               "whose only failures are flaky green): make the test deterministic")
    return result._replace(failures=failures, summary=summary, notes=(*result.notes, *out))


class RunEvidence(NamedTuple):
    """What `from_history` needs of one recorded run."""

    run_id: str
    at: float
    fingerprint: str | None
    failing: tuple[str, ...]  # the store's failing names
    passed: tuple[str, ...] | None  # result.json's passed_tests; None: not readable
    flaky_marked: tuple[str, ...] = ()  # failures the run itself marked flaky (reruns)


class FlakyTest(NamedTuple):
    """A test whose outcome changed between runs of the same working tree, with the runs that show it."""
    test: str
    failed_in: tuple[str, ...]  # runs that failed it
    passed_in: tuple[str, ...]  # runs of the same working tree that passed it (or its own rerun)
    fingerprints: tuple[str, ...]  # the working trees it flipped on
    # "history": failed in one run and passed in another of the same working tree;
    # "rerun": failed, then passed on rerun within one run
    evidence: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The flaky test as JSON (`greenloop flaky --json`)."""
        return {
            "test": self.test,
            "failed_in": list(self.failed_in),
            "passed_in": list(self.passed_in),
            "fingerprints": list(self.fingerprints),
            "evidence": list(self.evidence),
        }


def from_history(runs: Sequence[RunEvidence]) -> list[FlakyTest]:
    """Tests whose outcome changed between runs of the same working-tree fingerprint, and tests
    a run's reruns found flaky; each test once, in the order its first evidence appeared."""
    found: dict[str, dict[str, list[str]]] = {}

    def add(test: str, fp: str | None, failed: str, passed: str, evidence: str) -> None:
        entry = found.setdefault(test, {"failed": [], "passed": [], "fps": [], "evidence": []})
        for key, value in (("failed", failed), ("passed", passed), ("fps", fp), ("evidence", evidence)):
            if value and value not in entry[key]:
                entry[key].append(value)

    ordered = sorted(runs, key=lambda r: r.at)
    groups: dict[str, list[RunEvidence]] = {}
    for r in ordered:
        for test in r.flaky_marked:
            add(test, r.fingerprint, r.run_id, r.run_id, "rerun")
        if r.fingerprint:
            groups.setdefault(r.fingerprint, []).append(r)
        else:
            continue
        for earlier in groups[r.fingerprint][:-1]:  # each pair of runs of one working tree once
            for failed, other in ((earlier, r), (r, earlier)):
                if other.passed is None:
                    continue
                passed = set(other.passed)
                for test in failed.failing:
                    if test in passed and test not in failed.flaky_marked:
                        add(test, r.fingerprint, failed.run_id, other.run_id, "history")
    return [
        FlakyTest(test, tuple(e["failed"]), tuple(e["passed"]), tuple(e["fps"]), tuple(e["evidence"]))
        for test, e in found.items()
    ]
