"""proc.py: the deadline kills the whole tree, escaped descendants are swept, output goes to files."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from greenloop.model import RawRun
from greenloop.system import proc, procfs

PY = sys.executable


def run(tmp_path: Path, code: str, **kw: object) -> RawRun:
    return proc.run_to_completion(
        [PY, "-c", code],
        cwd=str(tmp_path),
        env=dict(os.environ),
        stdout_path=str(tmp_path / "out.txt"),
        stderr_path=str(tmp_path / "err.txt"),
        **kw,  # type: ignore[arg-type]
    )


alive = procfs.alive

def test_exit_code_and_output_in_files(tmp_path: Path) -> None:
    raw = run(
        tmp_path, "import sys; print('hello'); print('oops', file=sys.stderr); sys.exit(3)", timeout_s=30
    )
    assert (raw.exit_code, raw.timed_out, raw.aborted, raw.survivors) == (3, False, False, ())
    assert (tmp_path / "out.txt").read_text() == "hello\n"
    assert (tmp_path / "err.txt").read_text() == "oops\n"


def test_deadline_kills_a_child_that_ignores_sigterm_and_its_escaped_grandchild(tmp_path: Path) -> None:
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"p = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        "open('grandchild.pid', 'w').write(str(p.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    start = time.monotonic()
    raw = run(tmp_path, code, timeout_s=1.5, grace_s=0.5)
    elapsed = time.monotonic() - start
    assert raw.timed_out and raw.exit_code is not None and raw.exit_code < 0
    assert elapsed < 1.5 + 0.5 + 3  # deadline + grace + sweep, never the child's 600 s
    grandchild = int((tmp_path / "grandchild.pid").read_text())
    assert not alive(grandchild) and raw.survivors == ()


def test_background_grandchild_does_not_outlive_a_normal_exit(tmp_path: Path) -> None:
    code = (
        "import subprocess\n"
        f"p = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(600)'])\n"
        "open('grandchild.pid', 'w').write(str(p.pid))\n"
    )
    raw = run(tmp_path, code, timeout_s=30)
    assert raw.exit_code == 0 and not raw.timed_out
    assert not alive(int((tmp_path / "grandchild.pid").read_text()))


def test_cancel_stops_the_tree(tmp_path: Path) -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    start = time.monotonic()
    raw = run(tmp_path, "import time; time.sleep(600)", timeout_s=60, cancel=cancel, grace_s=0.5)
    assert raw.aborted and not raw.timed_out and time.monotonic() - start < 5


def test_spawn_error_is_reported_not_raised(tmp_path: Path) -> None:
    raw = proc.run_to_completion(
        [str(tmp_path / "no-such-binary")],
        cwd=str(tmp_path),
        env={},
        timeout_s=5,
        stdout_path=str(tmp_path / "o"),
        stderr_path=str(tmp_path / "e"),
    )
    assert raw.exit_code is None and raw.spawn_error and "no-such-binary" in raw.spawn_error


def test_on_line_gets_whole_lines_per_stream(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "sys.stdout.write('out-a'); sys.stdout.flush(); sys.stderr.write('ERR\\n'); sys.stderr.flush()\n"
        "time.sleep(0.3); sys.stdout.write('-rest\\nlast'); sys.stdout.flush()\n"
    )
    lines: list[str] = []
    raw = run(tmp_path, code, timeout_s=30, on_line=lines.append)
    assert raw.exit_code == 0
    assert sorted(lines) == ["ERR", "last", "out-a-rest"]


def test_verbatim_shell_command(tmp_path: Path) -> None:
    raw = proc.run_to_completion(
        "echo one | tr a-z A-Z; exit 4",
        cwd=str(tmp_path),
        env=dict(os.environ),
        timeout_s=10,
        stdout_path=str(tmp_path / "o"),
        stderr_path=str(tmp_path / "e"),
        shell=True,
    )
    assert raw.exit_code == 4 and (tmp_path / "o").read_text() == "ONE\n"


def test_child_wait_returns_the_code_or_none_at_its_timeout(tmp_path: Path) -> None:
    out = str(tmp_path / "o.txt")
    sleeper = [PY, "-c", "import time; time.sleep(30)"]
    slow = proc.spawn(sleeper, cwd=str(tmp_path), env=os.environ, stdout_path=out)
    try:
        started = time.monotonic()
        assert slow.wait(0.3) is None
        assert 0.25 <= time.monotonic() - started < 5
    finally:
        assert slow.stop(grace_s=0.5) == ()
    assert not alive(slow.pid)
    quick = proc.spawn([PY, "-c", "raise SystemExit(4)"], cwd=str(tmp_path), env=os.environ, stdout_path=out)
    assert quick.wait(30) == 4
    assert quick.stop() == ()  # already gone: nothing to sweep


# Run in a process of its own: it makes itself a child subreaper (as an integration run does),
# which the test process must not become.
_SUBREAPER_SCRIPT = """
import ctypes, json, os, sys, time
from greenloop.system import proc, procfs
assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
folder = sys.argv[1]
# sh and its background sleeper both carry the token; the sleeper's parent is sh
child = proc.spawn(["sh", "-c", "sleep 300 & echo $! > pid; wait"], cwd=folder, env=dict(os.environ),
                   stdout_path=os.path.join(folder, "out.txt"))
path = os.path.join(folder, "pid")
while not (os.path.exists(path) and open(path).read().strip()):
    time.sleep(0.02)
sleeper = int(open(path).read())
while (procfs.stat(sleeper) or procfs.stat(os.getpid())).comm != "sleep":  # exec'd, token readable
    time.sleep(0.02)
left = proc.kill_token(child.token, wait_s=5.0, own=(child.pid,))
# the sleeper died after sh and came to us: kill_token must have reaped it, not sh (our Popen's)
zombie = procfs.stat(sleeper)
print(json.dumps({"left": list(left), "sleeper": None if zombie is None else zombie.state,
                  "sh": child.popen.wait(10)}))
"""


def test_kill_token_reaps_what_re_parented_to_a_subreaper_and_leaves_popen_its_status(tmp_path: Path) -> None:
    import json
    import subprocess

    done = subprocess.run([PY, "-c", _SUBREAPER_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"left": [], "sleeper": None, "sh": -9}
