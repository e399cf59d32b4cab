"""Source lines for hints: the failing line, the function around it, where a called function lives.

A stack names file:line, not what is written there: the failing expression (`settings["timeout_ms"]`,
`expect(cart.total(items)).toBe(18)`) and the enclosing function are read from the workspace's
files. When an assertion fails after the code under test has returned, the stack holds only the
test's line; the function that produced the value is then the one the test called, found through
the test file's imports (`require('../code/cart.js')`, `import billing`) and its definition.

Everything is bounded and cached per Sources object (one per run): a file is read once, files
over 256 KiB or outside the root are not read, and a failed lookup costs one dictionary miss the
next time. Without a root (hints computed from a stored record) every lookup answers None.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import NamedTuple

__all__ = ["Call", "Sources", "call_in", "definition_lines", "enclosing", "failing_call"]

_MAX_FILE = 256 * 1024
_MAX_FILES = 256
_MAX_INDEXED = 20000  # directory entries looked at when a Python module is not where its name says
_MAX_LINE = 400  # characters of a source line searched for a call (a minified line is not read whole)
_SKIP_DIRS = {
    "node_modules",
    ".git",
    ".venv",
    "venv",
    "site-packages",
    "__pycache__",
    "dist",
    "build",
    ".tox",
}

_PY_DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(")
# Go functions and methods (`func Add(`, `func (c *Cart) Total(`), Rust functions (`pub fn inc(`)
_GO_DEF = re.compile(r"^func\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*)\s*[\[(]")
_RUST_DEF = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+([A-Za-z_]\w*)\s*[<(]"
)
_JS_DEF = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\("
    r"|^\s*(?:export\s+)?(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>|[\w$]+\s*=>)"
    r"|^\s*(?:static\s+)?(?:async\s+)?([A-Za-z_$][\w$]*)\s*\([^)]*\)\s*\{"
    r"|^\s*([A-Za-z_$][\w$]*)\s*:\s*(?:async\s+)?(?:function\b|\([^)]*\)\s*=>)"
)
_DEFINITIONS = {".go": (_GO_DEF,), ".rs": (_RUST_DEF,)}  # any other file: Python's or JavaScript's


def definition_lines(lines: list[str], name: str, suffix: str) -> Iterator[int]:
    """The numbers of the lines that define function `name` in a file ending in `suffix`
    (`.go`, `.rs`; anything else is read as Python or JavaScript)."""
    patterns = _DEFINITIONS.get(suffix, (_PY_DEF, _JS_DEF))
    for number, line in enumerate(lines, 1):
        if any((m := p.match(line)) and name in m.groups() for p in patterns):
            yield number


_JS_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "function", "else", "with"}
# `const cart = require('../code/cart.js')`, `const { total } = require(...)`, `import x from '...'`
_JS_REQUIRE = re.compile(
    r"(?:(?:const|let|var)\s+|^\s*)(\{[^}]*\}|[\w$]+)\s*=\s*require\(\s*['\"]([^'\"]+)['\"]\s*\)"
    r"|import\s+(?:(\* as [\w$]+|[\w$]+)\s*,?\s*)?(\{[^}]*\})?\s*from\s*['\"]([^'\"]+)['\"]",
    re.M,
)
# the one function a module exports whole: `module.exports = function (val) {`, `export default function`
_JS_DEFAULT = re.compile(r"^\s*(?:module\.exports\s*=|export\s+default)\s*(?:async\s+)?function\b")
# (a name list runs over lines only inside parentheses: `from a import (x,\n y)`)
_PY_IMPORT = re.compile(
    r"^[ \t]*import\s+([\w.]+)(?:\s+as\s+(\w+))?"
    r"|^[ \t]*from\s+([\w.]+)\s+import\s+(\([\w\s,]+\)|[\w \t,]+)",
    re.M,
)
_JS_REEXPORT = re.compile(r"""^\s*export\s+(?:\*|(\{[^}]*\}))\s*from\s*['"]([^'"]+)['"]""")
_JS_EXTS = ("", ".js", ".ts", ".mjs", ".cjs", ".jsx", ".tsx", "/index.js", "/index.ts")


class Call(NamedTuple):
    """A call in a line of code: `qualifier.name(args)` (qualifier may be empty)."""

    qualifier: str
    name: str
    text: str  # the call as written, shortened


def _strip_line(line: str) -> str:
    return " ".join(line.split())


def enclosing(lines: list[str], lineno: int) -> tuple[str, int] | None:
    """(function name, its def line) around 1-based `lineno`, by walking up to a def."""
    if not 0 < lineno <= len(lines):
        return None
    target = lines[lineno - 1]
    indent = len(target) - len(target.lstrip())
    for i in range(lineno - 1, max(-1, lineno - 400), -1):
        line = lines[i]
        m = _PY_DEF.match(line)
        if m and (len(line) - len(line.lstrip()) < indent or i == lineno - 1):
            return m.group(1), i + 1
        r = _RUST_DEF.match(line) or _GO_DEF.match(line)
        if r:  # (a Rust `fn` or Go `func` line: neither language is read as the other)
            return r.group(1), i + 1
        j = _JS_DEF.match(line)
        if j:
            name = next(g for g in j.groups() if g)
            if name not in _JS_KEYWORDS:
                return name, i + 1
    return None


_CHAINED = re.compile(r"\s*\.\s*(?!to[A-Z]|not\b|resolves\b|rejects\b)[A-Za-z_$][\w$]*\s*\(")
_CALL = re.compile(r"((?:[A-Za-z_$][\w$]*\.)*)([A-Za-z_$][\w$]*)\s*\(")
# the assertion API and builtins around the call under test
_NOT_CALLED_WORDS = (
    "expect assert require it test describe len str int float list dict set tuple sorted print repr"
    " Number String Boolean JSON equal deepEqual strictEqual deepStrictEqual notStrictEqual ok"
    " isinstance type round abs sum min max Object Array Math raises approx then resolves rejects"
    " Println Printf Print Sprintf Sprint Sprintln"  # Go's fmt: an Example prints the call's value
)
_NOT_CALLED = frozenset(_NOT_CALLED_WORDS.split())
_NOT_RECEIVERS = frozenset(("assert", "expect", "Math", "JSON", "Object", "console", "Promise"))
# A test function's own first line: a place some runners give for a failure of the whole test
_TEST_HEAD = re.compile(r"^\s*(?:pub\s+)?(?:async\s+)?(?:fn|def|func)\s+\w+\s*\(.*[{:]\s*$")
_GO_TESTING = frozenset(("t", "b", "f", "tb"))  # Go's *testing.T, B, F and testing.TB receivers
# Go reports a failure with t.Errorf/t.Fatalf after the check: the value came from the line above
# (`if got := Add(1, 2); got != 3 {`, `got := Add(1, 2)`).
_GO_REPORT = re.compile(r"\b(?:t|b|f|tb)\.(?:Error|Errorf|Fatal|Fatalf)\(")


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis group that opens at text[start]."""
    depth = 0
    quote = ""
    for i in range(start, min(len(text), start + 400)):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"`":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return min(len(text), start + 400)


def _code_only(line: str) -> str:
    """`line` with the inside of its string literals blanked out (same length, quotes kept):
    a call written inside a string (`"<img onerror=alert(1)>"`) is data, not the call under test."""
    out = list(line)
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote and line[i - 1] != "\\":
                quote = ""
            else:
                out[i] = " "
        elif ch in "'\"`":
            quote = ch
    return "".join(out)


def call_in(line: str) -> Call | None:
    """The first call of a function under test in a test line (`expect(`, `assert` are skipped;
    so is anything inside a string literal)."""
    line = line[:_MAX_LINE]
    for m in _CALL.finditer(_code_only(line)):
        name = m.group(2)
        qual = m.group(1).rstrip(".")
        # a matcher is chained on a call's result: `expect(x).toBe(`, `expect(p).resolves.toEqual(`
        chained = m.start() > 0 and line[m.start() - 1] == "."
        unittest = qual == "self" and name.startswith("assert")  # self.assertEqual(…)
        go_report = qual in _GO_TESTING and name[:1].isupper()  # t.Errorf(…), b.Fatal(…)
        if name in _NOT_CALLED or chained or unittest or go_report or qual.split(".")[0] in _NOT_RECEIVERS:
            continue
        end = _balanced(line, m.end() - 1)
        for _ in range(6):  # a chain on the result: request(app).post('/login').send({…})
            more = _CHAINED.match(line, end)
            if more is None:
                break
            end = _balanced(line, more.end() - 1)
        text = line[m.start() : end]
        return Call(qual, name, text if len(text) <= 80 else text[:79] + "…")
    return None


_SUBJECT_VAR = re.compile(
    r"expect\(\s*([A-Za-z_$][\w$]*)(?:\.[\w$]+)*\s*\)"  # expect(result).toBe(…), expect(res.status)
    r"|^\s*assert\s+([A-Za-z_]\w*)(?:\.\w+)*\s*(?:==|!=|is\b|in\b|<|>)"  # assert result == …
    r"|assert\.\w+\(\s*([A-Za-z_$][\w$]*)(?:\.[\w$]+)*\s*,"  # assert.strictEqual(res.status, …)
)


def failing_call(lines: list[str], lineno: int) -> Call | None:
    """The call whose value the failing line checks: on that line, on the lines of the same
    statement just above it (`expect(\n cart.total()\n).toBe(18)`), or the call a variable
    checked there was assigned from a few lines earlier (`result = invoice(…)`; `assert result == …`)."""
    if not 0 < lineno <= len(lines):
        return None
    line = lines[lineno - 1]
    if _TEST_HEAD.match(line):  # the runner points at the test itself (Rust's #[should_panic]):
        for below in lines[lineno : lineno + 6]:  # the call is the first one in its body
            found = call_in(below)
            if found is not None:
                return found
        return None
    found = call_in(line)
    if found is not None:
        return found
    if re.search(r"\braises\(.*:\s*$", line) and lineno < len(lines):
        return call_in(lines[lineno])  # `with pytest.raises(…):` points at itself; the call is inside
    if _GO_REPORT.search(line):
        for i in range(lineno - 2, max(-1, lineno - 5), -1):
            if lines[i].lstrip().startswith("func "):
                break  # the start of the test: the value comes from elsewhere
            found = call_in(lines[i])
            if found is not None:
                return found
        return None  # (a Go block's `{` is not a statement going on)
    joined = line
    for back in range(1, 4):  # a statement broken over lines: the stack points at its last line
        if lineno - 1 - back < 0:
            break
        above = lines[lineno - 1 - back].strip()
        if not (above.endswith(("(", ",", "[", "{")) or joined.lstrip().startswith((")", ".", "]"))):
            break  # the line above is a statement of its own
        joined = above + " " + joined.strip()
        found = call_in(joined)
        if found is not None:
            return found
    m = _SUBJECT_VAR.search(line)
    if not m:
        return None
    var = next(g for g in m.groups() if g)
    assign = re.compile(r"^\s*(?:const\s+|let\s+|var\s+)?" + re.escape(var) + r"\s*(?::[^=]+)?=(?!=)\s*(.+)$")
    for i in range(lineno - 2, max(-1, lineno - 32), -1):
        a = assign.match(lines[i])
        if a:  # only a variable that holds the call's own result (not a comprehension over calls)
            rhs = re.sub(r"^await\s+", "", a.group(1).strip())
            found = call_in(rhs)
            head = (
                f"{found.qualifier}.{found.name}"
                if found and found.qualifier
                else (found.name if found else "")
            )
            return found if found is not None and rhs.startswith(head) else None
        if _PY_DEF.match(lines[i]) or re.match(r"\s*(?:it|test)\(", lines[i]):
            break  # the start of the test: the variable comes from elsewhere
    return None


class Sources:
    """Cached, bounded reads of the workspace's source files under `root`."""

    def __init__(self, root: str | None) -> None:
        self.root = os.path.realpath(root) if root else None
        self._files: dict[str, list[str] | None] = {}
        self._defs: dict[tuple[str, str, str], tuple[str, int] | None] = {}
        self._py_modules: dict[str, str | None] = {}
        self._py_index: dict[str, list[str]] | None = None

    def lines(self, file: str | None) -> list[str] | None:
        """The lines of a workspace file (read once), or None: outside the root, too big, unreadable."""
        if not file or self.root is None:
            return None
        if file in self._files:
            return self._files[file]
        lines: list[str] | None = None
        try:
            path = os.path.realpath(os.path.join(self.root, file))
        except (OSError, ValueError):
            path = ""
        if len(self._files) < _MAX_FILES and path.startswith(self.root + os.sep):
            try:
                if os.path.getsize(path) <= _MAX_FILE:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        lines = fh.read().splitlines()
            except (OSError, ValueError):  # unreadable, or a path no file can have (a NUL)
                lines = None
        self._files[file] = lines
        return lines

    def line(self, file: str | None, lineno: int | None) -> str | None:
        """The source line at file:lineno, stripped, or None."""
        lines = self.lines(file)
        if lines is None or lineno is None or not 0 < lineno <= len(lines):
            return None
        return _strip_line(lines[lineno - 1])

    def call_at(self, file: str | None, lineno: int | None) -> Call | None:
        """The call the failing line at file:lineno checks (see failing_call)."""
        lines = self.lines(file)
        if lines is None or lineno is None:
            return None
        return failing_call(lines, lineno)

    def function_at(self, file: str | None, lineno: int | None) -> str | None:
        """The name of the function around file:lineno, or None."""
        lines = self.lines(file)
        if lines is None or lineno is None:
            return None
        found = enclosing(lines, lineno)
        return found[0] if found else None

    def returns(self, file: str, def_line: int) -> bool | None:
        """Whether the function defined at `def_line` has any `return` with a value (None: unknown)."""
        lines = self.lines(file)
        if lines is None or not 0 < def_line <= len(lines):
            return None
        head = lines[def_line - 1]
        indent = len(head) - len(head.lstrip())
        py = bool(_PY_DEF.match(head))
        if "=>" in head and "{" not in head.split("=>", 1)[1]:
            return True  # an arrow function with an expression body returns it
        for line in lines[def_line : def_line + 200]:
            stripped = line.strip()
            if not stripped:
                continue
            ind = len(line) - len(line.lstrip())
            if (py and ind <= indent) or (not py and ind <= indent and stripped.startswith("}")):
                break
            if re.match(r"return\s+\S", stripped) or re.match(r"return\s*\(", stripped):
                return True
        return False

    def definition(self, test_file: str, call: Call) -> tuple[str, int] | None:
        """(file, line) where the function `call` names is defined, found through the test's imports."""
        key = (test_file, call.qualifier, call.name)
        if key not in self._defs:
            self._defs[key] = self._find_definition(test_file, call)
        return self._defs[key]

    def _find_definition(self, test_file: str, call: Call) -> tuple[str, int] | None:
        lines = self.lines(test_file)
        if lines is None:
            return None
        text = "\n".join(lines[:300])
        base = call.qualifier.split(".")[-1] if call.qualifier else ""
        module: str | None = None
        imported: list[str] = []  # every workspace module the test imports, in order
        if test_file.endswith((".go", ".rs")):
            imported = self._same_package(test_file)
        elif test_file.endswith(".py"):
            module = self._py_module_for(text, base, call.name)
            if module is None:
                imported = [f for f in (self._py_file(d) for d in self._py_imports(text)) if f]
        else:
            for m in _JS_REQUIRE.finditer(text):
                names = " ".join(g for g in (m.group(1), m.group(3), m.group(4)) if g)
                spec = m.group(2) or m.group(5)
                bound = re.findall(r"[\w$]+", names.replace("* as", ""))
                if (base and base in bound) or (not base and call.name in bound):
                    module = self._js_module(test_file, spec)
                    whole = m.group(1) or m.group(3) or ""
                    if module and not base and call.name == whole.replace("* as", "").strip():
                        default = self._default_export(module)  # `ms = require('./')`; `ms('1h')`
                        if default is not None:
                            return default
                    break
                found_module = self._js_module(test_file, spec)
                if found_module:
                    imported.append(found_module)
        # A method on an object the test built (`cart.total()` after `cart = new Cart()`): the
        # imported module that defines a function of that name, if exactly one does.
        candidates = [module] if module else imported
        hits = [hit for hit in (self._def_in(m, call.name) for m in candidates[:12]) if hit]
        return hits[0] if len(hits) == 1 else None

    def _default_export(self, module: str) -> tuple[str, int] | None:
        lines = self.lines(module) or []
        return next(((module, i) for i, line in enumerate(lines, 1) if _JS_DEFAULT.match(line)), None)

    def _def_in(self, module: str, name: str, depth: int = 0) -> tuple[str, int] | None:
        """Where `module` defines `name`, following its re-exports (`export * from "./utils"`,
        a package's index) two levels down."""
        mod_lines = self.lines(module)
        if mod_lines is None:
            return None
        found = next(definition_lines(mod_lines, name, os.path.splitext(module)[1]), None)
        if found is not None:
            return module, found
        if depth >= 2 or module.endswith((".py", ".go", ".rs")):
            return None
        for line in mod_lines[:200]:
            m = _JS_REEXPORT.match(line)
            if m and (m.group(1) is None or name in re.findall(r"[\w$]+", m.group(1))):
                target = self._js_module(module, m.group(2))
                hit = self._def_in(target, name, depth + 1) if target else None
                if hit is not None:
                    return hit
        return None

    def _same_package(self, test_file: str) -> list[str]:
        """Where a Go or Rust test's functions come from without an import: a Go test sees its
        package's other files (the folder's .go files that are not tests); a Rust unit test
        sits in the file it tests (`super::inc`), and a crate's code starts at src/lib.rs."""
        if test_file.endswith(".rs"):
            return list(dict.fromkeys((test_file, "src/lib.rs", "src/main.rs")))
        if self.root is None:
            return []
        folder = os.path.dirname(test_file)
        try:
            names = sorted(os.listdir(os.path.join(self.root, folder)))
        except OSError:
            return []
        return [os.path.join(folder, n) for n in names if n.endswith(".go") and not n.endswith("_test.go")]

    @staticmethod
    def _py_imports(text: str) -> list[str]:
        out: list[str] = []
        for m in _PY_IMPORT.finditer(text):
            if m.group(1):
                out.append(m.group(1))
            elif m.group(3):
                out.append(m.group(3))
                names = m.group(4).strip("()").split(",")
                out.extend(f"{m.group(3)}.{n.strip().split(' as ')[0]}" for n in names if n.strip())
        return out

    def _js_module(self, test_file: str, spec: str) -> str | None:
        if not spec.startswith("."):
            return None  # a package, not the user's code
        base = os.path.normpath(os.path.join(os.path.dirname(test_file), spec))
        for ext in _JS_EXTS:
            path = os.path.normpath(base + ext)  # (`require('./')`: ./index.js is index.js)
            if self.lines(path) is not None:
                return path
        return None

    def _py_module_for(self, text: str, base: str, name: str) -> str | None:
        for m in _PY_IMPORT.finditer(text):
            if m.group(1):  # import a.b [as c]
                alias = m.group(2) or m.group(1).split(".")[-1]
                if base and alias == base:
                    return self._py_file(m.group(1))
            elif m.group(3):
                names = [n.strip().split(" as ")[0] for n in m.group(4).strip("()").split(",")]
                if base and base in names:
                    return self._py_file(f"{m.group(3)}.{base}") or self._py_file(m.group(3))
                if not base and name in names:
                    return self._py_file(m.group(3))
        return None

    def _py_file(self, dotted: str) -> str | None:
        """The workspace file of a module: the package path under the root, src/, or any folder."""
        if dotted in self._py_modules:
            return self._py_modules[dotted]
        rel = dotted.replace(".", "/")
        found: str | None = None
        for cand in (f"{rel}.py", f"{rel}/__init__.py", f"src/{rel}.py", f"src/{rel}/__init__.py"):
            if self.lines(cand) is not None:
                found = cand
                break
        if found is None and self.root is not None:
            found = self._search(f"{rel}.py")
        self._py_modules[dotted] = found
        return found

    def _search(self, tail: str) -> str | None:
        """A file ending in `tail` within three folder levels (a test's sys.path insert, e.g. code/)."""
        if self._py_index is None:
            self._py_index = self._index_py_files()
        for rel in self._py_index.get(os.path.basename(tail), ()):
            if rel == tail or rel.endswith("/" + tail):
                return rel
        return None

    def _index_py_files(self) -> dict[str, list[str]]:
        """Python files by name, walked once per Sources: three folder levels, at most
        _MAX_INDEXED names, dependencies and hidden folders skipped."""
        assert self.root is not None
        index: dict[str, list[str]] = {}
        seen = 0
        root_depth = self.root.count(os.sep)
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
            if dirpath.count(os.sep) - root_depth >= 3:
                dirnames[:] = []
            for name in filenames:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/")
                    index.setdefault(name, []).append(rel)
            seen += len(filenames)
            if seen > _MAX_INDEXED:
                break
        return index
