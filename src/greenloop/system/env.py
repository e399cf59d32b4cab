"""The child environment of a test run, built in one place.

A test sees the environment it would see in the shell that started greenloop, changed only
where greenloop must change it to read the runner's results, and every such change is said
in the run's `notes` (`changes`).

- Dropped: the agent markers (CLAUDECODE, AI_AGENT, CURSOR_AGENT, …) that make vitest 4
  switch to its minimal "agent" reporter, GITHUB_ACTIONS (vitest and jest add `::error`
  annotations), and the marker variables of a runner that may be running greenloop itself
  (VITEST, JEST_WORKER_ID, PYTEST_CURRENT_TEST, NODE_TEST_CONTEXT), which would otherwise
  leak into the child's own runner. A shell without them is unchanged.
- Added: nothing for every run. A pytest run gets PYTHONUNBUFFERED=1 (plan.py), so its lines
  reach the output file as tests finish (live progress, and what a run stopped at its
  deadline had seen), and PYTHONPATH gains the folder of greenloop's report plugin.
- Left alone: colour (NO_COLOR, FORCE_COLOR, PY_COLORS, CLICOLOR_FORCE) and CI. A test may
  read them (commander.js asserts on its colour output under NO_COLOR), and CI changes
  behaviour (jest does not write new snapshots under CI). greenloop needs neither: the
  output goes to a file, not a terminal, so runners print no colour unless the shell
  forces it; the machine reports are colour-free; the text parsers strip ANSI codes. No
  runner needs CI=1 to finish: stdin is closed, so none starts a watch mode or a prompt.

Sandboxed and MCP-started runs start from an allow-list instead (ENV_ALLOW, `allowed_env`),
and get their caches redirected to places the mode can write (`cache_env`); `child_env` puts
the two together for one run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from greenloop.layout import PRIVATE_TMP_CACHE, TMP_ROOT, cache_dir

if TYPE_CHECKING:
    from greenloop.system.sandbox import Policy

__all__ = [
    "ADDED",
    "CACHE_VARS",
    "DROPPED",
    "ENV_ALLOW",
    "ENV_ALLOW_PREFIXES",
    "WHY_DOC",
    "allowed_env",
    "cache_env",
    "changes",
    "child_env",
    "without_reporter_switches",
]

DROPPED: tuple[str, ...] = (
    # agent markers that std-env (vitest 4) and other tools read to pick an "agent" reporter
    "AI_AGENT",
    "CLAUDECODE",
    "CLAUDE_CODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CURSOR_AGENT",
    "CURSOR_TRACE_ID",
    "GEMINI_CLI",
    "CODEX_SANDBOX",
    "CODEX_THREAD_ID",
    "OPENCODE",
    "AUGMENT_AGENT",
    "GOOSE_PROVIDER",
    "JUNIE_DATA",
    "JUNIE_SHIM_PATH",
    "COPILOT_AGENT",
    "COPILOT_CLI",
    "REPL_ID",
    # CI annotation modes
    "GITHUB_ACTIONS",
    # a runner running greenloop must not leak its worker identity into the child's runner
    "VITEST",
    "VITEST_MODE",
    "VITEST_POOL_ID",
    "VITEST_WORKER_ID",
    "JEST_WORKER_ID",
    "PYTEST_CURRENT_TEST",
    "PYTEST_VERSION",
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "NODE_TEST_CONTEXT",
)

ADDED: tuple[tuple[str, str], ...] = ()  # nothing for every run (plan.py adds per runner)

# greenloop's own bookkeeping variables (report paths, the process token): no test reads them
_OWN_PREFIX = "GREENLOOP_"


def without_reporter_switches(
    base: Mapping[str, str],
    *,
    add: Iterable[tuple[str, str]] = (),
    drop: Iterable[str] = (),
) -> dict[str, str]:
    """`base` minus DROPPED and `drop`, plus ADDED and `add`: what every run's environment gets.

    `add` wins over ADDED (a plan may set its own values); nothing is read from os.environ
    here: the caller passes the base in.
    """
    dropped = set(DROPPED)
    dropped.update(drop)
    env = {k: v for k, v in base.items() if k not in dropped}
    env.update(ADDED)
    env.update(add)
    return env


# Where a sandboxed run's tools keep their caches (`cache_env`): redirected so the mode can
# write them. A test never reads these, so the note says "caches" instead of naming each.
CACHE_VARS: frozenset[str] = frozenset({
    "npm_config_cache", "XDG_CACHE_HOME", "GOCACHE", "BUN_INSTALL_CACHE_DIR", "CARGO_TARGET_DIR",
    "PLAYWRIGHT_BROWSERS_PATH", "PYTEST_ADDOPTS",
})
# The docs page that says why, by title: a note must not name a path of greenloop's own source
# tree, which a user who installed the wheel does not have.
WHY_DOC = "greenloop's docs, \"Sandboxed runs\""


def changes(base: Mapping[str, str], env: Mapping[str, str]) -> str | None:
    """One note saying how `env` differs from `base` (the shell's environment, or what a
    sandbox's allow-list lets through), or None when a test sees it unchanged.

    It names what a test could notice: each variable removed, each one set (a value of up
    to 8 characters with it), and the tool caches redirected as one item."""
    removed = sorted(k for k in base if k not in env and not k.startswith(_OWN_PREFIX))
    set_: list[str] = []
    caches = False
    for k in sorted(env):
        if k.startswith(_OWN_PREFIX) or base.get(k) == env[k]:
            continue
        old = base.get(k)
        if k in CACHE_VARS:
            caches = True
        elif old is not None and env[k].endswith(old) and len(env[k]) > len(old):
            set_.append(f"{k} (prefixed)")  # PYTHONPATH gains greenloop's pytest plugin folder
        elif len(env[k]) <= 8:
            set_.append(f"{k}={env[k]}")
        else:
            set_.append(k)
    if not removed and not set_ and not caches:
        return None
    parts: list[str] = []
    if removed:
        parts.append("removed " + ", ".join(removed))
    if set_:
        parts.append("set " + ", ".join(set_))
    if caches:
        parts.append("tool caches moved into the sandbox")
    return f"the tests' environment differs from greenloop's: {'; '.join(parts)} (why: {WHY_DOC})"


# --------------------------------------------------------------------------- sandboxed runs

# The variables a sandboxed child inherits; everything else (tokens, keys, agent variables,
# the variables that make runners switch reporters) stays outside. Plan.env adds on top.
ENV_ALLOW: frozenset[str] = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "COLORTERM",
        # what a test may assert on (colour, CI): passed as the shell has them
        "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "PY_COLORS", "CI",
        "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PYTHONPATH", "PYTHONHOME",
        "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
        "NODE_PATH", "NODE_OPTIONS", "NODE_ENV", "NVM_DIR", "NVM_BIN",
        "PYENV_ROOT", "PYENV_VERSION", "VOLTA_HOME", "ASDF_DIR", "ASDF_DATA_DIR", "FNM_DIR",
        "FNM_MULTISHELL_PATH", "UV_PYTHON_INSTALL_DIR",
        "JAVA_HOME", "GOPATH", "GOROOT", "GOFLAGS", "CARGO_HOME", "RUSTUP_HOME",
        "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
        "LD_LIBRARY_PATH", "PLAYWRIGHT_BROWSERS_PATH",
        # Go and Rust toolchains, by name: a GO*/CARGO_* prefix would also let credentials
        # through (CARGO_REGISTRY_TOKEN, GOOGLE_APPLICATION_CREDENTIALS)
        "GOMODCACHE", "GOPROXY", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOTOOLCHAIN",
        "GOWORK", "GOOS", "GOARCH", "GOAMD64", "GODEBUG", "GOEXPERIMENT", "CGO_ENABLED", "GOCACHE",
        "CARGO_TARGET_DIR", "CARGO_BUILD_JOBS", "CARGO_BUILD_TARGET", "CARGO_INCREMENTAL",
        "CARGO_NET_OFFLINE", "CARGO_TERM_COLOR", "RUSTUP_TOOLCHAIN", "RUSTFLAGS", "RUSTDOCFLAGS",
        "RUST_BACKTRACE", "RUST_TEST_THREADS", "RUST_MIN_STACK", "NEXTEST_PROFILE",
    }
)  # fmt: skip
ENV_ALLOW_PREFIXES: tuple[str, ...] = ("LC_", "PYTEST_", "GREENLOOP_")

_TMP_VARS = ("TMPDIR", "TMP", "TEMP", "TEMPDIR")


def cache_env(policy: Policy, base_env: Mapping[str, str], *, tmp: str | None = None) -> dict[str, str]:
    """Cache locations redirected to places the mode can write (npm, XDG, pytest, Go, Cargo, TMPDIR).

    workspace-write: under the workspace's `.greenloop/cache/` (kept between runs);
    read-only: under the private temporary folder (gone with the run). That folder is /tmp
    inside bubblewrap; without bubblewrap it is the run's own folder `tmp`, which TMPDIR, TMP,
    TEMP and TEMPDIR then name.
    """
    if not policy.sandboxed:
        return {}
    private = tmp or TMP_ROOT
    base = (
        os.fspath(cache_dir(policy.workspace_root))
        if policy.workspace_writable
        else (os.path.join(tmp, "cache") if tmp else PRIVATE_TMP_CACHE)
    )
    env = {"TMPDIR": private}
    if tmp:
        env.update(dict.fromkeys(_TMP_VARS, tmp))
    env["npm_config_cache"] = os.path.join(base, "npm")
    env["XDG_CACHE_HOME"] = os.path.join(base, "xdg")
    # Go's build cache must be writable; the module cache (GOMODCACHE) and CARGO_HOME are only
    # read, from where they are. Cargo builds into the workspace's target/ unless the
    # workspace is read-only.
    env["GOCACHE"] = os.path.join(base, "go-build")
    if not policy.workspace_writable:
        env["CARGO_TARGET_DIR"] = os.path.join(base, "cargo-target")
    env["BUN_INSTALL_CACHE_DIR"] = os.path.join(base, "bun")  # bun's module cache (bun test, bunx)
    # Playwright finds its browsers under the XDG cache; they stay where they are (read-only).
    home = base_env.get("HOME") or os.path.expanduser("~")
    browsers = os.path.join(base_env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "ms-playwright")
    if "PLAYWRIGHT_BROWSERS_PATH" not in base_env and os.path.isdir(browsers):
        env["PLAYWRIGHT_BROWSERS_PATH"] = browsers
    if not policy.workspace_writable:
        # pytest keeps .pytest_cache in the (now read-only) rootdir; point it at /tmp instead.
        addopts = base_env.get("PYTEST_ADDOPTS", "")
        env["PYTEST_ADDOPTS"] = f"{addopts} -o cache_dir={base}/pytest".strip()
    return env


def allowed_env(base_env: Mapping[str, str], policy: Policy) -> dict[str, str]:
    """What a run inherits before greenloop's own changes: the allow-list when sandboxed."""
    if not policy.sandboxed:
        return dict(base_env)
    base = {k: v for k, v in base_env.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIXES)}
    base.setdefault("PATH", os.defpath)
    return base


def child_env(
    base_env: Mapping[str, str],
    policy: Policy,
    *,
    add: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    drop: Iterable[str] = (),
    tmp: str | None = None,
) -> dict[str, str]:
    """A run's child environment under its policy.

    Sandboxed modes start from the allow-list; full-access inherits `base_env`. Either way
    `without_reporter_switches` then drops the variables that change runners' output and those
    in `drop`, adds its fixed variables and the plan's `add`; last come the cache redirections
    the mode needs (`tmp`: the run's private temporary folder when it is not bubblewrap's /tmp).
    """
    base = allowed_env(base_env, policy)
    pairs = tuple(add.items()) if isinstance(add, Mapping) else tuple(add)
    env = without_reporter_switches(base, add=pairs, drop=drop)
    env.update(cache_env(policy, {**base_env, **env}, tmp=tmp))  # the original XDG_CACHE_HOME, new addopts
    return env
