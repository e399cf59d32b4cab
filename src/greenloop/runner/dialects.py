"""Each runner's dialect: its machine report, how it filters by name, greenloop's reporters.

started or written. One table row per framework says how its command is built, how it takes
a target, how `last_failed` names are expressed in its dialect and which machine report it
writes beside its human output:

  vitest     <bin> run --reporter=default --reporter=json --outputFile.json=<dir>/report.json
             last_failed: failing files + -t '^(?:full name|…)$'
  jest       <bin> --reporters=default --reporters=<progress> --json --outputFile=<dir>/report.json
             (-t, files as path patterns; the list --reporters takes ends at --json)
  pytest     <python> -m pytest -p _greenloop_pytest_report --junitxml=<dir>/report.xml
             greenloop's plugin (frameworks/pytest_plugin/, on PYTHONPATH) writes report.json and
             switches junit off; junit is the fallback when the plugin cannot load
             (-k 'a or b', failing files)
  node:test  node --test --test-reporter=spec …stdout --test-reporter=tap …<dir>/report.tap
             (--test-name-pattern, failing files; TAP keeps a failing after() hook, junit drops it)
  npm-test   <pm> test   (no machine report, no name filter: the full suite, with a note)
  go         go test -json -timeout=<a little under greenloop's> ./...   (every module of a go.work)
             test2json events on stdout: stdout.txt is the report (frameworks/go_plan.py plans it);
             last_failed: -run '^(TestA|TestB)$/^(case)$' over the failing tests' packages
  cargo      cargo test --no-fail-fast (libtest's text: it has no stable machine format), or
             cargo nextest run … --profile default with its JUnit report when cargo-nextest is
             installed; targets: package names as -p, else test filters; last_failed: -- --exact

  mocha      <bin> --reporter <greenloop's reporter> --reporter-option output=<dir>/report.json
             (spec on stdout; --grep '^(?:full title$|describe of a failing hook |…)')
  unittest   <python> -m _greenloop_unittest   (frameworks/unittest_runner/ on PYTHONPATH: the
             text runner of `python -m unittest` plus report.json; targets and reruns are ids
             or files, a folder is `discover -s <folder>` as unittest's users write it)
  bun        bun test --reporter=junit --reporter-outfile=<dir>/report.xml
             (-t like mocha's grep; targets as ./paths; no junit when a file fails to load)

Sharding (`shard`, `--shard I/N`) is each runner's own mechanism: vitest and jest
`--shard=I/N`, node:test `--test-shard=I/N`, pytest greenloop's report plugin
(GREENLOOP_PYTEST_SHARD=I/N: it deselects the items whose node id hashes to another shard).
npm-test passes it on only when the test script's runner is one of those (vitest and jest
after `--`, `node --test` through NODE_OPTIONS, since node takes no option after its paths).

Live progress per test: vitest, jest and node:test also load greenloop's progress reporter
(frameworks/reporters/), and pytest's plugin streams too; each appends one NDJSON line per
finished test to <dir>/progress.ndjson (GREENLOOP_PROGRESS_FILE, or node's reporter
destination), which run.py tails. Text output is no good for this: pytest prints a file's
dots on one line, vitest's and jest's default reporters print a file's tests when it ends.
go and cargo count from their output lines (test2json events, libtest's `test … ok`).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from greenloop.layout import package_file

__all__ = [
    "DIALECTS",
    "MOCHA_REPORTER",
    "NODE_REPORTER",
    "PROGRESS_REPORTERS",
    "PROGRESS_VAR",
    "PYTEST_PLUGIN_DIR",
    "PYTEST_PLUGIN_NAME",
    "PYTHON_STREAMING",
    "UNITTEST_RUNNER_DIR",
    "UNITTEST_RUNNER_NAME",
    "Dialect",
    "report_format",
]


class Dialect(NamedTuple):
    """One framework's row: report file and format, and how names are filtered."""

    report_name: str | None  # file in the run folder, None: no machine report
    report_format: str | None
    name_flag: str | None  # "-t", "-k", "--test-name-pattern", None: cannot filter by name


DIALECTS: dict[str, Dialect] = {
    "vitest": Dialect("report.json", "vitest-json", "-t"),
    "jest": Dialect("report.json", "jest-json", "-t"),
    "pytest": Dialect("report.json", "pytest-json", "-k"),  # junit report.xml as the fallback
    # TAP, not junit: node's junit reporter drops a failing after() hook (exit 1, no failure).
    "node:test": Dialect("report.tap", "node-tap", "--test-name-pattern"),
    "npm-test": Dialect(None, None, None),
    "go": Dialect("stdout.txt", "go-json", "-run"),  # go test -json writes its events to stdout
    "cargo": Dialect(None, None, "--exact"),  # nextest's JUnit when installed (planned below)
    "mocha": Dialect("report.json", "mocha-json", "--grep"),
    "unittest": Dialect("report.json", "unittest-json", "ids"),  # test ids as arguments
    "bun": Dialect("report.xml", "bun-junit", "-t"),
}

# greenloop's unittest runner: a folder holding only `_greenloop_unittest.py` goes on
# PYTHONPATH and `python -m _greenloop_unittest` starts it (frameworks/unittest.py reads it)
UNITTEST_RUNNER_DIR = package_file("frameworks", "unittest_runner")
UNITTEST_RUNNER_NAME = "_greenloop_unittest"

# greenloop's own pytest report plugin: a folder holding only that file goes on PYTHONPATH
# and `-p NAME` loads it (frameworks/pytest_report.py reads what it writes)
PYTEST_PLUGIN_DIR = package_file("frameworks", "pytest_plugin")
PYTEST_PLUGIN_NAME = "_greenloop_pytest_report"
# greenloop's node:test reporter: node's TAP reporter, plus a line per test started and
# completed, as they happen, in the file named by GREENLOOP_NODE_STREAM
NODE_REPORTER = package_file("frameworks", "node_reporter", "greenloop_tap.mjs")
# greenloop's mocha reporter: spec on stdout and the JSON report (`--reporter <this file>`),
# read by frameworks/mocha.py; named here so a plan need not import the parser
MOCHA_REPORTER = package_file("frameworks", "mocha_reporter", "greenloop-mocha-reporter.cjs")
# Python buffers its output to a file in 8 KB blocks: unbuffered, pytest's lines reach the
# output file as tests finish (live progress, and what a run stopped at its deadline saw)
PYTHON_STREAMING: tuple[tuple[str, str], ...] = (("PYTHONUNBUFFERED", "1"),)

# greenloop's live-progress reporters for the JavaScript runners (one NDJSON line per test)
_REPORTERS_DIR = package_file("frameworks", "reporters")
PROGRESS_REPORTERS = {
    "vitest": os.path.join(_REPORTERS_DIR, "greenloop-vitest-progress.mjs"),
    "jest": os.path.join(_REPORTERS_DIR, "greenloop-jest-progress.cjs"),
    "node:test": os.path.join(_REPORTERS_DIR, "greenloop-node-progress.mjs"),
}
PROGRESS_VAR = "GREENLOOP_PROGRESS_FILE"


def report_format(framework: str, dialect: Dialect, report_file: str | None) -> str | None:
    """The format of a run's machine report: cargo's is nextest's JUnit, when nextest wrote one."""
    if framework == "cargo":
        return "nextest-junit" if report_file else None
    return dialect.report_format
