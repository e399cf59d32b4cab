"""The bug log, `bugs.ndjson`, and the bugs test runs open and close.

`record` (a bug, its statuses and moves), `log` (the locked append-only file: the only code
that reads or writes it), `fold` (the log's bytes to current states, fast), `workspace` (one
call per action for a workspace path), `bridge` (bugs from unit and integration runs).
"""
