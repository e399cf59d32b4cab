from __future__ import annotations

from greenloop.cli import entry

entry()
