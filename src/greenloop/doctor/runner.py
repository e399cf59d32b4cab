"""Doctor checks of the test runner: the framework the probe finds and the runner the plan would start.

Each runner's version is asked without running the suite (`<python> -m pytest --version`,
`node --version`, `npm --version`), or read from node_modules/<runner>/package.json."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from greenloop.doctor.report import Check

__all__ = ["JS_FRAMEWORKS", "MIN_NODE_MAJOR", "runner_checks"]

VERSION_TIMEOUT_S = 30.0  # a version query starts an interpreter or node once; generous on a busy machine
MIN_NODE_MAJOR = 20
JS_FRAMEWORKS = ("vitest", "jest", "node:test", "npm-test")


def _query(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int | None, str]:
    """(exit code, stdout + stderr) of a version query, through greenloop.system.proc (the one
    process module).

    It runs in an empty temporary folder, so `pytest --version` loads none of the workspace's
    conftest.py files: the question is which runner is installed, not whether the suite imports.
    """
    from greenloop.system import proc

    with tempfile.TemporaryDirectory(prefix="greenloop-doctor-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        raw = proc.run_to_completion(
            list(argv), cwd=tmp, env=env, timeout_s=VERSION_TIMEOUT_S, stdout_path=out, stderr_path=err
        )
        text = Path(out).read_text(errors="replace") + Path(err).read_text(errors="replace")
    if raw.spawn_error:
        return None, raw.spawn_error
    if raw.timed_out:
        return None, f"no answer within {VERSION_TIMEOUT_S:.0f}s"
    return raw.exit_code, text.strip()


def _query_env(env: Mapping[str, str]) -> dict[str, str]:
    from greenloop.system.env import without_reporter_switches

    return without_reporter_switches(env)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def _js_version(tool_path: str, package: str) -> str | None:
    """The version in node_modules/<package>/package.json beside node_modules/.bin/<tool>."""
    bin_dir = os.path.dirname(tool_path)
    if os.path.basename(bin_dir) != ".bin":
        return None
    try:
        with open(os.path.join(os.path.dirname(bin_dir), package, "package.json"), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return str(version) if version else None


def _node_check(env: Mapping[str, str]) -> Check:
    node = shutil.which("node", path=env.get("PATH") or os.defpath)
    if node is None:
        return Check(
            "runner", "node", "fail", "node is not on PATH", f"install Node.js {MIN_NODE_MAJOR} or later"
        )
    code, text = _query([node, "--version"], _query_env(env))
    m = re.search(r"v(\d+)\.\d+\.\d+", text)
    if code != 0 or m is None:
        return Check(
            "runner",
            "node",
            "fail",
            f"`{node} --version` failed: {_last_line(text)}",
            f"reinstall Node.js {MIN_NODE_MAJOR} or later",
        )
    if int(m.group(1)) < MIN_NODE_MAJOR:
        return Check(
            "runner",
            "node",
            "fail",
            f"node {m.group(0)} at {node} is too old",
            f"install Node.js {MIN_NODE_MAJOR} or later",
        )
    return Check("runner", "node", "ok", f"node {m.group(0)} at {node}")


def _pytest_check(root: str, env: Mapping[str, str]) -> Check:
    from greenloop.runner.toolchain import python_runner

    argv, notes, unavailable = python_runner(root, env)
    where = "; ".join(notes)
    if unavailable:
        return Check("runner", "pytest", "fail", unavailable.split(": run ")[0], _fix_of(unavailable))
    if argv[0] in ("uv", "poetry"):
        # `uv run` / `poetry run` would sync the environment first: not a question to ask here.
        return Check("runner", "pytest", "ok", f"{shlex.join(argv)} ({where}; version not asked)")
    code, text = _query([*argv, "--version"], _query_env(env))
    m = re.search(r"pytest (\d+\.\d+\S*)", text)
    if code != 0 or m is None:
        return Check(
            "runner",
            "pytest",
            "fail",
            f"`{shlex.join([*argv, '--version'])}` failed: {_last_line(text)}",
            f"reinstall it: `{argv[0]} -m pip install --force-reinstall pytest`",
        )
    suffix = f" ({where})" if where else ""
    return Check("runner", "pytest", "ok", f"pytest {m.group(1)}: {shlex.join(argv)}{suffix}")


def _fix_of(unavailable: str) -> str:
    """The fix half of a plan's 'X is not installed: run `…`' message."""
    _, sep, rest = unavailable.partition(": run ")
    return ("run " + rest) if sep else unavailable


def _js_check(framework: str, root: str, manager: str | None) -> Check:
    from greenloop.runner.toolchain import js_runner

    tool = js_runner(root, framework, manager)
    if tool.unavailable:
        return Check(
            "runner", framework, "fail", tool.unavailable.split(": run ")[0], _fix_of(tool.unavailable)
        )
    version = _js_version(tool.argv[0], framework)
    shown = f"{framework} {version}" if version else framework
    extra = f" ({'; '.join(tool.notes)})" if tool.notes else ""
    return Check("runner", framework, "ok", f"{shown}: {tool.argv[0]}{extra}")


def _npm_test_check(manager: str | None, env: Mapping[str, str]) -> Check:
    pm = manager or "npm"
    found = shutil.which(pm, path=env.get("PATH") or os.defpath)
    if found is None:
        return Check(
            "runner",
            "npm-test",
            "fail",
            f"{pm} is not on PATH",
            f"install {pm} (npm comes with Node.js; pnpm, yarn and bun install with `npm install -g {pm}`)",
        )
    code, text = _query([found, "--version"], _query_env(env))
    version = _last_line(text) if code == 0 else "version unknown"
    return Check(
        "runner", "npm-test", "ok", f"the package.json test script runs with {pm} {version} ({found})"
    )


def runner_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    """The framework found in `workspace`, and the runner (and Node) a run would start."""
    from greenloop.runner.probe import probe

    detection = probe(workspace, files=False)
    if detection.framework is None:
        if detection.suites:
            roots = ", ".join(s.root for s in detection.suites[:5])
            return [
                Check(
                    "runner",
                    "framework",
                    "ok",
                    f"no runner at the root; {len(detection.suites)} test roots: {roots}",
                    None,
                )
            ]
        return [
            Check(
                "runner",
                "framework",
                "warn",
                f"no test framework found in {workspace}",
                "add tests (or a runner to package.json / pytest to pyproject.toml), "
                "or pass --framework NAME or --command CMD to greenloop run",
            )
        ]
    config = f" ({detection.config_path})" if detection.config_path else ""
    checks = [Check("runner", "framework", "ok", f"{detection.framework}{config}")]
    fw = detection.framework
    if fw in JS_FRAMEWORKS:
        checks.append(_node_check(env))
    if fw == "pytest":
        checks.append(_pytest_check(detection.root, env))
    elif fw in ("vitest", "jest"):
        checks.append(_js_check(fw, detection.root, detection.package_manager))
    elif fw == "npm-test":
        checks.append(_npm_test_check(detection.package_manager, env))
    return checks
