"""Detection + options -> Plan: the exact argv of a run, with the runner's machine reporter.

Pure except for looking at files (is a runner installed, where is the virtualenv): nothing is
started or written. The runner's command comes from toolchain.py, each runner's report and
name filter from dialects.py (which lists every runner's command line), a `last_failed`
rerun's filter from last_failed.py; this module puts them together with the target and the
shard.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

from greenloop.errors import UsageError
from greenloop.layout import PROGRESS_NAME, STREAM_NAME
from greenloop.model import FRAMEWORKS, Detection, Plan, ShardInfo
from greenloop.result import RunResult
from greenloop.runner.dialects import (
    DIALECTS,
    MOCHA_REPORTER,
    NODE_REPORTER,
    PROGRESS_REPORTERS,
    PROGRESS_VAR,
    PYTEST_PLUGIN_DIR,
    PYTEST_PLUGIN_NAME,
    PYTHON_STREAMING,
    UNITTEST_RUNNER_DIR,
    UNITTEST_RUNNER_NAME,
    report_format,
)
from greenloop.runner.last_failed import last_failed_args, native_last_failed_notes
from greenloop.runner.make_test import MakeArgs, make_args
from greenloop.runner.toolchain import CARGO_MISSING, GO_MISSING, Toolchain, Which, runner_command

if TYPE_CHECKING:
    from greenloop.runner.affected import Changes, Selection
    from greenloop.runner.script_args import ScriptArgs

__all__ = ["RunOptions", "parse_shard", "plan", "script_runner"]


class RunOptions(NamedTuple):
    """What the caller asked for; validated by api.test_run before it gets here."""

    framework: str | None = None
    target: str | None = None
    last_failed: bool = False
    command: str | None = None
    timeout_ms: int | None = None
    shard: ShardInfo | None = None
    # `--affected`: the changed files and owed tests (greenloop.runner.affected.changes)
    affected: Changes | None = None
    # a whole-suite pytest run records the per-test coverage map (runner/affected_cov.py)
    # where the workspace's Python has coverage.py: the config's `coverage_map`
    coverage_map: bool = False


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
        notes.append("cargo nextest runs the suite; its JUnit report is read (nextest does not run doctests: "
                     "`cargo test --doc` does)")
    else:
        notes.append("cargo test's libtest output is parsed as text (it has no stable machine report)")
    why = None if binary else CARGO_MISSING
    return [binary or "cargo", *args], report_file, why, notes


def _unittest_targets(root: str, targets: list[str], notes: list[str]) -> list[str]:
    """A folder target as `python -m unittest` takes one: `discover -s <folder>` (with the
    workspace as the top level when the folder is a package, so test ids stay those of the
    whole run); unittest's main reads any other word as a module, class or test id."""
    folders = [t for t in targets if not t.startswith("-") and os.path.isdir(os.path.join(root, t))]
    if not folders:
        return targets
    if len(targets) > 1:
        notes.append(f"target: unittest discovers one folder a run; {len(targets)} targets given, "
                     "so each is read as a module, class or test id")
        return targets
    folder = folders[0].rstrip("/") or "."
    top = ["-t", "."] if os.path.isfile(os.path.join(root, folder, "__init__.py")) else []
    return ["discover", "-s", folder, *top]


class _Ctx(NamedTuple):
    """What every runner's part of a plan reads."""

    framework: str
    root: str
    options: RunOptions
    report_dir: str
    report_file: str | None
    progress_file: str
    manager: str | None
    env: Mapping[str, str]
    which: Which
    previous: RunResult | None
    timeout_ms: int
    tool: Toolchain
    affected: Selection | None
    make: MakeArgs  # go, cargo, unittest: what the Makefile's test target adds (make_test.py)


class _Built(NamedTuple):
    """One runner's command: argv before the targets, the targets it takes, and what it adds."""

    argv: list[str]
    targets: list[str]
    notes: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    fallback: tuple[str | None, str | None] = (None, None)
    stream_file: str | None = None
    report_file: str | None = None
    progress_file: str | None = None  # None: the context's
    unavailable: str | None = None  # go and cargo: in place of the toolchain's own


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
    if options.command is not None:
        return _verbatim(framework, options, root, timeout_ms)
    framework = _known(framework, detection)
    dialect = DIALECTS[framework]
    report_file = os.path.join(report_dir, dialect.report_name) if dialect.report_name else None
    targets = shlex.split(options.target) if options.target else []
    notes: list[str] = []
    affected = None
    if options.affected is not None:  # the affected tests in the runner's own dialect
        from greenloop.runner.affected import select

        affected = select(framework, root, options.affected)
        notes += affected.notes
        if affected.args is not None:
            targets = list(affected.args)
    tool = runner_command(framework, root, detection.package_manager, env, which, interpreter=interpreter)
    notes += tool.notes
    make = make_args(root, framework)
    notes += make.notes
    ctx = _Ctx(framework, root, options, report_dir, report_file, os.path.join(report_dir, PROGRESS_NAME),
               detection.package_manager, env, which, previous, timeout_ms, tool, affected, make)
    built = _BUILDERS.get(framework, _npm_test)(ctx, targets)
    notes += built.notes
    argv, targets, plan_env = built.argv, built.targets, built.env
    report_file = built.report_file if framework == "cargo" else report_file
    shard = options.shard
    if shard is not None:
        # the shard names what it splits, so `greenloop merge` names the merged run's selection
        picked = (options.target or "").strip() or None
        shard = ShardInfo(shard.index, shard.total, shard.commit, target=picked)
        plan_env = _shard(ctx, shard, argv, plan_env, notes)
    selection = _selection(ctx, targets, argv, notes, shard)
    notes += _target_notes(framework, root, targets)
    argv += targets
    progress_file = ctx.progress_file if built.progress_file is None else built.progress_file
    return Plan(
        framework=framework,
        argv=tuple(argv),
        cwd=root,
        timeout_ms=timeout_ms,
        env=plan_env,
        report_file=report_file,
        report_format=report_format(framework, dialect, report_file),
        fallback_report_file=built.fallback[0],
        fallback_report_format=built.fallback[1],
        notes=tuple(notes),
        unavailable=built.unavailable if framework in ("go", "cargo") else tool.unavailable,
        selection=selection,
        shard=shard,
        stream_file=built.stream_file,
        progress_file=progress_file or None,
        affected=affected.info if affected is not None else None,
        nothing=affected.nothing if affected is not None else None,
    )


def _verbatim(framework: str | None, options: RunOptions, root: str, timeout_ms: int) -> Plan:
    """`--command CMD`: the command as written, through the shell; target and last_failed unused."""
    notes = []
    if options.target:
        notes.append("target is ignored with a verbatim command")
    if options.last_failed:
        notes.append("last_failed is ignored with a verbatim command")
    return Plan(
        framework=framework or "",
        argv=(options.command or "",),
        cwd=root,
        timeout_ms=timeout_ms,
        env=PYTHON_STREAMING if framework == "pytest" else (),
        shell=True,
        notes=tuple(notes),
        selection="command",
    )


def _known(framework: str | None, detection: Detection) -> str:
    """The framework to plan, or a UsageError saying what to do."""
    if framework is None:
        hint = ""
        if detection.suites:
            first = detection.suites[0].root
            hint = f" ({len(detection.suites)} test roots: run one, e.g. `greenloop run {first}`)"
        raise UsageError(
            f"nothing to test in {detection.root}{hint}: no test runner, pytest marker or test files found; "
            "add tests, or pass --framework NAME or --command CMD"
        )
    if framework not in FRAMEWORKS:
        raise UsageError(f"unknown framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    return framework


def _script(c: _Ctx, targets: list[str]) -> ScriptArgs:
    """The package.json test script's own arguments for this runner (script_args.py)."""
    from greenloop.runner.script_args import script_args

    return script_args(c.framework, c.root, narrowed=bool(targets))


def _vitest(c: _Ctx, targets: list[str]) -> _Built:
    script = _script(c, targets)
    argv = list(c.tool.argv)
    if c.affected is not None and c.affected.args and argv[-1:] == ["run"]:
        argv[-1] = "related"  # `vitest related <files> --run`: the files' own import graph
        targets = [*targets, "--run"]
    argv += [*script.args, "--reporter=default", "--reporter=json"]
    argv += [f"--reporter={PROGRESS_REPORTERS['vitest']}", f"--outputFile.json={c.report_file}"]
    return _Built(argv, targets, script.notes, ((PROGRESS_VAR, c.progress_file),))


def _jest(c: _Ctx, targets: list[str]) -> _Built:
    # --reporters replaces the configured ones for this run: default keeps jest's own
    # output (the text fallback), greenloop's adds per-test progress. jest's --reporters
    # is a list that takes every word up to the next option, so it comes before --json:
    # a target or a last_failed file after it would be read as a reporter module.
    script = _script(c, targets)
    argv = [*c.tool.argv, *script.args, "--reporters=default", f"--reporters={PROGRESS_REPORTERS['jest']}"]
    argv += ["--json", f"--outputFile={c.report_file}"]
    return _Built(argv, targets, script.notes, ((PROGRESS_VAR, c.progress_file),))


def _pytest(c: _Ctx, targets: list[str]) -> _Built:
    stream_file = os.path.join(c.report_dir, STREAM_NAME)
    junit = os.path.join(c.report_dir, "report.xml")
    argv = [*c.tool.argv, "-p", PYTEST_PLUGIN_NAME, f"--junitxml={junit}"]
    inherited = c.env.get("PYTHONPATH")
    plan_env = (
        ("PYTHONPATH", PYTEST_PLUGIN_DIR + (os.pathsep + inherited if inherited else "")),
        ("GREENLOOP_PYTEST_REPORT", c.report_file or ""),
        ("GREENLOOP_PYTEST_JUNIT", junit),
        ("GREENLOOP_PYTEST_STREAM", stream_file),
        (PROGRESS_VAR, c.progress_file),
        *PYTHON_STREAMING,
    )
    if c.options.coverage_map and not targets and not c.options.last_failed and c.options.shard is None \
            and c.affected is None:
        from greenloop.runner import affected_cov

        if affected_cov.recordable(c.tool.argv[0]):
            args, variables = affected_cov.plan_parts(c.report_dir)
            argv += args
            plan_env += variables
    return _Built(argv, targets, env=plan_env, fallback=(junit, "junit"), stream_file=stream_file)


def _mocha(c: _Ctx, targets: list[str]) -> _Built:
    script = _script(c, targets)  # its requires, flags and specs
    argv = [*c.tool.argv, *script.args, "--reporter", MOCHA_REPORTER]
    # mocha splits --reporter-option at commas; a path with one goes by the variable alone
    if "," not in (c.report_file or ","):
        argv += ["--reporter-option", f"output={c.report_file}"]
    stream_file = os.path.join(c.report_dir, STREAM_NAME)
    plan_env = (("GREENLOOP_MOCHA_REPORT", c.report_file or ""), ("GREENLOOP_MOCHA_STREAM", stream_file))
    return _Built(argv, targets, script.notes, plan_env, stream_file=stream_file)


def _bun(c: _Ctx, targets: list[str]) -> _Built:
    script = _script(c, targets)
    argv = [*c.tool.argv, *script.args, "--reporter=junit", f"--reporter-outfile={c.report_file}"]
    if targets:  # (the parser module is not imported before the runner starts without need)
        from greenloop.frameworks.bun import test_files

        targets = [t if t.startswith("-") else test_files([t])[0] for t in targets]
    return _Built(argv, targets, script.notes)


def _unittest(c: _Ctx, targets: list[str]) -> _Built:
    stream_file = os.path.join(c.report_dir, STREAM_NAME)
    # greenloop's runner module in unittest's place: the same arguments and output
    argv = [*c.tool.argv[:-1], UNITTEST_RUNNER_NAME]
    inherited = c.env.get("PYTHONPATH")
    plan_env = (
        ("PYTHONPATH", UNITTEST_RUNNER_DIR + (os.pathsep + inherited if inherited else "")),
        ("GREENLOOP_UNITTEST_REPORT", c.report_file or ""),
        ("GREENLOOP_UNITTEST_STREAM", stream_file),
        *PYTHON_STREAMING,
    )
    notes: list[str] = []
    targets = _unittest_targets(c.root, targets, notes)
    if not targets and not c.options.last_failed:
        argv += c.make.selection  # the Makefile's discovery or modules: the whole suite, as it runs it
    return _Built(argv, targets, tuple(notes), plan_env, stream_file=stream_file)


def _node_test(c: _Ctx, targets: list[str]) -> _Built:
    argv = [
        *c.tool.argv,
        "--test-reporter=spec",
        "--test-reporter-destination=stdout",
        # node's own TAP, through greenloop's reporter when it is there (see NODE_REPORTER)
        f"--test-reporter={NODE_REPORTER}" if os.path.exists(NODE_REPORTER) else "--test-reporter=tap",
        f"--test-reporter-destination={c.report_file}",
        f"--test-reporter={PROGRESS_REPORTERS['node:test']}",
        f"--test-reporter-destination={c.progress_file}",
    ]
    if os.path.exists(NODE_REPORTER):
        stream_file = os.path.join(c.report_dir, STREAM_NAME)
        return _Built(argv, targets, env=(("GREENLOOP_NODE_STREAM", stream_file),), stream_file=stream_file)
    return _Built(argv, targets)


def _go_or_cargo(c: _Ctx, targets: list[str]) -> _Built:
    # live counts come from their output lines; go and cargo place their targets themselves
    # the Makefile's flags always; its packages unless a target, an affected selection or a
    # last_failed rerun chooses what runs
    chosen = targets or ([] if c.options.last_failed else list(c.make.selection))
    argv, native_report, unavailable, notes = _native_plan(
        c.framework, c.root, [*c.make.flags, *chosen], c.options, c.previous, c.timeout_ms, c.which
    )
    plan_env: tuple[tuple[str, str], ...] = ()
    if c.framework == "go":
        from greenloop.frameworks.go_workspace import workspace_env

        go_env, go_notes = workspace_env(c.root, c.env)
        plan_env, notes = tuple(go_env), [*notes, *go_notes]
    if c.options.last_failed:
        notes += native_last_failed_notes(c.previous)
    return _Built(argv, [], tuple(notes), plan_env, report_file=native_report, progress_file="",
                  unavailable=unavailable)


def _npm_test(c: _Ctx, targets: list[str]) -> _Built:
    argv = list(c.tool.argv)
    if targets:
        argv += ["--", *targets] if (c.manager or "npm") == "npm" else targets
    note = "the package.json test script takes no machine reporter; its output is parsed as text"
    return _Built(argv, [], (note,), progress_file="")


_BUILDERS = {
    "vitest": _vitest, "jest": _jest, "pytest": _pytest, "mocha": _mocha, "bun": _bun,
    "unittest": _unittest, "node:test": _node_test, "go": _go_or_cargo, "cargo": _go_or_cargo,
}  # fmt: skip


def _shard(c: _Ctx, shard: ShardInfo, argv: list[str], plan_env: tuple[tuple[str, str], ...],
           notes: list[str]) -> tuple[tuple[str, str], ...]:
    """Add the shard to `argv` (in place) or the environment (returned) in the runner's dialect."""
    spec = f"{shard.index}/{shard.total}"
    framework = c.framework
    if framework in ("vitest", "jest"):
        # A shard may hold no test file when N exceeds the files (both split by file).
        argv += [f"--shard={spec}", "--passWithNoTests"]
    elif framework == "node:test":
        argv.append(f"--test-shard={spec}")
    elif framework == "bun":
        argv.append(f"--shard={spec}")  # bun 1.3 and later; it splits the test files
    elif framework == "pytest":
        plan_env = (*plan_env, ("GREENLOOP_PYTEST_SHARD", spec))
    elif framework != "npm-test":
        raise UsageError(
            f"shard: greenloop does not split {framework} runs yet: give each machine its own "
            "packages or files with --target, then `greenloop merge` needs no shard"
        )
    else:  # npm-test: only through the script's own runner
        runner = script_runner(c.root)
        if runner is None:
            raise UsageError(
                "shard: the package.json test script's runner is not one greenloop can shard "
                "(vitest, jest or node --test as one plain command): run with --framework "
                "vitest|jest|node:test, or split the suite in the script itself"
            )
        if runner == "node:test":
            opt = f"--test-shard={spec}"
            inherited_opts = c.env.get("NODE_OPTIONS")
            opts = f"{inherited_opts} {opt}" if inherited_opts else opt
            plan_env = (*plan_env, ("NODE_OPTIONS", opts))
        else:
            extra = [f"--shard={spec}"]
            # npm passes what follows one `--` to the script; a target may have added it
            argv += ["--", *extra] if (c.manager or "npm") == "npm" and "--" not in argv else extra
        notes.append(f"shard {spec} is passed to the test script's runner, {runner}")
    return plan_env


def _selection(c: _Ctx, targets: list[str], argv: list[str], notes: list[str],
               shard: ShardInfo | None) -> str | None:
    """How the run is narrowed (target, last_failed, shard, affected; None: the whole suite);
    a last_failed rerun's filter goes into `argv`."""
    framework, options = c.framework, c.options
    selection = "target" if targets or (options.target and framework in ("npm-test", "go", "cargo")) else None
    if options.last_failed and framework in ("go", "cargo"):
        if c.previous is not None and c.previous.failures and selection is None:
            selection = "last_failed"
    elif options.last_failed:
        narrowing = last_failed_args(framework, c.root, c.previous, notes)
        argv += narrowing
        if narrowing:
            selection = selection or "last_failed"
    if shard is not None:
        selection = "shard"
    if c.affected is not None:
        selection = None if c.affected.args is None else "affected"  # a fallback ran the whole suite
    return selection


def _target_notes(framework: str, root: str, targets: list[str]) -> list[str]:
    """A note for each target that is not a path in the workspace (a name filter)."""
    notes = []
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
    return notes
