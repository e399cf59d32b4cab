"""The audit's no_whole_module_mocks check: no test replaces a module of code/ wholesale."""

from __future__ import annotations

import re
from pathlib import Path

from greenloop.audit.check import Check, nothing_found
from greenloop.audit.sources import Unit, line_of, walk_files

__all__ = [
    "check",
]

_JS_MOCK = re.compile(r"\b(?:vi|jest)\.(?:mock|doMock|unstable_mockModule)\s*\(\s*(['\"`])([^'\"`]+)\1")
_PY_PATCH = re.compile(r"\bpatch\s*\(\s*(['\"])([\w.]+)\1")
_PY_PATCH_OBJECT = re.compile(r"\b(?:patch\.object|monkeypatch\.setattr)\s*\(\s*[\w.]+\s*,\s*(['\"])(\w+)\1")
_PY_SYS_MODULES = re.compile(
    r"sys\.modules\s*\[\s*(['\"])([\w.]+)\1\s*\]\s*=(?!=)"
    r"|(?:monkeypatch\.setitem|patch\.dict)\s*\(\s*sys\.modules\s*,\s*\{?\s*(['\"])([\w.]+)\3"
)


def _python_modules(code_dir: Path) -> set[str]:
    names: set[str] = set()
    for path in walk_files(code_dir):
        if path.suffix != ".py":
            continue
        parts = list(path.relative_to(code_dir).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for i in range(1, len(parts) + 1):
            names.add(".".join(parts[:i]))
    return names | {f"code.{n}" for n in names}


def check(unit: Unit) -> Check:
    """The no_whole_module_mocks verdict: each mock that replaces a module of code/, and the fix."""
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
                        f"{src.file}:{line_of(src.code, m.start())}: {m.group(0)}…) mocks code/ wholesale"
                    )
            continue
        for pattern, group in ((_PY_PATCH, 2), (_PY_PATCH_OBJECT, 2)):
            for m in pattern.finditer(src.code):
                if m.group(group) in py_modules:
                    line = line_of(src.code, m.start())
                    found.append(f"{src.file}:{line}: {m.group(0)} replaces the module '{m.group(group)}'")
        for m in _PY_SYS_MODULES.finditer(src.code):
            name = m.group(2) or m.group(4)
            if name in py_modules:
                found.append(
                    f"{src.file}:{line_of(src.code, m.start())}: sys.modules entry '{name}' is replaced"
                )
    return nothing_found(
        "no_whole_module_mocks",
        f"{len(found)} whole-module mock(s) of code/",
        found,
        "fix: test the real module; mock only what it reaches outside the unit "
        "(external APIs, time, randomness) or a single function of it",
    )
