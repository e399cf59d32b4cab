"""What the hint tests share: a recorded case as the Failure it was, the sentence count a hint
may have, the Chinese-character test, and the JS units laid out as their runner saw them
(code/ + tests/), read by tests/test_hints.py and tests/test_hints_causes.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from greenloop.model import Failure

CJK = re.compile(r"[\u4e00-\u9fff]")
JS_RUNNERS = ("vitest", "jest", "node:test")
_FIELDS = ("test", "file", "line", "message", "expected", "got", "stack", "kind")


def case_failure(case: dict[str, Any]) -> Failure:
    """The Failure a recorded case (cases.json, causes.json) holds."""
    return Failure(**{k: case[k] for k in _FIELDS})


def sentences(text: str) -> int:
    """How many sentences a hint has (English or Chinese)."""
    return len(
        [s for s in re.split(r"(?<=[.。!?])\s+(?=[A-Z\u4e00-\u9fff“'])|(?<=[。!?])", text) if s.strip()]
    )


def js_units(base: Path, suites: Path, code: Path | list[Path]) -> dict[str, Path]:
    """One workspace per JS runner under `base`: its suite from `suites`/<runner> as tests/,
    and `code` (a folder, or single files) as code/."""
    out: dict[str, Path] = {}
    for runner in JS_RUNNERS:
        unit = base / runner.replace(":", "_")
        if isinstance(code, Path):
            shutil.copytree(code, unit / "code")
        else:
            (unit / "code").mkdir(parents=True)
            for file in code:
                shutil.copy(file, unit / "code" / file.name)
        shutil.copytree(suites / runner.replace(":", "_"), unit / "tests")
        out[runner] = unit
    return out
