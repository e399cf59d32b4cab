"""A shard's run: the shard checked against the rest of the call, and its result marked
with the shard and the commit it ran on (docs/scale.md), so `greenloop merge` can fold N of them.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from greenloop import layout
from greenloop.errors import UsageError
from greenloop.model import ShardInfo
from greenloop.result import RunResult

__all__ = ["check_shard", "git_commit", "mark_shard"]


def git_commit(start: str) -> str | None:
    """The commit HEAD names in the git work tree around `start`, read from git's own files
    (no process: `.git` or a worktree's `gitdir:` file, loose refs, then packed-refs); None
    outside git or when HEAD names nothing yet."""
    root = layout.git_root(start)
    if root is None:
        return None
    gitdir = os.path.join(root, ".git")
    try:
        if os.path.isfile(gitdir):  # a worktree or submodule: "gitdir: <path>"
            with open(gitdir, encoding="utf-8") as fh:
                target = fh.read().strip().removeprefix("gitdir:").strip()
            gitdir = os.path.normpath(os.path.join(root, target))
        with open(os.path.join(gitdir, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
        if not head.startswith("ref:"):
            return head or None  # a detached HEAD (CI checkouts) holds the commit itself
        ref = head[4:].strip()
        common = gitdir
        with contextlib.suppress(OSError), open(os.path.join(gitdir, "commondir"), encoding="utf-8") as fh:
            common = os.path.normpath(os.path.join(gitdir, fh.read().strip()))
        for folder in dict.fromkeys((gitdir, common)):
            with contextlib.suppress(OSError), open(os.path.join(folder, ref), encoding="utf-8") as fh:
                return fh.read().strip() or None
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref:
                    return parts[0]
    except OSError:
        return None
    return None


def check_shard(shard: object, *, target: object, last_failed: object, command: object,
                 mode: str) -> ShardInfo | None:
    """The validated shard, or None. A target is split like the
    whole suite (a CI job per part of one folder of a monorepo); a shard with what chooses its
    tests otherwise is refused: a last_failed rerun's failures or a retry's differ per machine,
    and a verbatim command is not greenloop's to split, so the parts would not add up."""
    if shard is None or shard == "":
        return None
    from greenloop.runner.plan import parse_shard

    parsed = parse_shard(shard)
    clash = [name for name, given in (("last_failed", bool(last_failed)),
                                      ("command", command is not None), ("mode retry", mode == "retry"),
                                      ("mode resume", mode == "resume"))
             if given]
    if clash:
        raise UsageError(f"shard splits the suite or a target of it: drop {', '.join(clash)} (or drop shard)")
    return parsed  # plan() records the target it splits


def mark_shard(result: RunResult, the_plan: Any) -> RunResult:
    """Mark a shard's result; a pytest shard whose report is missing did not load greenloop's
    plugin, so nothing was deselected: it ran the whole suite, and merging it would count
    every test N times, so it is broken rather than green."""
    shard = ShardInfo(the_plan.shard.index, the_plan.shard.total, commit=git_commit(the_plan.cwd),
                      target=the_plan.shard.target)
    result = result._replace(shard=shard, selection="shard")
    empty_exit = (0, 5) if the_plan.framework == "pytest" else (0,)  # pytest: 5 when all deselected
    if result.crash_reason == "no tests ran" and result.exit_code in empty_exit:
        # N exceeds what the runner splits (files, for vitest, jest and node:test): an empty shard
        # is not a broken one. `greenloop merge` still calls a suite with no test at all broken.
        spec = f"{the_plan.shard.index}/{the_plan.shard.total}"
        return result._replace(ok=True, outcome="green", crashed=False, crash_reason=None, next_action=None,
                               notes=(*result.notes, f"shard {spec} holds no test (more shards than the "
                                      "runner can split the suite into); it counts as an empty part"))
    if (the_plan.framework == "pytest" and not result.timed_out and not result.aborted
            and the_plan.report_file and not os.path.exists(the_plan.report_file)
            and result.outcome != "broken"):
        reason = ("shard: greenloop's pytest plugin did not load (was it disabled with -p no:…?), so "
                  "the shard was not applied and the whole suite ran; remove what disables it")
        result = result._replace(ok=False, outcome="broken", crashed=True, crash_reason=reason,
                                 next_action="retry_tester")
    return result
