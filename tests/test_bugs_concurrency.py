"""Sixteen writer processes at once: no event is lost, no line is torn, the fold is consistent.

Each worker does 500 operations on the same log: it opens its own bugs and moves them
open -> fixing -> fixed, and it races the others on a few shared `unit:test` keys (opening
them, which must dedup against the open one, and fixing them, which only one may win).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from greenloop.bugs.log import BugLog
from greenloop.bugs.record import TransitionRefused

WORKERS = 16
ROUNDS = 100  # x 5 operations = 500 per worker
SHARED_KEYS = 7


def _worker(path: str, w: int, barrier: Any, out: str) -> None:
    log = BugLog(path)
    me = f"w{w}"
    events: list[dict[str, Any]] = []
    barrier.wait()
    for i in range(ROUNDS):
        own = log.open(unit_id=me, test_name=f"t{i}", title=f"own {i}", by=me)
        events.append({"op": "open", "id": own.bug.id, "created": own.created, "key": own.bug.dedup_key})
        for to in ("fixing", "fixed"):
            done = log.transition(own.bug.id, to, by=me, fix_refs=[f"{me}-{i}"])
            events.append({"op": to, "id": own.bug.id, "from": done.from_status})
        shared = log.open(unit_id="shared", test_name=f"s{i % SHARED_KEYS}", title="shared", by=me)
        events.append({"op": "open", "id": shared.bug.id, "created": shared.created,
                       "key": shared.bug.dedup_key})
        try:
            log.transition(shared.bug.id, "fixed", by=me)
            events.append({"op": "fixed", "id": shared.bug.id, "from": "open"})
        except TransitionRefused as exc:
            events.append({"op": "refused", "id": shared.bug.id, "why": str(exc)})
    Path(out).write_text(json.dumps(events))


@pytest.mark.slow
def test_sixteen_writers_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bugs.ndjson"
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(WORKERS)
    outs = [tmp_path / f"w{w}.json" for w in range(WORKERS)]
    procs = [ctx.Process(target=_worker, args=(str(path), w, barrier, str(outs[w])))
             for w in range(WORKERS)]
    try:
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * WORKERS
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()

    events = [e for out in outs for e in json.loads(out.read_text())]
    assert len(events) == WORKERS * ROUNDS * 5

    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    records = [json.loads(line) for line in raw.decode().split("\n")[:-1]]  # every line is whole JSON

    # Every event that wrote is in the log exactly once; nothing else is.
    creates = [e for e in events if e["op"] == "open" and e["created"]]
    moves = [e for e in events if e["op"] in ("fixing", "fixed")]
    assert len(records) == len(creates) + len(moves)
    assert len(creates) >= WORKERS * ROUNDS + 1
    per_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        per_id[r["id"]].append(r)
    assert len(per_id) == len(creates) == len({e["id"] for e in creates})  # ids unique

    # Own bugs: open, fixing, fixed, in that order, by their worker, with both fix refs.
    own_ids = {e["id"] for e in creates if not e["key"].startswith("shared:")}
    assert len(own_ids) == WORKERS * ROUNDS
    for bug_id in own_ids:
        hist = per_id[bug_id]
        assert [h["status"] for h in hist] == ["open", "fixing", "fixed"]
        assert len({h["by"] for h in hist}) == 1 and len(hist[-1]["fix_refs"]) == 1

    # Shared bugs: opened once, fixed by exactly one worker, the others refused or reused.
    shared_ids = {e["id"] for e in creates if e["key"].startswith("shared:")}
    fixed_by = Counter(e["id"] for e in moves if e["id"] in shared_ids)
    assert all(fixed_by[i] == 1 for i in shared_ids) and set(fixed_by) == shared_ids
    for bug_id in shared_ids:
        assert [h["status"] for h in per_id[bug_id]] == ["open", "fixed"]
    for e in events:
        if e["op"] == "refused":
            assert "is fixed and cannot move to fixed" in e["why"]
    reused = [e for e in events if e["op"] == "open" and not e["created"]]
    assert all(e["id"] in shared_ids for e in reused)
    assert len(reused) + len(creates) == WORKERS * ROUNDS * 2

    # Dedup held under the race: replaying the log, no key ever had two active bugs.
    active: dict[str, str] = {}
    for r in records:
        key, bug_id = r["dedup_key"], r["id"]
        if r["status"] == "open" and len(per_id[bug_id]) and per_id[bug_id][0] is r:
            assert key not in active, f"{key} opened twice: {active.get(key)} and {bug_id}"
            active[key] = bug_id
        elif r["status"] not in ("open", "fixing") and active.get(key) == bug_id:
            del active[key]

    # The fold (fresh, and the incremental one a long-lived writer keeps) is the last line per id.
    expected = {bug_id: hist[-1]["status"] for bug_id, hist in per_id.items()}
    fresh = BugLog(path).fold()
    assert not fresh.warnings
    assert {b.id: b.status for b in fresh.bugs} == expected
    assert [b.id for b in fresh.bugs] == list(per_id)  # order of first appearance
    assert os.path.getsize(path) == len(raw)
