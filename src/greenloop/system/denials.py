"""Hints that name the sandbox when it stopped a test: a refused write or a cut network.

Read from a failure's message and stack (Python, Node and shell wording), they say which mode
would allow what the test tried.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from typing import NamedTuple

from greenloop.layout import TMP_ROOT, is_under
from greenloop.model import Failure
from greenloop.result import SandboxInfo

__all__ = ["apply_denial_hints", "denial_hint"]

_ROFS = r"(?:EROFS|[Rr]ead-only file system)"
_PERM = r"(?:EACCES|[Pp]ermission denied)"
# Each finds the path a refused write named, in Python, Node and shell wording.
_PATH_FORMS = (
    r"{err}[:,]\s*(?:[a-z]+\s+)?['\"](?P<path>[^'\"]+)['\"]",  # ...: '/p'  |  ..., open '/p'
    r"{err}[^\n]*?(?:open|mkdir|write|unlink|rename|copyfile|scandir)\s+['\"](?P<path>[^'\"]+)['\"]",
    r"['\"](?P<path>/[^'\"]+)['\"]:\s*{err}",  # touch: cannot touch '/p': Read-only file system
    r"(?:cannot create|can't create)\s+(?P<path>/[^:\s]+):\s*{err}",  # sh: cannot create /p: ...
)
_NET = (
    r"ENETUNREACH|[Nn]etwork is unreachable|EAI_AGAIN|Temporary failure in name resolution"
    r"|getaddrinfo ENOTFOUND|Name or service not known|nodename nor servname"
)


class _Denials(NamedTuple):
    erofs: tuple[re.Pattern[str], ...]
    eacces: tuple[re.Pattern[str], ...]
    erofs_bare: re.Pattern[str]
    net: re.Pattern[str]


@functools.cache
def _denials() -> _Denials:
    """The patterns, compiled on first use: only a failed sandboxed run needs them."""
    return _Denials(
        tuple(re.compile(f.format(err=_ROFS)) for f in _PATH_FORMS),
        tuple(re.compile(f.format(err=_PERM)) for f in _PATH_FORMS),
        re.compile(_ROFS),
        re.compile(_NET),
    )


def _denied_path(text: str, forms: tuple[re.Pattern[str], ...]) -> str | None:
    for form in forms:
        m = form.search(text)
        if m:
            return m.group("path")
    return None


def _inside(path: str, root: str) -> bool:
    return is_under(os.path.normpath(path), os.path.normpath(root))


def _private_tmp(path: str) -> str:
    """The run's own temporary folder a path lies in (greenloop-tmp-*), else the path itself
    made unmatchable: under Landlock the rest of /tmp is not writable."""
    parts = os.path.normpath(path).split(os.sep)
    if len(parts) > 2 and parts[1] == "tmp" and parts[2].startswith("greenloop-tmp-"):
        return os.sep.join(parts[:3])
    return "\0"


def denial_hint(failure: Failure, sandbox: SandboxInfo, *, language: str = "en") -> str | None:
    """A hint when a failure shows the sandbox stopping it, naming the mode that would allow it.

    Writes: EROFS anywhere, or EACCES on an absolute path outside the workspace and /tmp (under
    Landlock, which answers EACCES and leaves only the run's own temporary folder writable: any
    absolute path outside the workspace and that folder). A write inside the workspace under
    read-only needs workspace-write; anything else needs full-access. Network (bubblewrap only:
    Landlock leaves it alone): unreachable addresses and failed name lookups need full-access.
    """
    if sandbox.mode == "full-access" or sandbox.enforced_by is None:
        return None
    landlocked = sandbox.enforced_by.startswith("landlock")
    label = "auto: workspace-write" if sandbox.mode == "auto" else sandbox.mode
    text = "\n".join(p for p in (failure.message, failure.stack, failure.got or "") if p)
    ws = sandbox.workspace_root or ""
    stopped = False
    pattern = _denials()
    path = _denied_path(text, pattern.erofs)
    if path is not None or pattern.erofs_bare.search(text):
        stopped = True
    else:
        path = _denied_path(text, pattern.eacces)
        # EACCES inside the workspace or /tmp is an ordinary permission problem, not the sandbox.
        writable_tmp = _private_tmp(path) if landlocked and path else TMP_ROOT
        stopped = (
            path is not None
            and os.path.isabs(path)
            and not ((ws and _inside(path, ws)) or _inside(path, writable_tmp))
        )
    if stopped:
        inside_ws = bool(path) and (not os.path.isabs(path or "") or (ws != "" and _inside(path or "", ws)))
        needed = "workspace-write" if sandbox.mode == "read-only" and inside_ws else "full-access"
        where = f" to {path}" if path else ""
        if language == "zh":
            return (
                f"沙箱（{label}）阻止了写入{where}：此模式下只有"
                f"{'私有 /tmp' if sandbox.mode == 'read-only' else '工作区和私有 /tmp'}可写。"
                f"请改为写入工作区或临时目录；若确实需要，使用 {needed} 模式（--sandbox {needed}）。"
            )
        tmp_name = "the run's private temporary folder ($TMPDIR)" if landlocked else "a private /tmp"
        allowed = f"only {tmp_name}" if sandbox.mode == "read-only" else f"only the workspace and {tmp_name}"
        return (
            f"The sandbox ({label}) stopped a write{where}: {allowed} are writable in this mode. "
            f"Write under the workspace or a temporary folder instead, or, if the test really needs it, "
            f"run with --sandbox {needed} (tool argument sandbox='{needed}'), which allows it."
        )
    if pattern.net.search(text) and not landlocked:
        if language == "zh":
            return (
                f"沙箱（{label}）切断了网络：只有沙箱内的回环地址可用。"
                "请在测试中使用本地桩服务；若确实需要外网，使用 full-access 模式（--sandbox full-access）。"
            )
        return (
            f"The sandbox ({label}) cut the network: only loopback inside the sandbox is reachable. "
            "Use a local stub server in the test, or, if it really needs the outside network, "
            "run with --sandbox full-access (tool argument sandbox='full-access'), which allows it."
        )
    return None


def apply_denial_hints(
    failures: Iterable[Failure], sandbox: SandboxInfo, *, language: str = "en"
) -> tuple[Failure, ...]:
    """Put the sandbox hint first on each failure the sandbox caused (keeping any other hint)."""

    out: list[Failure] = []
    for f in failures:
        hint = denial_hint(f, sandbox, language=language)
        if hint and hint not in f.hint:
            f = f._replace(hint=f"{hint} {f.hint}".strip() if f.hint else hint)
        out.append(f)
    return tuple(out)
