"""The two helpers of hints: what two values show (hints/values.py) and what the workspace's
files say (hints/source.py: the failing line, the enclosing function, a called function's definition)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from greenloop.hints.printed import UNDEFINED, parse_value
from greenloop.hints.source import Call, Sources, call_in, failing_call
from greenloop.hints.values import compare, compare_texts, diff_from_message


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{'subtotal': 1800, 'currency': 'EUR'}", {"subtotal": 1800, "currency": "EUR"}),  # pytest
        ('{"currency": "EUR", "items": 2}', {"currency": "EUR", "items": 2}),  # jest
        ("{ title: 'a', done: false, tags: [] }", {"title": "a", "done": False, "tags": []}),  # vitest/node
        ('Object {\n  "a": 1,\n}', {"a": 1}),  # jest's older pretty form
        ("subtotal: 18\nitems: 2\ncurrency: 'EUR'", {"subtotal": 18, "items": 2, "currency": "EUR"}),  # node
        ("0: 'a'\n1: 'b'", ["a", "b"]),  # node's array
        ("undefined", UNDEFINED),
        ("null", None),
        ("-25", -25),
        ("2.5", 2.5),
        ("1 item", "1 item"),  # node:test prints a string bare
    ],
)
def test_values_are_read_as_each_runner_prints_them(text: str, value: object) -> None:
    assert parse_value(text) == value


@pytest.mark.parametrize(
    ("got", "expected", "words", "kind", "says"),
    [
        ("9", "10", "", "off-by-one", "off by one"),
        ("1800", "18", "price", "factor", "cents vs units"),
        ("1800", "18", "", "factor", "a factor of 100"),
        ("5", "5000", "delay", "factor", "milliseconds vs seconds"),
        ("0.25", "25", "percent", "factor", "percentage"),
        ("-50", "50", "", "sign", "sign"),
        ("2.67", "2.68", "", "rounding", "rounding"),
        ("3", "3.5", "", "fraction-dropped", "fraction"),
        ("'alice'", "'Alice'", "", "case", "case"),
        ("'a '", "'a'", "", "whitespace", "whitespace"),
        ("'1 items'", "'1 item'", "", "plural", "plural"),
        ("'Lovelace Ada'", "'Ada Lovelace'", "", "swapped", "swapped"),
        ("'hell'", "'hello'", "", "truncated", "one character short"),
        ("[1, 2]", "[1, 2, 3]", "", "truncated-list", "cut short"),
        ("['a', 'b', 'a']", "['a', 'b']", "", "duplicates", "repeats"),
        ("[3, 2, 1]", "[1, 2, 3]", "", "order", "reverse"),
        ("{'a': 1}", "{'a': 1, 'b': 2}", "", "missing-key", "'b'"),
        ("{'a': 1, 'b': 2}", "{'a': 1}", "", "extra-key", "'b'"),
        ('{"user_id": 1}', '{"userId": 1}', "", "renamed-key", "'userId'"),
        ("None", "180", "", "no-return", "None"),
        ("undefined", "18", "", "no-return", "undefined"),
        ("'3'", "3", "", "type", "string"),
        ("Promise {<pending>}", "18", "", "not-awaited", "await"),
        ("NaN", "3.5", "", "nan", "NaN"),
    ],
)
def test_what_the_values_show(got: str, expected: str, words: str, kind: str, says: str) -> None:
    finding = compare_texts(got, expected, words)
    assert finding is not None and finding.kind == kind
    assert says in finding.en + finding.detail_en
    assert finding.zh  # both languages


@pytest.mark.parametrize(
    ("got", "expected"),
    [
        ("7", "42"),
        ("'abc'", "'xyz'"),
        ("false", "'truthy'"),
        ("[1, 9]", "[4, 5]"),
        ("{'a': 1}", "{'a': 1}"),
        ("[]", "[1, 2]"),  # empty: nothing says where the items went
        ("0", "0.5"),  # zero: not evidently a dropped fraction
    ],
)
def test_values_that_show_nothing_give_no_finding(got: str, expected: str) -> None:
    assert compare_texts(got, expected) is None


def test_a_boolean_field_is_named_without_advice_about_comparisons() -> None:
    finding = compare({"done": False}, {"done": True})
    assert finding is not None and finding.detail_en == "done is False, expected True" and not finding.en


def test_pytest_diff_lines_stand_in_for_shortened_values() -> None:
    msg = (
        "assert {'currency': ...btotal': 1800} == {...}\n"
        "Differing items:\n{'subtotal': 1800} != {'subtotal': 18.0}"
    )
    finding = diff_from_message(msg, "invoice total")
    assert finding is not None and finding.kind == "factor" and "subtotal is 1800" in finding.detail_en
    right = diff_from_message("Right contains 1 more item:\n{'email': 'a@b.c'}")
    assert right is not None and right.kind == "missing-key"


def test_the_call_a_test_line_checks() -> None:
    assert call_in("expect(cart.total(items)).toBe(18);") == Call("cart", "total", "cart.total(items)")
    assert call_in("assert.strictEqual(toCents(0.5), 50);") == Call("", "toCents", "toCents(0.5)")
    assert call_in("assert billing.page_count(95, 10) == 10") == Call(
        "billing", "page_count", "billing.page_count(95, 10)"
    )
    assert call_in("expect(value).toBe(2);") is None
    chained = "const res = await request(app).post('/login').send({ name: 'bob' }).expect(401);"
    assert call_in(chained) == Call(
        "", "request", "request(app).post('/login').send({ name: 'bob' }).expect(401)"
    )
    lines = ["const res = await request(app).get('/x');", "expect(res.status).toBe(200);"]
    assert failing_call(lines, 2) == Call("", "request", "request(app).get('/x')")
    lines = ["def test_x():", "    result = invoice([1])", "    assert result == 3"]
    assert failing_call(lines, 3) == Call("", "invoice", "invoice([1])")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def test_definitions_are_found_through_the_test_files_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "src/cart.ts": "export const total = (items: number[]) => {\n  return 1;\n};\n",
            "tests/cart.test.ts": "import { total } from '../src/cart';\nexpect(total([1])).toBe(2);\n",
            "lib/shop/billing.py": "class Invoice:\n    def amount(self):\n        return 1\n",
            "tests/test_billing.py": "from shop.billing import Invoice\n\ndef test_a():\n"
            "    inv = Invoice()\n    assert inv.amount() == 2\n",
        },
    )
    src = Sources(str(tmp_path))
    assert src.definition("tests/cart.test.ts", Call("", "total", "total([1])")) == ("src/cart.ts", 1)
    call = src.call_at("tests/test_billing.py", 5)
    assert call == Call("inv", "amount", "inv.amount()")
    assert src.definition("tests/test_billing.py", call) == ("lib/shop/billing.py", 2)
    assert src.function_at("lib/shop/billing.py", 3) == "amount"
    assert src.returns("lib/shop/billing.py", 2) is True


def test_sources_read_nothing_outside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret.py").write_text("def leak():\n    return 1\n")
    os.symlink(tmp_path / "secret.py", root / "link.py")
    src = Sources(str(root))
    assert src.lines("../secret.py") is None
    assert src.lines("link.py") is None
    assert src.lines(str(tmp_path / "secret.py")) is None
    assert Sources(None).line("a.py", 1) is None


def test_go_reports_after_the_check_so_the_call_is_on_the_line_above() -> None:
    """Go tests fail with t.Errorf/t.Fatalf after an `if`: the value came from the line above,
    and the `{` that opens the if block does not make it one statement with the test's head."""
    lines = ["func TestAdd(t *testing.T) {", "\tif got := Add(1, 2); got != 3 {",
             '\t\tt.Errorf("Add(1, 2) = %d, want %d", got, 3)', "\t}", "}"]
    assert failing_call(lines, 3) == Call("", "Add", "Add(1, 2)")
    lines = ["func TestSub(t *testing.T) {", "\tif 1+1 != 3 {", '\t\tt.Fatalf("got %d, want %d", 2, 3)']
    assert failing_call(lines, 3) is None  # no call computed the value: none is named
    assert call_in('t.Errorf("got %v", Total(items))') == Call("", "Total", "Total(items)")


def test_a_place_at_the_test_itself_means_the_first_call_in_its_body() -> None:
    """libtest places a #[should_panic] test that did not panic at its fn line."""
    lines = ["    #[should_panic]", "    fn div_zero_panics() {", "        super::div(1, 0);", "    }"]
    assert failing_call(lines, 2) == Call("", "div", "div(1, 0)")


def test_go_and_rust_definitions_are_found_without_imports(tmp_path: Path) -> None:
    """A Go test sees its package's other files; a Rust unit test sits beside its code."""
    _write(
        tmp_path,
        {
            "calc/calc.go": "package calc\n\n// Add adds.\nfunc Add(a, b int) int { return a + b + 1 }\n",
            "calc/cart.go": "package calc\n\ntype Cart struct{}\n\nfunc (c *Cart) Total() int { return 1 }\n",
            "calc/calc_test.go": "package calc\n",
            "src/lib.rs": "pub fn inc(i: i32) -> i32 {\n    i + 2\n}\n#[cfg(test)]\nmod tests {}\n",
        },
    )
    src = Sources(str(tmp_path))
    assert src.definition("calc/calc_test.go", Call("", "Add", "Add(1, 2)")) == ("calc/calc.go", 4)
    assert src.definition("calc/calc_test.go", Call("c", "Total", "c.Total()")) == ("calc/cart.go", 5)
    assert src.definition("src/lib.rs", Call("super::", "inc", "super::inc(1)")) == ("src/lib.rs", 1)


def test_unittest_assertions_are_not_the_call_under_test() -> None:
    assert call_in("self.assertEqual(invoice([1]), {'a': 1})") == Call("", "invoice", "invoice([1])")


def test_frames_of_every_stack_shape_and_only_the_workspace_counts() -> None:
    from greenloop.hints.frames import top_user_frame
    from greenloop.model import Failure

    def place(stack: str) -> str | None:
        return top_user_frame(Failure(test="t", file="tests/a.test.js", line=5, stack=stack))

    assert place("❯ titleLength code/service.js:3:21\n❯ tests/a.test.js:5:3") == "code/service.js:3"
    assert place("TestContext.<anonymous> (tests/a.test.js:5:3)") == "tests/a.test.js:5"
    # an absolute path beside relative ones lies outside the workspace (the parsers relativize)
    assert place("at f (/usr/lib/node/x.js:1:1)\nat g (src/a.js:3:1)\nat tests/a.test.js:5:3") == "src/a.js:3"
    assert place('File "/srv/app/tests/a.py", line 2, in t\nFile "/srv/app/code/b.py", line 9, in f') == (
        "/srv/app/code/b.py:9"
    )


def test_hints_are_total_on_odd_input(tmp_path: Path) -> None:
    """Any failure record gets a hint (a hint bug must never turn a red run into a crash)."""
    import random

    from greenloop.hints.hint import hint_for
    from greenloop.model import Failure

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "a.test.js").write_text("expect(f(\n")
    pieces = [
        "KeyError: ",
        "'",
        '"',
        "{",
        "}",
        "[",
        "]",
        "(",
        ")",
        "\n",
        " == ",
        " !== ",
        "where ",
        "+  where ",
        "None",
        "undefined",
        "NaN",
        "Promise {",
        "…(2)",
        "...",
        "0x...",
        "at ",
        "❯ ",
        "tests/a.test.js:1:1",
        "code/x.py:3: ",
        'File "x.py", line 2, in f',
        "\x00",
        "é",
        "中",
        "1800",
        "-3",
        "1.5",
        "[as x]",
        "UNIQUE constraint failed: ",
        "Differing items:",
        "Right contains 1 more item:",
        "assert ",
        "expect(",
    ]
    rng = random.Random(7)
    sources = Sources(str(tmp_path))

    def junk() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))

    for i in range(400):
        failure = Failure(
            test=junk() or "t",
            file=rng.choice([None, "tests/a.test.js", "tests/x.py", junk()]),
            line=rng.choice([None, 0, 1, 5, 10**9]),
            message=junk(),
            expected=rng.choice([None, junk()]),
            got=rng.choice([None, junk()]),
            stack=junk(),
            kind=rng.choice(["test", "load", "hook"]),
        )
        for language in ("en", "zh"):
            hint = hint_for(failure, language=language, sources=sources if i % 2 else None)
            assert hint.strip(), failure


# expected, got (as each runner renders them), the key the hint names first
DIFF_KEYS = [
    # mocha's rendering of assert.deepStrictEqual({a: 1, b: [1, 2]}, {a: 1, b: [1, 3]}): no commas
    ('{\n  "a": 1\n  "b": [\n    1\n    3\n  ]\n}', '{\n  "a": 1\n  "b": [\n    1\n    2\n  ]\n}', "b"),
    ('{"a": 1, "b": 2}', '{"a": 1, "b": 3}', "b"),  # JSON
    ("{'name': 'x', 'age': 3}", "{'name': 'y', 'age': 3}", "name"),  # Python
    ('{ id: 1, url: "http://a/b" }', '{ id: 1, url: "http://a/c" }', "url"),  # JS; a URL is no key
    ('{"user": {"id": 1, "roles": ["a"]}}', '{"user": {"id": 1, "roles": ["b"]}}', "roles"),  # nested
    ('{"a": 1}', '{"a": 1, "extra": 2}', "extra"),  # a key only one side has
]


@pytest.mark.parametrize(("expected", "got", "key"), DIFF_KEYS)
def test_the_first_differing_key_in_every_notation(expected: str, got: str, key: str) -> None:
    from greenloop.hints.hint import _diff_key
    from greenloop.model import Failure

    message = "AssertionError [ERR_ASSERTION]: Expected values to be strictly deep-equal:"
    failure = Failure(test="t", file=None, line=None, message=message, expected=expected, got=got)
    assert _diff_key(failure) == key


def test_a_mocha_object_diff_names_the_key_that_differs() -> None:
    """mocha renders objects without commas, which no value reader parses: the hint names the
    first key that differs (it named the first key of all before)."""
    from greenloop.hints.hint import hint_for
    from greenloop.model import Failure

    expected, got, _ = DIFF_KEYS[0]
    message = "AssertionError [ERR_ASSERTION]: Expected values to be strictly deep-equal:"
    hint = hint_for(Failure(test="t", file=None, line=None, message=message, expected=expected, got=got))
    assert "(first difference: 'b')" in hint, hint
