"""The stream greenloop's node:test reporter writes as tests start and end
(frameworks/node_reporter/), read when a run is stopped at its deadline: the tests that were
running then."""

from __future__ import annotations

from greenloop.frameworks.common import relativize

__all__ = ["running_tests"]


def running_tests(path: str, root: str | None = None) -> list[tuple[str, str | None, int | None]]:
    """The tests greenloop's node:test reporter saw start and not complete (its stream, see
    frameworks/node_reporter/): per test file the last one started, as (name with its
    describes joined by " > ", file, line). The entry node makes for a test file itself is
    not a test, but under `--test-concurrency` node holds back a file's test events until the
    files before it have finished, so a file started and not ended with none of its tests
    seen is named itself (its line unknown): the test running there is not known, the file
    is. Empty when the stream is missing."""
    import json

    stacks: dict[str | None, list[str]] = {}
    running: dict[str | None, list[tuple[tuple[str, ...], int | None]]] = {}
    files_open: list[str] = []  # test files whose own entry started and has not ended
    try:
        fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except OSError:
        return []
    with fh:
        for raw in fh:
            try:
                item = json.loads(raw)
            except ValueError:
                continue  # a line torn by the kill
            if not isinstance(item, dict):
                continue
            file = item.get("file") if isinstance(item.get("file"), str) else None
            nesting: int = item["nesting"] if isinstance(item.get("nesting"), int) else 0
            name = item.get("start", item.get("end"))
            if isinstance(name, str) and name == file:
                if "start" in item and name not in files_open:
                    files_open.append(name)
                elif "end" in item and name in files_open:
                    files_open.remove(name)
                continue
            if not isinstance(name, str):
                continue
            stack = stacks.setdefault(file, [])
            open_ = running.setdefault(file, [])
            if "start" in item:
                del stack[nesting:]
                stack.append(name)
                line = item.get("line") if isinstance(item.get("line"), int) else None
                open_.append((tuple(stack), line))
            else:
                for i in range(len(open_) - 1, -1, -1):
                    names = open_[i][0]
                    if len(names) == nesting + 1 and names[-1] == name:
                        del open_[i]
                        break
    found: list[tuple[str, str | None, int | None]] = []
    for file, open_ in running.items():
        if open_:
            names, line = open_[-1]
            found.append((" > ".join(names), relativize(file, root) if file and root else file, line))
    for file in files_open:
        if not running.get(file):
            name = relativize(file, root) if root else file
            found.append((name, name, None))
    return found
