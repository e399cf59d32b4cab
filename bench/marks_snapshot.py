"""How long the gate's test-mark snapshot takes (closure/marks.py), on a workspace of N test files.

Builds a workspace of test files shaped like real ones (half Python with docstrings, a class,
a decorator and ten tests each; half TypeScript with a describe block, template literals and
ten tests each; a few skips), then times, in one process, median of --repeat runs:

- reading the test files alone (open, read, decode): the floor any scan stands on;
- `snapshot(root)`: what the gate takes at a session's first hook event (every file read);
- `snapshot(root, reuse=earlier)`: the same with an earlier snapshot of the workspace at hand;
- `taken_away(root, snapshot)` with nothing changed (every file only stat'ed);
- the same after one file gained a skip.

Each size is measured twice: a plain folder, and the same files committed in a git repository
(where a snapshot of GIT_FROM_FILES files or more keeps the files git holds as blob ids, and
only a changed file is read back from git at the end). The page cache is warm (the files were
just written), as it is for a project being edited.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from greenloop.closure.marks import snapshot, taken_away

PY = '''"""Tests of module {i}."""

import pytest

from app import thing


class TestThing{i}:
    """What a thing does."""

{tests}
'''
PY_TEST = '''    @pytest.mark.parametrize("n", [1, 2, 3])
    def test_case_{j}(self, n):
        """Case {j}: a docstring line."""
        value = thing(n, "some string", 'another')  # a comment
        assert value == n * {j}, f"{{value}} != {{n}}"
'''
JS = """import {{ describe, it, expect }} from 'vitest'
import {{ thing }} from '../src/thing'

describe('thing {i}', () => {{
{tests}
}})
"""
JS_TEST = """  it('does case {j}', async () => {{
    const v = await thing({j}, `template ${{1 + {j}}}`)
    // a comment about the case
    expect(v).toEqual({{ a: {j}, b: "str" }})
  }})
"""


def build(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / "tests" / f"pkg{i // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        if i % 2 == 0:
            body = PY.format(i=i, tests="\n".join(PY_TEST.format(j=j) for j in range(10)))
            (folder / f"test_mod{i}.py").write_text(body)
        else:
            body = JS.format(i=i, tests="\n".join(JS_TEST.format(j=j) for j in range(10)))
            (folder / f"mod{i}.test.ts").write_text(body)


def commit(root: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.com"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.com"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-qm", "tests"]):
        subprocess.run(["git", *argv], cwd=root, env=env, check=True)


def median_ms(fn: Callable[[], object], repeat: int) -> str:
    """Median wall and CPU milliseconds (CPU time is what other work on the machine disturbs least)."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
    return f"{statistics.median(wall):.1f} ms ({statistics.median(cpu):.1f} ms CPU)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    for files, in_git in [(n, g) for n in args.files for g in (False, True)]:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            build(root, files)
            if in_git:
                commit(root)
            size = sum(p.stat().st_size for p in (root / "tests").rglob("*") if p.is_file())
            base = snapshot(tmp)
            paths = [p for p in (root / "tests").rglob("*") if p.is_file()]
            reading = median_ms(lambda: [p.read_bytes().decode() for p in paths], args.repeat)  # noqa: B023
            snap = median_ms(lambda: snapshot(tmp), args.repeat)
            reused = median_ms(lambda: snapshot(tmp, reuse=base), args.repeat)  # noqa: B023
            same = median_ms(lambda: taken_away(tmp, base), args.repeat)  # noqa: B023
            first = next(root.rglob("test_mod0.py"))
            first.write_text(
                first.read_text().replace("    def test_case_3", "    @pytest.mark.skip\n    def test_case_3")
            )
            found = taken_away(tmp, base)
            edited = median_ms(lambda: taken_away(tmp, base), args.repeat)  # noqa: B023
            print(
                f"{files} test files{' in git' if in_git else ''} ({size / 1e6:.1f} MB, "
                f"snapshot {len(base) / 1e3:.0f} KB): "
                f"reading {reading}, snapshot {snap}, snapshot reusing the earlier one {reused}, "
                f"taken_away unchanged {same}, after one skip {edited} ({len(found)} mark)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
