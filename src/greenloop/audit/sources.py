"""Reading a DevLoop unit's sources and tests for the audit, without running anything.

Every `.js`-family and `.py` file under `<unit>/tests/` is read; JS at token level (comments
blanked out, strings and templates kept), Python with the ast module. A test file's tests are
found statically: `it`/`test` calls (inside their `describe` blocks) and pytest functions and
`Test*` class methods.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from greenloop.layout import STATE_DIR

__all__ = [
    "SKIP_DIRS",
    "SourceFile",
    "TestCase",
    "Unit",
    "call_end",
    "find_tests",
    "line_of",
    "load_json",
    "read_unit",
    "walk_files",
]

_JS_EXT = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")
# Folders never read (dependencies, caches, tool state); the sandbox check ignores them too.
SKIP_DIRS = frozenset({"node_modules", ".git", "__pycache__", ".pytest_cache", STATE_DIR, ".venv", "venv"})


@dataclass(frozen=True)
class TestCase:
    """A test found statically: `code` has comments removed, `raw` keeps them."""

    __test__ = False  # not a pytest test class

    name: str
    file: str
    line: int
    code: str
    raw: str
    language: Literal["js", "py"]

    @property
    def where(self) -> str:
        """`file:line`, as findings name a test."""
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class SourceFile:
    """One source file under the unit's tests/, as read and with its comments blanked out."""

    file: str  # relative to the unit
    language: Literal["js", "py"]
    raw: str
    code: str  # comments removed


@dataclass(frozen=True)
class Unit:
    """A unit as the checks see it: its folder, its test sources, the tests found in them, and
    notes about files that could not be read."""

    root: Path
    name: str
    sources: tuple[SourceFile, ...]
    tests: tuple[TestCase, ...]
    notes: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------- reading sources


def _strip_js_comments(src: str) -> str:
    """Blank out // and /* */ comments (keeping newlines), leaving strings and templates intact."""
    out: list[str] = []
    i, n = 0, len(src)
    template_depth: list[int] = []  # brace depth at which each open template's ${ started
    brace = 0
    while i < n:
        c = src[i]
        nxt = src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            j = n if j == -1 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            j = src.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in src[i:j]))
            i = j
        elif c in "'\"":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            out.append(src[i : j + 1])
            i = j + 1
        elif c == "`" or (c == "}" and template_depth and template_depth[-1] == brace):
            if c == "}":
                template_depth.pop()
                brace -= 1
            j = i + 1
            while j < n and src[j] != "`":
                if src[j] == "\\":
                    j += 2
                    continue
                if src[j] == "$" and j + 1 < n and src[j + 1] == "{":
                    brace += 1
                    template_depth.append(brace)
                    j += 2
                    break
                j += 1
            else:
                j += 1
            out.append(src[i:j])
            i = j
        else:
            if c == "{":
                brace += 1
            elif c == "}":
                brace -= 1
            out.append(c)
            i += 1
    return "".join(out)


def call_end(src: str, open_paren: int) -> int:
    """Index just past the `)` that closes the call opened at `open_paren` (strings skipped)."""
    depth, i, n = 0, open_paren, len(src)
    while i < n:
        c = src[i]
        if c in "'\"`":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


_JS_TEST = re.compile(
    r"(?<![\w.$])(?P<kind>it|test|describe|suite)(?:\.(?:only|concurrent|skip|fails|sequential|todo))?"
    r"\s*\(\s*(?P<q>['\"`])(?P<name>(?:\\.|(?!(?P=q)).)*)(?P=q)",
    re.S,
)


def _js_tests(source: SourceFile) -> list[TestCase]:
    code = source.code
    describes: list[tuple[int, int, str]] = []
    found: list[tuple[int, int, str]] = []
    for m in _JS_TEST.finditer(code):
        open_paren = code.index("(", m.start())
        end = call_end(code, open_paren)
        entry = (m.start(), end, m.group("name"))
        (describes if m.group("kind") in ("describe", "suite") else found).append(entry)
    tests = []
    for start, end, name in found:
        path = [d_name for d_start, d_end, d_name in describes if d_start < start < d_end]
        full = " > ".join([*path, name])
        line = line_of(code, start)
        tests.append(TestCase(full, source.file, line, code[start:end], source.raw[start:end], "js"))
    return tests


def _strip_py_comments(src: str) -> str:
    lines = src.splitlines(keepends=True)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return src
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            (row, col), (_, end) = tok.start, tok.end
            text = lines[row - 1]
            lines[row - 1] = text[:col] + " " * (end - col) + text[end:]
    return "".join(lines)


def _py_tests(source: SourceFile) -> tuple[list[TestCase], str | None]:
    try:
        tree = ast.parse(source.raw, filename=source.file)
    except SyntaxError as exc:
        return [], f"{source.file}:{exc.lineno}: does not parse ({exc.msg}); its tests were not read"
    raw_lines = source.raw.splitlines(keepends=True)
    code_lines = source.code.splitlines(keepends=True)
    tests: list[TestCase] = []

    def add(node: ast.FunctionDef | ast.AsyncFunctionDef, prefix: str) -> None:
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        last = node.end_lineno or node.lineno
        raw = "".join(raw_lines[first - 1 : last])
        code = "".join(code_lines[first - 1 : last])
        tests.append(TestCase(prefix + node.name, source.file, node.lineno, code, raw, "py"))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            add(node, "")
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    add(item, f"{node.name}::")
    return tests, None


def _is_js_test_file(name: str) -> bool:
    return name.endswith(_JS_EXT) and (".test." in name or ".spec." in name)


def _is_py_test_file(name: str) -> bool:
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def walk_files(root: Path) -> Iterable[Path]:
    """Every file under `root`, sorted, skipping dependency, cache and tool-state folders."""
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def find_tests(unit_dir: str | os.PathLike[str]) -> tuple[TestCase, ...]:
    """The tests found statically under `<unit>/tests/` (JS test files and pytest files)."""
    return read_unit(Path(unit_dir)).tests


def read_unit(root: Path) -> Unit:
    """Every JS and Python source under `<root>/tests/` and the tests found in them."""
    sources: list[SourceFile] = []
    tests: list[TestCase] = []
    notes: list[str] = []
    for path in walk_files(root / "tests"):
        rel = path.relative_to(root).as_posix()
        if "__snapshots__" in rel:
            continue
        if path.name.endswith(_JS_EXT):
            lang: Literal["js", "py"] = "js"
        elif path.name.endswith(".py"):
            lang = "py"
        else:
            continue
        try:
            raw = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            notes.append(f"{rel}: cannot be read ({exc.strerror})")
            continue
        code = _strip_js_comments(raw) if lang == "js" else _strip_py_comments(raw)
        is_test = _is_js_test_file(path.name) if lang == "js" else _is_py_test_file(path.name)
        source = SourceFile(rel, lang, raw, code)
        sources.append(source)
        if is_test and lang == "js":
            tests.extend(_js_tests(source))
        elif is_test:
            found, note = _py_tests(source)
            tests.extend(found)
            if note:
                notes.append(note)
    return Unit(root, root.name, tuple(sources), tuple(tests), tuple(notes))


def load_json(path: Path) -> tuple[Any, str | None]:
    """(data, None) or (None, problem) for a JSON file of the unit."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except json.JSONDecodeError as exc:
        return None, f"{path.name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    except OSError as exc:
        return None, f"{path.name} cannot be read ({exc.strerror})"


def line_of(text: str, pos: int) -> int:
    """The 1-based line of `text` that offset `pos` is on."""
    return text.count("\n", 0, pos) + 1

