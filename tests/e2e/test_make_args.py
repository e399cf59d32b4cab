"""A Makefile's `test` target's arguments on the real toolchains (runner/make_test.py): go's
build tags, cargo's features and unittest's discovery pattern are kept, so the tests they add
run; a target replaces what chooses the tests and keeps the flags; a recipe greenloop cannot
read as one plain command is not used, and the run says how to run it as written.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from .helpers import cli, write_files

pytestmark = pytest.mark.e2e

ENV = {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local", "CARGO_NET_OFFLINE": "true"}


def _run(ws: Path, *extra: str) -> dict[str, Any]:
    done = cli("run", str(ws), "--json", *extra, env=ENV, timeout=300)
    assert done.stdout.strip(), done.stderr
    result: dict[str, Any] = done.json
    return result


def _passed(r: dict[str, Any]) -> list[str]:
    return sorted(str(t) for t in r["passed_tests"])


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed (apt-get install golang-go)")
def test_go_build_tags_from_the_makefile_run_the_tagged_tests(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_files(ws, {
        ".git/HEAD": "ref: refs/heads/main\n",
        "go.mod": "module example.com/m\n\ngo 1.19\n",
        "m.go": "package m\n\nfunc Two() int { return 2 }\n",
        "m_test.go": 'package m\n\nimport "testing"\n\nfunc TestPlain(t *testing.T) {\n\tif Two() != 2 {\n'
                     '\t\tt.Fatal("two")\n\t}\n}\n',
        "tagged_test.go": '//go:build integration\n\npackage m\n\nimport "testing"\n\n'
                          'func TestTagged(t *testing.T) {\n\tif Two() != 3 {\n'
                          '\t\tt.Fatal("tagged")\n\t}\n}\n',
        "Makefile": "lint:\n\tgo vet ./...\n\ntest:\n\tgo test -tags integration -v -count=1 ./...\n",
    })
    r = _run(ws)
    assert r["outcome"] == "red" and [f["test"] for f in r["failures"]] == ["TestTagged"], r
    assert "-tags=integration" in str(r["command"]) and " -v " not in f" {r['command']} "
    assert any("Makefile's test target's arguments are kept: -tags=integration -count=1 ./..." in str(n)
               for n in r["notes"]), r["notes"]
    # a target chooses the tests; the tag stays, so the tagged test is still built and found
    narrowed = _run(ws, "--target", "TestTagged")
    assert [f["test"] for f in narrowed["failures"]] == ["TestTagged"]
    assert _passed(narrowed) == []
    (ws / "Makefile").write_text("test:\n\tgo test -tags $(TAGS) ./...\n")
    plain = _run(ws)
    assert plain["outcome"] == "green" and _passed(plain) == ["TestPlain"], plain
    assert any("not one plain go command" in str(n) and "--command 'make test'" in str(n)
               for n in plain["notes"]), plain["notes"]


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_cargo_features_from_the_makefile_run_the_featured_tests(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_files(ws, {
        ".git/HEAD": "ref: refs/heads/main\n",
        "Cargo.toml": '[package]\nname = "feat"\nversion = "0.1.0"\nedition = "2021"\n\n'
                      '[features]\nextra = []\n',
        "src/lib.rs": "pub fn two() -> i32 { 2 }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn plain() "
                      "{ assert_eq!(super::two(), 2); }\n\n    #[cfg(feature = \"extra\")]\n    #[test]\n"
                      "    fn featured() { assert_eq!(super::two(), 3); }\n}\n",
        "Makefile": "test:\n\tcargo test --features extra -- --test-threads=1\n",
    })
    r = _run(ws)
    assert r["outcome"] == "red", r
    assert [str(f["test"]).rsplit("::", 1)[-1] for f in r["failures"]] == ["featured"]
    assert "--features=extra" in str(r["command"])
    notes = " | ".join(str(n) for n in r["notes"])
    assert "arguments are kept: --features=extra" in notes and "after --" in notes, notes


def test_unittest_discovery_pattern_from_the_makefile_finds_its_test_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    python = Path(sys.executable).name
    write_files(ws, {
        ".git/HEAD": "ref: refs/heads/main\n",
        "setup.cfg": "[metadata]\nname = m\n",
        "m.py": "def two():\n    return 2\n",
        "tests/__init__.py": "",
        "tests/core_test.py": "import unittest\nimport m\n\n\nclass T(unittest.TestCase):\n"
                              "    def test_two(self):\n        self.assertEqual(m.two(), 3)\n",
        "tests/test_default.py": "import unittest\n\n\nclass D(unittest.TestCase):\n"
                                 "    def test_default(self):\n        pass\n",
        "Makefile": f"test:\n\t{python} -m unittest discover -s tests -p '*_test.py' -t . -v\n",
    })
    r = _run(ws, "--framework", "unittest")
    # as `make test` runs it: only *_test.py (test_default.py is not in its pattern)
    assert r["outcome"] == "red" and r["selection"] is None, r
    assert [str(f["test"]) for f in r["failures"]] == ["tests.core_test.T.test_two"], r["failures"]
    assert r["summary"] == {"total": 1, "passed": 0, "failed": 1, "skipped": 0}, r["summary"]
