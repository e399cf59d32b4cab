"""Timestamps as greenloop writes them: ISO 8601 in UTC, one helper for each precision.

`iso` (milliseconds: the closure state, the timeline, `check`) and `iso_seconds` (run and bug
records, integration runs, audit records). Standard library `time` only: the Stop hook's path
imports this module.
"""

from __future__ import annotations

import time

__all__ = ["iso", "iso_seconds"]


def iso(t: float) -> str:
    """An epoch time as an ISO 8601 UTC string with milliseconds (`2026-12-04T02:56:51.123Z`)."""
    whole = int(t)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((t - whole) * 1000):03d}Z"


def iso_seconds(t: float) -> str:
    """An epoch time as an ISO 8601 UTC string to the second (`2026-12-04T02:56:51Z`)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
