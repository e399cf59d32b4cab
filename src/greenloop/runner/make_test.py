"""The arguments a Makefile's `test` target gives go, cargo or unittest, which greenloop plans itself.

A Go, Rust or Python project without a package.json keeps its test command in its Makefile:
`go test -tags integration ./...`, `cargo test --features serde`, `python -m unittest discover
-s tests -p '*_test.py'`. Run without them, a build tag's tests, a feature's tests or every
test file outside unittest's default pattern never run, and the run is green. So when the
workspace's Makefile has a `test` target whose recipe is one plain command of the runner, its
arguments are kept (as package.json scripts are for the JavaScript runners, script_args.py):

- go: build flags (`-tags`, `-race`, `-count`, `-cover`, `-shuffle`, `-p`, `-parallel`, ...) and the
  packages; not `-json`, `-v` or `-timeout`, which greenloop sets itself;
- cargo: `--features`, `--all-features`, `--no-default-features`, `--workspace`, `-p`,
  `--release`, `--target`, `--profile`; not what follows `--` (libtest's own arguments);
- unittest: `discover` with its start folder, pattern and top level, or the modules it names.

A target, an affected selection or a last_failed rerun replaces what chooses the tests (go's
packages, `-run` and `-skip`; cargo's `-p` and `--workspace`; unittest's discovery or modules);
the other flags stay. A recipe greenloop cannot read as one plain command (several commands, make
variables, shell operators, a `cd`) is not used: the plan says so and how to run it as written
(`--command 'make test'`).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import NamedTuple

__all__ = ["MakeArgs", "make_args"]

_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_PYTHONS = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_SHELL = re.compile(r"[;&|<>`$]")  # operators, redirections, substitutions, make and shell variables
_GO_VALUED = frozenset({"-tags", "-run", "-skip", "-count", "-p", "-parallel", "-cpu", "-covermode",
                        "-coverpkg", "-coverprofile", "-shuffle", "-mod", "-modfile", "-ldflags", "-gcflags",
                        "-asmflags", "-exec", "-timeout", "-list", "-bench", "-benchtime", "-o", "-vet"})
_GO_DROPPED = frozenset({"-json", "-v", "-timeout", "-list", "-o"})  # greenloop's, or not a test run
_CARGO_VALUED = frozenset({"--features", "-F", "-p", "--package", "--target", "--profile", "--exclude"})
_LONG = {"-p": "--package", "-F": "--features"}  # (as --name=value words)
_CARGO_KEPT = frozenset({"--all-features", "--no-default-features", "--workspace", "--all", "--release",
                         *_CARGO_VALUED})


class MakeArgs(NamedTuple):
    """What the Makefile's test target adds: `flags` (kept with any target), `selection`
    (packages, modules, discovery: a target replaces it), and notes."""

    flags: tuple[str, ...] = ()
    selection: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _recipe(root: str) -> tuple[str, list[str]] | None:
    """(the Makefile's name, its `test` target's recipe lines), or None."""
    for name in _MAKEFILES:
        path = os.path.join(root, name)
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        text = text.replace("\\\n", " ")
        lines: list[str] | None = None
        for line in text.splitlines():
            if lines is None:
                if re.match(r"^test\s*:(?!=)", line):
                    lines = []
                    inline = line.split(":", 1)[1]
                    if ";" in inline:  # `test: deps ; command`
                        lines.append(inline.split(";", 1)[1].strip().lstrip("@-+").strip())
                continue
            if line.startswith("\t"):
                command = line.strip().lstrip("@-+").strip()
                if command and not command.startswith("#"):
                    lines.append(command)
            elif line.strip() and not line.lstrip().startswith("#"):
                break
        return (name, lines) if lines is not None else None
    return None


def _words(command: str) -> list[str] | None:
    if _SHELL.search(command):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _joined(words: list[str], valued: frozenset[str]) -> list[str] | None:
    """The words with each valued option and its value as one `--name=value` word."""
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in valued:
            if i + 1 >= len(words):
                return None
            out.append(f"{word}={words[i + 1]}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def _go(words: list[str]) -> MakeArgs | None:
    if words[:2] != ["go", "test"]:
        return None
    joined = _joined(words[2:], _GO_VALUED)
    if joined is None:
        return None
    kept = [w for w in joined if not (w.startswith("-") and w.split("=", 1)[0] in _GO_DROPPED)]
    # -run and -skip choose tests, as the packages do: a target replaces them
    chooses = [w for w in kept if not w.startswith("-") or w.split("=", 1)[0] in ("-run", "-skip")]
    return MakeArgs(tuple(w for w in kept if w not in chooses), tuple(chooses))


def _cargo(words: list[str]) -> MakeArgs | None:
    if words[:2] != ["cargo", "test"]:
        return None
    rest = words[2:]
    notes: list[str] = []
    if "--" in rest:
        notes.append("the Makefile's test target's libtest arguments (after --) are not used")
        rest = rest[: rest.index("--")]
    joined = _joined(rest, _CARGO_VALUED)
    if joined is None:
        return None
    kept = [w for w in joined if w.split("=", 1)[0] in _CARGO_KEPT]
    left = [w for w in joined if w not in kept]
    if left:
        notes.append(f"the Makefile's test target's {shlex.join(left)} is not used")
    kept = [_LONG.get(w.split("=", 1)[0], w.split("=", 1)[0]) + w[len(w.split("=", 1)[0]):] for w in kept]
    # the crates it names choose what runs, as a target does
    chooses = [w for w in kept if w.split("=", 1)[0] in ("--package", "--workspace", "--all", "--exclude")]
    return MakeArgs(tuple(w for w in kept if w not in chooses), tuple(chooses), tuple(notes))


def _unittest(words: list[str]) -> MakeArgs | None:
    if len(words) < 3 or not _PYTHONS.match(words[0]) or words[1:3] != ["-m", "unittest"]:
        return None
    rest = [w for w in words[3:] if w not in ("-v", "--verbose", "-q", "--quiet", "-b", "--buffer")]
    return MakeArgs((), tuple(rest))


_READERS = {"go": _go, "cargo": _cargo, "unittest": _unittest}


def make_args(root: str, framework: str) -> MakeArgs:
    """The Makefile test target's arguments for `framework` (see the module docstring)."""
    reader = _READERS.get(framework)
    found = _recipe(root) if reader is not None else None
    if reader is None or found is None:
        return MakeArgs()
    name, lines = found
    runs = [line for line in lines if framework_word(framework) in line]
    if not runs:
        return MakeArgs()
    words = _words(lines[0]) if len(lines) == 1 else None
    args = reader(words) if words else None
    if args is None:
        return MakeArgs(notes=(f"the {name}'s test target ({' && '.join(lines)[:160]}) is not one plain "
                               f"{framework} command, so its arguments were not used; to run it as written: "
                               "--command 'make test'",))
    shown = shlex.join([*args.flags, *args.selection])
    kept = (f"the {name}'s test target's arguments are kept: {shown}",) if shown else ()
    return args._replace(notes=(*kept, *args.notes))


def framework_word(framework: str) -> str:
    """The words a recipe line that runs `framework` holds."""
    return {"go": "go test", "cargo": "cargo test", "unittest": "unittest"}[framework]
