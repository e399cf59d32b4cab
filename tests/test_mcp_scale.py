"""The MCP tool test_run's `shard` and `rerun_failures`, through the SDK's real client against
`greenloop mcp` as a stdio subprocess and real pytest runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def _calls(workspace: Path, home: Path, calls: list[dict[str, Any]]) -> list[Any]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "greenloop", "mcp", "--workspace", str(workspace)],
        env={"GREENLOOP_CONFIG_HOME": str(home), "HOME": str(home), "PATH": os.environ.get("PATH", "")},
        cwd=str(workspace),
    )

    async def main() -> list[Any]:
        with open(home / "server-stderr.log", "a") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return [await s.call_tool("test_run", args) for args in calls]

    return anyio.run(main)


def _workspace(root: Path, counter: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    for i in range(4):
        (root / "tests" / f"test_m{i}.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    (root / "tests" / "test_flaky.py").write_text(
        "import os\n\n"
        f"COUNTER = {str(counter)!r}\n\n"
        "def test_flaky():\n"
        "    n = int(open(COUNTER).read()) if os.path.exists(COUNTER) else 0\n"
        "    open(COUNTER, 'w').write(str(n + 1))\n"
        "    assert n % 2 == 1\n"
    )
    return root


def test_shard_and_rerun_failures_through_the_tool(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ws = _workspace(tmp_path / "ws", tmp_path / "counter")
    one, two, bad = _calls(ws, home, [
        {"shard": "1/2", "sandbox": "full-access"},
        {"shard": "2/2", "sandbox": "full-access"},
        {"shard": "3/2"},
    ])
    (tmp_path / "counter").unlink()  # the shards ran the flaky test once: start it failing again
    (rerun,) = _calls(ws, home, [{"rerun_failures": 1, "sandbox": "full-access"}])
    for r, i in ((one, 1), (two, 2)):
        assert not r.is_error
        data = r.structured_content
        assert data["selection"] == "shard" and data["shard"] == {"index": i, "total": 2}
    assert one.structured_content["summary"]["total"] + two.structured_content["summary"]["total"] == 9
    assert bad.is_error and "out of range" in "".join(getattr(c, "text", "") for c in bad.content)
    data = rerun.structured_content
    assert not rerun.is_error and data["outcome"] == "red", data
    assert data["summary"]["flaky"] == 1 and data["failures"][0]["flaky"] is True
