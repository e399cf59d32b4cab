"""make_test.py: how a Makefile's `test` target is read (the real toolchains: e2e/test_make_args.py)."""

from __future__ import annotations

from pathlib import Path

from greenloop.runner.make_test import MakeArgs, make_args


def _read(tmp_path: Path, makefile: str, framework: str, name: str = "Makefile") -> MakeArgs:
    (tmp_path / name).write_text(makefile)
    return make_args(str(tmp_path), framework)


def test_no_makefile_or_no_test_target_or_another_runner_adds_nothing(tmp_path: Path) -> None:
    assert make_args(str(tmp_path), "go") == MakeArgs()
    assert _read(tmp_path, "build:\n\tgo build ./...\n", "go") == MakeArgs()
    assert _read(tmp_path, "test:\n\tnpm test\n", "go") == MakeArgs()  # it does not run go test
    assert _read(tmp_path, "test:\n\tgo test -tags x ./...\n", "pytest") == MakeArgs()  # not read for pytest
    assert _read(tmp_path, "test:=1\n\tgo test -tags x ./...\n", "go") == MakeArgs()  # a variable, not a rule


def test_the_recipe_s_forms(tmp_path: Path) -> None:
    # continuation lines, @ and - prefixes, comments, a rule's inline command, GNUmakefile first
    recipe = "test: build\n\t# the suite\n\t@go test \\\n\t  -race -count 2 \\\n\t  ./pkg/...\n"
    got = _read(tmp_path, recipe, "go")
    assert (got.flags, got.selection) == (("-race", "-count=2"), ("./pkg/...",))
    assert _read(tmp_path, "test: ; -go test -shuffle on .\n", "go", "GNUmakefile").flags == ("-shuffle=on",)


def test_go_keeps_build_flags_and_leaves_choosing_to_a_target(tmp_path: Path) -> None:
    recipe = "test:\n\tgo test -json -v -timeout 5m -tags 'a b' -run TestX -skip TestY ./...\n"
    got = _read(tmp_path, recipe, "go")
    assert got.flags == ("-tags=a b",)
    assert got.selection == ("-run=TestX", "-skip=TestY", "./...")


def test_cargo_keeps_its_selection_flags_in_long_form_and_names_what_it_drops(tmp_path: Path) -> None:
    recipe = "test:\n\tcargo test -p core -F serde --all-features --doc -- --nocapture\n"
    got = _read(tmp_path, recipe, "cargo")
    assert (got.flags, got.selection) == (("--features=serde", "--all-features"), ("--package=core",))
    assert any("--doc is not used" in n for n in got.notes) and any("after --" in n for n in got.notes)


def test_unittest_keeps_discovery_or_modules_and_drops_verbosity(tmp_path: Path) -> None:
    got = _read(tmp_path, "test:\n\tpython3.11 -m unittest -v discover -s t -p '*_test.py'\n", "unittest")
    assert got.selection == ("discover", "-s", "t", "-p", "*_test.py")
    modules = _read(tmp_path, "test:\n\t.venv/bin/python -m unittest pkg.tests\n", "unittest")
    assert modules.selection == ("pkg.tests",)


def test_a_recipe_that_is_not_one_plain_command_is_named_and_not_used(tmp_path: Path) -> None:
    for recipe in ("\tgo vet ./...\n\tgo test ./...\n", "\tgo test $(FLAGS) ./...\n",
                   "\tcd sub && go test ./...\n", "\tgo test ./... | tee log\n", "\tgo test -tags\n"):
        got = _read(tmp_path, "test:\n" + recipe, "go")
        assert (got.flags, got.selection) == ((), ()), recipe
        assert len(got.notes) == 1 and "--command 'make test'" in got.notes[0], recipe
