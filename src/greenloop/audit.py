"""The Tester's self-check of a DevLoop unit (`greenloop audit units/<unit>`).

A static look at a unit's tests (JS: vitest/jest with supertest or fetch; Python: pytest) that
decides whether they are worth trusting:

- acceptance_coverage: every criterion of spec.json has a test named for it (or referring to its
  id), and no test claims several criteria;
- contract_coverage: every non-5xx status code of contract.json `exports.http` has a test that
  calls that method and path and asserts that code;
- no_whole_module_mocks: no test replaces a module of code/ wholesale;
- no_network_or_clock: no test reaches a real host or reads the clock/randomness unstubbed;
- sandbox: nothing outside tests/ and runs/ changed (against git, else against the snapshot the
  previous audit stored in `.greenloop/audit/<unit>.json`);
- result_json: the latest runs/<run_id>/result.json validates and every failure has a hint;
- negative_tests: at least one test provokes a 4xx or asserts an error.

JS is read at token level (comments removed, strings kept); Python with the ast module.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import re
import tempfile
import time
import tokenize
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from greenloop.errors import UsageError
from greenloop.layout import STATE_DIR, find_project_root, git_root

__all__ = [
    "CHECK_NAMES",
    "AuditReport",
    "Baseline",
    "Check",
    "Criterion",
    "TestCase",
    "audit_unit",
    "find_tests",
]

CHECK_NAMES: tuple[str, ...] = (
    "acceptance_coverage",
    "contract_coverage",
    "no_whole_module_mocks",
    "no_network_or_clock",
    "sandbox",
    "result_json",
    "negative_tests",
)
Baseline = Literal["auto", "git", "snapshot"]
_JS_EXT = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts", ".jsx", ".tsx")
_SKIP_DIRS = frozenset({"node_modules", ".git", "__pycache__", ".pytest_cache", STATE_DIR, ".venv", "venv"})
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
_GIT_TIMEOUT_S = 30.0


# ----------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Check:
    """One check's verdict. `details` say what was found and, when it fails, what to do."""

    name: str
    ok: bool
    value: float | int | str | None
    details: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "value": self.value, "details": list(self.details)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Check:
        return cls(
            name=str(d["name"]),
            ok=bool(d["ok"]),
            value=d.get("value"),
            details=tuple(str(x) for x in d.get("details") or ()),
        )


@dataclass(frozen=True)
class AuditReport:
    unit: str
    ok: bool
    acceptance_coverage: float
    contract_coverage: float
    checks: tuple[Check, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "ok": self.ok,
            "acceptance_coverage": self.acceptance_coverage,
            "contract_coverage": self.contract_coverage,
            "checks": [c.to_json() for c in self.checks],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AuditReport:
        return cls(
            unit=str(d["unit"]),
            ok=bool(d["ok"]),
            acceptance_coverage=float(d["acceptance_coverage"]),
            contract_coverage=float(d["contract_coverage"]),
            checks=tuple(Check.from_json(c) for c in d.get("checks") or ()),
        )

    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


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
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Criterion:
    id: str | None
    text: str
    index: int

    @property
    def label(self) -> str:
        return f"{self.id}: {self.text}" if self.id else self.text


@dataclass(frozen=True)
class _Source:
    file: str  # relative to the unit
    language: Literal["js", "py"]
    raw: str
    code: str  # comments removed


@dataclass(frozen=True)
class _Unit:
    root: Path
    name: str
    sources: tuple[_Source, ...]
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


def _call_end(src: str, open_paren: int) -> int:
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


def _js_tests(source: _Source) -> list[TestCase]:
    code = source.code
    describes: list[tuple[int, int, str]] = []
    found: list[tuple[int, int, str]] = []
    for m in _JS_TEST.finditer(code):
        open_paren = code.index("(", m.start())
        end = _call_end(code, open_paren)
        entry = (m.start(), end, m.group("name"))
        (describes if m.group("kind") in ("describe", "suite") else found).append(entry)
    tests = []
    for start, end, name in found:
        path = [d_name for d_start, d_end, d_name in describes if d_start < start < d_end]
        full = " > ".join([*path, name])
        line = _line_of(code, start)
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


def _py_tests(source: _Source) -> tuple[list[TestCase], str | None]:
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


def _walk(root: Path) -> Iterable[Path]:
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def find_tests(unit_dir: str | os.PathLike[str]) -> tuple[TestCase, ...]:
    """The tests found statically under `<unit>/tests/` (JS test files and pytest files)."""
    return _read_unit(Path(unit_dir)).tests


def _read_unit(root: Path) -> _Unit:
    sources: list[_Source] = []
    tests: list[TestCase] = []
    notes: list[str] = []
    for path in _walk(root / "tests"):
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
        source = _Source(rel, lang, raw, code)
        sources.append(source)
        if is_test and lang == "js":
            tests.extend(_js_tests(source))
        elif is_test:
            found, note = _py_tests(source)
            tests.extend(found)
            if note:
                notes.append(note)
    return _Unit(root, root.name, tuple(sources), tuple(tests), tuple(notes))


def _load_json(path: Path) -> tuple[Any, str | None]:
    """(data, None) or (None, problem) for a JSON file of the unit."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except json.JSONDecodeError as exc:
        return None, f"{path.name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    except OSError as exc:
        return None, f"{path.name} cannot be read ({exc.strerror})"


def _nothing_found(name: str, header: str, found: Sequence[str], fix: str) -> Check:
    """A check that passes when `found` is empty: the header, each finding, then the fix if any."""
    details = [header, *found]
    if found:
        details.append(fix)
    return Check(name, not found, len(found), tuple(details))


# ----------------------------------------------------------------------------- 1. acceptance


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^0-9a-z\u4e00-\u9fff]+", " ", text.lower()).split())


def _criteria(spec: Any) -> tuple[list[Criterion], list[str]]:
    problems: list[str] = []
    if not isinstance(spec, dict) or not isinstance(spec.get("acceptance_criteria"), list):
        return [], ["spec.json has no acceptance_criteria list"]
    out: list[Criterion] = []
    for i, item in enumerate(spec["acceptance_criteria"], start=1):
        if isinstance(item, str) and item.strip():
            out.append(Criterion(None, item.strip(), i))
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            cid = item.get("id")
            out.append(Criterion(str(cid) if cid else None, item["text"].strip(), i))
        else:
            problems.append(
                f"spec.json acceptance_criteria[{i - 1}] must be a string or {{id, text}}, not {item!r}"
            )
    return out, problems


def _check_acceptance(unit: _Unit) -> Check:
    spec, problem = _load_json(unit.root / "spec.json")
    criteria, problems = _criteria(spec) if problem is None else ([], [problem])
    if not criteria:
        return Check(
            "acceptance_coverage",
            False,
            0.0,
            (*problems, "fix: give the unit a spec.json with acceptance_criteria (strings or {id, text})"),
        )
    claims: dict[str, list[Criterion]] = {}
    covered: dict[int, list[TestCase]] = {c.index: [] for c in criteria}
    texts = [_norm(c.text) for c in criteria]
    for test in unit.tests:
        name = _norm(test.name)
        # A test refers to a criterion by its id, or by naming its (normalised) text.
        found: list[tuple[Criterion, str, bool]] = []
        for c, text in zip(criteria, texts, strict=True):
            by_id = _refers_by_id(test, c)
            if by_id or (text and text in name):
                found.append((c, text, by_id))
        # a criterion whose text is contained in another hit's text is the less specific one
        hits = [
            c
            for c, text, by_id in found
            if by_id or not any(o is not c and text in o_text for o, o_text, _ in found)
        ]
        for c in hits:
            covered[c.index].append(test)
        if len(hits) > 1:
            claims[test.where] = hits
    uncovered = [c for c in criteria if not covered[c.index]]
    value = round((len(criteria) - len(uncovered)) / len(criteria), 4)
    details = [*problems, f"{len(criteria) - len(uncovered)} of {len(criteria)} criteria covered"]
    details += [f"uncovered: {c.label}" for c in uncovered]
    for where, hits in claims.items():
        details.append(f"{where} claims {len(hits)} criteria ({'; '.join(c.label for c in hits)})")
    ok = not uncovered and not claims and not problems
    if uncovered:
        details.append(
            "fix: write one it()/test per uncovered criterion, named with its text or carrying its id"
        )
    if claims:
        details.append("fix: split tests that claim several criteria into one test per criterion")
    return Check("acceptance_coverage", ok, value, tuple(details))


def _refers_by_id(test: TestCase, crit: Criterion) -> bool:
    return bool(crit.id) and bool(re.search(rf"(?<![\w-]){re.escape(crit.id or '')}(?![\w])", test.raw, re.I))


# ----------------------------------------------------------------------------- 2. contract


@dataclass(frozen=True)
class _Endpoint:
    method: str
    path: str
    codes: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def _endpoints(contract: Any) -> tuple[list[_Endpoint], list[str]]:
    http = contract.get("exports", {}).get("http") if isinstance(contract, dict) else None
    if http is None:
        return [], []
    if not isinstance(http, dict):
        return [], ["contract.json exports.http must be an object of 'METHOD /path' entries"]
    out, problems = [], []
    for key, entry in http.items():
        m = re.fullmatch(r"\s*([A-Za-z]+)\s+(/\S*)\s*", str(key))
        responses = entry.get("responses") if isinstance(entry, dict) else None
        if not m or m.group(1).upper() not in _METHODS:
            problems.append(f"contract.json exports.http key {key!r} must look like 'POST /api/todos'")
            continue
        if not isinstance(responses, dict):
            problems.append(
                f"contract.json exports.http[{key!r}].responses must be an object of status codes"
            )
            continue
        codes = tuple(sorted(str(c) for c in responses if re.fullmatch(r"[1-5]\d\d", str(c))))
        bad = [str(c) for c in responses if not re.fullmatch(r"[1-5]\d\d", str(c))]
        if bad:
            problems.append(f"contract.json exports.http[{key!r}].responses has non-status keys {bad}")
        out.append(_Endpoint(m.group(1).upper(), m.group(2), codes))
    return out, problems


_JS_CALLS = (
    # supertest / axios / client objects: .post('/api/todos')
    re.compile(r"\.(get|post|put|patch|delete|del|head|options)\s*\(\s*f?(['\"`])([^'\"`]*)\2", re.I),
    # helpers: call(app, 'POST', '/api/todos'), client.request("GET", "/x")
    re.compile(r"(['\"`])(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS)\1\s*,\s*f?(['\"`])([^'\"`]*)\3"),
)
_FETCH = re.compile(r"\bfetch\s*\(")
_STATUS_ASSERTS = (
    re.compile(r"\.expect\(\s*([1-5]\d\d)\b"),
    re.compile(r"\bstatus(?:Code|_code|_int)?\b[^;\n]{0,60}?(?<![\w.])([1-5]\d\d)(?![\w.])"),
    re.compile(r"(?<![\w.])([1-5]\d\d)\s*(?:==|===|,)\s*[\w.\[\]'\"]*\bstatus(?:Code|_code)?\b"),
)


@dataclass(frozen=True)
class _Call:
    pos: int
    method: str
    path: str


def _calls(code: str) -> list[_Call]:
    calls: list[_Call] = []
    for m in _JS_CALLS[0].finditer(code):
        method = m.group(1).upper()
        calls.append(_Call(m.start(), "DELETE" if method == "DEL" else method, m.group(3)))
    for m in _JS_CALLS[1].finditer(code):
        calls.append(_Call(m.start(), m.group(2), m.group(4)))
    for m in _FETCH.finditer(code):
        open_paren = code.index("(", m.start())
        args = code[open_paren : _call_end(code, open_paren)]
        literals = re.findall(r"(['\"`])([^'\"`]*/[^'\"`]*)\1", args)
        if not literals:
            continue
        method = re.search(r"method\s*:\s*['\"`](\w+)", args)
        calls.append(_Call(m.start(), method.group(1).upper() if method else "GET", literals[0][1]))
    return sorted(calls, key=lambda c: c.pos)


def _segments(path: str) -> list[str]:
    path = re.sub(r"^[a-z]+://[^/]+", "", path.strip())
    path = path.split("?")[0].split("#")[0]
    path = re.sub(r"\$\{[^}]*\}|\{[^}]*\}", ":param", path)
    return [s for s in path.split("/") if s]


def _path_matches(contract_path: str, test_path: str) -> bool:
    want, have = _segments(contract_path), _segments(test_path)
    if len(have) < len(want) or (not want and have):
        return False
    have = have[len(have) - len(want) :] if want else have  # tolerate a base prefix (/v1, a host)
    for w, h in zip(want, have, strict=False):
        if w.startswith((":", "{", "[", "<")) or h == ":param" or h.startswith(":"):
            continue
        if w != h:
            return False
    return True


def _asserted(code: str) -> list[tuple[int, int]]:
    found = {(m.start(), int(m.group(1))) for p in _STATUS_ASSERTS for m in p.finditer(code)}
    return sorted(found)


def _covered_pairs(test: TestCase) -> set[tuple[str, str, int]]:
    """(method, path as written, status) the test provokes and asserts."""
    calls = _calls(test.code)
    out: set[tuple[str, str, int]] = set()
    if not calls:
        return out
    for pos, status in _asserted(test.code):
        before = [c for c in calls if c.pos < pos]
        call = before[-1] if before else calls[0]
        out.add((call.method, call.path, status))
    return out


def _check_contract(unit: _Unit) -> Check:
    path = unit.root / "contract.json"
    if not path.exists():
        return Check(
            "contract_coverage", True, 1.0, ("no contract.json: the unit exports no HTTP API to cover",)
        )
    contract, problem = _load_json(path)
    endpoints, problems = _endpoints(contract) if problem is None else ([], [problem])
    required = [(e, code) for e in endpoints for code in e.codes if not code.startswith("5")]
    if not required:
        ok = not problems
        details = [*problems, "contract.json lists no non-5xx status codes under exports.http"]
        if problems:
            details.append(
                "fix: correct contract.json (docs/integration.md: exports.http['METHOD /path'].responses)"
            )
        return Check("contract_coverage", ok, 1.0 if ok else 0.0, tuple(details))
    provoked: list[tuple[TestCase, str, str, int]] = [
        (t, method, p, status) for t in unit.tests for method, p, status in _covered_pairs(t)
    ]
    missing: list[tuple[_Endpoint, str]] = []
    for endpoint, code in required:
        hit = any(
            method == endpoint.method and status == int(code) and _path_matches(endpoint.path, p)
            for _, method, p, status in provoked
        )
        if not hit:
            missing.append((endpoint, code))
    value = round((len(required) - len(missing)) / len(required), 4)
    details = [
        *problems,
        f"{len(required) - len(missing)} of {len(required)} status codes provoked and asserted",
    ]
    for endpoint, code in missing:
        kind = "its success case" if code.startswith("2") else "a negative case"
        details.append(f"missing: {endpoint.label} {code} ({kind})")
    if missing:
        details.append(
            "fix: for each missing code add a test that calls that method and path with an input that "
            "provokes it and asserts the code (e.g. .expect(400) or assert r.status_code == 400)"
        )
    return Check("contract_coverage", not missing and not problems, value, tuple(details))


# ----------------------------------------------------------------------------- 3. mocks


_JS_MOCK = re.compile(r"\b(?:vi|jest)\.(?:mock|doMock|unstable_mockModule)\s*\(\s*(['\"`])([^'\"`]+)\1")
_PY_PATCH = re.compile(r"\bpatch\s*\(\s*(['\"])([\w.]+)\1")
_PY_PATCH_OBJECT = re.compile(r"\b(?:patch\.object|monkeypatch\.setattr)\s*\(\s*[\w.]+\s*,\s*(['\"])(\w+)\1")
_PY_SYS_MODULES = re.compile(
    r"sys\.modules\s*\[\s*(['\"])([\w.]+)\1\s*\]\s*=(?!=)"
    r"|(?:monkeypatch\.setitem|patch\.dict)\s*\(\s*sys\.modules\s*,\s*\{?\s*(['\"])([\w.]+)\3"
)


def _python_modules(code_dir: Path) -> set[str]:
    names: set[str] = set()
    for path in _walk(code_dir):
        if path.suffix != ".py":
            continue
        parts = list(path.relative_to(code_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for i in range(1, len(parts) + 1):
            names.add(".".join(parts[:i]))
    return names | {f"code.{n}" for n in names}


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _check_mocks(unit: _Unit) -> Check:
    code_dir = (unit.root / "code").resolve()
    py_modules = _python_modules(code_dir)
    found: list[str] = []
    for src in unit.sources:
        if src.language == "js":
            for m in _JS_MOCK.finditer(src.code):
                spec = m.group(2)
                target = (
                    (unit.root / src.file).parent.joinpath(spec).resolve() if spec.startswith(".") else None
                )
                inside = target is not None and (target == code_dir or code_dir in target.parents)
                if inside or re.search(r"(^|/)code/", spec):
                    found.append(
                        f"{src.file}:{_line_of(src.code, m.start())}: {m.group(0)}…) mocks code/ wholesale"
                    )
            continue
        for pattern, group in ((_PY_PATCH, 2), (_PY_PATCH_OBJECT, 2)):
            for m in pattern.finditer(src.code):
                if m.group(group) in py_modules:
                    line = _line_of(src.code, m.start())
                    found.append(f"{src.file}:{line}: {m.group(0)} replaces the module '{m.group(group)}'")
        for m in _PY_SYS_MODULES.finditer(src.code):
            name = m.group(2) or m.group(4)
            if name in py_modules:
                found.append(
                    f"{src.file}:{_line_of(src.code, m.start())}: sys.modules entry '{name}' is replaced"
                )
    return _nothing_found(
        "no_whole_module_mocks",
        f"{len(found)} whole-module mock(s) of code/",
        found,
        "fix: test the real module; mock only what it reaches outside the unit "
        "(external APIs, time, randomness) or a single function of it",
    )


# ----------------------------------------------------------------------------- 4. network, clock


_EXTERNAL_URL = re.compile(
    r"(['\"`])(?:https?|wss?)://(?!localhost(?![\w.-])|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)"
    r"(?P<host>[A-Za-z0-9.-]+)"
)
_NET_STUB = {
    "js": re.compile(
        r"(?:vi|jest)\.(?:spyOn|stubGlobal)\s*\([^)]*fetch|(?:vi|jest)\.mock\(\s*['\"`]"
        r"(?:axios|node-fetch|got|undici|cross-fetch|superagent)|\bnock\b|\bmsw\b|setupServer"
        r"|global(?:This)?\.fetch\s*=|mock\.method\([^)]*fetch"
    ),
    "py": re.compile(
        r"\bresponses\b|respx|requests_mock|httpretty|pytest_httpserver|aioresponses"
        r"|(?:monkeypatch\.setattr|patch(?:\.object)?)\s*\([^)]*(?:requests|httpx|urlopen|socket|urllib)"
    ),
}
_CLOCK_USE = {
    "js": re.compile(
        r"\bDate\.now\s*\(|\bnew Date\s*\(\s*\)|\bMath\.random\s*\(|\bperformance\.now\s*\("
        r"|\bcrypto\.randomUUID\s*\(|setTimeout\s*\([^;]*?,\s*(?:[1-9]\d{2,})\s*\)"
    ),
    "py": re.compile(
        r"\btime\.(?:time|monotonic|perf_counter|sleep)\s*\(|\bdatetime(?:\.datetime)?\.(?:now|utcnow|today)\s*\("
        r"|\bdate\.today\s*\(|\brandom\.(?!seed\b)\w+\s*\(|\buuid\.uuid[14]\s*\("
    ),
}
_CLOCK_STUB = {
    "js": re.compile(
        r"(?:vi|jest)\.useFakeTimers|(?:vi|jest)\.setSystemTime|(?:vi|jest)\.spyOn\(\s*"
        r"(?:Math|Date|global(?:This)?\.Date|crypto|performance)\b|mock\.timers|vi\.stubGlobal\(\s*['\"`]"
        r"(?:Date|Math|crypto)|(?:vi|jest)\.mock\(\s*['\"`](?:uuid|nanoid)"
    ),
    "py": re.compile(
        r"freezegun|freeze_time|time_machine|random\.seed\s*\(|Random\(\s*\d"
        r"|(?:monkeypatch\.setattr|patch(?:\.object)?)\s*\([^)]*(?:time|datetime|random|uuid)"
    ),
}


def _check_network_clock(unit: _Unit) -> Check:
    found: list[str] = []
    for src in unit.sources:
        lang = src.language
        if not _NET_STUB[lang].search(src.code):
            for m in _EXTERNAL_URL.finditer(src.code):
                line = _line_of(src.code, m.start())
                found.append(
                    f"{src.file}:{line}: reaches the real host {m.group('host')} (network not stubbed)"
                )
        if not _CLOCK_STUB[lang].search(src.code):
            for m in _CLOCK_USE[lang].finditer(src.code):
                line = _line_of(src.code, m.start())
                snippet = " ".join(m.group(0).split())
                found.append(
                    f"{src.file}:{line}: {snippet}… depends on the clock or randomness without a stub"
                )
    return _nothing_found(
        "no_network_or_clock",
        f"{len(found)} unstubbed network, clock or randomness use(s)",
        found,
        "fix: stub the network (vi.spyOn(globalThis, 'fetch'), nock, responses, monkeypatch) and the "
        "clock or randomness (vi.useFakeTimers, vi.spyOn(Math, 'random'), freezegun, random.seed)",
    )


# ----------------------------------------------------------------------------- 5. sandbox


def _allowed(rel: str) -> bool:
    """tests/ and runs/ are the Tester's; tool state and caches (.greenloop/, __pycache__/) are nobody's."""
    if rel == "tests" or rel == "runs" or rel.startswith(("tests/", "runs/")):
        return True
    return any(part in _SKIP_DIRS for part in rel.split("/")[:-1])


def _git(args: list[str], cwd: Path) -> tuple[int | None, str]:
    from greenloop.system import proc

    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    with tempfile.TemporaryDirectory(prefix="greenloop-audit-") as tmp:
        raw = proc.run_to_completion(
            ["git", *args],
            cwd=str(cwd),
            env=env,
            timeout_s=_GIT_TIMEOUT_S,
            stdout_path=os.path.join(tmp, "out"),
            stderr_path=os.path.join(tmp, "err"),
        )
        out = Path(raw.stdout_path).read_text(encoding="utf-8", errors="replace")
        err = Path(raw.stderr_path).read_text(encoding="utf-8", errors="replace")
    if raw.spawn_error:
        return None, raw.spawn_error
    return raw.exit_code, out if raw.exit_code == 0 else err


def _sandbox_git(root: Path) -> tuple[list[str], str] | None:
    code, prefix = _git(["rev-parse", "--show-prefix"], root)
    if code != 0:
        return None
    prefix = prefix.strip()
    code, out = _git(["status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "."], root)
    if code != 0:
        return None
    entries = out.split("\0")
    changed: list[str] = []
    i = 0
    while i < len(entries):
        entry = entries[i]
        i += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        if "R" in status or "C" in status:
            i += 1  # the original path of a rename/copy follows
        rel = path[len(prefix) :] if path.startswith(prefix) else path
        if not _allowed(rel):
            kind = {"??": "added", " D": "deleted", "D ": "deleted"}.get(status, "changed")
            changed.append(f"{rel} {kind} (uncommitted)")
    return changed, "compared with git HEAD"


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def _snapshot(root: Path) -> dict[str, str]:
    files: dict[str, str] = {}
    for path in _walk(root):
        rel = path.relative_to(root).as_posix()
        if _allowed(rel) or path.is_symlink() or not path.is_file():
            continue
        files[rel] = _hash_file(path)
    return files


def _state_root(unit_root: Path) -> Path:
    project = find_project_root(unit_root)
    if project is not None:
        return project
    if unit_root.parent.name == "units":
        return unit_root.parent.parent
    return unit_root.parent


def _sandbox_snapshot(
    root: Path, unit: str, state_root: Path, clock: Callable[[], float]
) -> tuple[bool, list[str]]:
    store = state_root / STATE_DIR / "audit" / f"{unit}.json"
    current = _snapshot(root)
    previous: dict[str, str] | None = None
    problems: list[str] = []
    if store.exists():
        try:
            data = json.loads(store.read_text(encoding="utf-8"))
            previous = {str(k): str(v) for k, v in data["files"].items()}
        except (OSError, ValueError, KeyError, AttributeError, TypeError):
            problems.append(f"the stored snapshot {store} was unreadable; recorded a new one")
    record = {
        "version": 1,
        "unit": unit,
        "unit_path": str(root),
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock())),
        "files": current,
    }
    store.parent.mkdir(parents=True, exist_ok=True)
    tmp = store.with_suffix(f".json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, store)
    if previous is None:
        return True, [
            *problems,
            f"first audit outside git: recorded a baseline in {store}; the next audit compares against it",
        ]
    changes = [f"{p} changed" for p in sorted(current) if p in previous and previous[p] != current[p]]
    changes += [f"{p} added" for p in sorted(set(current) - set(previous))]
    changes += [f"{p} deleted" for p in sorted(set(previous) - set(current))]
    return False, [*problems, f"compared with the previous audit's snapshot ({store})", *changes]


def _check_sandbox(unit: _Unit, baseline: Baseline, state_root: Path, clock: Callable[[], float]) -> Check:
    details: list[str] = []
    # unit.root is resolved (audit_unit), so git_root walks the same folders as Path.parents.
    # Only whether there is a root matters: `git rev-parse --show-prefix` gives the unit's place.
    if baseline in ("auto", "git") and git_root(unit.root) is not None:
        result = _sandbox_git(unit.root)
        if result is not None:
            changed, how = result
            return _nothing_found(
                "sandbox",
                how,
                changed,
                "fix: only tests/ and runs/ may change; restore the other files "
                "(git checkout -- <file>) and let the Coder change code/, contract.json and spec.json",
            )
        details.append("git could not be asked; fell back to the audit snapshot")
    elif baseline == "git":
        details.append(f"{unit.root} is not inside a git work tree; fell back to the audit snapshot")
    _first, lines = _sandbox_snapshot(unit.root, unit.name, state_root, clock)
    changes = [ln for ln in lines if ln.endswith((" changed", " added", " deleted"))]
    details += lines
    if changes:
        details.append(
            "fix: only tests/ and runs/ may change between audits; restore code/, contract.json, "
            "spec.json and the other files, or have their owner make the change"
        )
    return Check("sandbox", not changes, len(changes), tuple(details))


# ----------------------------------------------------------------------------- 6. result.json


def _check_result_json(unit: _Unit) -> Check:
    from greenloop.schema import validate_run_result

    runs = unit.root / "runs"
    candidates = sorted(p.parent.name for p in runs.glob("*/result.json")) if runs.is_dir() else []
    if not candidates:
        return Check(
            "result_json",
            True,
            None,
            (f"warning: no run yet (no runs/<run_id>/result.json); run `greenloop run {unit.root}`",),
        )
    run_id = candidates[-1]
    rel = f"runs/{run_id}/result.json"
    data, problem = _load_json(runs / run_id / "result.json")
    if problem is not None:
        return Check(
            "result_json", False, run_id, (f"{rel}: {problem}", "fix: rerun the tests with greenloop")
        )
    errors = validate_run_result(data)
    details = [f"latest run: {rel}"]
    details += [f"schema: {e}" for e in errors[:10]]
    if len(errors) > 10:
        details.append(f"schema: … {len(errors) - 10} more")
    empty = []
    if isinstance(data, dict) and isinstance(data.get("failures"), list):
        for i, failure in enumerate(data["failures"]):
            hint = failure.get("hint") if isinstance(failure, dict) else None
            if not isinstance(hint, str) or not hint.strip():
                name = failure.get("test") if isinstance(failure, dict) else None
                empty.append(f"failures[{i}] ({name or '?'}) has no hint")
    details += empty
    if errors:
        details.append(
            "fix: write result.json as `greenloop schema run-result` describes (greenloop run does)"
        )
    if empty:
        details.append(
            "fix: give every failure a one- or two-sentence hint naming the cause and where to look"
        )
    return Check("result_json", not errors and not empty, run_id, tuple(details))


# ----------------------------------------------------------------------------- 7. negative tests


_ERROR_ASSERT = re.compile(
    r"\.toThrow|\.rejects\b|assert\.(?:throws|rejects)|\.toBeInstanceOf\(\s*\w*Error"
    r"|\bpytest\.raises\b|assertRaises|\.body\.error\b|\[['\"]error['\"]\]|\"error\"\s*:|'error'\s*:"
    r"|\berror\s*:\s*['\"]"
)


def _check_negative(unit: _Unit) -> Check:
    negatives = [
        t
        for t in unit.tests
        if any(400 <= s < 500 for _, s in _asserted(t.code)) or _ERROR_ASSERT.search(t.code)
    ]
    details = [f"{len(negatives)} of {len(unit.tests)} tests provoke a 4xx or assert an error"]
    details += [f"negative: {t.where} {t.name}" for t in negatives[:5]]
    if not negatives:
        details.append(
            "fix: add at least one negative test (invalid input answering 400, a missing resource "
            "answering 404, or an expected error) so an always-green suite cannot pass"
        )
    return Check("negative_tests", bool(negatives), len(negatives), tuple(details))


# ----------------------------------------------------------------------------- the audit


def audit_unit(
    unit_dir: str | os.PathLike[str],
    *,
    baseline: Baseline = "auto",
    state_root: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] = time.time,
) -> AuditReport:
    """Run the seven checks on the DevLoop unit at `unit_dir`.

    `baseline` picks the sandbox comparison: "git" (uncommitted changes against HEAD), "snapshot"
    (the previous audit's file hashes in `<state_root>/.greenloop/audit/<unit>.json`), or "auto"
    (git when the unit is inside a work tree). `state_root` defaults to the project root.
    """
    if baseline not in ("auto", "git", "snapshot"):
        raise UsageError(f"baseline must be one of auto, git, snapshot, not {baseline!r}")
    root = Path(unit_dir).resolve()
    if not root.is_dir():
        raise UsageError(f"unit folder {unit_dir} does not exist: pass a DevLoop unit such as units/todo-be")
    if not any((root / name).exists() for name in ("code", "tests", "spec.json", "contract.json")):
        raise UsageError(
            f"{unit_dir} is not a DevLoop unit (no code/, tests/, spec.json or contract.json): "
            "pass a folder such as units/todo-be"
        )
    unit = _read_unit(root)
    checks = [
        _check_acceptance(unit),
        _check_contract(unit),
        _check_mocks(unit),
        _check_network_clock(unit),
        _check_sandbox(unit, baseline, Path(state_root) if state_root else _state_root(root), clock),
        _check_result_json(unit),
        _check_negative(unit),
    ]
    if unit.notes:
        first = checks[0]
        checks[0] = Check(first.name, first.ok, first.value, (*first.details, *unit.notes))
    acceptance = checks[0].value if isinstance(checks[0].value, float) else 0.0
    contract = checks[1].value if isinstance(checks[1].value, float) else 0.0
    return AuditReport(
        unit=unit.name,
        ok=all(c.ok for c in checks),
        acceptance_coverage=acceptance,
        contract_coverage=contract,
        checks=tuple(checks),
    )
