"""The fold of shard results (greenloop.runner.merge): pure, on records built here."""

from __future__ import annotations

import pytest

from greenloop.errors import UsageError
from greenloop.model import Failure, ShardInfo, Summary
from greenloop.result import RunResult
from greenloop.runner.merge import merge


def shard(i: int, n: int, outcome: str = "green", *, framework: str = "pytest", ms: int = 100,
          failed: int = 0, flaky: int = 0, reason: str | None = None) -> tuple[str, RunResult]:
    failures = tuple(Failure(test=f"t{i}_{k}", bug_id="bug-elsewhere") for k in range(failed))
    r = RunResult(
        run_id=f"run-{i}", ok=outcome == "green", outcome=outcome,  # type: ignore[arg-type]
        framework=framework, command="x", exit_code=0 if outcome == "green" else 1,
        summary=Summary(total=3 + flaky, passed=3 - failed, failed=failed, flaky=flaky),
        failures=failures, duration_ms=ms, crash_reason=reason, crashed=outcome == "broken",
        passed_tests=tuple(f"p{i}_{k}" for k in range(3 - failed)), skipped_tests=(f"s{i}",),
        selection="shard",
        shard=ShardInfo(i, n), notes=(f"note {i}",), output_tail=f"tail {i}",
        started_at=f"2026-12-02T08:0{i}:00Z",
    )
    return f"s{i}.json", r


def test_all_green_is_a_green_run_of_the_whole_suite() -> None:
    m = merge([shard(2, 3, ms=300), shard(1, 3, ms=100), shard(3, 3, ms=200)], run_id="run-m")
    assert m.outcome == "green" and m.ok and m.exit_code == 0
    assert m.selection is None and m.shard is None
    assert m.summary == Summary(total=9, passed=9)
    assert m.passed_tests[:3] == ("p1_0", "p1_1", "p1_2") and len(set(m.passed_tests)) == 9
    assert m.skipped_tests == ("s1", "s2", "s3")  # the gate's evidence of tests taken away, every shard's
    assert m.duration_ms == 300 and any("600 ms summed" in n for n in m.notes)
    assert "shard 2/3: note 2" in m.notes and m.started_at == "2026-12-02T08:01:00Z"


def test_red_sums_counts_and_concatenates_failures_in_shard_order() -> None:
    m = merge([shard(3, 3, "red", failed=1), shard(1, 3, "red", failed=2), shard(2, 3, flaky=1)],
              run_id="run-m")
    assert m.outcome == "red" and not m.ok and m.next_action == "retry_coder" and m.exit_code == 1
    assert [f.test for f in m.failures] == ["t1_0", "t1_1", "t3_0"]
    assert all(f.bug_id is None for f in m.failures)  # the merging machine's bug log decides
    assert m.summary == Summary(total=10, passed=6, failed=3, skipped=0, flaky=1)
    assert m.selection is None


def test_a_missing_shard_is_broken_and_not_the_whole_suite() -> None:
    m = merge([shard(1, 4), shard(3, 4)], run_id="run-m")
    assert m.outcome == "broken" and not m.ok and m.exit_code is None
    assert m.crash_reason is not None and "2/4, 4/4 missing" in m.crash_reason
    assert m.selection == "shard"


def test_a_broken_shard_breaks_the_merge_over_red() -> None:
    m = merge([shard(1, 2, "red", failed=1), shard(2, 2, "broken", reason="timed out")], run_id="run-m")
    assert m.outcome == "broken" and "shard 2/2 broke: timed out" in (m.crash_reason or "")


def test_same_commit_or_unknown_commits_merge() -> None:
    a = ("a.json", shard(1, 2)[1]._replace(shard=ShardInfo(1, 2, "c" * 40)))
    b = ("b.json", shard(2, 2)[1]._replace(shard=ShardInfo(2, 2, "c" * 40)))
    assert merge([a, b], run_id="m").outcome == "green"
    assert merge([a, shard(2, 2)], run_id="m").outcome == "green"  # one shard outside git: not comparable


def test_no_test_in_any_shard_is_broken() -> None:
    _, a = shard(1, 2)
    _, b = shard(2, 2)
    empty = [(n, r._replace(summary=Summary(), passed_tests=())) for n, r in (("a", a), ("b", b))]
    assert merge(empty, run_id="run-m").outcome == "broken"


@pytest.mark.parametrize(
    ("results", "fragment"),
    [
        ([], "RESULT.json"),
        ([shard(1, 2), shard(2, 3)], "mixed N"),
        ([shard(1, 2), shard(2, 2, framework="vitest")], "different suites"),
        ([shard(1, 2), shard(1, 2)], "both shard 1/2"),
        ([("a.json", shard(1, 2)[1]._replace(shard=ShardInfo(1, 2, "a" * 40))),
          ("b.json", shard(2, 2)[1]._replace(shard=ShardInfo(2, 2, "b" * 40)))], "different commits"),
        ([shard(1, 2), ("whole.json", shard(2, 2)[1]._replace(shard=None))], "not a shard's result"),
        ([("a.json", shard(1, 2)[1]._replace(shard=ShardInfo(1, 2, target="pkg/a"))),
          ("b.json", shard(2, 2)[1]._replace(shard=ShardInfo(2, 2, target="pkg/b")))],
         "different selections"),
        ([("a.json", shard(1, 2)[1]._replace(shard=ShardInfo(1, 2, target="pkg/a"))), shard(2, 2)],
         "split the whole suite"),
    ],
)
def test_not_one_suites_shards_is_refused(results: list[tuple[str, RunResult]], fragment: str) -> None:
    with pytest.raises(UsageError, match=fragment):
        merge(results, run_id="run-m")


def test_a_file_every_shard_failed_to_load_is_listed_and_counted_once() -> None:
    """Each shard collects the whole suite, so each fails to import the same broken file and
    counts it (pytest: "1 error", total 1): the merged suite has it once."""
    load = Failure(test="tests/test_bad.py", file="tests/test_bad.py", kind="load", message="ImportError")
    named = []
    for i in (1, 2, 3):
        name, r = shard(i, 3, "broken", failed=1, reason="the suite could not load")
        named.append((name, r._replace(failures=(*r.failures, load),
                                       summary=r.summary._replace(total=4, failed=2))))
    merged = merge(named, run_id="run-m")
    loads = [f for f in merged.failures if f.kind == "load"]
    assert loads == [load]
    assert (merged.summary.total, merged.summary.failed) == (12 - 2, 6 - 2)
    assert "tests/test_bad.py failed to load in 3 shards; listed and counted once" in merged.notes
    assert len([f for f in merged.failures if f.kind == "test"]) == 3  # each shard's own failures stay


def test_the_shards_of_a_target_merge_into_a_run_of_that_target() -> None:
    """A narrowed run, never the whole suite: it closes only the bugs of the tests it ran."""
    named = [(n, r._replace(shard=ShardInfo(r.shard.index, 2, target="packages/api")))  # type: ignore[union-attr]
             for n, r in (shard(1, 2), shard(2, 2))]
    m = merge(named, run_id="run-m")
    assert m.outcome == "green" and m.selection == "target" and m.shard is None
    assert any("target packages/api" in n for n in m.notes)
    assert merge(named[:1], run_id="run-m").selection == "shard"  # a part missing: still a shard
    assert ShardInfo.from_json(named[0][1].shard.to_json()) == named[0][1].shard  # type: ignore[union-attr]
