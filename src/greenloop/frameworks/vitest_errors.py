"""What vitest's JSON report leaves out of a failed run: its unhandled errors, among them a
worker that died inside a test file ("Worker exited unexpectedly": a test that killed its
process, a native crash). vitest prints them and counts them on its `Errors  N errors` line,
and exits 1; the JSON report names no error and leaves the dead worker's tests `pending`.

`with_unhandled_errors` adds the text output's unhandled errors to the report's result, each
one failure counted as failed, as the text parser counts them. A dead worker's error names
no file; when the report holds exactly one file with tests that never reported, the failure
is named after that file (the one whose worker died), with the tests it never finished.
"""

from __future__ import annotations

import json
import re

from greenloop.frameworks.common import relativize
from greenloop.model import Failure, ParseResult

__all__ = ["never_reported", "with_unhandled_errors"]

_UNHANDLED = "unhandled error"
_DEAD_WORKER = re.compile(r"Worker exited unexpectedly|Worker \w+ emitted error|\[vitest-pool\]")


def never_reported(report_path: str, root: str | None) -> dict[str, list[str]]:
    """Test file (relative to root) -> names of its tests the report leaves `pending`."""
    try:
        with open(report_path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    found: dict[str, list[str]] = {}
    for r in data.get("testResults") or () if isinstance(data, dict) else ():
        if not isinstance(r, dict):
            continue
        names = [
            " > ".join([*(str(x) for x in a.get("ancestorTitles") or ()), str(a.get("title") or "")])
            for a in r.get("assertionResults") or ()
            if isinstance(a, dict) and a.get("status") == "pending"
        ]
        if names:
            file = str(r.get("name") or "")
            found[relativize(file, root) if root else file] = names
    return found


def with_unhandled_errors(report: ParseResult, text: ParseResult, report_path: str,
                          root: str | None) -> ParseResult:
    """The report's result plus the unhandled errors only the text output shows."""
    known = {(f.test, f.kind) for f in report.failures}
    extra = [f for f in text.failures if f.test.startswith(_UNHANDLED) and (f.test, f.kind) not in known]
    if not extra:
        return report
    dead = [i for i, f in enumerate(extra) if _DEAD_WORKER.search(f"{f.test}\n{f.message}")]
    if len(dead) == 1:
        files = never_reported(report_path, root)
        if len(files) == 1:
            [(file, names)] = files.items()
            shown = ", ".join(names[:3]) + (" …" if len(names) > 3 else "")
            extra[dead[0]] = Failure(
                test=file, file=file, kind="test",
                message=f"the worker running this file exited before its tests finished; "
                f"{len(names)} test(s) never reported a result ({shown}): a test that kills its "
                f"process or crashes node (vitest: {extra[dead[0]].message.splitlines()[0]})",
            )
    s = report.summary
    summary = s._replace(total=s.total + len(extra), failed=s.failed + len(extra))
    listed = ", ".join(f.test for f in extra[:3]) + (" …" if len(extra) > 3 else "")
    note = (f"{len(extra)} unhandled error(s) taken from the text output: vitest prints them and counts "
            f"them on its Errors line, its JSON report leaves them out: {listed}")
    return report._replace(summary=summary, failures=(*report.failures, *extra), notes=(*report.notes, note))
