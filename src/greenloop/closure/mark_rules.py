"""What one test file's text says: its skip/xfail/only/todo/ignore marks and its test declarations.

The rules behind closure/marks.py, per language (`py`, `js`, `go`, `rs`), pure: text in, lines
out. A match counts only in code: a comment line, a docstring, a template literal, a block
comment or a string that merely mentions `skip` is not a mark, and a test that is commented
out is no longer declared (so it reads as removed). Two steps keep this fast on thousands of
files: the multi-line strings and comments are found only in files that have them, and the
same-line strings and comments only around a match.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import NamedTuple

__all__ = ["MAX_TEXT", "Decl", "Found", "Mark", "language_of", "scan"]

MAX_TEXT = 200  # characters of a line kept in a mark
MAX_PREFIX = 4_000  # a match further into its line than this is not read (minified code)
MAX_LOOK_BACK = 200  # lines walked up from a Python mark to find what holds it
MAX_MARK_LINES = 1_000  # lines holding a mark's word read per file (the rest are not)


Mark = tuple[int, str, str | None, str]  # (line, kind, test, text)
Decl = tuple[int, str, str]  # (line, name, text)


class Found(NamedTuple):
    """One file's marks and test declarations, each in line order."""

    marks: tuple[Mark, ...]
    decls: tuple[Decl, ...]


def language_of(rel: str, js_or_py: str | None) -> str | None:
    """The rules a test file is read with: `py`, `js`, `go`, `rs`, or None (not a test file).
    `js_or_py` is the probe's answer for the path (test_paths.is_test_file)."""
    if js_or_py is not None:
        return js_or_py
    name = rel.rsplit("/", 1)[-1]
    if name == "conftest.py":
        return "py"  # a conftest can skip whole folders (item.add_marker(pytest.mark.skip))
    if name.endswith("_test.go"):
        return "go"
    if name.endswith(".rs"):
        return "rs"  # Rust's unit tests live beside the code
    return None


# What opens a string or comment that may cross lines, and what closes it.
_OPENERS = {"py": ('"""', "'''"), "js": ("/*", "`"), "go": ("/*", "`"), "rs": ("/*",)}
# Each opener's whole string or comment (to the end of the text when it never closes).
_TOKEN = {
    '"""': re.compile(r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\Z)'),
    "'''": re.compile(r"'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\Z)"),
    "/*": re.compile(r"/\*.*?(?:\*/|\Z)", re.S),
    "`": re.compile(r"`[^`\\]*(?:\\.[^`\\]*)*(?:`|\Z)"),
}

# Same-line strings, then what starts a comment, for the text before a match on its line.
_PY_STRINGS = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*\"""")
_C_STRINGS = re.compile(r"""'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`""")
_RS_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_LINE_RULES = {
    "py": (_PY_STRINGS, "#", "'\""),
    "js": (_C_STRINGS, "//", "'\"`"),
    "go": (_C_STRINGS, "//", "'\"`"),
    "rs": (_RS_STRINGS, "//", '"'),
}


_SUSPECT = re.compile(r"['\"`#/]")


class _Text:
    """A file's text with its dead spans (multi-line strings and comments) and line lookups.

    The text is held with a newline in front, so that every line starts after a newline and
    the line-start patterns can begin with a literal newline (which the regular expression
    engine finds fast), and positions count from that newline.
    """

    def __init__(self, text: str, lang: str) -> None:
        self.text = "\n" + text
        self.lang = lang
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._line_pos = 0
        self._line_no = 0
        openers = [o for o in _OPENERS[lang] if o in text]
        if openers:
            self._dead_spans(openers)

    def _dead_spans(self, openers: list[str]) -> None:
        """The multi-line strings and comments, in order. One that stays on its line is left to
        the same-line rules; one whose opener is not code (inside a same-line string, after a
        comment start) is no span, and the search goes on just after that opener. Openers are
        found by substring search, each once (a pattern search is ten times slower here)."""
        text = self.text
        if len(openers) == 1:  # the usual case: docstrings only, or template literals only
            token = openers[0]
            at = text.find(token)
            while at != -1:
                at = text.find(token, self._take(at, token))
            return
        ahead = {o: text.find(o) for o in openers}
        pos = 0
        while True:
            at, token = -1, ""
            for o in openers:
                i = ahead[o]
                if -1 < i < pos:
                    i = ahead[o] = text.find(o, pos)
                if i != -1 and (at == -1 or i < at):
                    at, token = i, o
            if at == -1:
                return
            pos = self._take(at, token)

    def _take(self, at: int, token: str) -> int:
        """Read the string or comment `token` opens at `at`; where the search goes on."""
        text = self.text
        m = _TOKEN[token].match(text, at)
        end = m.end() if m else len(text)
        if text.find("\n", at, end) == -1:
            return end
        if not self._line_code(at):
            return at + 1
        self._starts.append(at)
        self._ends.append(end)
        return end

    def line_of(self, pos: int) -> int:
        """The 1-based line of `pos` (cheapest when asked in increasing order)."""
        if pos >= self._line_pos:
            self._line_no += self.text.count("\n", self._line_pos, pos)
        else:
            self._line_no = self.text.count("\n", 0, pos)
        self._line_pos = pos
        return self._line_no

    def line_at(self, pos: int) -> str:
        """The whole line holding `pos`, stripped and bounded."""
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        return self.text[start : end if end != -1 else len(self.text)].strip()[:MAX_TEXT]

    def line_span(self, start: int) -> tuple[int, int]:
        """The line starting at `start`: (start, end), the end at its newline."""
        end = self.text.find("\n", start)
        return start, end if end != -1 else len(self.text)

    def _line_code(self, pos: int) -> bool:
        """Is `pos` code as far as its own line shows (after the last dead span ending on it)?"""
        return self._prefix_code(len(self._ends), pos)

    def _prefix_code(self, spans: int, pos: int) -> bool:
        """Does the line before `pos` (after the last of the first `spans` dead spans, when
        that ends on this line) leave `pos` outside a same-line string or comment?"""
        start = self.text.rfind("\n", 0, pos) + 1
        if spans and start < self._ends[spans - 1] <= pos:
            start = self._ends[spans - 1]  # a multi-line string or comment ended on this line
        if pos - start > MAX_PREFIX:
            return False  # deep in a very long line (generated or minified code): not read
        prefix = self.text[start:pos]
        if _SUSPECT.search(prefix) is None:
            return True  # no quote and no comment start before it on its line
        strings, comment, quotes = _LINE_RULES[self.lang]
        rest = strings.sub("", prefix)
        return comment not in rest and not any(q in rest for q in quotes)

    @property
    def has_spans(self) -> bool:
        """Does the text hold any multi-line string or comment?"""
        return bool(self._starts)

    def dead(self, pos: int) -> bool:
        """Is `pos` inside a multi-line string or comment? (Enough for a match that starts
        its line.)"""
        if not self._starts:
            return False
        i = bisect_right(self._starts, pos)
        return bool(i) and pos < self._ends[i - 1]

    def in_code(self, pos: int) -> bool:
        """Is `pos` in code: outside a multi-line string or comment, and not after a comment
        start or inside a string on its own line?"""
        i = bisect_right(self._starts, pos)
        if i and pos < self._ends[i - 1]:
            return False
        return self._prefix_code(i, pos)

    def indent_at(self, pos: int) -> int:
        """How far the line holding `pos` is indented."""
        start = self.text.rfind("\n", 0, pos) + 1
        end = start
        while end < len(self.text) and self.text[end] in " \t":
            end += 1
        return end - start

    def lines_with(self, words: tuple[str, ...]) -> list[int]:
        """The starts of the lines holding any of `words`, in order (found by substring search,
        so that the mark patterns run on a few lines, not the whole file)."""
        text = self.text
        starts: set[int] = set()
        for word in words:
            i = text.find(word)
            while i != -1:
                starts.add(text.rfind("\n", 0, i) + 1)
                nl = text.find("\n", i)
                if nl == -1:
                    break
                i = text.find(word, nl)
        return sorted(starts)[:MAX_MARK_LINES]


# -- Python ---------------------------------------------------------------------------------

# (An optional `async` in one pattern would cost every line a try; it gets a pattern of its own.)
_PY_DEF = re.compile(r"\n[ \t]*((def|class)[ \t]+(\w+)[^\n]*)")
_PY_ASYNC_DEF = re.compile(r"\n[ \t]*(async[ \t]+(def)[ \t]+(\w+)[^\n]*)")
_PY_MARK = re.compile(
    r"(?<![\w.])(?:pytest\.)?mark\.(?P<mark>skipif|skip|xfail)\b"
    r"|(?<![\w.])pytest\.(?P<call>skip|xfail|importorskip)\s*\("
    r"|^[ \t]*@(?:unittest\.)?(?P<deco>skipIf|skipUnless|skip|expectedFailure)\b"
    r"|\.(?P<self>skipTest)\s*\("
    r"|\braise[ \t]+(?:unittest\.)?(?P<exc>SkipTest)\b"
    # a conftest's collect_ignore leaves whole files out of the collection
    r"|^[ \t]*(?P<ignore>collect_ignore(?:_glob)?)\b[ \t]*(?:\+?=|\.(?:append|extend|insert)\b)",
    re.M,
)
_PY_OWNER = re.compile(r"(?:async[ \t]+)?(def|class)[ \t]+(\w+)")
_PY_WORDS = ("skip", "Skip", "xfail", "expectedFailure", "collect_ignore")
_PY_KIND = {"xfail": "xfail", "expectedFailure": "xfail"}

_Def = tuple[int, str, str]  # (position of the name's keyword, def | class, name)


def _py_owner(t: _Text, pos: int, defs: list[_Def]) -> str | None:
    """The test a Python mark applies to: a decorator (or a mark inside one, such as
    `pytest.param(..., marks=…)`) the next def; a call inside a test that test; in a helper
    (setUp, a fixture) or `pytestmark` in a class the class; at module level none."""
    i = bisect_right(defs, (pos, "\uffff"))
    following = defs[i] if i < len(defs) else None
    if t.line_at(pos).startswith("@"):
        return following[2] if following else None
    indent = t.indent_at(pos)
    # Walk back over the lines above to the nearest one indented less: what holds this mark.
    end = t.text.rfind("\n", 0, pos)
    looked = 0
    while end > 0 and indent > 0 and looked < MAX_LOOK_BACK:
        looked += 1
        start = t.text.rfind("\n", 0, end) + 1
        above = t.text[start:end]
        end = start - 1
        stripped = above.lstrip()
        depth = len(above) - len(stripped)
        if not stripped or stripped.startswith("#") or depth >= indent:
            continue
        if stripped.startswith("@"):
            return following[2] if following else None
        m = _PY_OWNER.match(stripped)
        if m and (m.group(1) == "class" or m.group(2).startswith("test")):
            return m.group(2)
        indent = depth  # a helper or a block: what holds it decides
    if looked >= MAX_LOOK_BACK and i:  # a very long body: the nearest def above holds it
        _pos, kind, name = defs[i - 1]
        return name if kind == "class" or name.startswith("test") else None
    return None


def _line_text(matched: str) -> str:
    """The first line of a match that starts its line, stripped and bounded."""
    end = matched.find("\n")
    return (matched if end == -1 else matched[:end]).strip()[:MAX_TEXT]


def _scan_py(t: _Text) -> Found:
    defs: list[_Def] = []
    decls: list[Decl] = []
    found = list(_PY_DEF.finditer(t.text))
    if "async" in t.text:
        found = sorted([*found, *_PY_ASYNC_DEF.finditer(t.text)], key=lambda m: m.start())
    held: list[tuple[int, str]] = []  # (indent, kind) of the defs and classes this one is inside
    dead = t.dead if t.has_spans else None
    for m in found:
        pos = m.start(1)
        if dead is not None and dead(pos):
            continue
        line, kind, name = m.group(1, 2, 3)
        defs.append((pos, kind, name))
        indent = pos - m.start() - 1
        while held and held[-1][0] >= indent:
            held.pop()
        # pytest collects a module's and a class's test functions, not one nested in a function
        if kind == "def" and name.startswith("test") and not (held and held[-1][1] == "def"):
            decls.append((t.line_of(pos), name, line.rstrip()[:MAX_TEXT]))
        held.append((indent, kind))
    marks: list[Mark] = []
    for start in t.lines_with(_PY_WORDS):
        for m in _PY_MARK.finditer(t.text, *t.line_span(start)):
            pos = m.start(m.lastgroup or 0)
            if t.in_code(pos):
                kind = _PY_KIND.get(m.group(m.lastgroup or 0), "skip")
                marks.append((t.line_of(pos), kind, _py_owner(t, pos, defs), t.line_at(pos)))
    return Found(tuple(marks), tuple(decls))


# -- JavaScript and TypeScript --------------------------------------------------------------

_JS_CHAIN_RE = r"(?P<chain>(?:[ \t]*\.[ \t]*\w+(?:\((?:[^()\n]|\([^()\n]*\))*\))?)*)\s*\(\s*"
_JS_TITLE_RE = (
    r"(?:'(?P<t1>[^'\\\n]*(?:\\.[^'\\\n]*)*)'"
    r'|"(?P<t2>[^"\\\n]*(?:\\.[^"\\\n]*)*)"'
    r"|`(?P<t3>[^`\\\n]*(?:\\.[^`\\\n]*)*)`)?"
)
_JS_NAMES = (
    r"(?P<fn>it|test|specify|describe|context|suite|xit|xtest|xspecify|xdescribe|xcontext|xsuite"
    r"|fit|ftest|fdescribe|fcontext)\b"
)
# A call that starts its line (after the closing brackets of the one before, at most)...
_JS_LINE = re.compile(
    r"\n[ \t]*(?P<line>(?:[})\];,]+[ \t]*)?" + _JS_NAMES + _JS_CHAIN_RE + _JS_TITLE_RE + r"[^\n]*)"
)
# ...and anywhere on a line that holds a mark's word.
_JS_CALL = re.compile(r"(?<![\w$.])" + _JS_NAMES + _JS_CHAIN_RE + _JS_TITLE_RE)
_JS_TESTS = frozenset({"it", "test", "specify", "xit", "xtest", "xspecify", "fit", "ftest"})
_JS_PREFIX = {"x": "skip", "f": "only"}
_JS_CHAIN = {
    "skip": "skip",
    "skipIf": "skip",
    "runIf": "skip",
    "only": "only",
    "todo": "todo",
    "failing": "xfail",
    "fails": "xfail",
    "if": "skip",  # bun: test.if(cond) runs only when cond holds
    "todoIf": "todo",
}
# node:test's options object comes right after the title: test('x', { skip: true }, fn)
_JS_OPTIONS = re.compile(r"\s*,\s*\{([^{}\n]*)\}")
_JS_OPTION = re.compile(r"\b(skip|todo|only)\s*:\s*(?!false\b|undefined\b|null\b|0\b|''|\"\")[^,}\s]")
_JS_CONTEXT = re.compile(r"(?<![\w$.])(?:t|ctx|context|this|tc)\s*\.\s*(skip|todo)\s*\(")
_JS_WORDS = ("skip", "only", "todo", "fail", "runIf", ".if")  # on a line worth the closer look


def _js_title(m: re.Match[str]) -> str | None:
    t1, t2, t3 = m.group("t1", "t2", "t3")
    return t1 if t1 is not None else t2 if t2 is not None else t3


def _js_kinds(m: re.Match[str], text: str, line_end: int) -> list[str]:
    """What a call's name, its chain (`.skip`, `.only`, `.skipIf(…)`) and node:test's options
    object right after its title (`test('x', { skip: true }, …)`) make of it."""
    fn = m.group("fn")
    kinds = [_JS_PREFIX[fn[0]]] if fn[0] in _JS_PREFIX and len(fn) > 2 else []
    chain = m.group("chain")
    if chain:
        kinds += [
            _JS_CHAIN[c] for c in (p.split("(")[0].strip() for p in chain.split(".")[1:]) if c in _JS_CHAIN
        ]
    options = _JS_OPTIONS.match(text, m.end(), line_end) if _js_title(m) is not None else None
    if options:
        kinds += [o.group(1) for o in _JS_OPTION.finditer(options.group(1))]
    return kinds


def _scan_js(t: _Text) -> Found:
    text = t.text
    decls: list[Decl] = []
    marks: dict[tuple[int, str, str | None], str] = {}  # (line, kind, test) -> text
    titled: list[tuple[int, str]] = []  # (position, title) of each test call, for t.skip()
    dead = t.dead if t.has_spans else None
    for m in _JS_LINE.finditer(text):
        pos = m.start("fn")
        if dead is not None and dead(pos):
            continue
        fn, chain, t1, t2, t3, line = m.group("fn", "chain", "t1", "t2", "t3", "line")
        title = t1 if t1 is not None else t2 if t2 is not None else t3
        ln = t.line_of(pos)
        if title is not None and fn in _JS_TESTS and "each" not in chain:
            decls.append((ln, title, _line_text(line)))
            titled.append((pos, title))
        if fn[0] in _JS_PREFIX and len(fn) > 2:
            marks[(ln, _JS_PREFIX[fn[0]], title)] = _line_text(line)
    for start in t.lines_with(_JS_WORDS):
        line_start, line_end = t.line_span(start)
        # A call's title may stand on the next line: it.skip(\n  'title', …)
        for m in _JS_CALL.finditer(
            text, line_start, t.line_span(line_end + 1)[1] if line_end < len(text) else line_end
        ):
            if m.start() >= line_end:
                break
            pos = m.start()
            if t.in_code(pos):
                title, ln = _js_title(m), t.line_of(pos)
                for kind in _js_kinds(m, text, line_end):
                    marks.setdefault((ln, kind, title), t.line_at(pos))
        for m in _JS_CONTEXT.finditer(text, line_start, line_end):
            pos = m.start()
            if t.in_code(pos):
                i = bisect_right(titled, (pos, ""))
                owner = titled[i - 1][1] if i else None
                marks.setdefault((t.line_of(pos), m.group(1), owner), t.line_at(pos))
    ordered = sorted(marks.items(), key=lambda item: item[0][0])
    return Found(tuple((ln, kind, test, x) for (ln, kind, test), x in ordered), tuple(decls))


# -- Go and Rust ----------------------------------------------------------------------------

_GO_FUNC = re.compile(r"\n(func[ \t]+(?:\([^)\n]*\)[ \t]*)?(\w+)[ \t]*[\[(][^\n]*)")
_GO_TEST = re.compile(r"Test(?![a-z])")  # go test's rule: TestX, Test_x, Test; not Testify
_GO_SKIP = re.compile(r"\.(?:Skip|Skipf|SkipNow)[ \t]*\(")
# A build constraint above the package clause can leave the whole file out of `go test`.
_GO_BUILD = re.compile(r"\n(//[ \t]*(?:go:build|\+build)\b[^\n]*)")
_RS_TEST = re.compile(r"\n[ \t]*(#)\[(?:\w+::)*(?:test|rstest|test_case)\b[^\n]*\]")
_RS_IGNORE = re.compile(r"^[ \t]*(#)\[(?:ignore\b|cfg_attr\([^\n]*\bignore\b)[^\n]*\]", re.M)
_RS_FN = re.compile(r"\bfn[ \t]+(\w+)")


def _scan_go(t: _Text) -> Found:
    funcs = [(m.start(1), m.group(2), m) for m in _GO_FUNC.finditer(t.text) if not t.dead(m.start(1))]
    tests = {pos for pos, name, _m in funcs if _GO_TEST.match(name) and name != "TestMain"}
    starts = [pos for pos, _name, _m in funcs]
    decls = tuple((t.line_of(pos), name, _line_text(m.group(1))) for pos, name, m in funcs if pos in tests)
    marks: list[Mark] = []
    for start in t.lines_with(("Skip",)):
        for m in _GO_SKIP.finditer(t.text, *t.line_span(start)):
            if t.in_code(m.start()):
                # The enclosing func: a test names itself; a helper that skips its caller, nothing.
                i = bisect_right(starts, m.start())
                owner = funcs[i - 1][1] if i and funcs[i - 1][0] in tests else None
                marks.append((t.line_of(m.start()), "skip", owner, t.line_at(m.start())))
    if "build" in t.text:
        package = t.text.find("\npackage ")
        for m in _GO_BUILD.finditer(t.text, 0, package if package != -1 else len(t.text)):
            marks.append((t.line_of(m.start(1)), "skip", None, _line_text(m.group(1))))
        marks.sort(key=lambda mark: mark[0])
    return Found(tuple(marks), decls)


def _rs_next_fn(t: _Text, pos: int) -> tuple[int, str] | None:
    m = _RS_FN.search(t.text, pos)
    return (m.start(), m.group(1)) if m else None


def _scan_rs(t: _Text) -> Found:
    decls: list[Decl] = []
    seen: set[int] = set()
    for m in _RS_TEST.finditer(t.text):
        fn = None if t.dead(m.start(1)) else _rs_next_fn(t, m.end())
        if fn is not None and fn[0] not in seen:
            seen.add(fn[0])
            decls.append((t.line_of(fn[0]), fn[1], t.line_at(fn[0])))
    marks: list[Mark] = []
    for start in t.lines_with(("ignore",)):
        for m in _RS_IGNORE.finditer(t.text, *t.line_span(start)):
            if t.in_code(m.start(1)):
                fn = _rs_next_fn(t, m.end())
                marks.append((t.line_of(m.start(1)), "ignore", fn[1] if fn else None, t.line_at(m.start(1))))
    return Found(tuple(marks), tuple(decls))


_SCANNERS = {"py": _scan_py, "js": _scan_js, "go": _scan_go, "rs": _scan_rs}


def scan(text: str, lang: str) -> Found:
    """The marks and test declarations of one file's text, in the rules of `lang`."""
    return _SCANNERS[lang](_Text(text, lang))
