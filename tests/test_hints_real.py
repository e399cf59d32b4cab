"""Hints on six real suites with a wrong value put into their source (issue 32, item 11):
tests/fixtures/hints/real/cases.json, captured by scripts/capture_real_hints from the real
runners through `greenloop run` (itsdangerous and toolz under pytest, ms under mocha,
commander under jest, ufo and path-to-regexp under vitest), each record with the few source
lines its hint reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from greenloop.hints.hint import hint_for
from greenloop.hints.source import Sources
from greenloop.model import Failure

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "hints" / "real" / "cases.json").read_text(encoding="utf-8")
)["cases"]
_JS = ("vitest", "jest", "mocha", "node:test", "bun")
_TEST_FILE = re.compile(
    r"(?:^|/)(?:tests?|__tests__)/|(?:^|/)test_[^/]*\.py|\.(?:test|spec)\.[jt]s|tests\.js"
)


def _hint(case: dict[str, Any], root: Path) -> str:
    """The case's hint, its source lines laid out at their numbers under `root`."""
    for file, lines in case["sources"].items():
        path = root / file
        path.parent.mkdir(parents=True, exist_ok=True)
        text = [""] * max((n for n, _ in lines), default=0)
        for n, line in lines:
            text[n - 1] = line
        path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return hint_for(Failure(**case["failure"]), framework=case["framework"], sources=Sources(str(root)))


@pytest.fixture(scope="module")
def hints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return {c["id"]: _hint(c, tmp_path_factory.mktemp("case")) for c in CASES}


def test_the_cases_are_real_and_broad() -> None:
    assert {c["project"] for c in CASES} >= {"itsdangerous", "toolz", "ms", "ufo", "path-to-regexp"}
    assert len(CASES) >= 50


def test_most_wrong_values_name_the_code_under_test_and_its_line(hints: dict[str, str]) -> None:
    named = [
        c["id"]
        for c in CASES
        if re.search(r"[\w$.]+ \(" + re.escape(c["mutation"]["file"]) + r":\d+\)", hints[c["id"]])
    ]
    assert len(named) >= 41, sorted(set(hints) - set(named))  # 4 of 62 before (bench/hint_accuracy.py)


def test_two_numbers_from_a_call_that_is_not_http_are_not_a_status(hints: dict[str, str]) -> None:
    hint = hints["itsdangerous:bytes-to-int-off:1"]  # bytes_to_int(enc): 193 where 192 is expected
    assert "route" not in hint and "status" not in hint
    assert "bytes_to_int (src/itsdangerous/encoding.py:" in hint


def test_a_hint_never_names_a_test_file_as_where_the_value_comes_from(hints: dict[str, str]) -> None:
    for case in CASES:
        m = re.search(r"(?:comes from|来自) [\w$.]+ \(([^):]+):", hints[case["id"]])
        assert m is None or not _TEST_FILE.search(m.group(1)), hints[case["id"]]


def test_a_javascript_hint_speaks_javascript(hints: dict[str, str]) -> None:
    for case in CASES:
        if case["framework"] in _JS:
            assert "None" not in hints[case["id"]] and "returned None" not in hints[case["id"]]


def test_toolz_tail_names_the_item_that_is_missing(hints: dict[str, str]) -> None:
    hint = hints["toolz:tail-one-short:1"]
    assert "['C']" in hint and "'E' is missing" not in hint
    assert "tail (toolz/itertoolz.py:325)" in hint


def test_extra_slashes_are_not_parts_in_another_order(hints: dict[str, str]) -> None:
    kinds = ("ufo:join", "ufo:trailing", "ufo:without-protocol")
    slashes = [c["id"] for c in CASES if c["id"].startswith(kinds)]
    assert slashes
    for case_id in slashes:
        assert "another order" not in hints[case_id] and "other separators" in hints[case_id], hints[case_id]
    assert "'//' where '/' is expected" in hints["ufo:trailing-slash-twice:0"]


def test_https_for_http_is_not_a_plural(hints: dict[str, str]) -> None:
    assert "plural" not in hints["ufo:with-http:0"]
    assert "plural" in hints["ms:long-plural:0"]


def test_a_mocha_expect_js_failure_reads_its_values_and_the_module_it_calls(hints: dict[str, str]) -> None:
    hint = hints["ms:hours-factor:0"]
    assert "ms('1h') returned 60000" in hint and "3600000" in hint and "ms (index.js:26)" in hint


def test_a_helper_the_test_file_defines_is_not_the_code_under_test(hints: dict[str, str]) -> None:
    hint = hints["commander:max-distance:0"]  # getSuggestion is defined in help.suggestion.test.js
    assert "getSuggestion" not in hint and "tests/help.suggestion.test.js:65" in hint
    # a JavaScript function without a return gives undefined: null is not a missing return
    assert "without a return" not in hint and "null" in hint


def test_a_none_inside_a_returned_tuple_is_not_a_missing_return(hints: dict[str, str]) -> None:
    hint = hints["itsdangerous:payload-dropped:0"]  # loads returned (payload, None)
    assert "item [1] is None" in hint and "without a return" not in hint and "returned None" not in hint
