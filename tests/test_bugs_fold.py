"""The fold's fast path (ids from canonical prefixes, last lines decoded in batches) against a
careful line-by-line reader, and its fallbacks: hand-edited lines, unicode, escaped quotes,
torn, corrupt and misleading lines, in one batch or many."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from greenloop.bugs import fold
from greenloop.bugs.log import BugLog
from greenloop.bugs.record import Bug

STAMP = "2026-11-29T12:00:00Z"
# the log read whole, in chunks of a few lines, and in chunks shorter than a line
CHUNKS = pytest.mark.parametrize("chunk", [fold.READ_CHUNK, 1000, 97])
TORN = "incomplete (no closing brace: a torn write?); line skipped"


def rec(i: int, status: str = "open", **kw: Any) -> dict[str, Any]:
    b = Bug(id=f"bug-20261129-1200-{i:04x}", source="unit_test", unit_id=f"u{i % 3}", test_name=f"t{i}",
            title=f"title {i}", detail="AssertionError\n    at x.spec.ts:1:1\n", status=status,  # type: ignore[arg-type]
            created_at=STAMP, updated_at=STAMP)
    return {**b.to_json(), **kw}


def canonical(d: dict[str, Any]) -> bytes:
    return (json.dumps(d, ensure_ascii=False) + "\n").encode()


def careful(path: Path) -> dict[str, Bug]:
    """The fold's meaning, the slow way: the last line of each id that reads as a bug."""
    out: dict[str, Bug] = {}
    for raw in path.read_bytes().split(b"\n"):
        try:
            bug = Bug.from_json(json.loads(raw))
        except ValueError:
            continue
        out[bug.id] = bug
    return out


@CHUNKS
def test_every_kind_of_line_folds_like_the_careful_reader(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "bugs.ndjson"
    out = [canonical(rec(i)) for i in range(6)]
    out.append(canonical(rec(1, "fixing", title='expected "a\\b", got "c"')))  # escaped quotes, backslash
    out.append(canonical(rec(2, "fixed", title="ünïcödé 日本語 🐛", unit_id="ü")))
    # hand-edited: keys in another order, other spacing; the newest line of bug 3
    hand = {k: v for k, v in reversed(list(rec(3, "fixed", title="by hand").items()))}
    out.append(json.dumps(hand, separators=(",", ":")).encode() + b"\n")
    out.append(b"\n")  # a blank line
    out.append(canonical(rec(4, "fixing"))[:-1] + b"\r\n")  # a CRLF line
    out.append(json.dumps(rec(6, title="only hand")).replace('{"id"', '{ "id"').encode() + b"\n")
    out.append(canonical(rec(5, "fixed"))[:70])  # torn at the end: bug 5 stays open
    path.write_bytes(b"".join(out))
    folded = BugLog(path, chunk=chunk).fold()
    assert {b.id: b for b in folded.bugs} == careful(path)
    by_id = {b.id: b for b in folded.bugs}
    assert [b.id for b in folded.bugs] == [rec(i)["id"] for i in range(7)]  # order of first lines
    assert by_id[rec(1)["id"]].title == 'expected "a\\b", got "c"'
    assert by_id[rec(2)["id"]].title == "ünïcödé 日本語 🐛" and by_id[rec(2)["id"]].unit_id == "ü"
    assert by_id[rec(3)["id"]].title == "by hand" and by_id[rec(3)["id"]].status == "fixed"
    assert by_id[rec(4)["id"]].status == "fixing"
    assert by_id[rec(5)["id"]].status == "open"
    assert folded.warnings == (f"bugs.ndjson line 13: {TORN}",)


@CHUNKS
def test_a_bad_last_line_falls_back_to_the_newest_good_one(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "bugs.ndjson"
    a, b, c, d = (rec(i) for i in range(4))
    path.write_bytes(b"".join([
        canonical(a), canonical(b), canonical(c), canonical(d),                     # lines 1-4
        canonical({**a, "status": "fixing"}),                                       # 5
        json.dumps({"status": "fixed", **{k: v for k, v in a.items() if k != "status"}}).encode()
        + b"\n",                                                                    # 6: hand, newest good
        canonical({**a, "status": "verified"})[:-30] + b"\n",                       # 7: torn
        canonical({**b, "status": "fixed"}).replace(b'"status": "fixed"', b'"status": "gone"'),  # 8
        canonical({**b, "status": "fixing"}).replace(b"\xff", b"")[:-1] + b"\xff\n",  # 9: not UTF-8
        canonical({**c, "status": "fixed", "id": "bug-other"})[:-2] + b', "id": "bug-x"}\n',  # 10
        canonical({**d, "status": "fixed"})[:-1] + b' {"id": "two values"}\n',       # 11
    ]))
    folded = BugLog(path, chunk=chunk).fold()
    got = {x.id: x.status for x in folded.bugs}
    assert got == {a["id"]: "fixed", b["id"]: "open", c["id"]: "open", d["id"]: "open"}  # no bug-other
    assert [w.split(":")[0] for w in folded.warnings] == [
        "bugs.ndjson line 7", "bugs.ndjson line 8", "bugs.ndjson line 9", "bugs.ndjson line 10",
        "bugs.ndjson line 11"]
    assert "incomplete" in folded.warnings[0] and "status 'gone'" in folded.warnings[1]
    assert "not valid UTF-8" in folded.warnings[2]
    assert "id prefix 'bug-other' disagrees with its id 'bug-x'" in folded.warnings[3]
    assert "not valid JSON" in folded.warnings[4]


@CHUNKS
def test_many_batches_with_a_bad_line_in_one(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "bugs.ndjson"
    n = fold.DECODE_BATCH * 2 + 10
    out = [canonical(rec(i)) for i in range(n)]
    out += [canonical(rec(i, "fixed")) for i in range(0, n, 2)]
    cut = fold.DECODE_BATCH + 6  # a bug in the second batch, whose fixed line is cut short: it stays open
    bad = n + cut // 2
    out[bad] = out[bad][:40] + b"\n"
    path.write_bytes(b"".join(out))
    folded = BugLog(path, chunk=chunk).fold()
    assert {b.id: b for b in folded.bugs} == careful(path) and len(folded.bugs) == n
    assert [b.id for b in folded.bugs] == [rec(i)["id"] for i in range(n)]
    assert folded.warnings == (f"bugs.ndjson line {bad + 1}: {TORN}",)
    assert folded.bugs[cut].status == "open" and folded.bugs[cut + 2].status == "fixed"


@CHUNKS
def test_a_reader_catching_up_keeps_line_numbers_and_fallbacks(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "bugs.ndjson"
    path.write_bytes(canonical(rec(0)) + canonical(rec(1)))
    reader = BugLog(path, chunk=chunk)
    assert len(reader.fold().bugs) == 2
    with path.open("ab") as fh:  # a torn line, then a writer's line after it; then text glued to a torn tail
        fh.write(canonical(rec(0, "fixed"))[:50])
    assert reader.fold().bugs[0].status == "open"
    assert reader.warnings == (f"bugs.ndjson line 3: {TORN}",)
    BugLog(path).transition(rec(1)["id"], "fixing")
    with path.open("ab") as fh:
        fh.write(canonical(rec(1, "fixed"))[:-1])  # no newline yet
    assert reader.fold().bugs[1].status == "fixed"
    with path.open("ab") as fh:
        fh.write(b"glued on\n" + canonical(rec(2)))
    folded = reader.fold()
    assert [b.status for b in folded.bugs] == ["open", "fixed", "open"]
    assert folded.warnings[-1] == ("bugs.ndjson line 5: text appended to a line that had no newline; "
                                   "line skipped")
    fresh = BugLog(path, chunk=chunk).fold()  # a fresh reader sees line 5 as one line, which does not read
    assert [b.status for b in fresh.bugs] == ["open", "fixing", "open"]
    assert fresh.warnings[-1].startswith("bugs.ndjson line 5: ")


@CHUNKS
def test_a_line_whose_id_is_given_twice_is_caught_in_a_clean_batch(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "bugs.ndjson"
    a, b = rec(0), rec(1)
    twice = canonical({**a, "status": "fixed"})[:-2] + b', "id": "bug-x"}\n'  # JSON keeps the last id
    path.write_bytes(canonical(a) + canonical(b) + twice + canonical({**b, "status": "fixing"}))
    folded = BugLog(path, chunk=chunk).fold()
    assert [(x.id, x.status) for x in folded.bugs] == [(a["id"], "open"), (b["id"], "fixing")]
    why = f"its id prefix {a['id']!r} disagrees with its id 'bug-x'"
    assert folded.warnings == (f"bugs.ndjson line 3: {why}; line skipped",)
