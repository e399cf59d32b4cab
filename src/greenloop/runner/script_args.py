"""The arguments a package.json test script gives the runner greenloop plans itself.

greenloop runs mocha, jest, vitest and bun directly, with its own reporters, so that it gets
their machine reports. A test script such as express's `mocha --require test/support/env
--reporter spec --check-leaks test/ test/acceptance/` says more than which runner: the modules
to load first, the flags, and which folders hold the tests. Run without them, 108 of express's
1,260 tests never ran, and the run was green. So the script's own arguments are kept (jest's
`--config`, vitest's `--project`, bun's `--preload`, mocha's `--require` and spec folders) and
only what greenloop sets itself is replaced: the reporters and their output files, and the
watch mode a run must not enter (vitest's `run` is greenloop's). With a target (or an
affected selection) the script's own test files and filters give way to it.

A script greenloop cannot read as one plain command of the runner (`mocha … && nyc report`, a
shell variable, `node --experimental-vm-modules node_modules/.bin/jest`, a chain to another
tool) is not taken apart: the plan notes that its arguments were not used and how to run the
script as written (`--framework npm-test`).
"""

from __future__ import annotations

import os
import re
import shlex
from typing import NamedTuple

from greenloop.runner.probe import read_test_script

__all__ = ["ScriptArgs", "script_args"]

class _Runner(NamedTuple):
    """How one runner's command line reads (what its CLI documents)."""

    binaries: frozenset[str]  # the script word that starts it (its basename)
    valued: frozenset[str]  # options whose value is the next word (`--name=value` is one word)
    listed: frozenset[str] = frozenset()  # options that take every following non-option word
    replaced: frozenset[str] = frozenset()  # options greenloop sets itself, or a run must not use
    files: frozenset[str] = frozenset()  # options that name test files (a selection replaces them)
    subcommand: str = ""  # the word after the binary that greenloop's command already has
    dropped_words: frozenset[str] = frozenset()  # subcommands greenloop replaces (vitest watch, run)


_RUNNERS = {
    # mocha 10-12
    "mocha": _Runner(
        frozenset({"mocha", "_mocha"}),
        frozenset({
            "--require", "-r", "--ui", "-u", "--timeout", "-t", "--timeouts", "--slow", "-s", "--grep", "-g",
            "--fgrep", "-f", "--file", "--ignore", "--exclude", "--extension", "--spec", "--config",
            "--package", "--reporter", "-R", "--reporter-option", "--reporter-options", "-O", "--retries",
            "--jobs", "-j", "--node-option", "-n", "--watch-files", "--watch-ignore", "--delay-ms",
            "--import", "--loader", "--experimental-loader",
        }),
        replaced=frozenset({"--reporter", "-R", "--reporter-option", "--reporter-options", "-O",
                            "--watch", "-w"}),
        files=frozenset({"--spec"}),
    ),
    # jest 29-30 (its array options take every word up to the next option)
    "jest": _Runner(
        frozenset({"jest", "jest.js"}),
        frozenset({
            "--config", "-c", "--rootDir", "--testNamePattern", "-t", "--maxWorkers", "-w",
            "--testTimeout", "--testEnvironment", "--env", "--coverageDirectory", "--coverageProvider",
            "--outputFile", "--seed", "--shard", "--testRunner", "--testSequencer", "--cacheDirectory",
            "--maxConcurrency", "--testRegex", "--changedSince", "--filter", "--globalSetup",
            "--globalTeardown", "--preset", "--resolver", "--workerIdleMemoryLimit", "--testPathPattern",
            "--testPathPatterns",
        }),
        listed=frozenset({
            "--reporters", "--selectProjects", "--ignoreProjects", "--projects", "--roots",
            "--testPathIgnorePatterns", "--testMatch", "--setupFiles", "--setupFilesAfterEnv",
            "--collectCoverageFrom", "--coverageReporters", "--moduleDirectories", "--moduleFileExtensions",
            "--modulePaths", "--watchPathIgnorePatterns", "--coveragePathIgnorePatterns",
        }),
        replaced=frozenset({"--reporters", "--json", "--outputFile", "--watch", "--watchAll", "--useStderr"}),
        files=frozenset({"--testPathPattern", "--testPathPatterns"}),
    ),
    # vitest 3-4 (`vitest` watches outside CI; greenloop's command is `vitest run`)
    "vitest": _Runner(
        frozenset({"vitest", "vitest.mjs"}),
        frozenset({
            "--config", "-c", "--root", "-r", "--dir", "--project", "--environment", "--pool",
            "--maxWorkers", "--minWorkers", "--testTimeout", "--hookTimeout", "--testNamePattern", "-t",
            "--exclude", "--shard", "--mode", "--reporter", "--outputFile", "--retry", "--bail",
            "--maxConcurrency", "--teardownTimeout", "--silent", "--typecheck.tsconfig", "--workspace",
            "--inspect", "--inspect-brk", "--changed", "--sequence.seed", "--sequence.shuffle",
        }),
        replaced=frozenset({"--reporter", "--outputFile", "--watch", "-w", "--run", "--ui", "--open",
                            "--standalone"}),
        dropped_words=frozenset({"run", "watch", "dev"}),
    ),
    # bun 1.x: `bun test …`
    "bun": _Runner(
        frozenset({"bun"}),
        frozenset({
            "--preload", "-r", "--timeout", "--rerun-each", "--retry", "--test-name-pattern", "-t",
            "--coverage-reporter", "--coverage-dir", "--reporter", "--reporter-outfile", "--max-concurrency",
            "--bail", "--seed", "--path-ignore-patterns", "--config", "--cwd", "--env-file", "--shard",
        }),
        replaced=frozenset({"--reporter", "--reporter-outfile", "--watch", "--hot"}),
        subcommand="test",
    ),
}
_SHELL = re.compile(r"&&|\|\||[;|<>`$]")


class ScriptArgs(NamedTuple):
    """The script's arguments to put after the runner's command, and what to say about them."""

    args: tuple[str, ...]
    notes: tuple[str, ...]


def script_args(framework: str, root: str, *, narrowed: bool) -> ScriptArgs:
    """The test script's arguments for `framework` (mocha, jest, vitest, bun) without what
    greenloop sets itself; without the script's test files and filters too when `narrowed`
    (a target or an affected selection names the tests). Nothing when the script does not run
    that runner."""
    runner = _RUNNERS.get(framework)
    script = read_test_script(root)
    if runner is None or script is None:
        return ScriptArgs((), ())
    try:
        words = shlex.split(script)
    except ValueError:
        words = []
    start = next((i for i, w in enumerate(words) if os.path.basename(w) in runner.binaries
                  and (not runner.subcommand or words[i + 1 : i + 2] == [runner.subcommand])), None)
    mentioned = any(os.path.basename(w) in runner.binaries for w in words) or (
        not words and re.search(rf"(?:^|[\s/]){re.escape(framework)}(?:\s|$)", script))
    if start is None and not mentioned:
        return ScriptArgs((), ())  # the script runs something else (a chain greenloop followed)
    env_prefix = all(re.fullmatch(r"[A-Za-z_]\w*=.*", w) for w in words[: start or 0])
    if start is None or _SHELL.search(script) or not env_prefix:
        return ScriptArgs((), (
            f"the package.json test script ({script!r}) is not one plain {framework} command, so "
            f"greenloop ran {framework} with none of its arguments; run with --framework npm-test to "
            "run the script as written (its output is then read as text)",
        ))
    kept, replaced, dropped = _split(runner, words[start + 1 + bool(runner.subcommand) :], narrowed)
    notes = []
    if kept:
        notes.append(f"the package.json test script's {framework} arguments are kept: {shlex.join(kept)}")
    if replaced:
        notes.append(f"greenloop sets these itself, in place of the test script's: {shlex.join(replaced)}")
    if dropped:
        notes.append("the selection replaces the test script's test files and filters: "
                     + shlex.join(dropped))
    return ScriptArgs(tuple(kept), tuple(notes))


def _split(runner: _Runner, rest: list[str], narrowed: bool) -> tuple[list[str], list[str], list[str]]:
    """(kept, replaced by greenloop, replaced by the selection) of a script's arguments."""
    kept: list[str] = []
    replaced: list[str] = []
    dropped: list[str] = []
    i = 0
    if rest[:1] and rest[0] in runner.dropped_words:
        i = 1  # vitest's `run` / `watch`: greenloop's command says `run` (or `related`)
    while i < len(rest):
        word = rest[i]
        name = word.split("=", 1)[0]
        option = word.startswith("-") and word != "-"
        value: list[str] = []
        if option and "=" not in word and name in runner.valued:
            value = rest[i + 1 : i + 2]
        elif option and "=" not in word and name in runner.listed:
            j = i + 1
            while j < len(rest) and not rest[j].startswith("-"):
                j += 1
            value = rest[i + 1 : j]
        i += 1 + len(value)
        if name in runner.replaced:
            replaced += [word, *value]
        elif narrowed and (name in runner.files or not option):
            dropped += [word, *value]
        else:
            kept += [word, *value]
    return kept, replaced, dropped
