"""No import circle among greenloop's modules (issue 28): what a module imports when it is
imported (its top-level imports, those under `if TYPE_CHECKING:` left out, and the packages
each import loads on the way) never leads back to it. A circle makes a module's meaning
depend on which of its members is imported first; the lazy imports inside functions, which
keep the hook and run paths light, are not edges (they run after every module has loaded)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _modules(src: Path, package: str) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        if "__pycache__" in path.parts or "node_modules" in path.parts:
            continue
        name = ".".join(path.relative_to(src).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _top_imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The known modules `path` (module `name`) imports when it is imported."""
    out: set[str] = set()
    is_package = path.name == "__init__.py"

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                    visit(node.orelse)
                    continue
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.Import):
                out.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    module = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    module = node.module or ""
                out.add(module)
                out.update(f"{module}.{alias.name}" for alias in node.names)  # a submodule by name

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    loaded: set[str] = set()
    for module in out:  # importing a.b.c runs a and a.b first
        parts = module.split(".")
        loaded.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in loaded if m in known and m != name}


def circles(src: Path, package: str) -> list[list[str]]:
    """The import circles among `package`'s modules (strongly connected groups of two or more)."""
    known = _modules(src, package)
    graph = {name: _top_imports(path, name, known) for name, path in known.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_greenloop_has_no_import_circle() -> None:
    assert len(_modules(SRC, "greenloop")) > 200  # the whole package was read
    assert circles(SRC, "greenloop") == []


def test_a_circle_is_found_through_a_relative_import_and_a_package(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.a import thing\n")  # the package loads a
    (pkg / "a.py").write_text("from .sub import helper\nthing = 1\n")
    (pkg / "sub" / "helper.py").write_text("TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import pkg.b\n")
    (pkg / "b.py").write_text("def later():\n    import pkg.sub.helper\n")
    assert circles(tmp_path, "pkg") == [["pkg.a", "pkg.sub"]]  # not b (lazy), not helper (typing only)
