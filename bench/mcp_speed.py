"""MCP server speed, both sides measured in the same run.

1. From the client's `initialize` to the `tools/list` answer, on a freshly spawned
   `greenloop mcp` (the server's own start-up is inside the figure). Target: < 1 s.
   Printed for the very first start (no handshake cache yet: the SDK's import is in the
   figure) and for the usual start (the handshake answered from the cache).
2. The first `test_run` on a freshly started server (right after the handshake, while the
   SDK may still be loading: greenloop.mcp.fast serves it) against `greenloop run --json`
   from the shell, alternating the two, medians compared. Target: ratio <= 1.1.
3. A `test_run` through MCP against the same `greenloop run --json` from the shell, on
   one real pytest suite, alternating the two, medians compared. Target: ratio <= 1.05.

Usage: python bench/mcp_speed.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

TESTS = 30


def make_suite(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    body = "".join(
        f"def test_case_{i}():\n    assert sum(range({i})) == {i * (i - 1) // 2}\n\n" for i in range(TESTS)
    )
    (root / "test_suite.py").write_text(body)


def params(workspace: Path, home: Path) -> StdioServerParameters:
    env = {
        "GREENLOOP_CONFIG_HOME": str(home),
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "GREENLOOP_SESSION": "bench-mcp",
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "greenloop", "mcp", "--workspace", str(workspace)], env=env
    )


async def time_to_tools(workspace: Path, home: Path, errlog: Any) -> float:
    async with (
        stdio_client(params(workspace, home), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        started = time.perf_counter()
        await session.initialize()
        listed = await session.list_tools()
        elapsed = time.perf_counter() - started
    assert listed.tools, "the server offered no tools"
    return elapsed


def shell_run(workspace: Path, home: Path) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "GREENLOOP_CONFIG_HOME": str(home), "HOME": str(home)}
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "greenloop", "run", str(workspace), "--json", "--session", "bench-shell"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    elapsed = time.perf_counter() - started
    return elapsed, json.loads(proc.stdout)


async def first_call(workspace: Path, home: Path, errlog: Any) -> float:
    """A fresh server's first test_run, from the request to the answer (after the handshake)."""
    async with (
        stdio_client(params(workspace, home), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        started = time.perf_counter()
        result = await session.call_tool("test_run", {})
        elapsed = time.perf_counter() - started
    data = result.structured_content or {}
    assert not result.is_error and data.get("ok"), result
    return elapsed


def compare_first_calls(
    workspace: Path, home: Path, rounds: int, errlog: Any
) -> tuple[list[float], list[float]]:
    first_times: list[float] = []
    shell_times: list[float] = []
    for i in range(rounds):
        order = ("mcp", "shell") if i % 2 == 0 else ("shell", "mcp")
        for side in order:
            if side == "mcp":
                first_times.append(anyio.run(first_call, workspace, home, errlog))
            else:
                elapsed, data = shell_run(workspace, home)
                assert data.get("ok"), data
                shell_times.append(elapsed)
    return first_times, shell_times


async def compare_runs(
    workspace: Path, home: Path, rounds: int, errlog: Any
) -> tuple[list[float], list[float]]:
    mcp_times: list[float] = []
    shell_times: list[float] = []
    async with (
        stdio_client(params(workspace, home), errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        # one warm-up each, not counted (first imports, first bwrap probe, page cache)
        await session.call_tool("test_run", {})
        await anyio.to_thread.run_sync(shell_run, workspace, home)
        for i in range(rounds):
            order = ("mcp", "shell") if i % 2 == 0 else ("shell", "mcp")
            for side in order:
                if side == "mcp":
                    started = time.perf_counter()
                    result = await session.call_tool("test_run", {})
                    mcp_times.append(time.perf_counter() - started)
                    data = result.structured_content or {}
                    assert not result.is_error and data.get("ok"), result
                else:
                    elapsed, data = await anyio.to_thread.run_sync(shell_run, workspace, home)
                    assert data.get("ok"), data
                    shell_times.append(elapsed)
    return mcp_times, shell_times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="greenloop-mcp-bench-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        workspace = root / "suite"
        make_suite(workspace)
        with open(root / "server-stderr.log", "w") as errlog:
            # The first start has no handshake cache (a first use, or after an upgrade); the
            # others answer initialize and tools/list from it while the SDK loads.
            cold = anyio.run(time_to_tools, workspace, home, errlog)
            starts = [anyio.run(time_to_tools, workspace, home, errlog) for _ in range(args.rounds)]
            first_times, first_shell = compare_first_calls(workspace, home, args.rounds, errlog)
            mcp_times, shell_times = anyio.run(compare_runs, workspace, home, args.rounds, errlog)
    start_med = statistics.median(starts)
    mcp_med = statistics.median(mcp_times)
    shell_med = statistics.median(shell_times)
    ratio = mcp_med / shell_med
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    print(f"initialize -> tools/list, first start (no handshake cache): {cold * 1000:.0f} ms")
    print(
        f"initialize -> tools/list (fresh server, warm cache): median {start_med * 1000:.0f} ms, "
        f"max {max(starts) * 1000:.0f} ms over {len(starts)}  target < 1000 ms  "
        f"{'OK' if start_med < 1.0 else 'SLOW'}"
    )
    first_med, first_shell_med = statistics.median(first_times), statistics.median(first_shell)
    first_ratio = first_med / first_shell_med
    print(
        f"first test_run on a fresh server: median {first_med * 1000:.0f} ms  "
        f"({', '.join(f'{t * 1000:.0f}' for t in first_times)})"
    )
    print(
        f"greenloop run (shell), same rounds: median {first_shell_med * 1000:.0f} ms  "
        f"({', '.join(f'{t * 1000:.0f}' for t in first_shell)})"
    )
    print(
        f"ratio first call / shell: {first_ratio:.3f}  target <= 1.1  "
        f"{'OK' if first_ratio <= 1.1 else 'SLOW'}  ({args.rounds} alternating rounds)"
    )
    mcp_list = ", ".join(f"{t * 1000:.0f}" for t in mcp_times)
    print(f"test_run via MCP:      median {mcp_med * 1000:.0f} ms  ({mcp_list})")
    print(
        f"greenloop run (shell): median {shell_med * 1000:.0f} ms  "
        f"({', '.join(f'{t * 1000:.0f}' for t in shell_times)})"
    )
    print(
        f"ratio MCP / shell: {ratio:.3f}  target <= 1.05  {'OK' if ratio <= 1.05 else 'SLOW'}  "
        f"({TESTS} pytest tests, {args.rounds} alternating rounds)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
