"""greenloop's pytest report plugin: counts and failures as one compact JSON file.

Loaded by `greenloop run` with `-p _greenloop_pytest_report` through a PYTHONPATH entry that
holds only this file, so it works in any workspace virtualenv. It imports nothing from
greenloop (only the standard library and pytest) and keeps to Python 3.8+ syntax
(its annotations are never evaluated).

    GREENLOOP_PYTEST_REPORT=<path>   where to write the report (nothing happens without it)
    GREENLOOP_PYTEST_JUNIT=<path>    the --junitxml path greenloop planned as a fallback; when
                                     this plugin is active it switches that report off

Counting follows pytest's own closing line: each report is put in the category pytest's
`pytest_report_teststatus` hook gives it (so xfail is "xfailed", a strict xpass "failed",
an error in setup or teardown "error"), collection errors are "error". Only failing reports
are kept in detail: node id, phase, file and line, message and the long representation.

The report: {"version": 1, "pytest": "8.x", "counts": {"passed": n, "failed": n, …},
"failures": [{"nodeid", "when", "category", "file", "line", "message", "longrepr"}],
"omitted": n, "duration": seconds, "exitstatus": n}
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pytest

MAX_FAILURES = 200  # failures kept in detail; the counts stay exact
MAX_LONGREPR = 20000  # characters of one failure's long representation

_REPORT_VAR = "GREENLOOP_PYTEST_REPORT"
_JUNIT_VAR = "GREENLOOP_PYTEST_JUNIT"


class _Collector:
    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config = config
        self.path = path
        self.counts: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        self.omitted = 0
        self.started = time.time()

    def _add(self, category: str, report: Any) -> None:
        if not category:
            return
        self.counts[category] = self.counts.get(category, 0) + 1
        if category not in ("failed", "error"):
            return
        if len(self.failures) >= MAX_FAILURES:
            self.omitted += 1
            return
        location = getattr(report, "location", None)
        file = line = None
        if location:
            file = location[0]
            if location[1] is not None:
                line = location[1] + 1
        elif getattr(report, "fspath", None):
            file = str(report.fspath)
        crash = getattr(report.longrepr, "reprcrash", None)
        message = getattr(crash, "message", None)
        if crash is not None and getattr(crash, "path", None) is None:
            crash = None
        try:
            text = report.longreprtext
        except Exception:  # a plugin's odd longrepr never loses the failure
            text = str(report.longrepr)
        self.failures.append({
            "nodeid": report.nodeid,
            "when": getattr(report, "when", "collect"),
            "category": category,
            "file": file,
            "line": line,
            "message": message,
            "longrepr": text[:MAX_LONGREPR],
        })

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        result = self.config.hook.pytest_report_teststatus(report=report, config=self.config)
        category = result[0] if result else ""
        if category == "failed" and report.when != "call":
            category = "error"  # pytest counts a failing setup or teardown as an error
        self._add(category, report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self._add("error", report)
        elif report.skipped:
            self._add("skipped", report)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        data = {
            "version": 1,
            "pytest": _pytest_version(),
            "counts": self.counts,
            "failures": self.failures,
            "omitted": self.omitted,
            "duration": round(time.time() - self.started, 3),
            "exitstatus": int(exitstatus),
        }
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(data, fh, ensure_ascii=False)
            os.replace(tmp, self.path)
        except OSError:
            pass  # no report: greenloop says so and reads the text output


def _pytest_version() -> str | None:
    return str(getattr(pytest, "__version__", "")) or None


@pytest.hookimpl(tryfirst=True)  # before junitxml's own pytest_configure reads xmlpath
def pytest_configure(config: pytest.Config) -> None:
    path = os.environ.get(_REPORT_VAR)
    if not path or hasattr(config, "workerinput"):  # xdist workers: the controller reports
        return
    junit = os.environ.get(_JUNIT_VAR)
    xmlpath = getattr(config.option, "xmlpath", None)
    if junit and xmlpath and os.path.abspath(xmlpath) == os.path.abspath(junit):
        config.option.xmlpath = None  # the fallback is not needed: this report replaces it
    config.pluginmanager.register(_Collector(config, path), "_greenloop_pytest_collector")

