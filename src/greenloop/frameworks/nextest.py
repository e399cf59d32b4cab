"""cargo-nextest's JUnit report: one <testsuite> per test binary, one <testcase> per test, the
captured output of a failing test in <system-out>/<system-err> (read as libtest's, through
frameworks/cargo.py). frameworks/nextest.toml turns the report on (frameworks/cargo_plan.py)."""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET

from greenloop.frameworks.cargo import failure_of
from greenloop.frameworks.results import closing_result
from greenloop.model import Failure, ParseResult

__all__ = ["parse_report", "with_skipped_from_summary"]


def parse_report(path: str, root: str | None = None) -> ParseResult:
    """cargo-nextest's JUnit report: one <testsuite> per test binary, one <testcase> per test,
    the captured output of a failing test in <system-out>/<system-err> (read as libtest's)."""
    try:
        tree = ET.parse(path)
    except FileNotFoundError:
        return ParseResult(notes=(f"report {path} is missing: cargo nextest never wrote it",))
    except (OSError, ET.ParseError) as exc:
        return ParseResult(notes=(f"report {path} is not valid JUnit XML ({exc})",))
    passed = failed = skipped = 0
    failures: list[Failure] = []
    passed_names: list[str] = []
    skipped_names: list[str] = []
    duration = 0.0
    for suite in tree.getroot().iter("testsuite"):
        with contextlib.suppress(ValueError):
            duration += float(suite.get("time") or 0)
        for case in suite.iter("testcase"):
            name = case.get("name") or "?"
            problem = case.find("failure")
            if problem is None:
                problem = case.find("error")
            if case.find("skipped") is not None:
                skipped += 1
                skipped_names.append(name)
            elif problem is not None:
                failed += 1
                parts = (problem, case.find("system-out"), case.find("system-err"))
                text = "\n".join(x.text or "" for x in parts if x is not None)
                body = text.splitlines()
                f = failure_of(name, body)
                if not f.message:
                    f = f._replace(message=(problem.get("message") or problem.get("type") or "failed"))
                failures.append(f)
            else:
                passed += 1
                passed_names.append(name)
    return closing_result(
        (passed, failed, skipped), failures, duration_ms=int(duration * 1000), passed_names=passed_names,
        skipped_names=skipped_names,
    )



def with_skipped_from_summary(report: ParseResult, text: ParseResult) -> ParseResult:
    """The report's counts plus the tests nextest skipped, read from its own `Summary` line.

    nextest's JUnit report lists only the tests it ran: ignored tests (`#[ignore]`) and tests
    its profile filters out appear only as "N skipped" in the closing line, which greenloop's
    text parser reads (frameworks/cargo.py). Its counts must equal nextest's own, so the
    skipped ones are added from there, with a note; nothing else is taken from the text.
    """
    extra = text.summary.skipped - report.summary.skipped if text.recognized else 0
    if extra <= 0:
        return report
    s = report.summary
    note = (f"{extra} test(s) nextest skipped (ignored, or filtered out by its profile) are counted "
            "from its Summary line: its JUnit report lists only the tests it ran")
    return report._replace(
        summary=s._replace(total=s.total + extra, skipped=s.skipped + extra),
        notes=(*report.notes, note),
        # the text names them where nextest printed a SKIP line for them
        skipped_tests=tuple(dict.fromkeys((*report.skipped_tests, *text.skipped_tests))),
    )
