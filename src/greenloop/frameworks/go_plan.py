"""The Go half of planning a run: `go test` arguments (`-json`, a `-timeout` a little under
greenloop's, `-run` per subtest level, and the packages: the targets, the failing tests'
packages, or every module of a go.work)."""

from __future__ import annotations

import os
import re

from greenloop.frameworks.go_workspace import workspace_patterns
from greenloop.model import Failure

__all__ = ["go_timeout", "plan_args", "run_pattern"]

# Go runs TestXxx where Xxx does not start with a lower-case letter
_TEST_NAME = re.compile(r"^(?:Test|Example|Fuzz)(?:[A-Z_0-9][^./\s]*)?(?:/\S+)?$")
_RE2_SPECIAL = re.compile(r"[\\.+*?()|\[\]{}^$]")  # RE2 rejects escapes of other characters


def run_pattern(names: list[str]) -> str:
    """The `-run` regex of tests named like `TestA` or `TestTable/case`: one alternation per level."""
    levels: list[list[str]] = []
    for name in dict.fromkeys(names):
        for i, part in enumerate(name.split("/")):
            if len(levels) <= i:
                levels.append([])
            if part not in levels[i]:
                levels[i].append(part)
    return "/".join("^(" + "|".join(_RE2_SPECIAL.sub(r"\\\g<0>", p) for p in lv) + ")$" for lv in levels)



def go_timeout(timeout_ms: int) -> str:
    """go test's own -timeout, a little under greenloop's: Go then panics with the hung test's
    stack (`panic: test timed out after`), which names it, before greenloop stops the tree."""
    margin = min(max(timeout_ms // 10, 500), 5000)
    return f"-timeout={max(timeout_ms - margin, 500)}ms"


def _has_tests(folder: str) -> bool:
    try:
        return any(n.endswith("_test.go") for n in os.listdir(folder))
    except OSError:
        return False


def plan_args(
    root: str, targets: list[str], failures: list[Failure] | None, timeout_ms: int
) -> tuple[list[str], list[str]]:
    """(arguments after `go test`, notes): `-json`, the timeout, `-run` for target tokens named
    like tests (`TestSub`, `TestTable/case`) or a last_failed rerun, and the packages (the
    other targets, the failing tests' packages, or every module's `./...`)."""
    notes: list[str] = []
    args = ["-json", go_timeout(timeout_ms)]
    flags = [t for t in targets if t.startswith("-")]
    # a token named like a test (TestX, TestX/case) selects tests by name, anything else is a package
    names = [t for t in targets if _TEST_NAME.match(t)]
    packages = [t for t in targets if not t.startswith("-") and t not in names]
    for token in packages:
        local = token.removesuffix("/...") or "."
        if token.startswith(".") and not os.path.isdir(os.path.join(root, local)):
            notes.append(
                f"target {token!r} is not a folder in the workspace; go test takes packages such as ./pkg/..."
            )
    if names:
        args += ["-run", run_pattern(names)]
    elif failures:
        failing = [f.test for f in failures if f.kind != "load" and f.test]
        if failing:
            args += ["-run", run_pattern(failing)]
        if not packages:
            dirs: list[str] = []
            for f in failures:
                folder = os.path.dirname(f.file) if f.file and not os.path.isabs(f.file) else None
                if f.kind == "load" or folder is None or not _has_tests(os.path.join(root, folder)):
                    dirs = []
                    break
                dirs.append("./" + folder if folder else ".")
            packages = list(dict.fromkeys(dirs))
    return [*args, *flags, *(packages or workspace_patterns(root))], notes
