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
from greenloop.runner.toolchain import CARGO_MISSING, GO_MISSING, Which, runner_command

if TYPE_CHECKING:
    from greenloop.runner.affected import Changes

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
    plan_env: tuple[tuple[str, str], ...] = ()
    fallback: tuple[str | None, str | None] = (None, None)
    stream_file: str | None = None
    progress_file = os.path.join(report_dir, PROGRESS_NAME)
    affected = None
    if options.affected is not None:  # the affected tests in the runner's own dialect
        from greenloop.runner.affected import select

        affected = select(framework, root, options.affected)
        notes += affected.notes
        if affected.args is not None:
            targets = list(affected.args)

    tool = runner_command(framework, root, manager, env, which, interpreter=interpreter)
    notes += tool.notes
    unavailable = tool.unavailable
    if framework in ("vitest", "jest", "bun"):  # the test script's own arguments (script_args.py)
        from greenloop.runner.script_args import script_args

        script = script_args(framework, root, narrowed=bool(targets))
        notes += script.notes
    if framework == "vitest":
        argv = list(tool.argv)
        if affected is not None and affected.args and argv[-1:] == ["run"]:
            argv[-1] = "related"  # `vitest related <files> --run`: the files' own import graph
            targets = [*targets, "--run"]
        argv += [*script.args, "--reporter=default", "--reporter=json"]
        argv += [f"--reporter={PROGRESS_REPORTERS['vitest']}", f"--outputFile.json={report_file}"]
        plan_env = ((PROGRESS_VAR, progress_file),)
    elif framework == "jest":
        # --reporters replaces the configured ones for this run: default keeps jest's own
        # output (the text fallback), greenloop's adds per-test progress. jest's --reporters
        # is a list that takes every word up to the next option, so it comes before --json:
        # a target or a last_failed file after it would be read as a reporter module.
        argv = [*tool.argv, *script.args, "--reporters=default", f"--reporters={PROGRESS_REPORTERS['jest']}"]
        argv += ["--json", f"--outputFile={report_file}"]
        plan_env = ((PROGRESS_VAR, progress_file),)
    elif framework == "pytest":
        stream_file = os.path.join(report_dir, STREAM_NAME)
        fallback = (os.path.join(report_dir, "report.xml"), "junit")
        argv = [*tool.argv, "-p", PYTEST_PLUGIN_NAME, f"--junitxml={fallback[0]}"]
        inherited = env.get("PYTHONPATH")
        plan_env = (
            ("PYTHONPATH", PYTEST_PLUGIN_DIR + (os.pathsep + inherited if inherited else "")),
            ("GREENLOOP_PYTEST_REPORT", report_file or ""),
            ("GREENLOOP_PYTEST_JUNIT", fallback[0]),
            ("GREENLOOP_PYTEST_STREAM", stream_file),
            (PROGRESS_VAR, progress_file),
            *PYTHON_STREAMING,
        )
    elif framework == "mocha":
        from greenloop.runner.script_args import mocha_script_args

        script = mocha_script_args(root, narrowed=bool(targets))  # its requires, flags and specs
        notes += script.notes
        argv = [*tool.argv, *script.args, "--reporter", MOCHA_REPORTER]
        # mocha splits --reporter-option at commas; a path with one goes by the variable alone
        if "," not in (report_file or ","):
            argv += ["--reporter-option", f"output={report_file}"]
        stream_file = os.path.join(report_dir, STREAM_NAME)
        plan_env = (("GREENLOOP_MOCHA_REPORT", report_file or ""), ("GREENLOOP_MOCHA_STREAM", stream_file))
    elif framework == "bun":
        argv = [*tool.argv, *script.args, "--reporter=junit", f"--reporter-outfile={report_file}"]
        if targets:  # (the parser module is not imported before the runner starts without need)
            from greenloop.frameworks.bun import test_files

            targets = [t if t.startswith("-") else test_files([t])[0] for t in targets]
    elif framework == "unittest":
        stream_file = os.path.join(report_dir, STREAM_NAME)
        # greenloop's runner module in unittest's place: the same arguments and output
        argv = [*tool.argv[:-1], UNITTEST_RUNNER_NAME]
        inherited = env.get("PYTHONPATH")
        plan_env = (
            ("PYTHONPATH", UNITTEST_RUNNER_DIR + (os.pathsep + inherited if inherited else "")),
            ("GREENLOOP_UNITTEST_REPORT", report_file or ""),
            ("GREENLOOP_UNITTEST_STREAM", stream_file),
            *PYTHON_STREAMING,
        )
        targets = _unittest_targets(root, targets, notes)
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
            plan_env = (("GREENLOOP_NODE_STREAM", stream_file),)
    elif framework in ("go", "cargo"):
        progress_file = ""  # live counts come from their output lines
        argv, native_report, unavailable, native_notes = _native_plan(
            framework, root, targets, options, previous, timeout_ms, which
        )
        if framework == "go":
            from greenloop.frameworks.go_workspace import workspace_env

            go_env, go_notes = workspace_env(root, env)
            plan_env, native_notes = tuple(go_env), [*native_notes, *go_notes]
        if framework == "cargo":
            report_file = native_report
        notes += native_notes
        targets = []  # go and cargo place their targets themselves
        if options.last_failed:
            notes += native_last_failed_notes(previous)
    else:  # npm-test
        progress_file = ""
        argv = list(tool.argv)
        if targets:
            argv += ["--", *targets] if (manager or "npm") == "npm" else targets
            targets = []
        notes.append("the package.json test script takes no machine reporter; its output is parsed as text")

    shard = options.shard
    if shard is not None:
        # the shard names what it splits, so `greenloop merge` names the merged run's selection
        picked = (options.target or "").strip() or None
        shard = ShardInfo(shard.index, shard.total, shard.commit, target=picked)
        spec = f"{shard.index}/{shard.total}"
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
                plan_env = (*plan_env, ("NODE_OPTIONS", opts))
            else:
                extra = [f"--shard={spec}"]
                # npm passes what follows one `--` to the script; a target may have added it
                argv += ["--", *extra] if (manager or "npm") == "npm" and "--" not in argv else extra
            notes.append(f"shard {spec} is passed to the test script's runner, {runner}")
    selection = "target" if targets or (options.target and framework in ("npm-test", "go", "cargo")) else None
    if options.last_failed and framework in ("go", "cargo"):
        if previous is not None and previous.failures and selection is None:
            selection = "last_failed"
    elif options.last_failed:
        narrowing = last_failed_args(framework, root, previous, notes)
        argv += narrowing
        if narrowing:
            selection = selection or "last_failed"
    if shard is not None:
        selection = "shard"
    if affected is not None:
        selection = None if affected.args is None else "affected"  # a fallback ran the whole suite
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
        env=plan_env,
        report_file=report_file,
        report_format=report_format(framework, dialect, report_file),
        fallback_report_file=fallback[0],
        fallback_report_format=fallback[1],
        notes=tuple(notes),
        unavailable=unavailable,
        selection=selection,
        shard=shard,
        stream_file=stream_file,
        progress_file=progress_file or None,
        affected=affected.info if affected is not None else None,
        nothing=affected.nothing if affected is not None else None,
    )
