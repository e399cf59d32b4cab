"""Where a failing test is declared, for the failures a runner reports without a line.

Runners leave the line out when nothing in the stack points into the test: mocha's and bun's
timeouts ("Timeout of 2000ms exceeded" has no frame), a test greenloop's deadline stopped, a
unittest test marked expectedFailure that passed, a Rust test that returned Err (no traceback
at all, and no file either: the module path or the dotted id names the file).
An agent told only "test/a.spec.js" has to search; told "test/a.spec.js:4" it opens the test.

The test's own name says what to look for, in its runner's words: the last title of a JS test
(`it('slow'` / `test("slow"` / `` it(`slow` ``), a Go test function (`func TestX(` for
`TestX/sub`), a Rust test function (`fn inc_works(` for `tests::inc_works`), a Python method
(`def test_x(`; unittest's dotted id also names the module file). A line is only given when the
file declares that name exactly once: a title two describes share stays without one (greenloop
never guesses a place).
"""

from __future__ import annotations

import os
import re
from itertools import islice

from greenloop.hints.source import Sources, definition_lines
from greenloop.model import Failure

__all__ = ["with_declarations"]

_KINDS = ("test", "timeout")  # a hook or a file that failed to load is not a declared test
_JS = frozenset(("vitest", "jest", "npm-test", "node:test", "mocha", "bun"))
_JS_CALL = r"\b(?:it|test|specify)(?:\.[\w$]+)*\s*\(\s*"
_SUBTEST_SUFFIX = re.compile(r" \([^()]*\)\Z")  # unittest's subTest parameters: "test_x (a=1)"
_NAME = re.compile(r"[A-Za-z_]\w*")


def _js_title(name: str) -> re.Pattern[str] | None:
    """`it('title'` in any of JavaScript's three quotes, for the test's own title (greenloop
    joins describe titles and the test's with " > ")."""
    title = name.rsplit(" > ", 1)[-1].strip()
    if not title or title == "(unnamed)":
        return None
    quoted = "|".join(
        re.escape(q + title.replace("\\", "\\\\").replace(q, "\\" + q) + q) for q in ("'", '"', "`")
    )
    return re.compile(_JS_CALL + f"(?:{quoted})")


def _function(framework: str, test: str) -> str | None:
    """The function that declares a Go, Rust or Python test: `TestX` of `TestX/sub`,
    `inc_works` of `tests::inc_works`, `test_x` of `pkg.mod.Class.test_x (a=1)` or of
    `tests/a.py::Class::test_x[1]`; None for a name that is not one (a Rust doctest)."""
    if framework == "go":
        top = test.split("/", 1)[0]
        return top if re.fullmatch(r"(?:Test|Example|Fuzz|Benchmark)\w*", top) else None
    if framework == "cargo":
        leaf = test.rsplit("::", 1)[-1].strip()
    else:
        leaf = _SUBTEST_SUFFIX.sub("", test).split("::")[-1].split("[", 1)[0].rsplit(".", 1)[-1].strip()
    return leaf if _NAME.fullmatch(leaf) else None


def _declared_line(sources: Sources, file: str, framework: str, test: str) -> int | None:
    """The one line of `file` that declares `test`, or None (not there, or there twice)."""
    lines = sources.lines(file)
    if not lines:
        return None
    if framework in _JS:
        pattern = _js_title(test)
        found = [i for i, text in enumerate(lines, 1) if pattern and pattern.search(text)]
    else:
        function = _function(framework, test)
        suffix = os.path.splitext(file)[1]
        found = list(islice(definition_lines(lines, function, suffix), 2)) if function else []
    return found[0] if len(found) == 1 else None


def _unittest_file(test: str, sources: Sources) -> str | None:
    """The module file of a unittest id (`pkg.test_mod.Class.test_x`): the longest dotted prefix
    that is a .py file under the root."""
    parts = _SUBTEST_SUFFIX.sub("", test).split(".")
    for cut in range(len(parts) - 1, 0, -1):
        candidate = os.path.join(*parts[:cut]) + ".py"
        if sources.lines(candidate) is not None:
            return candidate
    return None


def _cargo_file(test: str, sources: Sources) -> str | None:
    """A Rust test's file from its module path (`a::tests::x`: src/a/tests.rs, src/a.rs … then
    the crate roots and tests/*.rs): the first that declares the test exactly once."""
    modules = test.split("::")[:-1]
    candidates: list[str] = []
    for cut in range(len(modules), 0, -1):
        folder = "/".join(["src", *modules[:cut]])
        candidates += [folder + ".rs", folder + "/mod.rs"]
    candidates += ["src/lib.rs", "src/main.rs"]
    if sources.root is not None and os.path.isdir(os.path.join(sources.root, "tests")):
        names = os.listdir(os.path.join(sources.root, "tests"))  # integration tests: one crate a file
        candidates += sorted(f"tests/{n}" for n in names if n.endswith(".rs"))
    return next((c for c in candidates[:64] if _declared_line(sources, c, "cargo", test) is not None), None)


def with_declarations(
    failures: tuple[Failure, ...], framework: str | None, sources: Sources | None
) -> tuple[Failure, ...]:
    """The failures, those without a line given the line that declares their test (and a
    unittest or Rust failure without a file its module's file) when the file declares it
    exactly once. `sources`: the run's folder, read through the hints' bounded reader."""
    known = framework in _JS or framework in ("go", "cargo", "pytest", "unittest")
    if not known or framework is None or sources is None or all(f.line is not None for f in failures):
        return failures
    out: list[Failure] = []
    for failure in failures:
        if failure.line is None and failure.kind in _KINDS:
            file = failure.file
            if file is None and framework == "unittest":
                file = _unittest_file(failure.test, sources)
            elif file is None and framework == "cargo":  # a test that returned Err has no place
                file = _cargo_file(failure.test, sources)
            line = _declared_line(sources, file, framework, failure.test) if file else None
            if line is not None:
                failure = failure._replace(file=file, line=line)
        out.append(failure)
    return tuple(out)
