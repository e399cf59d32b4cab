"""The cargo half of planning a run: `cargo test` or `cargo nextest run` arguments (`-p`
packages, `--test` files, test filters, `-- --exact` for a rerun of the failing tests)."""

from __future__ import annotations

import glob
import os
import re
from typing import Any

from greenloop.model import Failure

__all__ = ["NEXTEST_PROFILE", "NEXTEST_TOOL_CONFIG", "package_names", "plan_args"]

# greenloop's nextest settings (a tool config, lower priority than the repository's own
# .config/nextest.toml): the default profile writes a JUnit report, to
# <workspace>/target/nextest/default/junit.xml. A tool config only adds to existing profiles
# here, so the default profile is the one run, named so NEXTEST_PROFILE cannot move it.
NEXTEST_TOOL_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nextest.toml")
NEXTEST_PROFILE = "default"


def package_names(root: str) -> list[str]:
    """The package names of the crate or workspace at `root` (Cargo.toml and its members)."""
    names: list[str] = []

    def read(folder: str) -> dict[str, Any]:
        from greenloop.config import read_toml  # local: only a cargo plan reads TOML

        try:
            return read_toml(os.path.join(folder, "Cargo.toml"))[0]
        except Exception:  # missing or invalid: no names from it (cargo itself says why)
            return {}

    top = read(root)
    pkg = top.get("package")
    if isinstance(pkg, dict) and isinstance(pkg.get("name"), str):
        names.append(pkg["name"])
    ws = top.get("workspace")
    members = ws.get("members") if isinstance(ws, dict) else None
    for pattern in members if isinstance(members, list) else []:
        for folder in sorted(glob.glob(os.path.join(root, str(pattern)))):
            sub = read(folder).get("package")
            if isinstance(sub, dict) and isinstance(sub.get("name"), str):
                names.append(sub["name"])
    return list(dict.fromkeys(names))


def plan_args(
    root: str, targets: list[str], failures: list[Failure] | None, nextest: bool
) -> tuple[list[str], list[str]]:
    """(arguments after `cargo`, notes). A target that names a package becomes `-p NAME`,
    `tests/NAME.rs` becomes `--test NAME`, a flag stays a cargo flag, anything else is a test
    path filter; a last_failed rerun passes
    the failing tests' exact paths with `--exact`."""
    notes: list[str] = []
    if nextest:
        args = [
            "nextest",
            "run",
            "--no-fail-fast",
            "--tool-config-file",
            f"greenloop:{NEXTEST_TOOL_CONFIG}",
            "--profile",
            NEXTEST_PROFILE,
        ]
    else:
        args = ["test", "--no-fail-fast"]
    packages = set(package_names(root))
    filters: list[str] = []
    for token in targets:
        if token.startswith("-"):
            args.append(token)
        elif token in packages:
            args += ["-p", token]
        elif re.match(r"^(?:\./)?tests/[\w-]+\.rs$", token):  # an integration test file
            args += ["--test", token.rsplit("/", 1)[-1][:-3]]
        else:
            filters.append(token)
    exact = False
    if failures:
        names = [f.test for f in failures if f.kind != "load" and f.test]
        if names and not filters:
            filters, exact = list(dict.fromkeys(names)), True
    if filters or exact:
        args.append("--")
        if exact:
            args.append("--exact")
        args += filters
    return args, notes
