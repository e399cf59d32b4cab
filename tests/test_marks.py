"""Tests taken away (closure/marks.py): real files in a temporary workspace, real git for HEAD."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from greenloop.closure import mark_rules, marks
from greenloop.closure.marks import Mark, snapshot, taken_away

SRC = str(Path(marks.__file__).resolve().parents[2])


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def added(root: Path, files: dict[str, str]) -> list[tuple[str, int, str, str | None]]:
    """(file, line, kind, test) of what writing `files` into an empty workspace takes away,
    file by file in name order (the walk reads a folder in the order the file system gives)."""
    base = snapshot(str(root))
    for rel, text in files.items():
        write(root, rel, text)
    got = [(m.file, m.line, m.kind, m.test) for m in taken_away(str(root), base)]
    return sorted(got, key=lambda mark: mark[0])


def git(root: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


PY_ALL = """
import unittest

import pytest

pytestmark = pytest.mark.skip


@pytest.mark.skip(reason="later")
def test_one():
    pass


@pytest.mark.skipif(True, reason="x")
@pytest.mark.xfail
def test_two():
    pytest.skip("inside")


@pytest.mark.parametrize("x", [
    1,
    pytest.param(2, marks=pytest.mark.skip),
])
def test_three(x):
    pass


class TestK(unittest.TestCase):
    pytestmark = [pytest.mark.xfail]

    def setUp(self):
        raise unittest.SkipTest("x")

    @unittest.expectedFailure
    def test_k(self):
        self.skipTest("no")

    @unittest.skip("x")
    async def test_m(self):
        pass
"""


def test_every_python_form_is_a_mark_on_its_test(tmp_path: Path) -> None:
    assert added(tmp_path, {"tests/test_a.py": PY_ALL}) == [
        ("tests/test_a.py", 5, "skip", None),
        ("tests/test_a.py", 8, "skip", "test_one"),
        ("tests/test_a.py", 13, "skip", "test_two"),
        ("tests/test_a.py", 14, "xfail", "test_two"),
        ("tests/test_a.py", 16, "skip", "test_two"),
        ("tests/test_a.py", 21, "skip", "test_three"),
        ("tests/test_a.py", 28, "xfail", "TestK"),
        ("tests/test_a.py", 31, "skip", "TestK"),  # setUp's skip skips the class
        ("tests/test_a.py", 33, "xfail", "test_k"),
        ("tests/test_a.py", 35, "skip", "test_k"),
        ("tests/test_a.py", 37, "skip", "test_m"),
    ]


JS_ALL = """
import { test, it, describe } from 'vitest'

describe.skip('suite', () => {
  it('one', () => {})
  it.only('two', () => {})
  xit('three', () => {})
  test.todo('four')
  test('five', { skip: true }, () => {})
  test('six', (t) => {
    t.skip('no')
  })
  it.skipIf(process.env.CI)('seven', () => {})
  test.failing('eight', () => {})
  fit("nine", () => {})
  test('ten', { skip: false }, () => {})
  it.runIf(process.env.CI)('eleven', () => {})
  test('twelve', { todo: 'later' }, () => {})
  xdescribe('inner', () => {})
  fdescribe('focused', () => {})
  test.only('thirteen', () => {})
  describe.only('fourteen', () => {})
})
"""


def test_every_js_form_is_a_mark_on_its_test(tmp_path: Path) -> None:
    assert added(tmp_path, {"src/a.test.ts": JS_ALL}) == [
        ("src/a.test.ts", 3, "skip", "suite"),
        ("src/a.test.ts", 5, "only", "two"),
        ("src/a.test.ts", 6, "skip", "three"),
        ("src/a.test.ts", 7, "todo", "four"),
        ("src/a.test.ts", 8, "skip", "five"),
        ("src/a.test.ts", 10, "skip", "six"),
        ("src/a.test.ts", 12, "skip", "seven"),
        ("src/a.test.ts", 13, "xfail", "eight"),
        ("src/a.test.ts", 14, "only", "nine"),
        ("src/a.test.ts", 16, "skip", "eleven"),
        ("src/a.test.ts", 17, "todo", "twelve"),
        ("src/a.test.ts", 18, "skip", "inner"),
        ("src/a.test.ts", 19, "only", "focused"),
        ("src/a.test.ts", 20, "only", "thirteen"),
        ("src/a.test.ts", 21, "only", "fourteen"),
    ]


def test_go_skips_and_rust_ignores(tmp_path: Path) -> None:
    go = """
    package x

    func TestA(t *testing.T) {
    \tt.Skip("later")
    }

    func (s *S) TestB() { s.T().Skipf("x %d", 1) }

    func TestC(t *testing.T) {
    \tif testing.Short() {
    \t\tt.SkipNow()
    \t}
    }
    """
    rust = """
    #[cfg(test)]
    mod tests {
        #[test]
        #[ignore = "slow"]
        fn slow_one() {}

        #[test]
        #[ignore]
        fn slow_two() {}
    }
    """
    assert added(tmp_path, {"x_test.go": go, "src/lib.rs": rust}) == [
        ("src/lib.rs", 4, "ignore", "slow_one"),
        ("src/lib.rs", 8, "ignore", "slow_two"),
        ("x_test.go", 4, "skip", "TestA"),
        ("x_test.go", 7, "skip", "TestB"),
        ("x_test.go", 11, "skip", "TestC"),
    ]


def test_comments_docstrings_and_strings_are_not_marks(tmp_path: Path) -> None:
    py = '''
    import pytest

    # @pytest.mark.skip is only a comment
    def helper():
        """pytest.skip("no") in a docstring
        @pytest.mark.skip
        """
        return "pytest.skip('x')", 'self.skipTest(1)'  # pytest.skip(


    def test_real():
        assert helper()  # TODO: pytest.mark.xfail if it flakes
    '''
    js = """
    // it.skip('commented', () => {})
    const s = "test.only('x')"
    const tpl = `
      it.only('in template', () => {})
    `
    /* test.skip('block', () => {})
       xit('x')
    */
    const db = query.skip(10)
    test('real', () => { expect(s).toContain('.skip(') })
    """
    go = """
    package x

    // t.Skip("comment")
    func TestA(t *testing.T) {
    \tmsg := "t.Skip()"
    \t_ = `
    t.Skip("raw string")
    `
    }
    """
    rust = """
    // #[ignore]
    #[test]
    fn other() { let s = "#[ignore]"; }
    """
    assert added(tmp_path, {"test_a.py": py, "a.test.js": js, "a_test.go": go, "lib.rs": rust}) == []


def test_a_mark_already_in_the_baseline_is_not_new(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    pass\n")
    base = snapshot(str(tmp_path))
    # Lines move above it and a second, unrelated test arrives: the old skip is still the old one.
    write(
        tmp_path,
        "tests/test_a.py",
        "import pytest\n\n\ndef test_new():\n    pass\n\n\n@pytest.mark.skip\ndef test_a():\n    pass\n",
    )
    assert taken_away(str(tmp_path), base) == ()


def test_removed_tests_are_reported_at_their_baseline_line(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    write(tmp_path, "src/a.test.js", "test('adds', () => {})\ntest('subtracts', () => {})\n")
    write(tmp_path, "a_test.go", "package a\n\nfunc TestX(t *testing.T) {}\n")
    write(tmp_path, "tests/gone.rs", "#[test]\nfn gone() {}\n")
    base = snapshot(str(tmp_path))
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n\n\n# def test_b():\n#     pass\n")
    write(tmp_path, "src/a.test.js", "test('adds', () => {})\ntest('subtracts again', () => {})\n")
    write(tmp_path, "a_test.go", "package a\n")
    (tmp_path / "tests/gone.rs").unlink()
    got = taken_away(str(tmp_path), base)
    assert sorted((m.file, m.line, m.kind, m.test, m.text) for m in got) == [
        ("a_test.go", 3, "removed", "TestX", "func TestX(t *testing.T) {}"),
        ("src/a.test.js", 2, "removed", "subtracts", "test('subtracts', () => {})"),  # renamed
        ("tests/gone.rs", 2, "removed", "gone", "fn gone() {}"),
        ("tests/test_a.py", 5, "removed", "test_b", "def test_b():"),  # commented out
    ]


def test_an_untouched_workspace_has_nothing_taken_away(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", PY_ALL)
    write(tmp_path, "src/a.test.ts", JS_ALL)
    assert taken_away(str(tmp_path), snapshot(str(tmp_path))) == ()


def test_without_git_or_baseline_only_js_only_marks_count(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", PY_ALL)
    write(tmp_path, "src/a.test.ts", JS_ALL)
    got = taken_away(str(tmp_path), None)
    assert [(m.line, m.kind, m.test) for m in got] == [
        (5, "only", "two"),
        (14, "only", "nine"),
        (19, "only", "focused"),
        (20, "only", "thirteen"),
        (21, "only", "fourteen"),
    ]
    assert got[0] == Mark("src/a.test.ts", 5, "only", "two", "it.only('two', () => {})")
    assert got[0].to_json() == {
        "file": "src/a.test.ts",
        "line": 5,
        "kind": "only",
        "test": "two",
        "text": "it.only('two', () => {})",
    }


def test_against_git_head_when_there_is_no_baseline(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tests/test_a.py",
        "import pytest\n\n@pytest.mark.skip\ndef test_old():\n    pass\n\n\ndef test_b():\n    pass\n",
    )
    write(tmp_path, "tests/test_gone.py", "def test_g():\n    pass\n")
    write(tmp_path, "src/b.test.js", "test('same', () => {})\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "tests")
    assert taken_away(str(tmp_path), None) == ()  # HEAD's own skip is not new
    write(
        tmp_path,
        "tests/test_a.py",
        "import pytest\n\n@pytest.mark.skip\ndef test_old():\n    pass\n\n\n"
        "@pytest.mark.xfail\ndef test_b():\n    pass\n",
    )
    (tmp_path / "tests/test_gone.py").unlink()
    write(tmp_path, "src/new.test.js", "test.only('new', () => {})\n")  # untracked
    got = [(m.file, m.line, m.kind, m.test) for m in taken_away(str(tmp_path), None)]
    assert sorted(got) == [
        ("src/new.test.js", 1, "only", "new"),
        ("tests/test_a.py", 8, "xfail", "test_b"),
        ("tests/test_gone.py", 1, "removed", "test_g"),
    ]


def test_a_baseline_that_is_not_a_snapshot_falls_back(tmp_path: Path) -> None:
    write(tmp_path, "a.test.js", "it.only('x', () => {})\ntest.skip('y', () => {})\n")
    assert [m.kind for m in taken_away(str(tmp_path), "not json")] == ["only"]


def test_snapshot_is_compact_json(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    pass\n")
    data = json.loads(snapshot(str(tmp_path)))
    size, mtime, found_marks, decls = data["files"]["tests/test_a.py"]
    st = (tmp_path / "tests/test_a.py").stat()
    assert (size, mtime) == (st.st_size, st.st_mtime_ns)
    assert found_marks == [[3, "skip", "test_a", "@pytest.mark.skip"]]
    assert decls == [[4, "test_a", "def test_a():"]]
    assert data["truncated"] is False


def test_dependency_and_virtualenv_folders_are_never_read(tmp_path: Path) -> None:
    skip = "it.only('x', () => {})\n"
    write(tmp_path, "node_modules/pkg/a.test.js", skip)
    write(tmp_path, "env/pyvenv.cfg", "")
    write(tmp_path, "env/lib/test_x.py", "import pytest\npytestmark = pytest.mark.skip\n")
    write(tmp_path, "target/debug/x.rs", "#[test]\n#[ignore]\nfn a() {}\n")
    assert added(tmp_path, {}) == []
    assert json.loads(snapshot(str(tmp_path)))["files"] == {}


def test_bounds_big_files_and_the_file_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "big.test.js", "it.only('x', () => {})\n" + "//" * marks.MAX_FILE_BYTES)
    monkeypatch.setattr(marks, "MAX_FILES", 2)
    for name in ("a", "b", "c"):
        write(tmp_path, f"{name}.test.js", f"it.only('{name}', () => {{}})\n")
    data = json.loads(snapshot(str(tmp_path)))
    read = sorted(data["files"])
    assert len(read) == 2 and "big.test.js" not in read  # (which two: the folder's order)
    assert data["too_big"] == ["big.test.js"]
    assert data["over_limit"] == 1
    assert sorted(f"{m.test}.test.js" for m in taken_away(str(tmp_path), None)) == read


def test_a_conftest_that_skips_whole_folders_is_a_mark(tmp_path: Path) -> None:
    conftest = """
    import pytest


    def pytest_collection_modifyitems(items):
        for item in items:
            item.add_marker(pytest.mark.skip(reason="not today"))
    """
    assert added(tmp_path, {"tests/conftest.py": conftest}) == [("tests/conftest.py", 6, "skip", None)]


def test_code_in_a_multiline_string_declares_nothing(tmp_path: Path) -> None:
    py = '''
    SOURCE = """
    import pytest

    @pytest.mark.skip
    def test_written_to_a_fixture():
        pass
    """


    def test_real():
        assert SOURCE
    '''
    write(tmp_path, "tests/test_gen.py", py)
    data = json.loads(snapshot(str(tmp_path)))
    _size, _mtime, found_marks, decls = data["files"]["tests/test_gen.py"]
    assert found_marks == []
    assert [name for _ln, name, _text in decls] == ["test_real"]


def test_rust_cfg_attr_ignore_and_a_removed_test(tmp_path: Path) -> None:
    write(tmp_path, "tests/it.rs", "#[test]\nfn keep() {}\n\n#[tokio::test]\nasync fn drop_me() {}\n")
    base = snapshot(str(tmp_path))
    write(tmp_path, "tests/it.rs", '#[test]\n#[cfg_attr(not(feature = "x"), ignore)]\nfn keep() {}\n')
    got = [(m.line, m.kind, m.test) for m in taken_away(str(tmp_path), base)]
    assert got == [(2, "ignore", "keep"), (5, "removed", "drop_me")]


def test_head_of_a_workspace_below_the_repository_root(tmp_path: Path) -> None:
    write(tmp_path, "svc/tests/test_a.py", "def test_a():\n    pass\n")
    write(tmp_path, "other/tests/test_b.py", "def test_b():\n    pass\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "tests")
    (tmp_path / "other/tests/test_b.py").unlink()  # outside the workspace: not its business
    write(tmp_path, "svc/tests/test_a.py", "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    pass\n")
    got = taken_away(str(tmp_path / "svc"), None)
    assert [(m.file, m.line, m.kind, m.test) for m in got] == [("tests/test_a.py", 3, "skip", "test_a")]


def test_a_repository_without_a_commit_reports_only_only_marks(tmp_path: Path) -> None:
    write(tmp_path, "a.test.js", "it.only('x', () => {})\ntest.skip('y', () => {})\n")
    git(tmp_path, "init", "-q")
    assert [m.kind for m in taken_away(str(tmp_path), None)] == ["only"]


def test_a_snapshot_in_git_keeps_the_files_git_holds_as_blobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(marks, "GIT_FROM_FILES", 0)  # (the route is for large workspaces)
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n")
    write(tmp_path, "tests/test_gone.py", "def test_g():\n    pass\n")
    write(tmp_path, "src/c.test.js", "test('c', () => {})\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "tests")
    write(tmp_path, "src/c.test.js", "test.skip('c', () => {})\n")  # changed before the session
    base = snapshot(str(tmp_path))
    files = json.loads(base)["files"]
    assert isinstance(files["tests/test_a.py"][2], str) and files["tests/test_a.py"][3] is None
    assert files["src/c.test.js"][2] == [[1, "skip", "c", "test.skip('c', () => {})"]]
    write(tmp_path, "tests/test_a.py", "import pytest\n\n@pytest.mark.xfail\ndef test_a():\n    pass\n")
    (tmp_path / "tests/test_gone.py").unlink()
    got = sorted((m.file, m.line, m.kind, m.test) for m in taken_away(str(tmp_path), base))
    assert got == [
        ("tests/test_a.py", 3, "xfail", "test_a"),
        ("tests/test_a.py", 5, "removed", "test_b"),
        ("tests/test_gone.py", 1, "removed", "test_g"),
    ]  # the skip that was there when the session began is not new


def test_reuse_reads_only_the_files_that_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n")
    write(tmp_path, "tests/test_b.py", "def test_b():\n    pass\n")
    earlier = snapshot(str(tmp_path))
    assert snapshot(str(tmp_path), reuse=earlier) == earlier
    write(tmp_path, "tests/test_b.py", "import pytest\n\n@pytest.mark.skip\ndef test_b():\n    pass\n")
    read: list[str] = []
    real_read = marks._read

    def counted(path: str) -> bytes | None:
        read.append(path)
        return real_read(path)

    monkeypatch.setattr(marks, "_read", counted)
    again = json.loads(snapshot(str(tmp_path), reuse=earlier))
    assert [Path(p).name for p in read] == ["test_b.py"]
    assert again["files"]["tests/test_b.py"][2] == [[3, "skip", "test_b", "@pytest.mark.skip"]]
    assert snapshot(str(tmp_path), reuse="not a snapshot") == snapshot(str(tmp_path))


def test_the_module_stays_light_for_the_stop_hook() -> None:
    code = (
        "import sys; import greenloop.closure.marks; "
        "print(sorted(m for m in ('subprocess', 'greenloop.model', 'pathlib') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {SRC!r}); {code}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


def test_more_runner_forms(tmp_path: Path) -> None:
    py = """
    import pytest

    pytest.importorskip("numpy")


    def test_x():
        pytest.xfail("known")
    """
    js = """
    describe('suite', function () {
      it('mocha', function () {
        this.skip()
      })
      test('vitest', (ctx) => {
        ctx.skip()
      })
      test('node', (t) => {
        t.todo('later')
      })
      it.fails('vitest fails', () => {})
      xcontext('x ctx', () => {})
      fcontext('f ctx', () => {})
      ftest('f test', () => {})
      test('node only', { only: true }, () => {})
      test.if(process.env.CI)('bun if', () => {})
      describe('one line', () => { it.only('mid', () => {}) })
      it('paged', async () => { await db.find({ skip: 10 }) })
      test('both', { skip: 'not yet', todo: true }, () => {})
    })
    """
    go = """
    package x

    func needsDB(t *testing.T) {
    \tt.Skip("no database")
    }

    func TestY(t *testing.T) {
    \tt.Run("sub", func(t *testing.T) { t.Skipf("later") })
    }
    """
    rust = """
    #[rstest]
    #[ignore]
    fn cases() {}
    """
    assert added(tmp_path, {"test_m.py": py, "m.test.js": js, "m_test.go": go, "lib.rs": rust}) == [
        ("lib.rs", 2, "ignore", "cases"),
        ("m.test.js", 3, "skip", "mocha"),
        ("m.test.js", 6, "skip", "vitest"),
        ("m.test.js", 9, "todo", "node"),
        ("m.test.js", 11, "xfail", "vitest fails"),
        ("m.test.js", 12, "skip", "x ctx"),
        ("m.test.js", 13, "only", "f ctx"),
        ("m.test.js", 14, "only", "f test"),
        ("m.test.js", 15, "only", "node only"),
        ("m.test.js", 16, "skip", "bun if"),
        ("m.test.js", 17, "only", "mid"),
        ("m.test.js", 19, "skip", "both"),
        ("m.test.js", 19, "todo", "both"),
        ("m_test.go", 4, "skip", None),  # a helper: the test it skips is its caller
        ("m_test.go", 8, "skip", "TestY"),
        ("test_m.py", 3, "skip", None),
        ("test_m.py", 7, "xfail", "test_x"),
    ]


def test_go_test_names_follow_go_test(tmp_path: Path) -> None:
    write(tmp_path, "a_test.go", "package a\n\nfunc Testify(t *testing.T) {}\nfunc Test_x(t *testing.T) {}\n")
    data = json.loads(snapshot(str(tmp_path)))
    assert [d[1] for d in data["files"]["a_test.go"][3]] == ["Test_x"]


def test_a_function_nested_in_a_test_is_not_a_test(tmp_path: Path) -> None:
    py = """
    class TestA:
        def test_method(self):
            def test_helper():
                pass

            async def test_inner():
                pass

        async def test_async(self):
            pass


    def test_module():
        pass
    """
    write(tmp_path, "tests/test_a.py", py)
    decls = json.loads(snapshot(str(tmp_path)))["files"]["tests/test_a.py"][3]
    assert [(ln, name) for ln, name, _text in decls] == [
        (2, "test_method"),
        (9, "test_async"),
        (13, "test_module"),
    ]


def test_a_title_on_the_next_line_still_names_the_test(tmp_path: Path) -> None:
    js = """
    it.skip(
      'long title',
      () => {},
    )
    test(
      'removed later',
      () => {},
    )
    """
    assert added(tmp_path, {"a.test.js": js}) == [("a.test.js", 1, "skip", "long title")]
    base = snapshot(str(tmp_path))
    write(tmp_path, "a.test.js", "it.skip(\n  'long title',\n  () => {},\n)\n")
    assert [(m.kind, m.test) for m in taken_away(str(tmp_path), base)] == [("removed", "removed later")]


def test_the_declaration_bound_keeps_marks_but_not_removals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(marks, "MAX_DECLS", 2)
    write(tmp_path, "tests/test_a.py", "def test_a1():\n    pass\n\n\ndef test_a2():\n    pass\n")
    write(tmp_path, "tests/test_b.py", "import pytest\n\n@pytest.mark.skip\ndef test_b():\n    pass\n")
    base = snapshot(str(tmp_path))
    files = json.loads(base)["files"]
    kept = sorted(rel for rel, entry in files.items() if entry[3] is not None)
    assert len(kept) == 1  # whichever the walk read first fits; the other keeps its marks only
    assert files["tests/test_b.py"][2] == [[3, "skip", "test_b", "@pytest.mark.skip"]]
    for rel in ("tests/test_a.py", "tests/test_b.py"):
        write(tmp_path, rel, "")
    got = {(m.file, m.test) for m in taken_away(str(tmp_path), base)}
    expected = {"tests/test_a.py": {("tests/test_a.py", "test_a1"), ("tests/test_a.py", "test_a2")}}
    assert got == expected.get(kept[0], {("tests/test_b.py", "test_b")})


def test_a_file_that_grew_past_the_bound_is_not_a_removal(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n")
    base = snapshot(str(tmp_path))
    write(tmp_path, "tests/test_a.py", "#" * (marks.MAX_FILE_BYTES + 1))
    assert taken_away(str(tmp_path), base) == ()
    assert json.loads(snapshot(str(tmp_path)))["too_big"] == ["tests/test_a.py"]


def test_bytes_that_are_not_utf8_are_read_anyway(tmp_path: Path) -> None:
    base = snapshot(str(tmp_path))
    (tmp_path / "a.test.js").write_bytes(b"// \xff\xfe\nit.only('x', () => {})\n")
    assert [(m.line, m.kind, m.test) for m in taken_away(str(tmp_path), base)] == [(2, "only", "x")]


def test_files_left_out_of_the_run_whole(tmp_path: Path) -> None:
    conftest = """
    collect_ignore = ["test_cart.py"]
    collect_ignore_glob = []
    collect_ignore_glob.append("test_x*.py")
    """
    go = """
    //go:build ignore

    package x

    // a comment that says //go:build is not a constraint here
    func TestA(t *testing.T) {}
    """
    assert added(tmp_path, {"tests/conftest.py": conftest, "x_test.go": go}) == [
        ("tests/conftest.py", 1, "skip", None),
        ("tests/conftest.py", 2, "skip", None),
        ("tests/conftest.py", 3, "skip", None),
        ("x_test.go", 1, "skip", None),
    ]


def test_a_blob_git_no_longer_has_is_not_compared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(marks, "GIT_FROM_FILES", 0)
    write(tmp_path, "tests/test_a.py", "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    pass\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "tests")
    base = snapshot(str(tmp_path))
    files = json.loads(base)
    files["files"]["tests/test_a.py"][2] = "0" * 40  # an object git does not hold
    write(tmp_path, "tests/test_a.py", "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    assert 1\n")
    # Compared with nothing, its old skip would read as new; not compared, nothing is said.
    assert taken_away(str(tmp_path), json.dumps(files)) == ()


def test_pathological_files_stay_fast(tmp_path: Path) -> None:
    import time

    body = "import pytest\n\n\ndef test_long():\n" + '    pytest.skip("x")\n' * 20_000
    minified = "it('a', () => {" + "x('\\'', \"q\", `t`);" * 30_000 + "}); it.only('b', () => {})\n"
    start = time.monotonic()
    found = added(tmp_path, {"tests/test_long.py": body, "min.test.js": minified})
    assert time.monotonic() - start < 5
    assert len(found) == mark_rules.MAX_MARK_LINES  # the long file's first 1,000 mark lines
    assert {m[3] for m in found} == {"test_long"}
