"""Where code is in a test file's text: its multi-line strings and comments, the strings and
comments on a line before a match, and line lookups (for closure/mark_rules.py).

Python's regular expressions try every position of a text unless a pattern starts with a
literal, so openers are found by substring search, and a line's own strings and comments are
looked at only before a match.
"""

from __future__ import annotations

import re
from bisect import bisect_right

__all__ = ["MAX_MARK_LINES", "MAX_PREFIX", "MAX_TEXT", "Text"]

MAX_TEXT = 200  # characters of a line kept in a mark
MAX_PREFIX = 4_000  # a match further into its line than this is not read (minified code)
MAX_MARK_LINES = 1_000  # lines holding a mark's word read per file (the rest are not)


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


class Text:
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
