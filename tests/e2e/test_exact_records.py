"""`greenloop run` reports what the runner itself saw: node:test's own counts, the same
result as a bare run of the suite, and what a run killed at its deadline had seen."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from .helpers import REPO, cli, node_workspace

pytestmark = pytest.mark.e2e

FIXTURES = REPO / "tests" / "fixtures"


def _run(ws: Path, *args: str, timeout: float = 120) -> tuple[int, dict[str, Any]]:
    done = cli("run", str(ws), "--json", *args, timeout=timeout)
    return done.code, done.json


def _node_summary(text: str) -> dict[str, int]:
    found = re.findall(r"^(?:# |ℹ )(tests|pass|fail|cancelled|skipped|todo) (\d+)$", text, re.M)
    return {k: int(v) for k, v in found}


def test_node_counts_are_nodes_own(tmp_path: Path) -> None:
    # the hooks fixture suite: failing before/after/beforeEach/afterEach hooks, todo tests that
    # pass and fail, skips, cancelled tests; greenloop's summary is node's closing lines
    ws = node_workspace(tmp_path / "ws", {})
    for src in (FIXTURES / "node_test" / "hooks" / "src").iterdir():
        shutil.copy(src, ws / src.name)
    code, r = _run(ws)
    assert (code, r["outcome"]) == (1, "red"), r
    run_dir = ws / ".greenloop" / "runs" / r["run_id"]
    own = _node_summary((run_dir / "stdout.txt").read_text(encoding="utf-8"))
    assert own["tests"] == 33, own
    assert r["summary"] == {
        "total": own["tests"],
        "passed": own["pass"],
        "failed": own["fail"] + own["cancelled"],
        "skipped": own["skipped"] + own["todo"],
    }
    kinds = {f["test"]: f["kind"] for f in r["failures"]}
    assert kinds["cart > with a database"] == "hook"
    assert not any(t.startswith("cart > with a database > ") for t in kinds)
