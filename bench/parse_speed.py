"""Speed and memory of `greenloop parse` on a 100 MB `pytest -v` log.

Generates the log in a temp folder (passing lines, some failures with tracebacks and
captured output, the short summary and the closing line), then in fresh subprocesses
measures (a) reading the lines only and (b) greenloop's streaming pytest parser over the
same file, and prints MB/s for both, their ratio, and each process's peak RSS
(resource.getrusage). Targets: parse >= 50 MB/s, peak RSS < 100 MB.

    python bench/parse_speed.py [--mb 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MEASURE = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "cli":
    import contextlib, io
    from greenloop.cli import main
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["parse", "--framework", "pytest", "--json", path])
    data = json.loads(buf.getvalue())
    print(json.dumps({"exit": code, "summary": data["summary"], "seconds": time.perf_counter() - t0,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    sys.exit(0)
with open(path, encoding="utf-8", errors="replace", newline="") as fh:
    if mode == "read":
        n = 0
        for line in fh:
            n += 1
        out = {"lines": n}
    else:
        from greenloop.frameworks import parse_text
        res = parse_text("pytest", fh)
        out = {"summary": res.summary.to_json(), "failures": len(res.failures), "recognized": res.recognized}
dt = time.perf_counter() - t0
out["seconds"] = dt
out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def generate(path: Path, target_mb: int) -> dict[str, int]:
    target = target_mb * 1024 * 1024
    passed = failed = 0
    failed_ids: list[str] = []
    with path.open("w", encoding="utf-8") as fh:
        fh.write("=" * 29 + " test session starts " + "=" * 30 + "\n")
        fh.write("platform linux -- Python 3.11.7, pytest-9.0.3, pluggy-1.6.0\nrootdir: /work/app\n")
        fh.write("collecting ... collected many items\n\n")
        size = 0
        i = 0
        while size < target * 0.97:
            mod = i // 500
            nodeid = f"tests/unit/test_module_{mod:05d}.py::TestThing::test_behaviour_{i:07d}[case-{i % 7}]"
            status = "FAILED" if i % 5000 == 4999 else "PASSED"
            line = f"{nodeid} {status}{' ' * max(1, 100 - len(nodeid))}[{(i * 7) % 100:3d}%]\n"
            fh.write(line)
            size += len(line)
            if status == "FAILED":
                failed += 1
                failed_ids.append(nodeid)
            else:
                passed += 1
            i += 1
        fh.write("\n" + "=" * 35 + " FAILURES " + "=" * 35 + "\n")
        for nodeid in failed_ids:
            head = nodeid.split("::", 1)[1].replace("::", ".")
            fh.write(f"{'_' * 20} {head} {'_' * 20}\n\n")
            fh.write("    def test_behaviour(self):\n>       assert compute(3) == 4\nE       assert 3 == 4\n")
            fh.write("E        +  where 3 = compute(3)\n\n")
            fh.write(f"{nodeid.split('::')[0]}:42: AssertionError\n")
            fh.write("----------------------------- Captured stdout call -----------------------------\n")
            fh.write("noise\n" * 3)
        fh.write("=" * 27 + " short test summary info " + "=" * 28 + "\n")
        for nodeid in failed_ids:
            fh.write(f"FAILED {nodeid} - assert 3 == 4\n")
        fh.write(f"{'=' * 10} {failed} failed, {passed} passed in 812.45s (0:13:32) {'=' * 10}\n")
    return {"passed": passed, "failed": failed}


def run(mode: str, path: Path) -> dict[str, Any]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parent.parent / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", MEASURE, mode, str(path)], capture_output=True, text=True,
                         env=env, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100, help="log size in MB (default 100)")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="greenloop-bench-") as tmp:
        log = Path(tmp) / "pytest-v.log"
        truth = generate(log, ns.mb)
        mb = log.stat().st_size / (1024 * 1024)
        read = run("read", log)
        parse = run("parse", log)
        cli = run("cli", log)
    s = parse["summary"]
    ok_counts = s["passed"] == truth["passed"] and s["failed"] == truth["failed"]
    read_rate = mb / read["seconds"]
    parse_rate = mb / parse["seconds"]
    print(f"log: {mb:.1f} MB pytest -v, {truth['passed']} passed, {truth['failed']} failed")
    for label, r, rate in (("read lines only", read, read_rate), ("greenloop parse", parse, parse_rate)):
        print(f"{label:15} : {r['seconds']:.2f} s  {rate:7.1f} MB/s  peak RSS {r['peak_rss_mb']:.1f} MB")
    cli_rate = mb / cli["seconds"]
    print(f"greenloop parse CLI (--json, whole command): {cli['seconds']:.2f} s  {cli_rate:7.1f} MB/s  "
          f"peak RSS {cli['peak_rss_mb']:.1f} MB")
    print(f"ratio parse/read time: {parse['seconds'] / read['seconds']:.2f}")
    print(f"counts match the generated truth: {ok_counts}; failures listed: {parse['failures']}")
    print(f"targets: >= 50 MB/s -> {'met' if parse_rate >= 50 else 'MISSED'}; "
          f"peak RSS < 100 MB -> {'met' if parse['peak_rss_mb'] < 100 else 'MISSED'}")
    return 0 if ok_counts else 1


if __name__ == "__main__":
    sys.exit(main())
