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

import contextlib
import os
import re
from collections.abc import Callable

from greenloop.hints.source import Sources
from greenloop.model import Failure

__all__ = ["with_declarations"]

_KINDS = ("test", "timeout")  # a hook or a file that failed to load is not a declared test
_JS = ("vitest", "jest", "npm-test", "node:test", "mocha", "bun")
_JS_CALL = r"\b(?:it|test|specify)(?:\.[\w$]+)*\s*\(\s*"
_MAX_READ = 256 * 1024  # as the hints' source reads: a bigger file is not searched
_SUBTEST_SUFFIX = re.compile(r" \([^()]*\)\Z")  # unittest's subTest parameters: "test_x (a=1)"


def _js_title(name: str) -> str:
    """The test's own title: greenloop joins describe titles and the test's with " > "."""
    return name.rsplit(" > ", 1)[-1].strip()


def _js_pattern(title: str) -> re.Pattern[str] | None:
    if not title or title == "(unnamed)":
        return None
    quoted = "|".join(
        re.escape(q + title.replace("\\", "\\\\").replace(q, "\\" + q) + q) for q in ("'", '"', "`")
    )
    return re.compile(_JS_CALL + f"(?:{quoted})")


def _go_pattern(name: str) -> re.Pattern[str] | None:
    top = name.split("/", 1)[0]
    if not re.fullmatch(r"(?:Test|Example|Fuzz|Benchmark)\w*", top):
        return None
    return re.compile(rf"^func\s+{re.escape(top)}\s*\(")


def _rust_pattern(name: str) -> re.Pattern[str] | None:
    leaf = name.rsplit("::", 1)[-1].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", leaf):  # a doctest ("src/lib.rs - inc (line 3)") has its line
        return None
    return re.compile(rf"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?fn\s+{re.escape(leaf)}\s*[<(]")


def _py_method(name: str) -> str:
    leaf = _SUBTEST_SUFFIX.sub("", name).split("::")[-1]
    return leaf.split("[", 1)[0].rsplit(".", 1)[-1].strip()


def _py_pattern(name: str) -> re.Pattern[str] | None:
    method = _py_method(name)
    if not re.fullmatch(r"[A-Za-z_]\w*", method):
        return None
    return re.compile(rf"^\s*(?:async\s+)?def\s+{re.escape(method)}\s*\(")


_PATTERNS: dict[str, Callable[[str], re.Pattern[str] | None]] = {
    **{name: (lambda test: _js_pattern(_js_title(test))) for name in _JS},
    "go": _go_pattern,
    "cargo": _rust_pattern,
    "pytest": _py_pattern,
    "unittest": _py_pattern,
}


def _unittest_file(test: str, root: str) -> str | None:
    """The module file of a unittest id (`pkg.test_mod.Class.test_x`): the longest dotted prefix
    that is a .py file under the root."""
    parts = _SUBTEST_SUFFIX.sub("", test).split(".")
    for cut in range(len(parts) - 1, 0, -1):
        candidate = os.path.join(*parts[:cut]) + ".py"
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def _cargo_file(test: str, root: str) -> str | None:
    """A Rust test's file from its module path (`a::tests::x`: src/a/tests.rs, src/a.rs … then
    the crate roots and tests/*.rs): the first that declares the test exactly once."""
    modules = test.split("::")[:-1]
    candidates: list[str] = []
    for cut in range(len(modules), 0, -1):
        folder = "/".join(["src", *modules[:cut]])
        candidates += [folder + ".rs", folder + "/mod.rs"]
    candidates += ["src/lib.rs", "src/main.rs"]
    with contextlib.suppress(OSError):
        names = os.listdir(os.path.join(root, "tests"))  # integration tests: one crate per file
        candidates += sorted(f"tests/{n}" for n in names if n.endswith(".rs"))
    pattern = _rust_pattern(test)
    if pattern is None:
        return None
    for candidate in candidates[:64]:
        path = os.path.join(root, candidate)
        if os.path.isfile(path) and os.path.getsize(path) <= _MAX_READ:
            with open(path, encoding="utf-8", errors="replace") as fh:
                if _declared_line(fh.read().splitlines(), pattern) is not None:
                    return candidate
    return None


def _declared_line(lines: list[str], pattern: re.Pattern[str]) -> int | None:
    found = [i for i, text in enumerate(lines, 1) if pattern.search(text)]
    return found[0] if len(found) == 1 else None


def with_declarations(
    failures: tuple[Failure, ...], framework: str | None, root: str | None
) -> tuple[Failure, ...]:
    """The failures, those without a line given the line that declares their test (and a
    unittest failure without a file its module's file) when the file declares it exactly once."""
    make = _PATTERNS.get(framework or "")
    if make is None or root is None or all(f.line is not None for f in failures):
        return failures
    sources = Sources(root)
    out: list[Failure] = []
    for failure in failures:
        if failure.line is None and failure.kind in _KINDS:
            file = failure.file
            if file is None and framework == "unittest":
                file = _unittest_file(failure.test, root)
            elif file is None and framework == "cargo":  # a test that returned Err has no place
                file = _cargo_file(failure.test, root)
            pattern = make(failure.test) if file else None
            lines = sources.lines(file) if pattern is not None else None
            line = _declared_line(lines, pattern) if lines and pattern is not None else None
            if line is not None:
                failure = failure._replace(file=file, line=line)
        out.append(failure)
    return tuple(out)
