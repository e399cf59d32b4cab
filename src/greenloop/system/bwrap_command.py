"""The bubblewrap command line that confines a run, and the binds it needs.

Read-only binds of the system, a writable (or read-only) bind of the workspace, `--tmpfs /tmp`
(re-showing the workspace and the runner's toolchain when they live under /tmp: `tmp_roots`),
`--unshare-net` (loopback only), `--unshare-pid` with `--die-with-parent` (nothing the run
starts can outlive it), `--new-session` and `--cap-drop ALL`. Only argv is computed here;
starting processes is proc.py's job.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from greenloop.layout import PACKAGE_DIR, PRIVATE_TMP_CACHE, TMP_ROOT, is_under

if TYPE_CHECKING:
    from greenloop.system.sandbox import Policy

__all__ = ["tmp_roots", "wrap_argv"]


def _tool_root(path: str) -> str:
    """The installation a tool belongs to: the `node_modules` folder holding it, the prefix
    above `bin/`, else its own folder."""
    parts = path.split(os.sep)
    if "node_modules" in parts[:-1]:
        return os.sep.join(parts[: parts.index("node_modules") + 1])
    folder = os.path.dirname(path)
    if os.path.basename(folder) in ("bin", "Scripts"):
        prefix = os.path.dirname(folder)
        if prefix not in (TMP_ROOT, "/"):
            return prefix
    return folder


# Where toolchain managers keep their installs and caches (read by the runner, never written
# by it under the sandbox): each variable names a folder or a PATH-like list.
_TOOLCHAIN_VARS = (
    "VIRTUAL_ENV", "CONDA_PREFIX", "PYENV_ROOT", "NVM_DIR", "NVM_BIN", "VOLTA_HOME", "ASDF_DATA_DIR",
    "ASDF_DIR", "FNM_DIR", "FNM_MULTISHELL_PATH", "UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR",
    "UV_TOOL_DIR", "npm_config_prefix", "NODE_PATH", "PYTHONPATH", "JAVA_HOME", "GOROOT",
    "GOPATH", "GOMODCACHE", "CARGO_HOME", "RUSTUP_HOME",
)  # fmt: skip


def _python_home(root: str) -> list[str]:
    """A virtualenv's base interpreter prefix (`home` in its pyvenv.cfg), resolved."""
    try:
        with open(os.path.join(root, "pyvenv.cfg"), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition("=")
                if key.strip() == "home" and value.strip():
                    home = value.strip()
                    return [_tool_root(os.path.join(home, "x")), _tool_root(os.path.realpath(home) + "/x")]
    except OSError:
        pass
    return []


def tmp_roots(argv0: str | None, env: Mapping[str, str], cwd: str = ".") -> list[str]:
    """Folders under /tmp that a private /tmp must still show: the runner's installation (as
    named and as resolved, a virtualenv's base interpreter too), folders the working folder
    links to, PATH entries and the toolchain managers' folders (_TOOLCHAIN_VARS) that live there.
    """
    candidates: list[str] = []
    if argv0:
        found = argv0 if "/" in argv0 else shutil.which(argv0, path=env.get("PATH") or os.defpath)
        if found:
            found = os.path.abspath(os.path.join(cwd, found))
            for root in (_tool_root(found), _tool_root(os.path.realpath(found))):
                # a venv linked into the workspace: its own folder resolved, and its base Python
                candidates += [root, os.path.realpath(root), *_python_home(os.path.realpath(root))]
    # A workspace whose node_modules or virtualenv is a link to a folder under /tmp (a shared
    # install, a monorepo's hoisted modules) must still see the whole linked installation.
    try:
        with os.scandir(cwd) as links:
            for link in links:
                if link.is_symlink():
                    real = os.path.realpath(link.path)
                    candidates += [real, *_python_home(real)]
    except OSError:
        pass
    for entry in (env.get("PATH") or "").split(os.pathsep):
        if entry and os.path.isabs(entry):
            candidates += [_tool_root(os.path.join(entry, "x")), _tool_root(os.path.realpath(entry) + "/x")]
    for var in _TOOLCHAIN_VARS:
        for entry in (env.get(var) or "").split(os.pathsep):
            if entry and os.path.isabs(entry):
                candidates += [entry, os.path.realpath(entry)]
    # greenloop's own files that runners load (the pytest plugin, the vitest/jest/node/mocha
    # reporters, the unittest runner) live in its package folder: a checkout or virtualenv
    # under /tmp (CI, tox) must still show it.
    package = PACKAGE_DIR
    candidates += [package, os.path.realpath(package)]
    roots: list[str] = []
    for c in candidates:
        c = os.path.normpath(c)
        if is_under(c, TMP_ROOT) and c != TMP_ROOT and os.path.exists(c) and c not in roots:
            roots.append(c)
    return roots


def wrap_argv(
    argv: Sequence[str],
    policy: Policy,
    *,
    share_net: bool = False,
    cwd: str | None = None,
    readable: Iterable[str] = (),
    writable: Iterable[str] = (),
    bwrap: str = "bwrap",
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The command line that runs `argv` under `policy` (unchanged for full-access).

    `readable` are extra folders to re-show read-only (only those under /tmp need it), on top
    of the toolchain of `argv[0]` that `tmp_roots` finds from `env` (default: this process's
    environment), so a command run by an interpreter under /tmp always finds it. `writable` are
    extra folders to bind writable (for example the run folder where a runner writes its report
    in read-only mode; they must exist). `share_net=True` keeps the host's network namespace:
    the integration runner uses it so its units still reach each other over loopback, with the
    filesystem still confined.
    """
    if not policy.sandboxed:
        return list(argv)
    ws = policy.workspace_root
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", TMP_ROOT]
    toolchain = tmp_roots(argv[0] if argv else None, os.environ if env is None else env, cwd or ws)
    # Parents before children, so a bind inside another one lands on top of it.
    binds: list[tuple[str, str]] = []
    for path in (*readable, *toolchain):
        real = os.path.realpath(path)
        if is_under(real, TMP_ROOT) and real != TMP_ROOT and not is_under(real, ws):
            binds.append(("--ro-bind", real))
    binds.append(("--bind" if policy.workspace_writable else "--ro-bind", ws))
    for path in writable:
        real = os.path.realpath(path)
        if policy.workspace_writable and is_under(real, ws):
            continue
        binds.append(("--bind", real))
    seen: set[str] = set()
    for flag, path in sorted(binds, key=lambda b: (b[1].count("/"), b[1])):
        if path in seen:
            continue
        seen.add(path)
        out += [flag, path, path]
    if not policy.workspace_writable:
        out += ["--dir", PRIVATE_TMP_CACHE]
    if not share_net:
        out.append("--unshare-net")
    out += ["--unshare-pid", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    out += ["--chdir", os.path.realpath(cwd or ws), "--"]
    return out + list(argv)
