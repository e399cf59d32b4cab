"""The audit's contract_coverage check: every non-5xx status code of contract.json
`exports.http` has a test that calls that method and path and asserts that code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from greenloop.audit.check import Check
from greenloop.audit.sources import TestCase, Unit, call_end, load_json

__all__ = [
    "asserted_statuses",
    "check",
]

_HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")


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
        if not m or m.group(1).upper() not in _HTTP_METHODS:
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
        args = code[open_paren : call_end(code, open_paren)]
        literals = re.findall(r"(['\"`])([^'\"`]*/[^'\"`]*)\1", args)
        if not literals:
            continue
        method = re.search(r"method\s*:\s*['\"`](\w+)", args)
        calls.append(_Call(m.start(), method.group(1).upper() if method else "GET", literals[0][1]))
    return sorted(calls, key=lambda c: c.pos)


def _path_segments(path: str) -> list[str]:
    path = re.sub(r"^[a-z]+://[^/]+", "", path.strip())
    path = path.split("?")[0].split("#")[0]
    path = re.sub(r"\$\{[^}]*\}|\{[^}]*\}", ":param", path)
    return [s for s in path.split("/") if s]


def _path_matches(contract_path: str, test_path: str) -> bool:
    want, have = _path_segments(contract_path), _path_segments(test_path)
    if len(have) < len(want) or (not want and have):
        return False
    have = have[len(have) - len(want) :] if want else have  # tolerate a base prefix (/v1, a host)
    for w, h in zip(want, have, strict=False):
        if w.startswith((":", "{", "[", "<")) or h == ":param" or h.startswith(":"):
            continue
        if w != h:
            return False
    return True


def asserted_statuses(code: str) -> list[tuple[int, int]]:
    """(offset, status) of every HTTP status code the code asserts, in order."""
    found = {(m.start(), int(m.group(1))) for p in _STATUS_ASSERTS for m in p.finditer(code)}
    return sorted(found)


def _covered_pairs(test: TestCase) -> set[tuple[str, str, int]]:
    """(method, path as written, status) the test provokes and asserts."""
    calls = _calls(test.code)
    out: set[tuple[str, str, int]] = set()
    if not calls:
        return out
    for pos, status in asserted_statuses(test.code):
        before = [c for c in calls if c.pos < pos]
        call = before[-1] if before else calls[0]
        out.add((call.method, call.path, status))
    return out


def check(unit: Unit) -> Check:
    """The contract_coverage verdict: the share of status codes provoked and asserted, the missing ones."""
    path = unit.root / "contract.json"
    if not path.exists():
        return Check(
            "contract_coverage", True, 1.0, ("no contract.json: the unit exports no HTTP API to cover",)
        )
    contract, problem = load_json(path)
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
