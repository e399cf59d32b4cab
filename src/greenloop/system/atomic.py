"""Replacing a file whole: a reader sees the old file or the new one, never half of one.

The text goes to a temporary file beside the target (same folder, so the rename stays on one
file system), optionally flushed to disk, given its mode, then renamed over the target; a
failure on the way removes the temporary file and raises. The temporary name holds the pid and
random bytes, so two writers (processes or threads) never share one. `tempfile` is not used:
importing it loads `random` and `hashlib`, which the run's start path does not pay for.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["write_text"]


def write_text(
    path: str | os.PathLike[str],
    text: str,
    *,
    mode: int | None = None,
    keep_mode: bool = False,
    fsync: bool = False,
) -> None:
    """Replace `path` with `text` (UTF-8), its folder made if missing. `mode`: the new file's
    permissions (e.g. 0o600 for a secret); `keep_mode`: those of the file it replaces, when there
    is one; `fsync`: flushed to disk before the rename (a record that must survive a crash)."""
    target = os.fspath(path)
    folder = os.path.dirname(target) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif keep_mode and os.path.exists(target):
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
