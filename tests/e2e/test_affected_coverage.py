"""The per-test coverage map on real pytest and coverage.py (runner/affected_cov.py): a whole
suite run records it; a pytest `--affected` run then keeps, of the test files the import graph
chose, those that ran a changed function; and keeps them all when the lines cannot answer
(module-level code, a function run at collection or by a session fixture, a function no test
ran), naming why.

Every test file here imports `pkg.core` (so the import graph alone chooses all of them); each
test uses one of its functions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from greenloop import api
from greenloop.result import RunResult
from greenloop.runner import affected_cov

from .helpers import write_files

pytestmark = pytest.mark.e2e

CORE = '''\
LIMIT = 10


def double(x):
    return x * 2


def triple(x):
    return x * 3


def fixture_value():
    return 7


def cases():
    return [1, 2]


def unused(x):
    return x - 1
'''

FILES = {
    "pkg/__init__.py": "",
    "pkg/core.py": CORE,
    "tests/conftest.py": "import pytest\nfrom pkg import core\n\n\n@pytest.fixture(scope='session')\n"
                         "def shared():\n    return core.fixture_value()\n",
    "tests/test_double.py": "from pkg.core import double\n\n\ndef test_double():\n"
                            "    assert double(2) == 4\n",
    "tests/test_triple.py": "from pkg.core import triple\n\n\ndef test_triple():\n"
                            "    assert triple(2) == 6\n",
    "tests/test_shared.py": "from pkg import core\n\n\ndef test_shared(shared):\n    assert shared == 7\n",
    "tests/test_cases.py": "import pytest\nfrom pkg.core import cases\n\n\n"
                           "@pytest.mark.parametrize('n', cases())\ndef test_cases(n):\n"
                           "    assert n in (1, 2)\n",
    "tests/test_limit.py": "from pkg.core import LIMIT\n\n\ndef test_limit():\n    assert LIMIT == 10\n",
}
ALL = sorted(p for p in FILES if p.startswith("tests/test_"))


@pytest.fixture(scope="module")
def coverage_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One virtualenv with pytest and coverage.py for the module's workspaces (from PyPI)."""
    where = tmp_path_factory.mktemp("covvenv") / "venv"
    venv.create(where, with_pip=True)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    done = subprocess.run([*pip, "pytest>=8", "coverage>=7"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return where


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def _workspace(tmp_path: Path, coverage_venv: Path, extra: dict[str, str] | None = None) -> Path:
    root = tmp_path / "ws"
    write_files(root, {**FILES, **(extra or {})})
    os.symlink(coverage_venv, root / ".venv")  # the workspace's own virtualenv, as a user has one
    (root / ".gitignore").write_text(".venv\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "commit", "-q", "-m", "suite")
    return root


def _whole(root: Path) -> RunResult:
    (root / ".greenloop" / "affected").mkdir(parents=True, exist_ok=True)  # as an --affected run leaves it
    result = api.test_run(root, framework="pytest")
    assert result.outcome in ("green", "red"), result
    return result


def _affected(root: Path) -> tuple[list[str], RunResult]:
    result = api.test_run(root, framework="pytest", affected=True, session_id=f"s-{os.urandom(3).hex()}")
    assert result.affected is not None
    return sorted(result.affected.tests), result


def _change(root: Path, old: str, new: str) -> None:
    path = root / "pkg" / "core.py"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


def test_a_whole_run_records_the_map_and_a_changed_body_runs_only_its_tests(tmp_path: Path,
                                                                             coverage_venv: Path) -> None:
    root = _workspace(tmp_path, coverage_venv)
    _whole(root)
    doc = affected_cov.load(str(root))
    assert doc is not None and sorted(doc["tests"]) == ALL
    assert doc["tests"]["tests/test_double.py"]["pkg/core.py"] == [5]  # double's body, nothing else
    assert 13 in doc["shared"]["pkg/core.py"]  # fixture_value's body ran in the session fixture
    _change(root, "return x * 2", "return x * 2 + 1")
    tests, result = _affected(root)
    assert tests == ["tests/test_double.py"], result.notes
    assert result.outcome == "red"
    assert [f.test for f in result.failures] == ["tests/test_double.py::test_double"]
    assert any(f"narrowed {len(ALL)} test file(s) to 1" in n for n in result.notes), result.notes


@pytest.mark.parametrize(("old", "new", "why"), [
    ("LIMIT = 10", "LIMIT = 11", "changed outside function bodies"),
    ("def triple(x):", "def triple(x, y=0):", "changed outside function bodies"),
    ("return 7", "return 8", "ran outside one test"),  # the session fixture's
    ("return [1, 2]", "return [1, 3]", "ran outside one test"),  # run at collection
    ("return x - 1", "return x - 2", "no test ran a changed function"),
])
def test_what_the_lines_cannot_answer_keeps_the_graphs_choice(tmp_path: Path, coverage_venv: Path, old: str,
                                                              new: str, why: str) -> None:
    root = _workspace(tmp_path, coverage_venv)
    _whole(root)
    _change(root, old, new)
    tests, result = _affected(root)
    assert tests == ALL, result.notes
    assert any(why in n and "pkg/core.py" in n for n in result.notes), result.notes


def test_a_comment_runs_nothing_and_failing_new_and_changed_test_files_are_kept(tmp_path: Path,
                                                                               coverage_venv: Path) -> None:
    red = "from pkg import core\n\n\ndef test_red():\n    assert core.triple(1) == 4\n"
    root = _workspace(tmp_path, coverage_venv, {"tests/test_red.py": red})
    first = _whole(root)
    assert [f.test for f in first.failures] == ["tests/test_red.py::test_red"]
    _change(root, "    return x * 2\n", "    # twice\n    return x * 2\n")  # no code changed
    tests, result = _affected(root)
    assert tests == ["tests/test_red.py"], result.notes  # it failed when the map was recorded
    (root / "tests" / "test_new.py").write_text(red.replace("red", "new").replace("== 4", "== 3"))
    (root / "tests" / "test_triple.py").write_text(FILES["tests/test_triple.py"] + "\n# touched\n")
    tests, result = _affected(root)
    assert tests == ["tests/test_new.py", "tests/test_red.py", "tests/test_triple.py"], result.notes


def test_no_coverage_in_the_workspace_records_no_map(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    write_files(root, FILES)
    env_python = Path(sys.executable)
    assert not affected_cov.recordable(str(env_python)) or pytest.skip("this venv has coverage.py")
    result = api.test_run(root, framework="pytest")
    assert result.outcome == "green"
    assert affected_cov.load(str(root)) is None
    assert "_greenloop_pytest_coverage" not in (result.command or "")


def test_a_file_changed_since_the_map_but_committed_still_counts(tmp_path: Path, coverage_venv: Path) -> None:
    # the map is recorded; then a commit makes double call extra.add: git's changes no longer
    # show core.py, but test_double's recorded lines ran it, so a later change to add keeps it
    extra = {"pkg/extra.py": "def add(a, b):\n    return a + b\n",
             "tests/test_extra.py": "from pkg.extra import add\n\n\ndef test_add():\n"
                                    "    assert add(1, 1) == 2\n"}
    root = _workspace(tmp_path, coverage_venv, extra)
    _whole(root)
    _change(root, "    return x * 2\n", "    from pkg.extra import add\n\n    return add(x, x)\n")
    _git(root, "commit", "-qam", "double through add")
    (root / "pkg" / "extra.py").write_text("def add(a, b):\n    return a + b + 1\n")
    tests, result = _affected(root)
    assert "tests/test_double.py" in tests and "tests/test_extra.py" in tests, result.notes
    assert sorted(f.test for f in result.failures) == ["tests/test_double.py::test_double",
                                                       "tests/test_extra.py::test_add"]


def test_the_map_is_recorded_only_where_the_workspace_runs_affected(tmp_path: Path,
                                                                   coverage_venv: Path) -> None:
    # recording costs a whole run about 1.9x its time: a workspace that never narrows never pays
    root = _workspace(tmp_path, coverage_venv)
    result = api.test_run(root, framework="pytest")
    assert result.outcome == "green"
    assert affected_cov.load(str(root)) is None
    assert "_greenloop_pytest_coverage" not in (result.command or "")
    _affected(root)  # the first --affected run: the import graph alone (no map yet)
    result = api.test_run(root, framework="pytest")  # from now on a whole run records it
    assert "_greenloop_pytest_coverage" in (result.command or "")
    doc = affected_cov.load(str(root))
    assert doc is not None and sorted(doc["tests"]) == ALL


def test_config_affected_makes_every_whole_run_record_the_map(tmp_path: Path, coverage_venv: Path) -> None:
    root = _workspace(tmp_path, coverage_venv)
    (root / "greenloop.toml").write_text("affected = true\n")
    api.test_run(root, framework="pytest")
    assert affected_cov.load(str(root)) is not None
    (root / "greenloop.toml").write_text("affected = true\ncoverage_map = false\n")
    affected_cov.map_path(str(root)).unlink()
    result = api.test_run(root, framework="pytest")
    assert "_greenloop_pytest_coverage" not in (result.command or "")
    assert affected_cov.load(str(root)) is None
