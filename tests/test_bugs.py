"""The bug log: records, open with dedup, ids, the state machine, the tolerant fold, list and show."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest

from greenloop.bugs import record, workspace
from greenloop.bugs.log import BugLog, bug_log_path
from greenloop.bugs.record import ALLOWED_MOVES, STATUSES, Bug, BugNotFound, TransitionRefused
from greenloop.errors import GreenloopError, UsageError

ID_RE = re.compile(r"^bug-\d{8}-\d{4}-[0-9a-f]{4,}$")
T0 = 1_795_000_000.0  # a fixed instant: every bug of a test opens in the same minute


def clock(t: float = T0):  # type: ignore[no-untyped-def]
    return lambda: t


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.fixture
def log(tmp_path: Path) -> BugLog:
    return BugLog(tmp_path / "bugs.ndjson", clock=clock())


def test_record_round_trip_and_contract_keys() -> None:
    b = Bug(id="bug-20260513-1031-c9f2", source="unit_test", unit_id="todo-be", test_name="t",
            title="T", run_id="run-1", fix_refs=("a",), created_at="x", updated_at="y", by="tester")
    d = b.to_json()
    assert list(d) == ["id", "source", "unit_id", "run_id", "test_name", "dedup_key", "category",
                       "severity", "title", "detail", "affected_units", "status", "fix_refs",
                       "created_at", "updated_at", "by", "closed_by", "evidence"]
    assert d["dedup_key"] == "todo-be:t"
    assert Bug.from_json(d) == b
    assert Bug.from_json(json.loads(json.dumps(d))) == b
    # the careful reader fills what an older or hand-written line leaves out
    minimal = Bug.from_json({"id": "bug-x", "status": "open", "unit_id": "u", "test_name": "t"})
    assert (minimal.source, minimal.severity, minimal.title, minimal.affected_units) == (
        "unit_test", "medium", "t", ("u",))
    for bad in ({"status": "open"}, {"id": "b", "status": "closed"}, {"id": "b", "status": "open",
                "severity": "huge"}, {"id": "b", "status": "open", "fix_refs": "abc"}):
        with pytest.raises(ValueError):
            Bug.from_json(bad)


def test_open_writes_one_line_and_dedups_open_and_fixing(log: BugLog) -> None:
    first = log.open(unit_id="todo-be", test_name="empty title gives 400", title="500 not 400",
                     run_id="run-1", by="tester", detail="TypeError: boom")
    assert first.created and ID_RE.match(first.bug.id)
    b = first.bug
    assert (b.status, b.source, b.severity, b.dedup_key, b.affected_units, b.by) == (
        "open", "unit_test", "medium", "todo-be:empty title gives 400", ("todo-be",), "tester")
    assert b.created_at == b.updated_at == "2026-11-18T11:06:40Z"
    again = log.open(unit_id="todo-be", test_name="empty title gives 400", title="other words")
    assert not again.created and again.bug == b
    assert len(lines(log.path)) == 1  # reusing appends nothing
    # same test in another unit, or another test in the same unit: new bugs
    assert log.open(unit_id="todo-fe", test_name="empty title gives 400", title="x").created
    assert log.open(unit_id="todo-be", test_name="lists", title="x").created
    # still deduped while fixing; a fixed bug no longer absorbs a new failure (a regression)
    log.transition(b.id, "fixing", by="coder")
    assert log.open(unit_id="todo-be", test_name="empty title gives 400", title="x").bug.id == b.id
    log.transition(b.id, "fixed")
    regression = log.open(unit_id="todo-be", test_name="empty title gives 400", title="x")
    assert regression.created and regression.bug.id != b.id
    # a fresh reader (another process) sees the same dedup state from the file alone
    assert BugLog(log.path).open(unit_id="todo-be", test_name="empty title gives 400",
                                 title="x").bug.id == regression.bug.id


@pytest.mark.slow
def test_ids_unique_for_many_bugs_in_one_minute(log: BugLog) -> None:
    ids = [log.open(unit_id="u", test_name=f"t{i}", title="x").bug.id for i in range(3000)]
    assert len(set(ids)) == 3000  # 4 hex digits collide often at this count: retried under the lock
    assert all(ID_RE.match(i) and i.startswith("bug-20261118-1106-") for i in ids)
    # another writer with its own view never reuses an id either
    other = BugLog(log.path, clock=clock())
    more = [other.open(unit_id="v", test_name=f"t{i}", title="x").bug.id for i in range(200)]
    assert not set(more) & set(ids)


def test_every_transition_is_checked(tmp_path: Path) -> None:
    legal = {(a, b) for a, tos in ALLOWED_MOVES.items() for b in tos}
    assert legal == {("open", "fixing"), ("open", "fixed"), ("fixing", "fixed"), ("fixed", "verified")}
    paths = {"open": [], "fixing": ["fixing"], "fixed": ["fixed"], "verified": ["fixed", "verified"]}
    for n, (start, to) in enumerate(itertools.product(STATUSES, STATUSES)):
        log = BugLog(tmp_path / f"{n}.ndjson", clock=clock())
        bug = log.open(unit_id="u", test_name="t", title="x").bug
        for step in paths[start]:
            log.transition(bug.id, step)
        before = log.path.read_bytes()
        if (start, to) in legal:
            done = log.transition(bug.id, to, by="me", fix_refs=["r1"])
            assert (done.from_status, done.bug.status, done.bug.by) == (start, to, "me")
            assert "r1" in done.bug.fix_refs
        else:
            with pytest.raises(TransitionRefused) as err:
                log.transition(bug.id, to)
            msg = str(err.value)
            assert f"is {start} and cannot move to {to}" in msg
            allowed = ALLOWED_MOVES[start]
            assert all(a in msg for a in allowed) if allowed else "final" in msg
            assert err.value.exit_code == 2
            assert log.path.read_bytes() == before  # a refusal writes nothing


def test_transition_records_by_and_accumulates_fix_refs(log: BugLog) -> None:
    b = log.open(unit_id="u", test_name="t", title="x", run_id="run-1").bug
    log.transition(b.id, "fixing", by="coder", fix_refs=["abc"])
    log.transition(b.id, "fixed", by="tester", fix_refs=["run-2", "abc", ""])
    done = log.transition(b.id, "verified", by="integrator", fix_refs=["run-int-1"])
    assert done.bug.fix_refs == ("abc", "run-2", "run-int-1")
    assert done.bug.run_id == "run-1" and done.bug.created_at == b.created_at
    hist = log.show(b.id).history
    assert [(h.line, h.bug.status, h.bug.by) for h in hist] == [
        (1, "open", None), (2, "fixing", "coder"), (3, "fixed", "tester"), (4, "verified", "integrator")]


def test_bad_arguments_name_the_field(log: BugLog) -> None:
    with pytest.raises(UsageError, match="unit"):
        log.open(unit_id=" ", test_name="t", title="x")
    with pytest.raises(UsageError, match="test"):
        log.open(unit_id="u", test_name="", title="x")
    with pytest.raises(UsageError, match=r"severity 'huge'.*low, medium, high, critical"):
        log.open(unit_id="u", test_name="t", title="x", severity="huge")
    with pytest.raises(UsageError, match="source"):
        log.open(unit_id="u", test_name="t", title="x", source="e2e")
    b = log.open(unit_id="u", test_name="t", title="x").bug
    with pytest.raises(UsageError, match=r"to 'done'.*open, fixing, fixed, verified"):
        log.transition(b.id, "done")
    with pytest.raises(BugNotFound, match=r"no bug 'bug-nope'.*bugs list"):
        log.transition("bug-nope", "fixed")
    with pytest.raises(UsageError, match="status 'closed'"):
        log.list(status="closed")
    assert not log.path.read_text().count("\n") > 1


def test_severity_guess() -> None:
    g = record.guess_severity
    assert g("POST /api/todos returns 201", "500") == "high"
    assert g("x", 503) == "high"
    assert g("x", '{"status": 502}') == "high"
    assert g("x", "1500 ms") == "medium" and g("x", "5000") == "medium"
    assert g("rejects a bad token (auth)", "401") == "critical"
    assert g("Security headers are set", None) == "critical"
    assert g("OAuth callback", None) == "critical" and g("unauthorized gives 401", None) == "critical"
    assert g("author name is shown", None) == "medium"
    assert g("login auth answers 500", "500") == "critical"  # the more severe guess wins
    assert g("lists todos", "400") == "medium"


def test_torn_and_corrupt_lines_are_skipped_with_their_line_number(log: BugLog) -> None:
    a = log.open(unit_id="u", test_name="a", title="a").bug
    b = log.open(unit_id="u", test_name="b", title="b").bug
    log.transition(a.id, "fixing")
    good = log.path.read_bytes()
    torn_a = json.dumps({**a.to_json(), "status": "fixed"})[:60]  # a's newest line, cut mid-write
    junk = (b"this is not json\n" + b'["a", "list"]\n' + b'{"id": "bug-h", "status": "weird"}\n'
            + b'{"id": "bug-u", "status": "open", "title": "\xff"}\n')
    log.path.write_bytes(good + junk + b"\n" + torn_a.encode())
    fresh = BugLog(log.path)
    folded = fresh.fold()
    assert {x.id: x.status for x in folded.bugs} == {a.id: "fixing", b.id: "open"}
    w = folded.warnings
    assert len(w) == 5
    assert "line 4: not valid JSON" in w[0]
    assert "line 5: not a bug record" in w[1]
    assert "line 6: not a bug record (status 'weird'" in w[2]
    assert "line 7: not valid UTF-8" in w[3]
    assert "line 9: incomplete" in w[4] and "torn" in w[4]
    # a writer ends the torn line before appending, so its own line survives whole
    c = fresh.open(unit_id="u", test_name="c", title="c").bug
    raw = log.path.read_bytes().decode(errors="replace").splitlines()
    assert raw[8] == torn_a and json.loads(raw[9])["id"] == c.id
    again = BugLog(log.path).fold()
    assert {x.id for x in again.bugs} == {a.id, b.id, c.id}
    assert any("line 9" in x for x in again.warnings)
    # show parses every line of the bug and reports the torn one
    shown = BugLog(log.path).show(a.id)
    assert [h.bug.status for h in shown.history] == ["open", "fixing"]


def test_incremental_reader_sees_other_writers_and_torn_tails(tmp_path: Path) -> None:
    path = tmp_path / "bugs.ndjson"
    reader, writer = BugLog(path), BugLog(path, clock=clock())
    assert reader.fold().bugs == ()  # no log yet: empty, and nothing is created
    assert not path.exists()
    a = writer.open(unit_id="u", test_name="a", title="a").bug
    assert [x.id for x in reader.fold().bugs] == [a.id]
    writer.transition(a.id, "fixed")
    assert reader.fold().bugs[0].status == "fixed"
    # a line without its newline (an editor dropped it) still counts; a writer ends it first
    hand = json.dumps({**a.to_json(), "id": "bug-hand", "dedup_key": "u:hand"})
    with path.open("a") as fh:
        fh.write(hand)
    assert [x.id for x in reader.fold().bugs] == [a.id, "bug-hand"] and not reader.warnings
    writer.open(unit_id="u", test_name="b", title="b")
    assert len(reader.fold().bugs) == 3 and not reader.warnings
    assert len(path.read_text().splitlines()) == 4
    # a hand-written line in another key order and spacing is read in full, by fold and show
    with path.open("a") as fh:
        fh.write('{"status":"open","unit_id":"u","test_name":"h2","id":"bug-hand2"}\n')
        fh.write(json.dumps({"by": "me", **{**a.to_json(), "id": "bug-hand2", "test_name": "h2",
                                              "status": "fixed"}}) + "\n")
    assert reader.fold().bugs[-1].id == "bug-hand2" and reader.fold().bugs[-1].status == "fixed"
    assert [h.bug.status for h in reader.show("bug-hand2").history] == ["open", "fixed"]
    assert not reader.warnings
    # the log replaced under a reader (rotated, restored from a backup): it starts over
    path.write_text(hand + "\n")
    assert [x.id for x in reader.fold().bugs] == ["bug-hand"]


def test_list_filters_and_show(log: BugLog) -> None:
    x = log.open(unit_id="todo-be", test_name="auth login", title="x", got="500").bug
    y = log.open(unit_id="todo-be", test_name="lists", title="y", got="500").bug
    z = log.open(unit_id="integration", test_name="case-1", title="z", source="integration_test",
                 affected_units=["todo-be", "todo-fe"]).bug
    w = log.open(unit_id="todo-fe", test_name="renders", title="w", severity="low").bug
    log.transition(y.id, "fixed")

    def ids(**kw: object) -> list[str]:
        return [b.id for b in log.list(**kw).bugs]  # type: ignore[arg-type]

    assert ids() == [x.id, y.id, z.id, w.id]
    assert ids(unit="todo-be") == [x.id, y.id, z.id]  # affected units count
    assert ids(unit="todo-fe") == [z.id, w.id]
    assert ids(status="open") == [x.id, z.id, w.id]
    assert ids(status="open,fixed", unit="todo-be") == [x.id, y.id, z.id]
    assert ids(status=["fixed"]) == [y.id]
    assert ids(source="integration_test") == [z.id]
    assert ids(severity="critical") == [x.id] and ids(severity="high") == [y.id]
    assert ids(severity="low", unit="todo-be") == []
    with pytest.raises(BugNotFound):
        log.show("bug-none")
    shown = log.show(y.id)
    assert shown.bug.status == "fixed" and [h.line for h in shown.history] == [2, 5]
    assert shown.to_json()["history"][1]["status"] == "fixed"


def test_module_functions_for_tools(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "units" / "todo-be").mkdir(parents=True)
    (project / "units.json").write_text('{"units": []}')
    unit = project / "units" / "todo-be"
    assert bug_log_path(unit) == project.resolve() / "bugs.ndjson"
    assert workspace.unit_id_of(unit) == "todo-be"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert bug_log_path(plain) == plain.resolve() / ".greenloop" / "bugs.ndjson"
    assert workspace.unit_id_of(plain) == "plain"
    b = workspace.open_bug(unit, unit="todo-be", test="t", title="x", by="s-1")
    assert isinstance(b, Bug) and b.by == "s-1"
    assert workspace.open_bug(unit, unit="todo-be", test="t", title="again").id == b.id
    moved = workspace.transition(str(unit), b.id, "fixed", by="s-1", fix_ref="abc")
    assert moved.status == "fixed" and moved.fix_refs == ("abc",)
    assert [x.id for x in workspace.list_bugs(project, status="fixed")] == [b.id]
    assert workspace.show_bug(project, b.id).history[-1].bug.status == "fixed"
    with pytest.raises(GreenloopError):
        workspace.transition(unit, b.id, "open")
