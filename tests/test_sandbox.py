"""Sandbox policy: mode names, resolution order, the bwrap argv, the child environment, hints.

These need no bubblewrap; tests/test_sandbox_bwrap.py runs real sandboxes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from greenloop.cli import main
from greenloop.closure.store import Store
from greenloop.errors import ConfigError, UsageError
from greenloop.layout import PACKAGE_DIR
from greenloop.model import Failure, Plan
from greenloop.result import SandboxInfo
from greenloop.system import bwrap_command, denials, enforcers, launcher, sandbox
from greenloop.system.env import child_env
from greenloop.system.sandbox import Policy


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Keep the machine's user config out of resolution.
    monkeypatch.setenv("GREENLOOP_CONFIG_HOME", str(tmp_path / "user-config"))
    monkeypatch.delenv("GREENLOOP_CONFIG_PATCH", raising=False)
    w = tmp_path / "ws"
    w.mkdir()
    (w / ".git").mkdir()  # the state database lives at the repository root
    return w


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize(
    "name", ["read-only", "workspace-write", "full-access", "Read_Only", " full-access "]
)
def test_parse_mode_accepts_the_three_modes(name: str) -> None:
    assert sandbox.parse_mode(name) in sandbox.MODES


@pytest.mark.parametrize("name", ["bogus", "", "none", None, 3])
def test_unknown_mode_is_bad_input_naming_it_and_listing_modes(name: object) -> None:
    with pytest.raises(UsageError) as info:
        sandbox.parse_mode(name, field="--sandbox")
    msg = str(info.value)
    assert repr(name) in msg and "--sandbox" in msg
    for mode in sandbox.MODES:
        assert mode in msg
    assert info.value.exit_code == 2


# --------------------------------------------------------------------------- resolution


def test_resolution_order_explicit_then_session_then_config(tmp_path: Path) -> None:
    r = sandbox.resolve(tmp_path, explicit="full-access", session_mode="read-only", default="workspace-write")
    assert (r.mode, r.source) == ("full-access", "explicit")
    r = sandbox.resolve(tmp_path, explicit=None, session_mode="read-only", default="full-access")
    assert (r.mode, r.source) == ("read-only", "session")
    r = sandbox.resolve(tmp_path, explicit=None, session_mode=None, default="full-access")
    assert (r.mode, r.source) == ("full-access", "config")
    assert sandbox.resolve(tmp_path).mode == "auto"  # the deployment default
    assert r.workspace_root == os.path.realpath(tmp_path)


def test_resolution_tolerates_a_corrupt_session_value_and_rejects_bad_config(tmp_path: Path) -> None:
    assert sandbox.resolve(tmp_path, session_mode="garbage", default="read-only").source == "config"
    with pytest.raises(UsageError):
        sandbox.resolve(tmp_path, explicit="garbage", session_mode="read-only")
    with pytest.raises(ConfigError, match="sandbox"):
        sandbox.resolve(tmp_path, default="garbage")


def test_resolution_from_real_sources_with_all_three_present(ws: Path) -> None:
    (ws / "greenloop.toml").write_text('sandbox = "full-access"\n')
    with Store(ws) as st:
        st.record_sandbox_mode("s1", "workspace-write")
        st.record_sandbox_mode("s1", "read-only")  # the latest event wins
        st.record_sandbox_mode("other", "workspace-write")
    env = dict(os.environ)
    # explicit > session > config
    p = sandbox.resolve_for(ws, explicit="workspace-write", session_id="s1", env=env)
    assert (p.mode, p.source) == ("workspace-write", "explicit")
    p = sandbox.resolve_for(ws, session_id="s1", env=env)
    assert (p.mode, p.source) == ("read-only", "session")
    p = sandbox.resolve_for(ws, session_id="nobody", env=env)
    assert (p.mode, p.source) == ("full-access", "config")
    p = sandbox.resolve_for(ws, env=env)
    assert (p.mode, p.source) == ("full-access", "config")
    assert p.workspace_root == os.path.realpath(ws)


def test_resolution_reads_no_state_into_existence(ws: Path) -> None:
    p = sandbox.resolve_for(ws, session_id="s1", env=dict(os.environ))
    assert (p.mode, p.source) == ("auto", "config")
    assert not (ws / ".greenloop").exists()


def test_policy_json_round_trip(tmp_path: Path) -> None:
    p = sandbox.resolve(tmp_path, session_mode="read-only")
    assert Policy.from_json(json.loads(json.dumps(p.to_json()))) == p
    assert p.to_json()["network"] == "loopback"
    assert sandbox.resolve(tmp_path, explicit="full-access").network == "host"
    info = p.info("bubblewrap 0.8.0")
    assert info == SandboxInfo("read-only", "bubblewrap 0.8.0", p.workspace_root)


# --------------------------------------------------------------------------- argv


def _pairs(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_full_access_leaves_the_command_alone(tmp_path: Path) -> None:
    p = sandbox.resolve(tmp_path, explicit="full-access")
    assert bwrap_command.wrap_argv(["pytest", "-q"], p) == ["pytest", "-q"]


def test_workspace_write_argv(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    tool = tmp_path / "venv" / "bin"
    tool.mkdir(parents=True)
    p = sandbox.resolve(ws, explicit="workspace-write")
    argv = bwrap_command.wrap_argv(
        ["python", "-m", "pytest"],
        p,
        cwd=str(ws / "sub"),
        readable=[str(tmp_path / "venv")],
        bwrap="/b/bwrap",
    )
    assert argv[0] == "/b/bwrap"
    assert argv[argv.index("--") + 1 :] == ["python", "-m", "pytest"]
    head = argv[: argv.index("--")]
    for flag in ("--unshare-net", "--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in head
    assert head[head.index("--cap-drop") + 1] == "ALL"
    assert head[1:4] == ["--ro-bind", "/", "/"]
    assert _pairs(head, "--tmpfs") == ["/tmp"]
    assert _pairs(head, "--proc") == ["/proc"] and _pairs(head, "--dev") == ["/dev"]
    real_ws = os.path.realpath(ws)
    assert real_ws in _pairs(head, "--bind")
    assert os.path.realpath(tmp_path / "venv") in _pairs(head, "--ro-bind")
    # the private /tmp comes before the binds that re-show things under it
    assert head.index("--tmpfs") < head.index(real_ws)
    assert _pairs(head, "--chdir") == [os.path.realpath(ws / "sub")]


def test_read_only_argv_binds_workspace_read_only_and_extra_writable(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    run = ws / ".greenloop" / "runs" / "r1"
    run.mkdir(parents=True)
    p = sandbox.resolve(ws, explicit="read-only")
    head = bwrap_command.wrap_argv(["true"], p, writable=[str(run)])
    head = head[: head.index("--")]
    ro = _pairs(head, "--ro-bind")
    rw = _pairs(head, "--bind")
    assert os.path.realpath(ws) in ro and os.path.realpath(ws) not in rw
    assert rw == [os.path.realpath(run)]
    # the writable run folder is bound after (on top of) the read-only workspace
    assert head.index(os.path.realpath(run)) > head.index(os.path.realpath(ws))
    assert "--unshare-net" in head


def test_share_net_keeps_the_host_network_for_integration_units(tmp_path: Path) -> None:
    p = sandbox.resolve(tmp_path, explicit="workspace-write")
    argv = bwrap_command.wrap_argv(["node", "server.js"], p, share_net=True)
    assert "--unshare-net" not in argv and "--unshare-pid" in argv


def test_tmp_roots_show_a_linked_node_modules_whole(tmp_path: Path) -> None:
    """A workspace whose node_modules links to a shared install under /tmp (as the e2e tests
    and monorepos do) must see the whole installation, not just the runner's own package."""
    shared = tmp_path / "shared" / "node_modules"
    (shared / "vitest").mkdir(parents=True)
    (shared / "vitest" / "vitest.mjs").write_text("")
    (shared / ".bin").mkdir()
    (shared / ".bin" / "vitest").symlink_to("../vitest/vitest.mjs")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "node_modules").symlink_to(shared)
    vitest = str(ws / "node_modules" / ".bin" / "vitest")
    roots = bwrap_command.tmp_roots(vitest, {"PATH": "/usr/bin"}, str(ws))
    assert str(shared) in roots
    assert not [r for r in roots if r.startswith(str(shared) + os.sep)]


def test_tmp_roots_find_interpreters_and_path_entries_under_tmp(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    py = prefix / "bin" / "python3"
    py.symlink_to("/usr/bin/env")
    nm = tmp_path / "nodemods"
    nm.mkdir()
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin", "NODE_PATH": str(nm)}
    roots = bwrap_command.tmp_roots("python3", env)
    assert str(prefix) in roots and str(nm) in roots
    assert "/tmp" not in roots and all(r.startswith("/tmp/") for r in roots)
    # greenloop's own package folder is shown too when it lives under /tmp (a checkout there)
    package = PACKAGE_DIR
    own = [package] if package.startswith("/tmp/") else []
    assert bwrap_command.tmp_roots(str(py), {"PATH": "/usr/bin"}) == [str(prefix), *own]
    assert bwrap_command.tmp_roots("/usr/bin/env", {"PATH": "/usr/bin"}) == own


def test_tmp_roots_find_a_venvs_base_interpreter_and_toolchain_managers(tmp_path: Path) -> None:
    """A venv made from an interpreter that itself lives under /tmp (a CI-built or uv-managed
    Python), and the folders of nvm/volta/asdf/fnm/pyenv/uv when they live under /tmp."""
    base = tmp_path / "cpython"
    (base / "bin").mkdir(parents=True)
    (base / "bin" / "python3").write_text("")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\ninclude-system-site-packages = false\n")
    volta, uv = tmp_path / "volta", tmp_path / "uv-pythons"
    volta.mkdir()
    uv.mkdir()
    env = {"PATH": "/usr/bin", "VOLTA_HOME": str(volta), "UV_PYTHON_INSTALL_DIR": str(uv)}
    roots = bwrap_command.tmp_roots(str(venv / "bin" / "python"), env)
    assert {str(venv), str(base), str(volta), str(uv)} <= set(roots)
    # wrap_argv binds the command's own toolchain even when its caller passes nothing
    policy = sandbox.resolve(tmp_path / "ws", explicit="workspace-write")
    argv = bwrap_command.wrap_argv([str(venv / "bin" / "python"), "-V"], policy, env={"PATH": "/usr/bin"})
    binds = {argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert {str(venv), str(base)} <= binds


# --------------------------------------------------------------------------- environment


def test_sandboxed_env_starts_from_an_allow_list(tmp_path: Path) -> None:
    base = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "LC_ALL": "C.UTF-8",
        "AWS_SECRET_ACCESS_KEY": "x",
        "GITHUB_TOKEN": "y",
        "CLAUDECODE": "1",
        "SSH_AUTH_SOCK": "/run/ssh",
        "PYTEST_CURRENT_TEST": "t",
        "PYTEST_ADDOPTS": "-x",
    }
    p = sandbox.resolve(tmp_path, explicit="workspace-write")
    env = child_env(base, p, add={"MY_VAR": "1"}, drop=["HOME"])
    assert env["PATH"] == "/usr/bin" and env["LC_ALL"] == "C.UTF-8" and env["MY_VAR"] == "1"
    for gone in (
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "CLAUDECODE",
        "SSH_AUTH_SOCK",
        "PYTEST_CURRENT_TEST",
    ):
        assert gone not in env
    assert "HOME" not in env  # the plan's drop applies too
    assert env["TMPDIR"] == "/tmp" and "CI" not in env and "NO_COLOR" not in env  # nothing forced
    coloured = child_env({**base, "NO_COLOR": "1", "FORCE_COLOR": "2", "CI": "true"}, p)
    assert (coloured["NO_COLOR"], coloured["FORCE_COLOR"], coloured["CI"]) == ("1", "2", "true")
    cache = os.path.join(p.workspace_root, ".greenloop", "cache")
    assert env["npm_config_cache"] == os.path.join(cache, "npm")
    assert env["XDG_CACHE_HOME"] == os.path.join(cache, "xdg")
    assert env["PYTEST_ADDOPTS"] == "-x"  # the workspace's own .pytest_cache is writable


def test_read_only_env_moves_caches_to_private_tmp(tmp_path: Path) -> None:
    p = sandbox.resolve(tmp_path, explicit="read-only")
    env = child_env({"PATH": "/usr/bin", "PYTEST_ADDOPTS": "-x"}, p)
    assert env["npm_config_cache"].startswith("/tmp/") and env["XDG_CACHE_HOME"].startswith("/tmp/")
    assert env["PYTEST_ADDOPTS"].startswith("-x ") and "cache_dir=/tmp/" in env["PYTEST_ADDOPTS"]


def test_full_access_env_inherits(tmp_path: Path) -> None:
    p = sandbox.resolve(tmp_path, explicit="full-access")
    env = child_env({"PATH": "/usr/bin", "GITHUB_TOKEN": "y", "CLAUDECODE": "1"}, p)
    assert env["GITHUB_TOKEN"] == "y" and "CLAUDECODE" not in env and "TMPDIR" not in env


def test_launch_refuses_when_bwrap_is_unavailable(tmp_path: Path) -> None:
    plan = Plan(framework="pytest", argv=("pytest",), cwd=str(tmp_path), timeout_ms=1000)
    status = enforcers.BwrapStatus(False, None, reason="bwrap was not found on PATH")
    p = sandbox.resolve(tmp_path, explicit="workspace-write")
    with pytest.raises(sandbox.SandboxUnavailable) as info:
        launcher.launch(plan, p, base_env={"PATH": "/usr/bin", "GREENLOOP_LANDLOCK": "off"}, status=status)
    msg = str(info.value)
    assert "apt-get install bubblewrap" in msg and "full-access" in msg and "not found" in msg
    assert "Landlock" in msg and "GREENLOOP_LANDLOCK" in msg
    assert info.value.exit_code == 3
    # full-access never needs bwrap, and says nothing enforced it
    full = launcher.launch(plan, sandbox.resolve(tmp_path, explicit="full-access"), status=status)
    assert full.argv == ("pytest",) and full.info.enforced_by is None


def test_launch_runs_a_verbatim_command_through_sh_inside(tmp_path: Path) -> None:
    plan = Plan(
        framework="pytest", argv=("pytest -q && echo hi",), cwd=str(tmp_path), timeout_ms=1, shell=True
    )
    status = enforcers.BwrapStatus(True, "/usr/bin/bwrap", "0.8.0", loopback=True)
    got = launcher.launch(plan, sandbox.resolve(tmp_path), base_env={"PATH": "/usr/bin"}, status=status)
    assert got.shell is False
    assert got.argv[-3:] == ("/bin/sh", "-c", "pytest -q && echo hi")
    assert got.info == SandboxInfo("auto", "bubblewrap 0.8.0", os.path.realpath(tmp_path))


# --------------------------------------------------------------------------- denial hints

WS = "/work/project"
WW = SandboxInfo("workspace-write", "bubblewrap 0.8.0", WS)
RO = SandboxInfo("read-only", "bubblewrap 0.8.0", WS)
FULL = SandboxInfo("full-access", None, WS)


@pytest.mark.parametrize(
    "message,path",
    [
        ("OSError: [Errno 30] Read-only file system: '/etc/greenloop.conf'", "/etc/greenloop.conf"),
        ("Error: EROFS: read-only file system, open '/usr/lib/x.json'", "/usr/lib/x.json"),
        ("touch: cannot touch '/var/lib/x': Read-only file system", "/var/lib/x"),
        ("sh: 1: cannot create /opt/out.txt: Read-only file system", "/opt/out.txt"),
        ("PermissionError: [Errno 13] Permission denied: '/root/.config/x'", "/root/.config/x"),
        ("Error: EACCES: permission denied, mkdir '/usr/local/share/y'", "/usr/local/share/y"),
    ],
)
def test_writes_outside_the_workspace_get_a_sandbox_hint(message: str, path: str) -> None:
    hint = denials.denial_hint(Failure(test="t", message=message), WW)
    assert hint is not None
    assert "workspace-write" in hint and path in hint and "--sandbox full-access" in hint


def test_read_only_write_inside_workspace_suggests_workspace_write() -> None:
    f = Failure(test="t", message="x", stack=f"OSError: [Errno 30] Read-only file system: '{WS}/out.txt'")
    hint = denials.denial_hint(f, RO)
    assert hint is not None and "--sandbox workspace-write" in hint and "(read-only)" in hint
    zh = denials.denial_hint(f, RO, language="zh")
    assert zh is not None and "沙箱" in zh and "workspace-write" in zh


def test_no_sandbox_hint_for_ordinary_failures_or_full_access() -> None:
    assert denials.denial_hint(Failure(test="t", message="AssertionError: 1 != 2"), WW) is None
    # EACCES inside the workspace or /tmp is the test's own business
    inside = Failure(test="t", message=f"PermissionError: [Errno 13] Permission denied: '{WS}/locked'")
    assert denials.denial_hint(inside, WW) is None
    tmp = Failure(test="t", message="EACCES: permission denied, open '/tmp/x'")
    assert denials.denial_hint(tmp, WW) is None
    erofs = Failure(test="t", message="OSError: [Errno 30] Read-only file system: '/etc/x'")
    assert denials.denial_hint(erofs, FULL) is None


def test_network_denial_hint() -> None:
    for msg in (
        "OSError: [Errno 101] Network is unreachable",
        "Error: connect ENETUNREACH 192.0.2.1:80",
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
        "Error: getaddrinfo EAI_AGAIN registry.npmjs.org",
    ):
        hint = denials.denial_hint(Failure(test="t", message=msg), WW)
        assert hint is not None and "network" in hint and "full-access" in hint, msg


def test_apply_denial_hints_puts_the_sandbox_first_and_keeps_other_hints() -> None:
    failures = (
        Failure(
            test="a", message="OSError: [Errno 30] Read-only file system: '/etc/x'", hint="Check the path."
        ),
        Failure(test="b", message="AssertionError", hint="Compare values."),
    )
    out = denials.apply_denial_hints(failures, WW)
    assert out[0].hint.startswith("The sandbox (workspace-write)") and out[0].hint.endswith("Check the path.")
    assert out[1] == failures[1]
    assert denials.apply_denial_hints(out, WW) == out  # idempotent


# --------------------------------------------------------------------------- CLI


def test_cli_sandbox_set_records_an_event(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sandbox", "set", "--session", "s1", "read-only", "--path", str(ws), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"session_id": "s1", "mode": "read-only", "workspace": os.path.realpath(ws)}
    with Store(ws) as st:
        assert st.latest_sandbox_mode("s1") == "read-only"
    assert main(["sandbox", "show", "--session", "s1", "--path", str(ws), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["mode"] == "read-only" and shown["source"] == "session"


def test_cli_sandbox_set_unknown_mode_is_exit_2_and_records_nothing(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sandbox", "set", "--session", "s1", "sideways", "--path", str(ws)]) == 2
    err = capsys.readouterr().err
    assert "'sideways'" in err and "read-only, workspace-write, full-access" in err
    assert not (ws / ".greenloop").exists()
    assert main(["sandbox", "set", "--session", "s1", "read-only", "--path", str(ws / "missing")]) == 2
    assert "--path" in capsys.readouterr().err


def test_cli_sandbox_show_without_bwrap_says_how_to_install(
    ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(enforcers.BWRAP_ENV_VAR, str(ws / "no-bwrap-here"))
    # auto falls back to Landlock, and says why
    assert main(["sandbox", "show", "--path", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "Landlock (landlock ABI" in out and "apt-get install bubblewrap" in out
    # without Landlock either: auto runs unconfined (exit 0, said plainly), a named mode is refused
    monkeypatch.setenv("GREENLOOP_LANDLOCK", "off")
    assert main(["sandbox", "show", "--path", str(ws)]) == 0
    assert "NOT ENFORCED" in capsys.readouterr().out
    assert main(["sandbox", "show", "--path", str(ws), "--mode", "workspace-write"]) == 3
    err = capsys.readouterr().err
    assert "apt-get install bubblewrap" in err and "full-access" in err
    assert main(["sandbox", "show", "--path", str(ws), "--mode", "full-access"]) == 0


def test_playwright_browsers_stay_findable_when_the_xdg_cache_moves(tmp_path: Path) -> None:
    (tmp_path / "cache" / "ms-playwright").mkdir(parents=True)
    base = {"PATH": "/usr/bin", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env = child_env(base, sandbox.resolve(tmp_path / "ws", explicit="workspace-write"))
    assert env["PLAYWRIGHT_BROWSERS_PATH"] == str(tmp_path / "cache" / "ms-playwright")
    assert env["XDG_CACHE_HOME"] != base["XDG_CACHE_HOME"]
    env = child_env({**base, "PLAYWRIGHT_BROWSERS_PATH": "/opt/pw"}, sandbox.resolve(tmp_path))
    assert env["PLAYWRIGHT_BROWSERS_PATH"] == "/opt/pw"


def test_available_enforcers_names_both_and_says_how_to_get_a_missing_one(tmp_path: Path) -> None:
    checks = enforcers.available_enforcers()
    assert [c.name for c in checks] == ["bwrap", "landlock"]
    for c in checks:
        assert isinstance(c, enforcers.EnforcerCheck) and c.detail
        assert (c.fix is None) == c.available
    hidden = {
        "PATH": os.environ["PATH"],
        enforcers.BWRAP_ENV_VAR: str(tmp_path / "no-bwrap"),
        "GREENLOOP_LANDLOCK": "off",
    }
    bwrap, landlock = enforcers.available_enforcers(hidden)
    assert (
        not bwrap.available
        and "does not exist" in bwrap.detail
        and "apt-get install bubblewrap" in (bwrap.fix or "")
    )
    assert not landlock.available and "GREENLOOP_LANDLOCK" in landlock.detail
