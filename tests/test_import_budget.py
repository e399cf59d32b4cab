"""The Stop hook's import budget (issue 28): what the hook process imports, not how long it takes.

The hook runs as a fresh process on every agent turn, so its imports are most of its cost
(bench/hook_latency.py measures the time; a timed test would only measure the machine). Each
case runs the hook exactly as `greenloop init claude-code` writes it (`hook_command`), with
`-X importtime`, for a Claude Code Stop event, and reads the modules it imported from that
report: the standard library's heavy modules stay out (greenloop.lite stands in for typing's
NamedTuple and json), the gate's evidence modules stay out once the session has its start
record, and the number of greenloop modules stays under a stated bound.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from greenloop.closure.store import Store
from greenloop.closure.transitions import Counts, RunRecord
from greenloop.hooks.config_merge import hook_command
from greenloop.system.fingerprint import working_tree

# Imported by none of the hook's cases: each costs the hook one to fifteen milliseconds
# (typing with re, enum, contextlib; json imports re; sqlite3's dbapi2 imports datetime).
HEAVY = (
    "typing", "enum", "re", "json", "sqlite3", "sqlite3.dbapi2", "datetime", "contextlib",
    "argparse", "dataclasses", "inspect", "pathlib", "subprocess", "threading", "tomllib",
    "importlib", "warnings", "encodings.ascii", "greenloop.exit_codes", "greenloop.commands",
    "greenloop.commands.gate",
)  # fmt: skip
# The gate's evidence and marks: loaded for a session's first event (its start record), not after.
GATE_HEAVY = (
    "greenloop.closure.evidence", "greenloop.closure.marks", "greenloop.closure.mark_rules",
    "greenloop.closure.mark_text", "greenloop.closure.run_evidence", "greenloop.runner.test_paths",
)  # fmt: skip
# greenloop's own modules (packages included) one Stop may import: 28 now (steer and allow).
GREENLOOP_BOUND = 30


def _workspace(ws: Path, *, green: bool) -> None:
    (ws / "greenloop.toml").write_text("max_intercept_rounds = 1000\n")
    with Store(ws) as store:
        store.record_run(
            RunRecord(
                "run-budget",
                ok=green,
                at=time.time(),
                outcome="green" if green else "red",
                session_id="budget",
                summary=Counts(3, 3, 0, 0) if green else Counts(3, 1, 2, 0),
                failing=() if green else ("tests/test_a.py::test_one",),
                fingerprint=working_tree(ws) if green else None,
            )
        )


def _stop(ws: Path, tmp: Path) -> tuple[str, set[str]]:
    argv = shlex.split(hook_command("claude-code"))
    env = {k: v for k, v in os.environ.items() if k != "CLAUDE_PROJECT_DIR"}
    # The hook answered in process (no hook server): what a hook costs when it has to load
    # greenloop itself (the first hook of a session, GREENLOOP_HOOK_SERVER=0). With a server,
    # the client imports greenloop.hook_client alone (tests/test_hook_server.py).
    env.update(GREENLOOP_CONFIG_HOME=str(tmp / "no-user-config"), XDG_CACHE_HOME=str(tmp / "cache"),
               GREENLOOP_HOOK_SERVER="0")
    event = {
        "session_id": "budget",
        "transcript_path": str(ws / "t.jsonl"),
        "cwd": str(ws),
        "hook_event_name": "Stop",
        "permission_mode": "default",
        "stop_hook_active": False,
    }
    proc = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        input=json.dumps(event),
        capture_output=True,
        text=True,
        cwd=ws,
        env=env,
        timeout=60,
        check=True,
    )
    modules = set()
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[1].strip().isdigit():
            modules.add(parts[2].strip())
    assert "greenloop.closure.gate" in modules, proc.stderr[-2000:]  # the report is the hook's
    return proc.stdout, modules


@pytest.mark.parametrize("case", ["steer", "allow"])
def test_stop_hook_imports_stay_light(tmp_path: Path, case: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    _workspace(ws, green=case == "allow")
    first_out, first = _stop(ws, tmp_path)  # the session's first event: its start record, the TOML parse
    out, modules = _stop(ws, tmp_path)
    if case == "steer":
        assert '"decision": "block"' in first_out and '"decision": "block"' in out
        assert "greenloop.closure.messages" in modules
    else:
        assert first_out == "" and out == ""
        assert "greenloop.system.tree_digest" in modules  # the stale-green rule's fingerprint
    assert "greenloop.closure.run_evidence" in first  # what the second call is compared with
    assert sorted(set(HEAVY) & modules) == []
    assert sorted(set(GATE_HEAVY) & modules) == []
    ours = sorted(m for m in modules if m == "greenloop" or m.startswith("greenloop."))
    assert len(ours) <= GREENLOOP_BOUND, ours


def test_lite_json_matches_json() -> None:
    from greenloop import lite

    docs = ['{"a": [1, 2.5, null, true, "\\u00e9x"], "b": {}}', " [1e400, -0.0] ", '"s"', "3"]
    for doc in docs:
        assert repr(lite.loads(doc)) == repr(json.loads(doc))
    for bad in ["", "   ", '{"a":', "[1] x", "\ufeff{}", '{"a" 1}']:
        with pytest.raises(json.JSONDecodeError) as ours:
            lite.loads(bad)
        with pytest.raises(json.JSONDecodeError) as theirs:
            json.loads(bad)
        assert str(ours.value) == str(theirs.value)
    values = [
        {"decision": "block", "reason": 'é ☃ "q"\n'},
        [1, 2.5, None, True, float("inf")],
        "s",
        {"b": 1, "a": 2},
    ]
    for value in values:
        for ascii_only in (True, False):
            for sort in (True, False):
                assert lite.dumps(value, ensure_ascii=ascii_only, sort_keys=sort) == json.dumps(
                    value, ensure_ascii=ascii_only, sort_keys=sort
                )
    with pytest.raises(TypeError, match="not JSON serializable"):
        lite.dumps({"a": object()})


def test_lite_named_tuple_is_typings() -> None:
    from typing import NamedTuple as TypingNamedTuple

    from greenloop.lite import NamedTuple

    class Lite(NamedTuple):  # type: ignore[misc]  # (Any to mypy; modules import typing's then)
        """A record."""

        a: int
        b: str = "x"

        def twice(self) -> int:
            return 2 * self.a

    class Typed(TypingNamedTuple):
        a: int
        b: str = "x"

    lite = Lite(1)
    assert (lite, lite.twice(), lite._replace(b="y")) == ((1, "x"), 2, (1, "y"))
    assert Lite._fields == Typed._fields and Lite._field_defaults == Typed._field_defaults
    assert Lite.__doc__ == "A record." and Lite.__module__ == __name__ and repr(lite) == "Lite(a=1, b='x')"
    assert isinstance(lite, tuple) and Lite(a=2, b="z") == (2, "z")
    with pytest.raises(TypeError, match="Non-default"):

        class Bad(NamedTuple):  # type: ignore[misc]
            a: int = 1
            b: str
