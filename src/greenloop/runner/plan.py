"""Detection + options -> Plan: the exact argv of a run, with the runner's machine reporter.

Pure except for looking at files (is a runner installed, where is the virtualenv): nothing is
started or written. One table row per framework says how its command is built, how it takes
a target, how `last_failed` names are expressed in its dialect and which machine report it
writes beside its human output:

  vitest     <bin> run --reporter=default --reporter=json --outputFile.json=<dir>/report.json
             last_failed: failing files + -t '^(?:full name|…)$'
  jest       <bin> --json --outputFile=<dir>/report.json      (-t, files as path patterns)
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
             text runner of `python -m unittest` plus report.json; targets and reruns are ids)
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

import importlib.util
import os
import re
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from greenloop.errors import UsageError
from greenloop.layout import package_file
from greenloop.model import FRAMEWORKS, Detection, Failure, Plan, RunResult, ShardInfo
from greenloop.runner.probe import npm_test_command

__all__ = [
    "DIALECTS",
    "NODE_REPORTER",
    "PROGRESS_REPORTERS",
    "PYTEST_PLUGIN_DIR",
    "PYTEST_PLUGIN_NAME",
    "PYTHON_STREAMING",
    "UNITTEST_RUNNER_DIR",
    "UNITTEST_RUNNER_NAME",
    "Dialect",
    "RunOptions",
    "Toolchain",
    "js_runner",
    "name_pattern",
    "parse_shard",
    "plan",
    "python_runner",
    "runner_command",
    "script_runner",
    "unittest_prefix",
]

Which = Callable[[str], "str | None"]


class RunOptions(NamedTuple):
    """What the caller asked for; validated by api.test_run before it gets here."""

    framework: str | None = None
    target: str | None = None
    last_failed: bool = False
    command: str | None = None
    timeout_ms: int | None = None
    shard: ShardInfo | None = None


def parse_shard(value: object, *, field: str = "shard (--shard)") -> ShardInfo:
    """`"I/N"` -> ShardInfo(I, N), 1 <= I <= N; UsageError naming the field and the fix."""
    if isinstance(value, ShardInfo):
        value = f"{value.index}/{value.total}"
    text = value.strip() if isinstance(value, str) else ""
    m = re.fullmatch(r"(\d+)\s*/\s*(\d+)", text)
    fix = "pass I/N with 1 <= I <= N, e.g. --shard 1/3 for the first of three shards"
    if m is None:
        raise UsageError(f"{field} must be I/N, got {value!r}: {fix}")
    index, total = int(m.group(1)), int(m.group(2))
    if total < 1 or index < 1 or index > total:
        raise UsageError(f"{field} {text!r} is out of range: {fix}")
    return ShardInfo(index, total)


_SCRIPT_RUNNER = re.compile(r"(?:^|[\s/])(vitest|jest)(?:\s|$)")
_SCRIPT_NODE_TEST = re.compile(r"(?:^|[\s/])node\s+(?:\S+\s+)*?--test(?:\s|=|$)")


def script_runner(root: str) -> str | None:
    """The runner package.json's test script starts ("vitest", "jest", "node:test"), when it is
    one plain command greenloop can shard; None for anything else (chained commands, mocha…)."""
    import json

    try:
        with open(os.path.join(root, "package.json"), encoding="utf-8") as fh:
            script = json.load(fh).get("scripts", {}).get("test")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(script, str) or re.search(r"&&|\|\||;|\|", script):
        return None
    m = _SCRIPT_RUNNER.search(script)
    if m is not None:
        return m.group(1)
    return "node:test" if _SCRIPT_NODE_TEST.search(script) else None


class Toolchain(NamedTuple):
    """How a runner is started in this workspace, or why it cannot be."""

    argv: tuple[str, ...]
    notes: tuple[str, ...] = ()
    unavailable: str | None = None


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
STREAM_NAME = "stream.ndjson"
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
PROGRESS_NAME = "progress.ndjson"
PROGRESS_VAR = "GREENLOOP_PROGRESS_FILE"

_SEP = re.compile(r" (?:>|›) ")


def _upwards(root: Path, limit: int = 8) -> list[Path]:
    """`root` and its parents up to the repository root (a monorepo hoists node_modules)."""
    out = [root]
    here = root
    for _ in range(limit):
        if (here / ".git").exists() or here.parent == here:
            break
        here = here.parent
        out.append(here)
    return out


def _install_hint(manager: str | None, package: str) -> str:
    return {
        "pnpm": f"pnpm add -D {package}",
        "yarn": f"yarn add -D {package}",
        "bun": f"bun add -d {package}",
    }.get(manager or "npm", f"npm install -D {package}")


def js_runner(root: str, binary: str, manager: str | None) -> Toolchain:
    """The workspace's own `binary` from node_modules/.bin (or Yarn Plug'n'Play), never a global one."""
    base = Path(root)
    for folder in _upwards(base):
        candidate = folder / "node_modules" / ".bin" / binary
        if os.access(candidate, os.X_OK):
            return Toolchain((str(candidate),))
        if (folder / ".pnp.cjs").is_file():
            return Toolchain(("yarn", binary), notes=(f"{binary} runs through Yarn Plug'n'Play",))
    return Toolchain(
        (binary,),
        unavailable=(
            f"{binary} is not installed in {root}: run `{_install_hint(manager, binary)}` "
            f"(or `{manager or 'npm'} install` if package.json already lists it)"
        ),
    )


def _venv_python(venv: Path) -> Path | None:
    for rel in ("bin/python", "Scripts/python.exe"):
        if (venv / rel).exists():
            return venv / rel
    return None


def _venv_has(venv: Path, module: str) -> bool:
    """Is `module` installed in the virtualenv (or visible through its system site-packages)?"""
    if any(venv.glob(f"lib/python*/site-packages/{module}")):
        return True
    if (venv / "Lib" / "site-packages" / module).exists():
        return True
    try:
        cfg = (venv / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    # A venv made with --system-site-packages sees the base interpreter's packages; trust it.
    return re.search(r"^\s*include-system-site-packages\s*=\s*true\s*$", cfg, re.M | re.I) is not None


def python_runner(
    root: str, env: Mapping[str, str], which: Which | None = None, *, interpreter: str | None = None
) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """(argv that starts pytest, notes, unavailable reason) for a Python workspace.

    Order: the workspace's `.venv`/`venv` (here or in a parent up to the repository root), the
    active VIRTUAL_ENV, `uv run` with uv.lock, `poetry run` with poetry.lock, then this
    interpreter.
    """
    which = which or shutil.which
    base = Path(root)
    for folder in _upwards(base):
        for name in (".venv", "venv"):
            venv = folder / name
            venv_python = _venv_python(venv)
            if venv_python is not None:
                rel = os.path.relpath(venv, base)
                argv = (str(venv_python), "-m", "pytest")
                if not _venv_has(venv, "pytest"):
                    why = f"pytest is not installed in {rel}: run `{argv[0]} -m pip install pytest`"
                    return argv, (), why
                return argv, (f"pytest runs in the workspace's virtualenv {rel}",), None
    active = env.get("VIRTUAL_ENV")
    if active:
        active_python = _venv_python(Path(active))
        if active_python is not None and _venv_has(Path(active), "pytest"):
            note = f"pytest runs in the active virtualenv {active}"
            return (str(active_python), "-m", "pytest"), (note,), None
    notes: list[str] = []
    for lockfile, tool in (("uv.lock", "uv"), ("poetry.lock", "poetry")):
        if any((folder / lockfile).is_file() for folder in _upwards(base)):
            if which(tool):
                return (tool, "run", "pytest"), (f"pytest runs through `{tool} run` ({lockfile})",), None
            notes.append(f"{lockfile} found but {tool} is not on PATH; using this interpreter")
    python: str = interpreter or _current_python()
    if interpreter is None and importlib.util.find_spec("pytest") is None:
        return (python, "-m", "pytest"), tuple(notes), (
            f"pytest is not installed for {python}: run `{python} -m pip install pytest` "
            "or create the workspace's .venv with it"
        )
    return (python, "-m", "pytest"), tuple(notes), None


def unittest_prefix(pytest_argv: Sequence[str]) -> tuple[str, ...]:
    """The interpreter part of `python_runner`'s pytest argv: `<python> -m pytest` -> `<python>`,
    `uv run pytest` -> `uv run python` (the same environment, without needing pytest)."""
    argv = tuple(pytest_argv)
    if argv[-2:] == ("-m", "pytest"):
        return argv[:-2]
    if argv[-1:] == ("pytest",):
        return (*argv[:-1], "python")
    return argv


def _current_python() -> str:
    import sys

    return sys.executable or "python3"


def name_pattern(names: Sequence[str], *, anchored: bool = True) -> str:
    """A regex matching any of `names`, where a ` > ` / ` › ` separator also matches a space.

    vitest and jest match `-t` against the full name joined with spaces; greenloop shows it
    joined with ` > `. Both forms match.
    """
    alts = []
    for name in dict.fromkeys(names):
        parts = _SEP.split(name)
        alts.append("(?: > | › | )".join(re.escape(p) for p in parts))
    body = "|".join(alts)
    return f"^(?:{body})$" if anchored else f"(?:{body})"


def _leaf(name: str) -> str:
    leaf = name.rsplit("::", 1)[-1]
    return _SEP.split(leaf)[-1]


_K_SAFE = re.compile(r"^[\w.\-\[\]]+$")


def _pytest_k(names: Sequence[str]) -> str:
    """`-k` takes identifiers; a parametrised id with other characters falls back to its function."""
    words: list[str] = []
    for name in names:
        leaf = _leaf(name)
        if not _K_SAFE.match(leaf):
            leaf = leaf.split("[", 1)[0]
        if _K_SAFE.match(leaf) and leaf not in words:
            words.append(leaf)
    return " or ".join(words)


def _failing_files(root: str, failures: Sequence[Failure]) -> list[str]:
    files: list[str] = []
    for f in failures:
        if not f.file:
            continue
        path = f.file if os.path.isabs(f.file) else os.path.join(root, f.file)
        if os.path.exists(path):
            rel = os.path.relpath(path, root)
            if rel not in files:
                files.append(rel)
    return files


def _last_failed_args(framework: str, root: str, previous: RunResult | None, notes: list[str]) -> list[str]:
    """The extra argv of a `last_failed` rerun; empty (with a note saying why) for the full suite."""
    if previous is None:
        notes.append("last_failed: no previous run is stored for this workspace; ran the full suite")
        return []
    failures = previous.failures
    if not failures:
        notes.append(f"last_failed: the previous run {previous.run_id} had no failures; ran the full suite")
        return []
    dialect = DIALECTS[framework]
    if dialect.name_flag is None:
        notes.append(f"last_failed: {framework} cannot filter tests by name; ran the full suite")
        return []
    files = _failing_files(root, failures)
    names = [f.test for f in failures if f.kind != "load" and f.test]
    args: list[str] = []
    if framework in ("vitest", "jest"):
        if names:
            args += ["-t", name_pattern(names)]
        args += files
    elif framework == "pytest":
        expr = _pytest_k(names)
        if expr:
            args += ["-k", expr]
        args += files
    elif framework == "node:test":
        if names:
            args.append(f"--test-name-pattern={name_pattern([_leaf(n) for n in names])}")
        args += files
    elif framework in ("mocha", "bun"):
        # The name filter alone: a failure's file is where it failed (possibly a helper module,
        # or the module a test file could not import), and mocha would run any file it is
        # given as a test file. Every test file loads, only the named tests run.
        from greenloop.frameworks.bun import name_filter
        from greenloop.frameworks.mocha import grep_pattern

        pattern = grep_pattern(failures) if framework == "mocha" else name_filter(failures)
        if pattern:
            args += ["--grep" if framework == "mocha" else "-t", pattern]
    elif framework == "unittest":
        from greenloop.frameworks.unittest import rerun_ids

        args += rerun_ids(failures)
    if not args:
        notes.append("last_failed: the previous failures carry no names or files; ran the full suite")
        return []
    notes.append(f"last_failed: reran {len(failures)} failure(s) of {previous.run_id}")
    return args


GO_MISSING = "go is not on PATH: install Go (`apt-get install golang-go` or https://go.dev/dl/)"
CARGO_MISSING = "cargo is not on PATH: install Rust with rustup (https://rustup.rs)"


def _native_last_failed_notes(previous: RunResult | None) -> list[str]:
    if previous is None:
        return ["last_failed: no previous run is stored for this workspace; ran the full suite"]
    if not previous.failures:
        return [f"last_failed: the previous run {previous.run_id} had no failures; ran the full suite"]
    return [f"last_failed: reran {len(previous.failures)} failure(s) of {previous.run_id}"]


def _report_format(framework: str, dialect: Dialect, report_file: str | None) -> str | None:
    if framework == "cargo":
        return "nextest-junit" if report_file else None
    return dialect.report_format


def _native_plan(
    framework: str,
    root: str,
    targets: list[str],
    options: RunOptions,
    previous: RunResult | None,
    timeout_ms: int,
    which: Which,
) -> tuple[list[str], str | None, str | None, list[str]]:
    """(argv, report file, unavailable, notes) of a go or cargo run (frameworks/go_plan.py, cargo_plan.py)."""
    failures = list(previous.failures) if options.last_failed and previous is not None else None
    report_file: str | None = None
    if framework == "go":
        from greenloop.frameworks import go_plan

        binary = which("go")
        args, notes = go_plan.plan_args(root, targets, failures, timeout_ms)
        why = None if binary else GO_MISSING
        return [binary or "go", "test", *args], None, why, notes
    from greenloop.frameworks import cargo_plan

    binary = which("cargo")
    nextest = binary is not None and which("cargo-nextest") is not None
    args, notes = cargo_plan.plan_args(root, targets, failures, nextest)
    if nextest:
        report_file = os.path.join(root, "target", "nextest", cargo_plan.NEXTEST_PROFILE, "junit.xml")
        notes.append("cargo nextest runs the suite; its JUnit report is read")
    else:
        notes.append("cargo test's libtest output is parsed as text (it has no stable machine report)")
    why = None if binary else CARGO_MISSING
    return [binary or "cargo", *args], report_file, why, notes


def runner_command(
    framework: str,
    root: str,
    manager: str | None,
    env: Mapping[str, str],
    which: Which | None = None,
    *,
    interpreter: str | None = None,
) -> Toolchain:
    """The command that runs `framework` in the workspace at `root`, before greenloop's
    reporter flags: what `greenloop run` starts and `greenloop probe` shows (one source)."""
    which = which or shutil.which
    if framework in ("vitest", "jest"):
        tool = js_runner(root, framework, manager)
        return tool._replace(argv=(*tool.argv, "run")) if framework == "vitest" else tool
    if framework == "pytest":
        argv, notes, unavailable = python_runner(root, env, which, interpreter=interpreter)
        return Toolchain(argv, notes, unavailable)
    if framework == "node:test":
        node = which("node")
        missing = None if node else "node is not on PATH: install Node.js 20 or later"
        return Toolchain((node or "node", "--test"), unavailable=missing)
    if framework == "go":
        from greenloop.frameworks.go_workspace import workspace_patterns  # local: only Go needs it

        go = which("go")
        missing = None if go else GO_MISSING
        return Toolchain(("go", "test", *workspace_patterns(root)), unavailable=missing)
    if framework == "cargo":
        cargo = which("cargo")
        missing = None if cargo else CARGO_MISSING
        nextest = cargo is not None and which("cargo-nextest") is not None
        return Toolchain(("cargo", "nextest", "run") if nextest else ("cargo", "test"), unavailable=missing)
    if framework == "mocha":
        return js_runner(root, "mocha", manager)
    if framework == "bun":
        tool = js_runner(root, "bun", manager)
        found = which("bun")
        if tool.unavailable and found:
            tool = Toolchain((found,), ("bun runs from PATH (a global install)",))
        elif tool.unavailable:
            why = (f"bun is not installed in {root} nor on PATH: run `{_install_hint(manager, 'bun')}` "
                   "(the npm package carries bun's binary) or install bun on PATH")
            tool = tool._replace(unavailable=why)
        return tool._replace(argv=(*tool.argv, "test"))
    if framework == "unittest":
        # the workspace's interpreter as pytest would have it, without needing pytest
        argv, notes, _ = python_runner(root, env, which, interpreter=interpreter)
        py_notes = tuple(n.replace("pytest runs", "unittest runs") for n in notes)
        return Toolchain((*unittest_prefix(argv), "-m", "unittest"), py_notes)
    pm = manager or "npm"
    missing = None if which(pm) else f"{pm} is not on PATH: install it to run the package.json test script"
    return Toolchain(npm_test_command(pm), unavailable=missing)


def plan(
    detection: Detection,
    options: RunOptions,
    *,
    report_dir: str,
    default_timeout_ms: int,
    previous: RunResult | None = None,
    env: Mapping[str, str] | None = None,
    which: Which | None = None,
    interpreter: str | None = None,
) -> Plan:
    """The Plan for one run. Raises UsageError when there is nothing to run."""
    env = os.environ if env is None else env
    which = which or shutil.which
    framework = options.framework or detection.framework
    timeout_ms = options.timeout_ms if options.timeout_ms is not None else default_timeout_ms
    root = detection.root
    notes: list[str] = []

    if options.command is not None:
        if options.target:
            notes.append("target is ignored with a verbatim command")
        if options.last_failed:
            notes.append("last_failed is ignored with a verbatim command")
        return Plan(
            framework=framework or "",
            argv=(options.command,),
            cwd=root,
            timeout_ms=timeout_ms,
            env=PYTHON_STREAMING if framework == "pytest" else (),
            shell=True,
            notes=tuple(notes),
            selection="command",
        )
    if framework is None:
        hint = ""
        if detection.suites:
            first = detection.suites[0].root
            hint = f" ({len(detection.suites)} test roots: run one, e.g. `greenloop run {first}`)"
        raise UsageError(
            f"nothing to test in {root}{hint}: no test runner, pytest marker or test files found; "
            "add tests, or pass --framework NAME or --command CMD"
        )
    if framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")

    dialect = DIALECTS[framework]
    report_file = os.path.join(report_dir, dialect.report_name) if dialect.report_name else None
    targets = shlex.split(options.target) if options.target else []
    manager = detection.package_manager
    unavailable: str | None = None
    argv: list[str]
    child_env: tuple[tuple[str, str], ...] = ()
    fallback: tuple[str | None, str | None] = (None, None)
    stream_file: str | None = None
    progress_file = os.path.join(report_dir, PROGRESS_NAME)

    tool = runner_command(framework, root, manager, env, which, interpreter=interpreter)
    notes += tool.notes
    unavailable = tool.unavailable
    if framework == "vitest":
        argv = [*tool.argv, "--reporter=default", "--reporter=json"]
        argv += [f"--reporter={PROGRESS_REPORTERS['vitest']}", f"--outputFile.json={report_file}"]
        child_env = ((PROGRESS_VAR, progress_file),)
    elif framework == "jest":
        # --reporters replaces the configured ones for this run: default keeps jest's own
        # output (the text fallback), greenloop's adds per-test progress
        argv = [*tool.argv, "--json", f"--outputFile={report_file}"]
        argv += ["--reporters=default", f"--reporters={PROGRESS_REPORTERS['jest']}"]
        child_env = ((PROGRESS_VAR, progress_file),)
    elif framework == "pytest":
        stream_file = os.path.join(report_dir, STREAM_NAME)
        fallback = (os.path.join(report_dir, "report.xml"), "junit")
        argv = [*tool.argv, "-p", PYTEST_PLUGIN_NAME, f"--junitxml={fallback[0]}"]
        inherited = env.get("PYTHONPATH")
        child_env = (
            ("PYTHONPATH", PYTEST_PLUGIN_DIR + (os.pathsep + inherited if inherited else "")),
            ("GREENLOOP_PYTEST_REPORT", report_file or ""),
            ("GREENLOOP_PYTEST_JUNIT", fallback[0]),
            ("GREENLOOP_PYTEST_STREAM", stream_file),
            (PROGRESS_VAR, progress_file),
            *PYTHON_STREAMING,
        )
    elif framework == "mocha":
        from greenloop.frameworks.mocha import REPORTER

        argv = [*tool.argv, "--reporter", REPORTER]
        # mocha splits --reporter-option at commas; a path with one goes by the variable alone
        if "," not in (report_file or ","):
            argv += ["--reporter-option", f"output={report_file}"]
        stream_file = os.path.join(report_dir, STREAM_NAME)
        child_env = (("GREENLOOP_MOCHA_REPORT", report_file or ""), ("GREENLOOP_MOCHA_STREAM", stream_file))
    elif framework == "bun":
        from greenloop.frameworks.bun import test_files

        argv = [*tool.argv, "--reporter=junit", f"--reporter-outfile={report_file}"]
        targets = [t if t.startswith("-") else test_files([t])[0] for t in targets]
    elif framework == "unittest":
        stream_file = os.path.join(report_dir, STREAM_NAME)
        # greenloop's runner module in unittest's place: the same arguments and output
        argv = [*tool.argv[:-1], UNITTEST_RUNNER_NAME]
        inherited = env.get("PYTHONPATH")
        child_env = (
            ("PYTHONPATH", UNITTEST_RUNNER_DIR + (os.pathsep + inherited if inherited else "")),
            ("GREENLOOP_UNITTEST_REPORT", report_file or ""),
            ("GREENLOOP_UNITTEST_STREAM", stream_file),
            *PYTHON_STREAMING,
        )
    elif framework == "node:test":
        argv = [
            *tool.argv,
            "--test-reporter=spec",
            "--test-reporter-destination=stdout",
            # node's own TAP, through greenloop's reporter when it is there (see NODE_REPORTER)
            f"--test-reporter={NODE_REPORTER}" if os.path.exists(NODE_REPORTER) else "--test-reporter=tap",
            f"--test-reporter-destination={report_file}",
            f"--test-reporter={PROGRESS_REPORTERS['node:test']}",
            f"--test-reporter-destination={progress_file}",
        ]
        if os.path.exists(NODE_REPORTER):
            stream_file = os.path.join(report_dir, STREAM_NAME)
            child_env = (("GREENLOOP_NODE_STREAM", stream_file),)
    elif framework in ("go", "cargo"):
        progress_file = ""  # live counts come from their output lines
        argv, native_report, unavailable, native_notes = _native_plan(
            framework, root, targets, options, previous, timeout_ms, which
        )
        if framework == "go":
            from greenloop.frameworks.go_workspace import workspace_env

            go_env, go_notes = workspace_env(root, env)
            child_env, native_notes = tuple(go_env), [*native_notes, *go_notes]
        if framework == "cargo":
            report_file = native_report
        notes += native_notes
        targets = []  # go and cargo place their targets themselves
        if options.last_failed:
            notes += _native_last_failed_notes(previous)
    else:  # npm-test
        progress_file = ""
        argv = list(tool.argv)
        if targets:
            argv += ["--", *targets] if (manager or "npm") == "npm" else targets
            targets = []
        notes.append("the package.json test script takes no machine reporter; its output is parsed as text")

    shard = options.shard
    if shard is not None:
        spec = f"{shard.index}/{shard.total}"
        if framework in ("vitest", "jest"):
            # A shard may hold no test file when N exceeds the files (both split by file).
            argv += [f"--shard={spec}", "--passWithNoTests"]
        elif framework == "node:test":
            argv.append(f"--test-shard={spec}")
        elif framework == "pytest":
            child_env = (*child_env, ("GREENLOOP_PYTEST_SHARD", spec))
        elif framework != "npm-test":
            raise UsageError(
                f"shard: greenloop does not split {framework} runs yet: give each machine its own "
                "packages or files with --target, then `greenloop merge` needs no shard"
            )
        else:  # npm-test: only through the script's own runner
            runner = script_runner(root)
            if runner is None:
                raise UsageError(
                    "shard: the package.json test script's runner is not one greenloop can shard "
                    "(vitest, jest or node --test as one plain command): run with --framework "
                    "vitest|jest|node:test, or split the suite in the script itself"
                )
            if runner == "node:test":
                opt = f"--test-shard={spec}"
                inherited_opts = env.get("NODE_OPTIONS")
                opts = f"{inherited_opts} {opt}" if inherited_opts else opt
                child_env = (*child_env, ("NODE_OPTIONS", opts))
            else:
                extra = [f"--shard={spec}"]
                argv += ["--", *extra] if (manager or "npm") == "npm" else extra
            notes.append(f"shard {spec} is passed to the test script's runner, {runner}")
    selection = "target" if targets or (options.target and framework in ("npm-test", "go", "cargo")) else None
    if options.last_failed and framework in ("go", "cargo"):
        if previous is not None and previous.failures and selection is None:
            selection = "last_failed"
    elif options.last_failed:
        narrowing = _last_failed_args(framework, root, previous, notes)
        argv += narrowing
        if narrowing:
            selection = selection or "last_failed"
    if shard is not None:
        selection = "shard"
    for token in targets:
        path = token.split("::", 1)[0]
        if framework == "unittest" and re.match(r"^[\w.]+$", token):
            continue  # a module, class or test id, as `python -m unittest` takes it
        if not token.startswith("-") and not os.path.exists(os.path.join(root, path)):
            how = (
                "pytest needs a path or a node id such as tests/test_a.py::test_name"
                if framework == "pytest"
                else f"{framework} takes it as a file filter, not a test name"
            )
            notes.append(f"target {token!r} is not a path in the workspace; {how}")
    argv += targets
    return Plan(
        framework=framework,
        argv=tuple(argv),
        cwd=root,
        timeout_ms=timeout_ms,
        env=child_env,
        report_file=report_file,
        report_format=_report_format(framework, dialect, report_file),
        fallback_report_file=fallback[0],
        fallback_report_format=fallback[1],
        notes=tuple(notes),
        unavailable=unavailable,
        selection=selection,
        shard=shard,
        stream_file=stream_file,
        progress_file=progress_file or None,
    )

