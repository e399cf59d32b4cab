"""Live progress per test, for every runner, as a client sees it while a slow suite runs.

Each runner gets a real suite of six tests that each sleep half a second. Progress must
advance per test while the suite runs, never in one jump at the end: through MCP (the SDK's
real client with a progress callback against `greenloop mcp` as a subprocess), and on the
CLI's live line (`greenloop run` with its stderr on a pseudo-terminal, as a person sees it).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

RUNNERS = Path(__file__).parent / "runners" / "node_modules"
TESTS = 6
SLEEP_MS = 500
FRAMEWORKS = ("pytest", "node:test", "vitest", "jest")


def _slow_suite(root: Path, framework: str) -> Path:
    """Six tests, each sleeping SLEEP_MS, in the runner's own dialect (some in a suite)."""
    root.mkdir(parents=True)
    (root / ".git").mkdir()
    if framework == "pytest":
        (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
        body = "import time\n\n" + "".join(
            f"def test_{i}():\n    time.sleep({SLEEP_MS / 1000})\n\n" for i in range(TESTS)
        )
        (root / "test_slow.py").write_text(body)
        return root
    if framework in ("vitest", "jest") and not (RUNNERS / ".bin" / framework).exists():
        pytest.skip("npm ci in tests/runners first")
    package: dict[str, Any] = {"name": "slow", "private": True}
    if framework == "vitest":
        package["type"] = "module"
    (root / "package.json").write_text(json.dumps(package))
    if framework in ("vitest", "jest"):
        (root / "node_modules").symlink_to(RUNNERS)
    half = TESTS // 2
    sleep = "const sleep = (ms) => new Promise((r) => setTimeout(r, ms))\n"
    tests = "".join(f"test('t{i}', async () => {{ await sleep({SLEEP_MS}) }})\n" for i in range(half))
    suite = "describe('suite', () => {\n" + "".join(
        f"  test('s{i}', async () => {{ await sleep({SLEEP_MS}) }})\n" for i in range(TESTS - half)
    ) + "})\n"
    imports = {
        "node:test": "import { test, describe } from 'node:test'\n",
        "vitest": "import { test, describe } from 'vitest'\n",
        "jest": "",
    }[framework]
    name = "slow.test.mjs" if framework == "node:test" else "slow.test.js"
    (root / name).write_text(imports + sleep + tests + suite)
    return root


def _env(home: Path) -> dict[str, str]:
    return {
        "GREENLOOP_CONFIG_HOME": str(home),
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
    }


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_mcp_progress_arrives_per_test_while_the_suite_runs(tmp_path: Path, framework: str) -> None:
    ws = _slow_suite(tmp_path / "ws", framework)
    home = tmp_path / "home"
    home.mkdir()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "greenloop", "mcp", "--workspace", str(ws)],
        env=_env(home),
        cwd=str(ws),
    )
    arrivals: list[tuple[float, float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        arrivals.append((time.monotonic(), progress, message))

    async def main() -> tuple[Any, float]:
        with open(home / "server-stderr.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool(
                    "test_run", {"framework": framework}, progress_callback=on_progress
                )
                return result, time.monotonic()

    result, ended = anyio.run(main)
    data = result.structured_content or {}
    assert not result.is_error and data.get("ok"), data
    assert data["summary"]["passed"] == TESTS
    counts = [done for _, done, _ in arrivals]
    assert len(arrivals) >= TESTS, arrivals  # one per test at least, not one at the end
    assert counts == sorted(set(counts)) and counts[-1] == TESTS, counts
    # the first came while the suite still had most of its sleeping to do, and they are spread
    assert ended - arrivals[0][0] >= (TESTS - 2) * SLEEP_MS / 1000, (ended, arrivals)
    assert arrivals[-2][0] - arrivals[0][0] >= (TESTS - 3) * SLEEP_MS / 1000, arrivals
    assert "passed" in (arrivals[-1][2] or "")


_LINE = re.compile(r"running… (\d+) passed")


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_cli_live_line_advances_per_test(tmp_path: Path, framework: str) -> None:
    """`greenloop run` on a terminal: render.LiveProgress redraws as each test ends."""
    ws = _slow_suite(tmp_path / "ws", framework)
    home = tmp_path / "home"
    home.mkdir()
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "greenloop", "run", str(ws), "--framework", framework],
        stdout=subprocess.PIPE,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env=_env(home),
        cwd=str(ws),
    )
    os.close(follower)
    seen: list[tuple[float, int]] = []
    text = ""
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 4096).decode("utf-8", "replace")
                except OSError:  # the terminal closed: the run is over
                    break
                if not chunk:
                    break
                text += chunk
                now = time.monotonic()
                for frame in chunk.split("\r"):
                    found = _LINE.search(frame)
                    if found and (not seen or int(found.group(1)) != seen[-1][1]):
                        seen.append((now, int(found.group(1))))
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=60) == 0, text
        ended = time.monotonic()
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    counts = [n for _, n in seen if n]
    assert counts and counts[-1] == TESTS, text
    assert len(counts) >= TESTS - 1, seen  # redrawn per test (two in one 0.2 s frame at most once)
    first = next(t for t, n in seen if n)
    assert ended - first >= (TESTS - 2) * SLEEP_MS / 1000, (ended, seen)
