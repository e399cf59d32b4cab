"""The `--affected` import graphs on real files: Python (affected_py: src layout, relative and
function-level imports, packages' __init__, conftest folders, a file that does not parse, custom
test patterns) and JavaScript (affected_js: require/import/export-from/dynamic import, extension
and index resolution, a specifier built at run time), and affected.select's fallbacks."""

from __future__ import annotations

from pathlib import Path

from greenloop.runner import affected_js, affected_py
from greenloop.runner.affected import Changes, select


def _write(root: Path, files: dict[str, str]) -> str:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(root)


PY = {
    "src/app/__init__.py": "from .core import run\n",
    "src/app/core.py": "from . import helpers\n\ndef run():\n    return helpers.h()\n",
    "src/app/helpers.py": "def h():\n    return 1\n",
    "src/app/lazy.py": "def f():\n    return 2\n",
    "src/app/sub/__init__.py": "",
    "src/app/sub/deep.py": "from ..helpers import h\n",
    "tests/test_core.py": "from app.core import run\n",
    "tests/test_lazy.py": "def test_x():\n    from app import lazy\n",
    "tests/test_deep.py": "import app.sub.deep\n",
    "tests/test_plain.py": "import os\n",
    "tests/unit/conftest.py": "",
    "tests/unit/test_u.py": "",
    "scripts/tool.py": "",
}


def test_python_graph_follows_src_layout_relative_and_lazy_imports(tmp_path: Path) -> None:
    root = _write(tmp_path, PY)

    def pick(*changed: str) -> list[str]:
        return affected_py.select(root, "pytest", changed)[0]

    # helpers reaches core (relative `from . import`), the package __init__ (every app import runs it)
    assert pick("src/app/helpers.py") == ["tests/test_core.py", "tests/test_deep.py", "tests/test_lazy.py"]
    assert pick("src/app/lazy.py") == ["tests/test_lazy.py"]  # imported inside a function
    assert pick("src/app/sub/deep.py") == ["tests/test_deep.py"]
    assert pick("scripts/tool.py") == []  # nothing imports it
    assert pick("tests/test_plain.py") == ["tests/test_plain.py"]  # a changed test file itself
    assert pick("tests/unit/conftest.py") == ["tests/unit/test_u.py"]  # its folder and below


def test_python_graph_runs_or_refuses_what_it_cannot_see(tmp_path: Path) -> None:
    broken = {**PY, "src/app/broken.py": "def (:\n", "tests/test_broken.py": "from app import broken\n"}
    root = _write(tmp_path, broken)
    tests, why = affected_py.select(root, "pytest", ["src/app/lazy.py"])
    # the test reaching a file that does not parse always runs; its imports are unknown
    assert tests == ["tests/test_broken.py", "tests/test_lazy.py"] and why is None


def test_pytest_test_files_are_its_configs_python_files(tmp_path: Path) -> None:
    files = {**PY, "tests/check_core.py": "from app import core\n",
             "tests/sub/core_check.py": "import app.core\n"}
    # the file pytest reads names its patterns (one list, split as pytest splits it); a pattern
    # with a folder matches the path's end
    for config in ({"pytest.ini": "[pytest]\npython_files = check_*.py\n  sub/*_check.py\n"},
                   {"pyproject.toml": "[tool.pytest.ini_options]\n"
                                      'python_files = ["check_*.py", "sub/*_check.py"]\n'},
                   {"setup.cfg": "[tool:pytest]\npython_files =\n\tcheck_*.py\n\tsub/*_check.py\n"}):
        root = _write(tmp_path / str(len(list(tmp_path.iterdir()))), {**files, **config})
        tests, why = affected_py.select(root, "pytest", ["src/app/helpers.py"])
        assert (tests, why) == (["tests/check_core.py", "tests/sub/core_check.py"], None), config
    # pytest reads the first config file that is one: a pytest.ini without the key wins over
    # setup.cfg's patterns, which pytest then never sees
    root = _write(tmp_path / "first", {**files, "pytest.ini": "[pytest]\n",
                                       "setup.cfg": "[tool:pytest]\npython_files = check_*.py\n"})
    assert affected_py.select(root, "pytest", ["src/app/lazy.py"])[0] == ["tests/test_lazy.py"]
    assert affected_py.test_patterns(root, "unittest") == ("test*.py",)


def test_pytest_leaves_out_what_its_whole_run_leaves_out(tmp_path: Path) -> None:
    files = {**PY, "tests/fixtures/conftest.py": "collect_ignore_glob = ['*']\n",
             "tests/fixtures/test_fx.py": "import app\n", "other/test_o.py": "import app\n",
             "pytest.ini": "[pytest]\ntestpaths = tests\n"}
    root = _write(tmp_path, files)
    assert affected_py.select(root, "pytest", ["src/app/lazy.py"])[0] == ["tests/test_lazy.py"]
    dynamic = _write(tmp_path / "two", {**files, "tests/fixtures/conftest.py": "collect_ignore = names()\n"})
    _tests, why = affected_py.select(dynamic, "pytest", ["src/app/lazy.py"])
    assert why is not None and "collect_ignore" in why


def test_unittest_takes_its_own_pattern_and_no_conftest(tmp_path: Path) -> None:
    root = _write(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": "", "testsuite.py": "import pkg.m\n",
                             "conftest.py": "import pkg.m\n", "test_other.py": ""})
    assert affected_py.select(root, "unittest", ["pkg/m.py"])[0] == ["testsuite.py"]
    assert affected_py.select(root, "pytest", ["pkg/m.py"])[0] == ["test_other.py"]  # via conftest.py


JS = {
    "lib/index.js": "module.exports = require('./core')\n",
    "lib/core.mjs": "export * from './util.mjs'\n",
    "lib/util.mjs": "export const u = 1\n",
    "lib/other.ts": "export const o = 1\n",
    "test/a.test.js": "const lib = require('../lib')\n",
    "b.spec.ts": "import { o } from './lib/other'\n",
    "c.test.mjs": "const m = await import('./lib/util.mjs')\n",
    "helper.js": "",
}


def test_js_graph_resolves_extensions_index_files_and_dynamic_literals(tmp_path: Path) -> None:
    root = _write(tmp_path, JS)

    def pick(*changed: str) -> list[str]:
        return affected_js.select(root, "node:test", changed)[0]

    assert pick("lib/util.mjs") == ["c.test.mjs", "test/a.test.js"]  # export-from, index.js, import()
    assert pick("lib/other.ts") == ["b.spec.ts"]  # extensionless specifier
    assert pick("helper.js") == []
    root2 = _write(tmp_path / "two", {**JS, "test/a.test.js": "const n = '../lib'\nrequire(n)\n"})
    _tests, why = affected_js.select(root2, "node:test", ["lib/util.mjs"])
    assert why is not None and "test/a.test.js" in why


def test_select_falls_back_for_what_it_cannot_map(tmp_path: Path) -> None:
    root = _write(tmp_path, PY)
    for changed, word in ((("uv.lock",), "uv.lock"), (("src/app/helpers.py", "setup.py"), "setup.py"),
                          (("notes.md",), "notes.md")):
        sel = select("pytest", root, Changes(changed=changed))
        assert sel.args is None and sel.info.fallback is not None and word in sel.info.fallback
        assert any(word in n for n in sel.notes)
    script = select("npm-test", root, Changes(changed=("src/lib.js",)))
    assert script.args is None and "not mapped for npm-test" in (script.info.fallback or "")
    cargo = select("cargo", root, Changes(changed=("src/lib.rs",)))  # no Cargo.toml: cargo says why
    assert cargo.args is None and "`cargo metadata` failed" in (cargo.info.fallback or "")
    nothing = select("pytest", root, Changes())
    assert nothing.args == [] and nothing.nothing is not None
    owed = select("pytest", root, Changes(owed=("tests/test_plain.py::test_p",),
                                          owed_files=("tests/test_plain.py",)))
    assert owed.args == ["tests/test_plain.py"] and owed.nothing is None
    jest = select("jest", root, Changes(changed=("src/x.js",)))
    assert jest.args == ["--passWithNoTests", "--findRelatedTests", "src/x.js"]


def test_mocha_takes_its_test_folder_and_gives_up_on_a_configured_spec(tmp_path: Path) -> None:
    root = _write(tmp_path, JS)
    assert affected_js.select(root, "mocha", ["lib/util.mjs"])[0] == ["test/a.test.js"]
    spec = _write(tmp_path / "two", {**JS, ".mocharc.json": '{"spec": ["spec/**/*.js"]}'})
    _tests, why = affected_js.select(spec, "mocha", ["lib/util.mjs"])
    assert why is not None and ".mocharc.json" in why


def test_unittest_takes_the_pattern_its_makefile_discovery_gives(tmp_path: Path) -> None:
    root = _write(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": "", "tests/m_test.py": "import pkg.m\n",
                             "tests/test_m.py": "import pkg.m\n",
                             "Makefile": "test:\n\tpython3 -m unittest discover -s tests -p '*_test.py'\n"})
    assert affected_py.select(root, "unittest", ["pkg/m.py"])[0] == ["tests/m_test.py"]
