"""Fold the results of a suite's N shards (`greenloop run --shard I/N`) into one RunResult.

Pure: `check_shards` refuses results that are not one suite's shards (UsageError, exit 2) and
`merge` folds them. Reading the files, recording the merged run for the gate and bridging it
into the bug log is `api.merge_results`'s job.

The fold (docs/scale.md):
- counts are summed, failures concatenated in shard order, passed tests unioned;
- outcome: broken when a shard is missing (each shard declares I/N, so the missing indexes
  are known) or broke; else red when any shard is red; green only when all N are green;
- duration is the longest shard's (the wall time of parallel jobs), the sum is in the notes;
- selection is None (the whole suite) only when all N shards of the suite are there: only
  then may the merged run close bugs as a run of the whole suite would; all N shards of a
  target (`--target T --shard I/N`) make a run of that target (selection "target", noted).
"""

from __future__ import annotations

from collections.abc import Sequence

from greenloop.errors import UsageError
from greenloop.model import Failure, ShardInfo, Summary
from greenloop.result import RunResult

__all__ = ["check_shards", "merge", "missing_shards"]


def _split(shard: ShardInfo) -> str:
    return f"target {shard.target!r}" if shard.target else "the whole suite"


def check_shards(results: Sequence[tuple[str, RunResult]]) -> int:
    """The shard count N of `(name, result)` pairs that are shards of one suite; UsageError when
    they are not (no shard, mixed N, mixed frameworks, different commits, one index twice)."""
    if not results:
        raise UsageError("merge needs the result.json of each shard: pass RESULT.json files")
    first_name, first = results[0]
    seen: dict[int, str] = {}
    for name, r in results:
        if r.shard is None:
            raise UsageError(
                f"{name} is not a shard's result (no `shard` in it): merge the results of "
                "`greenloop run --shard I/N`"
            )
        assert first.shard is not None  # checked on the first pass of this loop
        if r.shard.total != first.shard.total:
            raise UsageError(
                f"{name} is shard {r.shard.index}/{r.shard.total} but {first_name} is "
                f"{first.shard.index}/{first.shard.total}: shards of different splits (mixed N) "
                "cannot be merged; pass the results of one --shard I/N set"
            )
        if r.framework != first.framework:
            raise UsageError(
                f"{name} ran {r.framework or 'an unknown runner'} but {first_name} ran "
                f"{first.framework or 'an unknown runner'}: these are shards of different suites; "
                "pass the results of one suite"
            )
        if r.shard.commit and first.shard.commit and r.shard.commit != first.shard.commit:
            raise UsageError(
                f"{name} ran at commit {r.shard.commit[:12]} but {first_name} at "
                f"{first.shard.commit[:12]}: shards of different commits cannot be merged; pass the "
                "results of one pipeline's shards"
            )
        if r.shard.target != first.shard.target:
            raise UsageError(
                f"{name} split {_split(r.shard)} but {first_name} split {_split(first.shard)}: shards "
                "of different selections cannot be merged; pass the results of one --shard I/N set"
            )
        if r.shard.index in seen:
            raise UsageError(
                f"{name} and {seen[r.shard.index]} are both shard {r.shard.index}/{r.shard.total}: "
                "pass one result per shard (the latest attempt of a retried job)"
            )
        seen[r.shard.index] = name
    assert first.shard is not None
    return first.shard.total


def missing_shards(results: Sequence[RunResult], total: int) -> list[int]:
    """Shard indexes 1..total that none of `results` ran."""
    present = {r.shard.index for r in results if r.shard is not None}
    return [i for i in range(1, total + 1) if i not in present]


def _summed(results: Sequence[RunResult]) -> Summary:
    return Summary(
        total=sum(r.summary.total for r in results),
        passed=sum(r.summary.passed for r in results),
        failed=sum(r.summary.failed for r in results),
        skipped=sum(r.summary.skipped for r in results),
        flaky=sum(r.summary.flaky for r in results),
    )


def _failures_once(results: Sequence[RunResult]) -> tuple[tuple[Failure, ...], dict[str, int]]:
    """Every shard's failures, a file that failed to load listed once however many shards
    tried to load it (each shard collects the whole suite before it picks its share), and how
    many shards beyond the first each such file failed in."""
    failures: list[Failure] = []
    seen: set[tuple[str, str | None]] = set()
    again: dict[str, int] = {}
    for r in results:
        for f in r.failures:
            key = (f.test, f.file)
            if f.kind == "load" and key in seen:
                again[f.test] = again.get(f.test, 0) + 1
                continue
            if f.kind == "load":
                seen.add(key)
            failures.append(f._replace(bug_id=None))
    return tuple(failures), again


def merge(
    named: Sequence[tuple[str, RunResult]],
    *,
    run_id: str,
    tail_chars: int = 3000,
    workspace: str | None = None,
) -> RunResult:
    """One RunResult for the shards `named` (`(file name, result)` pairs); see the module doc."""
    total = check_shards(named)
    results = sorted((r for _, r in named), key=lambda r: r.shard.index if r.shard else 0)
    missing = missing_shards(results, total)
    summary = _summed(results)
    failures, again = _failures_once(results)
    repeats = sum(again.values())
    if repeats:  # each shard counted the file among its failures: the suite has it once
        summary = summary._replace(total=max(0, summary.total - repeats),
                                   failed=max(0, summary.failed - repeats))
    broken = [r for r in results if r.outcome == "broken"]
    red = [r for r in results if r.outcome == "red"]
    label = {id(r): f"shard {r.shard.index}/{total}" for r in results if r.shard is not None}
    notes: list[str] = [
        f"merged {len(results)} of {total} shard(s): "
        + ", ".join(f"{label[id(r)]} {r.run_id} ({r.outcome})" for r in results)
    ]
    target = results[0].shard.target if results[0].shard else None
    if target:
        notes.append(f"the shards split target {target}: the merged run covers that selection, "
                     "not the whole suite")
    notes += [f"{name} failed to load in {n + 1} shards; listed and counted once"
              for name, n in again.items()]
    crash_reason: str | None = None
    next_action: str | None = None
    if missing:
        outcome = "broken"
        crash_reason = (f"shard(s) {', '.join(f'{i}/{total}' for i in missing)} missing: the merge "
                        "does not cover the whole suite; add their result.json")
    elif broken:
        outcome = "broken"
        crash_reason = "; ".join(f"{label[id(r)]} broke: {r.crash_reason or 'broken'}" for r in broken)
        next_action = broken[0].next_action
    elif red:
        outcome = "red"
        next_action = "retry_coder"
    elif summary.total == 0 and summary.passed == 0:
        outcome = "broken"
        crash_reason = "no tests ran in any shard"
        next_action = "retry_tester"
    else:
        outcome = "green"
    durations = [r.duration_ms for r in results]
    notes.append(f"duration: {max(durations, default=0)} ms wall (the longest shard), "
                 f"{sum(durations)} ms summed over the shards")
    for r in results:
        notes += [f"{label[id(r)]}: {n}" for n in r.notes]
    passed = tuple(dict.fromkeys(t for r in results for t in r.passed_tests))
    skipped = tuple(dict.fromkeys(t for r in results for t in r.skipped_tests))
    exit_codes = [r.exit_code for r in results]
    exit_code = 0 if all(c == 0 for c in exit_codes) else next(
        (c for c in exit_codes if c not in (0, None)), None)
    if missing:
        exit_code = None
    ok = outcome == "green"
    tails = [r for r in results if r.outcome != "green"] or list(results)
    tail = "\n".join(f"── {label[id(r)]} ──\n{r.output_tail}" for r in tails if r.output_tail)
    started = [r.started_at for r in results if r.started_at]
    first = results[0]
    return RunResult(
        run_id=run_id,
        ok=ok,
        outcome=outcome,  # type: ignore[arg-type]
        framework=first.framework,
        command="greenloop merge " + " ".join(name for name, _ in named),
        exit_code=exit_code,
        timed_out=any(r.timed_out for r in results),
        aborted=any(r.aborted for r in results),
        crashed=bool(missing) or any(r.crashed for r in results),
        crash_reason=crash_reason,
        summary=summary,
        failures=failures,
        output_tail=tail[-tail_chars:] if tail_chars > 0 else "",
        notes=tuple(dict.fromkeys(notes)),
        duration_ms=max(durations, default=0),
        sandbox=first.sandbox,
        workspace=workspace,
        started_at=min(started) if started else None,
        next_action=next_action,
        # The whole suite only when every shard of it is there; all the shards of a target
        # are that target's run; else still a narrowed run.
        selection="shard" if missing else ("target" if target else None),
        passed_tests=passed,
        skipped_tests=skipped,
    )
