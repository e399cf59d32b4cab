"""Failures a runner reports without a line are placed at their test's declaration, and only
when the file declares that test exactly once (greenloop.frameworks.declared)."""

from __future__ import annotations

from pathlib import Path

import pytest

from greenloop.frameworks.declared import with_declarations
from greenloop.hints.source import Sources
from greenloop.model import Failure

MOCHA = """const assert = require('node:assert')
describe('edge', () => {
  it('deep', () => assert.deepStrictEqual({a: 1}, {a: 2}))
  it('slow', function (done) { this.timeout(50); setTimeout(done, 500) })
  it("it's quoted", async () => {})
  test.only(`template`, () => {})
  it('twice', () => {})
  describe('inner', () => { it('twice', () => {}) })
})
"""
GO = """package edge

import "testing"

func TestAdd(t *testing.T) {
\tt.Run("small", func(t *testing.T) {})
}

func ExampleAdd() {
\t// Output: 3
}
"""
RUST = """pub fn inc(i: i32) -> i32 { i + 2 }

#[cfg(test)]
mod tests {
    #[test]
    fn inc_works() {}

    #[tokio::test]
    async fn inc_async() {}
}
"""
UNITTEST = """import unittest


class TestCalc(unittest.TestCase):
    @unittest.expectedFailure
    def test_xpass(self):
        pass

    def test_sub(self):
        pass
"""

# framework, file written, failure (test, file given), the place it gets (file, line) or None
CASES = [
    ("mocha", "test/a.spec.js", MOCHA, "edge > slow", "test/a.spec.js", ("test/a.spec.js", 4)),
    ("mocha", "test/a.spec.js", MOCHA, "edge > it's quoted", "test/a.spec.js", ("test/a.spec.js", 5)),
    ("bun", "test/a.spec.js", MOCHA, "edge > template", "test/a.spec.js", ("test/a.spec.js", 6)),
    ("mocha", "test/a.spec.js", MOCHA, "edge > inner > twice", "test/a.spec.js", None),  # declared twice
    ("mocha", "test/a.spec.js", MOCHA, "edge > missing", "test/a.spec.js", None),
    ("go", "edge_test.go", GO, "ExampleAdd", "edge_test.go", ("edge_test.go", 9)),
    ("go", "edge_test.go", GO, "TestAdd/small", "edge_test.go", ("edge_test.go", 5)),
    ("cargo", "src/lib.rs", RUST, "tests::inc_works", "src/lib.rs", ("src/lib.rs", 6)),
    ("cargo", "src/lib.rs", RUST, "tests::inc_async", "src/lib.rs", ("src/lib.rs", 9)),
    ("cargo", "src/lib.rs", RUST, "src/lib.rs - inc (line 3)", "src/lib.rs", None),  # a doctest
    # a test that returned Err names no file: its module path does
    ("cargo", "src/lib.rs", RUST, "tests::inc_works", None, ("src/lib.rs", 6)),
    ("cargo", "src/calc/tests.rs", RUST, "calc::tests::inc_async", None, ("src/calc/tests.rs", 9)),
    ("cargo", "tests/integration.rs", RUST, "inc_works", None, ("tests/integration.rs", 6)),
    # unittest names no file for an unexpected success: the dotted id names the module
    ("unittest", "tests/test_calc.py", UNITTEST, "tests.test_calc.TestCalc.test_xpass", None,
     ("tests/test_calc.py", 6)),
    ("unittest", "tests/test_calc.py", UNITTEST, "tests.test_calc.TestCalc.test_sub (a=1)", None,
     ("tests/test_calc.py", 9)),
    ("unittest", "tests/test_calc.py", UNITTEST, "elsewhere.TestCalc.test_sub", None, None),
]


@pytest.mark.parametrize(("framework", "path", "text", "test", "given", "placed"), CASES)
def test_a_failure_without_a_line_gets_its_declaration(
    tmp_path: Path, framework: str, path: str, text: str, test: str, given: str | None,
    placed: tuple[str, int] | None,
) -> None:
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text(text)
    failure = Failure(test=test, file=given, message="m")
    [out] = with_declarations((failure,), framework, Sources(str(tmp_path)))
    assert ((out.file, out.line) if out.line is not None else None) == placed
    if placed is None:
        assert out.file == given  # nothing is guessed


def test_a_line_the_runner_gave_is_kept_and_hooks_are_not_tests(tmp_path: Path) -> None:
    (tmp_path / "a.spec.js").write_text(MOCHA)
    given = Failure(test="edge > slow", file="a.spec.js", line=40, message="m")
    hook = Failure(test='edge > "before all" hook', file="a.spec.js", message="m", kind="hook")
    assert with_declarations((given, hook), "mocha", Sources(str(tmp_path))) == (given, hook)


def test_nothing_is_read_outside_the_workspace_or_without_one(tmp_path: Path) -> None:
    (tmp_path / "a.spec.js").write_text(MOCHA)
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = Failure(test="edge > slow", file="../a.spec.js", message="m")
    assert with_declarations((outside,), "mocha", Sources(str(ws))) == (outside,)
    assert with_declarations((outside,), "mocha", None) == (outside,)
    assert with_declarations((outside,), None, Sources(str(tmp_path))) == (outside,)
