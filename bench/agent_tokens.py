#!/usr/bin/env python3
"""What an agent reads of a run, in tokens: the agent format, the human format and the raw
runner output side by side, for green runs, one failure and 100 failures.

Cases:
- every captured fixture of a green or failing suite (tests/fixtures/<framework>/<suite>/, the
  plain variant): the raw output is the runner's own text; its report is parsed as a run would
  parse it, hints built against the suite's source;
- the demo project (examples/demo, one real bug) run for real through `greenloop.api.test_run`,
  and again with the bug fixed (green); the todo example's Python unit (green);
- a generated pytest suite with 100 failing tests, run for real.

Tokens are counted with o200k_base from the `bpe-openai` package, which ships its vocabulary in
the wheel (dev extra); without it, bytes/4, and the output says so. The agent format is shown
as a session sees it after its first run (its long-lived notes already said); the figure of
the first run in a session is printed for the real runs too.

    python bench/agent_tokens.py
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from greenloop import agent_format, api, render  # noqa: E402
from greenloop.frameworks import parse_report, parse_text  # noqa: E402
from greenloop.layout import STDERR_NAME, STDOUT_NAME  # noqa: E402
from greenloop.result import RunResult  # noqa: E402
from greenloop.runner.results import with_hints  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
TARGETS = {"green": 40, "one failure": 150, "100 failures": 2500}


def tokenizer() -> tuple[Callable[[str], int], str]:
    """A token counter and its name: o200k_base when bpe-openai is installed, else bytes/4."""
    try:
        import bpe_openai

        enc = bpe_openai.get_encoding("o200k_base")
        return (lambda text: len(enc.encode(text))), "o200k_base (bpe-openai)"
    except Exception:  # not installed, or its data unreadable
        return (lambda text: (len(text.encode("utf-8")) + 3) // 4), "bytes/4 (bpe-openai not installed)"


def fixture_results() -> list[tuple[str, RunResult, str]]:
    """(case name, result, raw runner output) of each captured green or failing suite."""
    out = []
    metas = sorted(FIXTURES.glob("*/*/plain.meta.json")) + sorted(FIXTURES.glob("*/*/tap.meta.json"))
    for meta_path in metas:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        suite_dir = meta_path.parent
        text_path = meta_path.with_name(meta_path.name.replace(".meta.json", ".txt"))
        raw = text_path.read_text(encoding="utf-8")
        if meta.get("report"):
            parsed = parse_report(meta["report_format"], str(suite_dir / meta["report"]), root=meta["cwd"])
        else:
            with open(text_path, encoding="utf-8") as fh:
                parsed = parse_text(meta["framework"], fh, root=meta["cwd"])
        if not parsed.recognized or not parsed.summary.total:
            continue
        failures = with_hints(parsed.failures, meta["framework"], "en", str(suite_dir / "src"))
        ok = meta["exit_code"] == 0 and not failures
        result = RunResult(
            run_id="run-bench", ok=ok, outcome="green" if ok else "red", framework=meta["framework"],
            command=" ".join(meta.get("argv") or []), exit_code=meta["exit_code"], summary=parsed.summary,
            failures=failures, duration_ms=parsed.duration_ms or 0, notes=parsed.notes,
            output_tail=raw[-3000:],
            result_ref=f"{meta['cwd']}/.greenloop/runs/run-bench/result.json", workspace=meta["cwd"],
        )
        out.append((f"fixture {meta_path.parent.parent.name}/{suite_dir.name}", result, raw))
    return out


def _raw(result: RunResult) -> str:
    run_dir = Path(result.result_ref or "").parent
    names = (STDOUT_NAME, STDERR_NAME)
    return "".join((run_dir / n).read_text(encoding="utf-8", errors="replace") for n in names)


def real_runs(work: Path) -> list[tuple[str, RunResult, str]]:
    """The demo project red and green, and a generated suite of 100 failing tests, run for real."""
    demo = work / "demo"
    shutil.copytree(ROOT / "examples" / "demo", demo, ignore=shutil.ignore_patterns(".venv", ".greenloop"))
    (demo / ".git").mkdir()
    out = []
    red = api.test_run(demo, session_id="bench")
    out.append(("examples/demo (its bug)", red, _raw(red)))
    cart = demo / "cart.py"
    cart.write_text(cart.read_text().replace("total * 10 // 100", "total * 90 // 100"))
    green = api.test_run(demo, session_id="bench")
    out.append(("examples/demo (fixed)", green, _raw(green)))
    auth = work / "auth"  # the todo example's Python unit (its tests pass)
    shutil.copytree(ROOT / "examples" / "todo" / "units" / "auth", auth)
    (auth / ".git").mkdir()
    unit = api.test_run(auth, session_id="bench")
    out.append(("examples/todo unit auth", unit, _raw(unit)))
    many = work / "many"
    (many / "tests").mkdir(parents=True)
    (many / ".git").mkdir()
    (many / "pyproject.toml").write_text('[tool.pytest.ini_options]\naddopts = "-p no:cacheprovider"\n')
    (many / "prices.py").write_text("def price(n):\n    return n * 100 - 1\n")
    for f in range(4):
        body = ["from prices import price\n"]
        for i in range(25):
            n = f * 25 + i
            body.append(f"\ndef test_price_of_{n:03d}_items():\n    assert price({n}) == {n * 100}\n")
        (many / "tests" / f"test_prices_{f}.py").write_text("".join(body))
    hundred = api.test_run(many, session_id="bench")
    out.append(("generated pytest suite", hundred, _raw(hundred)))
    return out


def category(r: RunResult) -> str:
    if r.outcome == "green":
        return "green"
    return {1: "one failure", 100: "100 failures"}.get(len(r.failures), f"{len(r.failures)} failures")


def main() -> int:
    count, how = tokenizer()
    print(f"tokens: {how}")
    with tempfile.TemporaryDirectory(prefix="greenloop-agent-tokens-") as tmp:
        cases = [(name, r, raw, False) for name, r, raw in fixture_results()]
        cases += [(name, r, raw, True) for name, r, raw in real_runs(Path(tmp))]
        header = f"{'case':<34} {'kind':<13} {'agent':>6} {'first':>6} {'human':>6} {'raw':>7}  agent/raw"
        print(header)
        print("-" * len(header))
        worst: dict[str, int] = {}
        named_all = True
        for name, r, raw, real in cases:
            kind = category(r)
            # with the run id, as a shell run without a session prints it (the larger figure)
            agent = agent_format.run_text(r, cwd=r.workspace, run_id=True)
            new = set(agent_format.once_keys(r.notes, green=r.outcome == "green"))
            first_text = agent_format.run_text(r, new_once=new, cwd=r.workspace, run_id=True)
            first = str(count(first_text)) if real else ""
            human = render.run_text(r, cwd=r.workspace)
            a, h, w = count(agent), count(human), count(raw)
            if kind in TARGETS:
                worst[kind] = max(worst.get(kind, 0), a)
            if kind == "100 failures":
                named_all = all(re.search(re.escape(f.test.split("::")[-1]), agent) for f in r.failures)
            print(f"{name:<34} {kind:<13} {a:>6} {first:>6} {h:>6} {w:>7}  {a / max(w, 1):.3f}")
        print()
        ok = True
        for kind, limit in TARGETS.items():
            got = worst.get(kind)
            met = got is not None and got <= limit and (kind != "100 failures" or named_all)
            ok = ok and met
            extra = ", every failing test named" if kind == "100 failures" and named_all else ""
            verdict = "met" if met else "MISSED"
            print(f"target {kind}: agent format <= {limit} tokens: worst {got}{extra} -> {verdict}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
