"""Hints on the four kinds of failure issue 32 found wrong (item 5): an asyncio.wait_for timeout
that Python 3.11 reports as CancelledError, a dict whose total differs only because its tax
does, a parametrized id holding code, and a check between two literals. The records are the
ones greenloop's pytest parser made of a real pytest 8 run on Python 3.11 (the test file
below), so the message, values and stack are pytest's own."""

from __future__ import annotations

from pathlib import Path

from greenloop.hints.hint import hint_for
from greenloop.hints.source import Sources, call_in
from greenloop.hints.values import compare_texts
from greenloop.model import Failure

TEST_FILE = '''import asyncio
import pytest

async def slow():
    await asyncio.sleep(5)

def test_wait_for_times_out():
    async def main():
        await asyncio.wait_for(slow(), timeout=0.05)
    asyncio.run(main())

def compute():
    return {"subtotal": 100, "tax": 21, "total": 121}

def test_invoice():
    assert compute() == {"subtotal": 100, "tax": 20, "total": 120}

@pytest.mark.parametrize("label", ["<img src=x onerror=alert(1)>"])
def test_label_kept(label):
    out = render(label)
    assert out == "<img src=x onerror=alert(1)>"

def test_literals():
    assert 1 == 2
'''

WAIT_FOR = Failure(
    test="tests/test_i5.py::test_wait_for_times_out",
    file="tests/test_i5.py",
    line=9,
    message="asyncio.exceptions.CancelledError\nTimeoutError",
    stack="tests/test_i5.py:5:\ntests/test_i5.py:10:\ntests/test_i5.py:9: in main",
)
# pytest prints "Differing items" in the order of a set: here total came before tax
INVOICE = Failure(
    test="tests/test_i5.py::test_invoice",
    file="tests/test_i5.py",
    line=16,
    message="AssertionError: assert {'subtotal': ... 'total': 121} == {'subtotal': ... 'total': 120}\n"
    "Omitting 1 identical items, use -vv to show\nDiffering items:\n{'total': 121} != {'total': 120}\n"
    "{'tax': 21} != {'tax': 20}\nUse -v to get more diff",
    expected="{'subtotal': ... 'total': 120}",
    got="{'subtotal': ... 'total': 121}",
    stack="tests/test_i5.py:16: AssertionError",
)
LABEL = Failure(
    test="tests/test_i5.py::test_label_kept[<img src=x onerror=alert(1)>]",
    file="tests/test_i5.py",
    line=21,
    message="AssertionError: assert '<img src=x onerror=alert(2)>' == '<img src=x onerror=alert(1)>'\n"
    "- <img src=x onerror=alert(1)>\n?                          ^\n+ <img src=x onerror=alert(2)>\n"
    "?                          ^",
    expected="'<img src=x onerror=alert(1)>'",
    got="'<img src=x onerror=alert(2)>'",
    stack="tests/test_i5.py:21: AssertionError",
)
LITERALS = Failure(
    test="tests/test_i5.py::test_literals",
    file="tests/test_i5.py",
    line=24,
    message="assert 1 == 2",
    expected="2",
    got="1",
    stack="tests/test_i5.py:24: AssertionError",
)


def _sources(tmp_path: Path) -> Sources:
    (tmp_path / "tests").mkdir(exist_ok=True)
    (tmp_path / "tests" / "test_i5.py").write_text(TEST_FILE, encoding="utf-8")
    return Sources(str(tmp_path))


def test_a_cancelled_wait_for_is_named_a_timeout_in_python_words(tmp_path: Path) -> None:
    sources = _sources(tmp_path)
    for failure in (WAIT_FOR, WAIT_FOR._replace(message="asyncio.exceptions.CancelledError")):
        for zh in (False, True):
            hint = hint_for(failure, framework="pytest", language="zh" if zh else "en", sources=sources)
            assert "wait_for" in hint and "tests/test_i5.py:9" in hint, hint
            assert ("超时" if zh else "timeout") in hint
            assert "promise" not in hint.lower() and "await/return" not in hint


def test_a_cancelled_error_without_a_wait_is_not_called_a_timeout() -> None:
    bare = WAIT_FOR._replace(message="asyncio.exceptions.CancelledError", stack="tests/test_i5.py:9")
    assert "timeout" not in hint_for(bare, framework="pytest").lower()


def test_a_python_test_that_never_finished_gets_no_javascript_advice() -> None:
    hung = Failure(
        test="tests/test_x.py::test_hangs",
        file="tests/test_x.py",
        line=3,
        message="Failed: Timeout (>2.0s) from pytest-timeout.",
        stack="tests/test_x.py:3",
    )
    hint = hint_for(hung, framework="pytest")
    assert "blocking call" in hint and "promise" not in hint and "await" not in hint
    js = hint_for(hung._replace(file="tests/x.test.js", stack="at tests/x.test.js:3:1"), framework="vitest")
    assert "await" in js


def test_the_key_that_differs_first_is_named_not_the_total_that_follows_it(tmp_path: Path) -> None:
    hint = hint_for(INVOICE, framework="pytest", sources=_sources(tmp_path))
    # pytest's shortened values hide which key comes first: both are named, no guess about either
    assert "tax is 21, expected 20" in hint and "total is 121" in hint
    assert hint.index("tax") < hint.index("total") and "off by one" not in hint.lower()
    # with the whole values the total is seen to be the sum of its parts: tax is the cause
    whole = INVOICE._replace(
        message="AssertionError: expected { subtotal: 100, total: 121, tax: 21 } to deeply equal"
        " { subtotal: 100, total: 120, tax: 20 }",
        expected="{ subtotal: 100, total: 120, tax: 20 }",
        got="{ subtotal: 100, total: 121, tax: 21 }",
    )
    hint = hint_for(whole, framework="vitest")
    assert "tax is 21, expected 20 (total follows from it)" in hint, hint
    # a total off by exactly the sum of the other differences follows from them too
    finding = compare_texts("{'tax': 3, 'fee': 2, 'total': 15}", "{'tax': 1, 'fee': 1, 'total': 12}")
    assert finding is not None and finding.detail_en.startswith("tax is 3, expected 1 (total follows")


def test_code_inside_a_string_or_a_test_id_is_not_the_call_under_test(tmp_path: Path) -> None:
    assert call_in('assert out == "<img src=x onerror=alert(1)>"') is None
    found = call_in("assert render('<b onclick=go(1)>') == x")
    assert found is not None and found.name == "render"
    hint = hint_for(LABEL, framework="pytest", sources=_sources(tmp_path))
    assert "alert(1) returned" not in hint and "render(label) returned" in hint, hint


def test_a_check_between_two_literals_gets_no_guess(tmp_path: Path) -> None:
    sources = _sources(tmp_path)
    for zh in (False, True):
        hint = hint_for(LITERALS, framework="pytest", language="zh" if zh else "en", sources=sources)
        assert "assert 1 == 2" in hint and "off by one" not in hint.lower() and "差 1" not in hint, hint


def _parsed(framework: str, folder: str, name: str) -> dict[str, Failure]:
    """The failures greenloop's parser reads from a captured real run (tests/fixtures/)."""
    from greenloop.frameworks import parse_text

    base = Path(__file__).parent / "fixtures" / folder
    text = (base / name).read_text(encoding="utf-8").splitlines()
    return {f.test: f for f in parse_text(framework, text, root=str(base / "src")).failures}


def test_a_go_panic_names_the_function_that_panicked_and_its_line() -> None:
    """issue 30, item 10: the panic's own function and file:line, not only a line."""
    base = Path(__file__).parent / "fixtures" / "go" / "mixed" / "src"
    failure = _parsed("go", "go/mixed", "json.txt")["TestIndexPanics"]
    for zh in (False, True):
        hint = hint_for(failure, framework="go", language="zh" if zh else "en", sources=Sources(str(base)))
        assert "Index (<work>/crash/crash.go:3)" in hint and "crash_test.go:8" in hint, hint
        assert "index out of range [5]" in hint


def test_a_rust_panic_names_the_function_it_happened_in_but_an_assert_is_not_a_panic() -> None:
    base = Path(__file__).parent / "fixtures" / "cargo" / "mixed" / "src"
    failures = _parsed("cargo", "cargo/mixed", "plain.txt")
    hint = hint_for(failures["tests::explicit_panic"], framework="cargo", sources=Sources(str(base)))
    assert "explicit_panic (src/lib.rs:49) panics ('index out of bounds" in hint, hint
    hint = hint_for(failures["tests::plain_assert"], framework="cargo", sources=Sources(str(base)))
    assert "panics" not in hint


def test_a_syntax_error_is_placed_where_the_file_does_not_parse_not_at_its_import() -> None:
    """issue 30, item 9: pytest's record of app/pricing.py:5 (imported by test_pricing.py:1)."""
    failure = _parsed("pytest", "pytest/syntax", "plain.txt")["test_pricing.py"]
    hint = hint_for(failure, framework="pytest")
    assert "app/pricing.py:5" in hint and "test_pricing.py:1" not in hint, hint
    babel = Failure(
        test="tests/ts-imports.test.ts",
        file="tests/ts-imports.test.ts",
        message="SyntaxError: /w/tests/ts-imports.test.ts: Unexpected token, expected \",\" (17:23)",
        stack="at tests/setup.js:3:1",
        kind="load",
    )
    assert "/w/tests/ts-imports.test.ts:17" in hint_for(babel, framework="jest")


def test_an_indentation_error_is_a_syntax_error_placed_where_it_is() -> None:
    """issue 30, item 9: unittest's record of codec/enc.py:7 (IndentationError: unexpected
    indent), reached through codec/__init__.py:1 and test_codec.py:3. The hint named the
    importing frame (codec/__init__.py:1): IndentationError and TabError are SyntaxErrors."""
    failures = _parsed("unittest", "unittest/indent", "plain.txt")
    assert set(failures) == {"codec", "test_codec"}
    for failure in failures.values():
        for language in ("en", "zh"):
            hint = hint_for(failure, framework="unittest", language=language)
            assert "codec/enc.py:7" in hint and "unexpected indent" in hint, hint
            assert "__init__.py" not in hint and "test_codec.py:3" not in hint, hint
