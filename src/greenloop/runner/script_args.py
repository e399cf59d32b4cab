"""The arguments a package.json test script gives the runner greenloop plans itself (mocha).

greenloop runs mocha directly, with its own reporter, so that it gets mocha's JSON report. A
test script such as express's `mocha --require test/support/env --reporter spec --check-leaks
test/ test/acceptance/` says more than which runner: the modules to load first, the flags, and
which folders hold the tests. Run without them, 108 of express's 1,260 tests never ran, and the
run was green. So the script's own arguments are kept and only its reporter options are
replaced; with a target (or an affected selection) the script's spec folders give way to it.

A script greenloop cannot read as one plain mocha command (`mocha … && nyc report`, a shell
variable, a chain to another tool) is not taken apart: the plan notes that its arguments were
not used and how to run the script as written (`--framework npm-test`).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import NamedTuple

from greenloop.runner.probe import read_test_script

__all__ = ["ScriptArgs", "mocha_script_args"]

# mocha 10-12 options that take a value as the next word (the rest are flags). An option
# written `--name=value` is one word whatever its arity.
_MOCHA_VALUED = frozenset({
    "--require", "-r", "--ui", "-u", "--timeout", "-t", "--timeouts", "--slow", "-s", "--grep", "-g",
    "--fgrep", "-f", "--file", "--ignore", "--exclude", "--extension", "--spec", "--config",
    "--package", "--reporter", "-R", "--reporter-option", "--reporter-options", "-O", "--retries",
    "--jobs", "-j", "--node-option", "-n", "--watch-files", "--watch-ignore", "--delay-ms",
    "--import", "--loader", "--experimental-loader",
})  # fmt: skip
_REPORTER = frozenset({"--reporter", "-R", "--reporter-option", "--reporter-options", "-O"})
_SHELL = re.compile(r"&&|\|\||[;|<>`$]")


class ScriptArgs(NamedTuple):
    """The script's arguments to put after the runner's binary, and what to say about them."""

    args: tuple[str, ...]
    notes: tuple[str, ...]


def mocha_script_args(root: str, *, narrowed: bool) -> ScriptArgs:
    """The test script's mocha arguments without its reporter options; without its spec
    folders too when `narrowed` (a target or an affected selection names the files)."""
    script = read_test_script(root)
    if script is None or not re.search(r"(?:^|[\s/])mocha(?:\s|$)", script):
        return ScriptArgs((), ())
    try:
        words = shlex.split(script)
    except ValueError:
        words = []
    start = next((i for i, w in enumerate(words) if os.path.basename(w) == "mocha"), None)
    env_prefix = all(re.fullmatch(r"[A-Za-z_]\w*=.*", w) for w in words[: start or 0])
    if start is None or _SHELL.search(script) or not env_prefix:
        return ScriptArgs((), (
            f"the package.json test script ({script!r}) is not one plain mocha command, so greenloop "
            "ran mocha with none of its arguments; run with --framework npm-test to run the script "
            "as written (its output is then read as text)",
        ))
    kept: list[str] = []
    dropped_specs: list[str] = []
    rest = words[start + 1 :]
    i = 0
    while i < len(rest):
        word = rest[i]
        name = word.split("=", 1)[0]
        takes_value = word.startswith("-") and "=" not in word and name in _MOCHA_VALUED
        value = rest[i + 1 : i + 2] if takes_value else []
        i += 1 + len(value)
        if name in _REPORTER:
            continue  # greenloop's reporter takes its place
        if narrowed and (name == "--spec" or not word.startswith("-")):
            dropped_specs += value or [word]
            continue
        kept += [word, *value]
    notes = []
    if kept:
        notes.append(f"the package.json test script's mocha arguments are kept: {shlex.join(kept)}")
    if dropped_specs:
        notes.append(f"the selection replaces the test script's spec {shlex.join(dropped_specs)}")
    return ScriptArgs(tuple(kept), tuple(notes))
