"""How many failure records of six real suites with a wrong value in their source get a hint
that names the code under test (the broken function and its file:line), before and after.

The cases are tests/fixtures/hints/real/cases.json (scripts/capture_real_hints: itsdangerous,
toolz, ms, commander, ufo, path-to-regexp as greenloop's parsers recorded them, with the source lines
their hints read). One run computes every hint twice, each in its own interpreter: with the
hints of BASE (the commit before this work, taken from git) and with the working tree's.

Usage: python bench/hint_accuracy.py [BASE]     (default BASE: 99b5e23)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "tests" / "fixtures" / "hints" / "real" / "cases.json"
BASE = "99b5e23"


def materialize(cases: list[dict[str, Any]], root: Path) -> None:
    """Each case's source lines at their numbers, under root/<case index>/ (blank elsewhere)."""
    for i, case in enumerate(cases):
        for file, lines in case["sources"].items():
            path = root / str(i) / file
            path.parent.mkdir(parents=True, exist_ok=True)
            last = max((n for n, _ in lines), default=0)
            text = [""] * last
            for n, line in lines:
                text[n - 1] = line
            path.write_text("\n".join(text) + "\n", encoding="utf-8")


def names_code(case: dict[str, Any], hint: str) -> bool:
    """The hint names a function of the broken file and its file:line (`tail (toolz/itertoolz.py:325)`):
    the broken function, or the one the test calls that reaches it (`ms`, whose module is ms)."""
    file = re.escape(case["mutation"]["file"])
    return re.search(r"[\w$.]+ \(" + file + r":\d+\)", hint) is not None


def wrong_value(case: dict[str, Any]) -> bool:
    """An assertion on a value (not an error thrown, a timeout or a load failure)."""
    f = case["failure"]
    head = (f["message"] or "").lstrip()
    return f["kind"] == "test" and (
        f["expected"] is not None
        or f["got"] is not None
        or re.match(r"(?:AssertionError|assert |expect|Error: expected)", head) is not None
    )


def worker(root: str) -> None:
    """Print one JSON list of hints, one per case, with the greenloop on sys.path."""
    from greenloop.hints.hint import hint_for
    from greenloop.hints.source import Sources
    from greenloop.model import Failure

    cases = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    out = []
    for i, case in enumerate(cases):
        sources = Sources(os.path.join(root, str(i)))
        out.append(hint_for(Failure(**case["failure"]), framework=case["framework"], sources=sources))
    print(json.dumps(out))


def hints_with(src: Path, root: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = (
        f"import sys; sys.path.insert(1, {str(ROOT / 'bench')!r}); import hint_accuracy as h;"
        f" h.worker({str(root)!r})"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    hints: list[str] = json.loads(proc.stdout)
    return hints


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "-v"]
    base = args[0] if args else BASE
    cases = json.loads(CASES.read_text(encoding="utf-8"))["cases"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        materialize(cases, root)
        old_src = Path(tmp) / "base"
        git = ["git", "-C", str(ROOT), "archive", base, "src"]
        archive = subprocess.run(git, capture_output=True, check=True)
        old_src.mkdir()
        (Path(tmp) / "base.tar").write_bytes(archive.stdout)
        with tarfile.open(Path(tmp) / "base.tar") as tar:
            tar.extractall(old_src, filter="data")
        before = hints_with(old_src / "src", root)
        after = hints_with(ROOT / "src", root)
    values = [i for i, c in enumerate(cases) if wrong_value(c)]
    for label, hints in ((f"before ({base})", before), ("after (working tree)", after)):
        named = [i for i in range(len(cases)) if names_code(cases[i], hints[i])]
        named_values = [i for i in named if i in values]
        print(
            f"{label:24} names the code under test: {len(named)}/{len(cases)} records,"
            f" {len(named_values)}/{len(values)} wrong values"
        )
    if "-v" in sys.argv:
        for i, case in enumerate(cases):
            print(f"\n{case['id']}\n  before: {before[i]}\n  after:  {after[i]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
