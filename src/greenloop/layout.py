"""Where things live on disk: the state folder, run folders, run ids, project roots.

Only paths are computed here (and the state folder made, with the `.gitignore` that keeps
it out of the user's `git status`); reading and writing the files is the job of the module
that knows each format (store.py, bugs/, run.py, integration/).
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib costs the Stop hook ~8 ms (urllib, ipaddress): imported where used
    from pathlib import Path

__all__ = [
    "BUG_LOG_NAME",
    "DB_NAME",
    "NOT_CODE_DIRS",
    "PACKAGE_DIR",
    "PRIVATE_TMP_CACHE",
    "PROGRESS_NAME",
    "RESULT_NAME",
    "RUN_RECORD_NAME",
    "STATE_DIR",
    "STDERR_NAME",
    "STDOUT_NAME",
    "STREAM_NAME",
    "TIMELINE_NAME",
    "TMP_ROOT",
    "cache_dir",
    "db_path",
    "find_project_root",
    "git_root",
    "is_under",
    "make_state_dir",
    "new_run_id",
    "package_file",
    "records_dir",
    "rerun_dir",
    "run_dir",
    "runs_dir",
    "state_dir",
    "state_root",
    "unit_of",
    "unit_run_dir",
]

STATE_DIR = ".greenloop"
DB_NAME = "state.db"  # the SQLite state database, in STATE_DIR of the state root
# The files of one run folder: the stored result, and the runner's output as it ran.
RESULT_NAME = "result.json"
STDOUT_NAME = "stdout.txt"
STDERR_NAME = "stderr.txt"
# What a run records while its suite runs (runner/recover.py), and the per-test streams the
# runners' greenloop reporters append to (runner/dialects.py plans them).
RUN_RECORD_NAME = "run.json"
PROGRESS_NAME = "progress.ndjson"
STREAM_NAME = "stream.ndjson"

# The machine's shared temporary folder: bubblewrap replaces it with a private one.
TMP_ROOT = "/tmp"
# Where a read-only run's caches go inside bubblewrap's private /tmp (gone with the run).
PRIVATE_TMP_CACHE = "/tmp/greenloop-cache"

# greenloop's own installed package folder: the files runners load from it (the pytest plugin,
# the reporters, the unittest runner) and the worker processes that import it are found here.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def package_file(*parts: str) -> str:
    """A file or folder shipped inside greenloop's package (e.g. `frameworks/reporters`)."""
    return os.path.join(PACKAGE_DIR, *parts)

# Folders that hold no code of the user's: version control, greenloop's state, installed
# packages, virtualenvs, tool caches and build outputs. The working-tree fingerprint skips
# exactly these; the probe skips these and more (fingerprint.SKIP_DIRS, probe.SKIP_DIRS).
NOT_CODE_DIRS = frozenset(
    {
        ".git",
        STATE_DIR,
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "dist",
        "build",
        ".next",
        "coverage",
    }
)


def state_root(workspace: str | os.PathLike[str]) -> str:
    """Where the state database of a workspace lives: the nearest folder at or above it that
    holds `.greenloop/state.db`, else the enclosing git root, else the workspace itself (so a
    run in a package of a monorepo and a hook at the repository root share one state)."""
    start = os.path.abspath(os.fspath(workspace))
    folder = start
    repo: str | None = None
    while True:
        if os.path.isfile(os.path.join(folder, STATE_DIR, DB_NAME)):
            return folder
        if repo is None and os.path.exists(os.path.join(folder, ".git")):
            repo = folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return repo or start
        folder = parent


def db_path(workspace: str | os.PathLike[str]) -> str:
    """The SQLite state file of a workspace: `<state root>/.greenloop/state.db`."""
    return os.path.join(state_root(workspace), STATE_DIR, DB_NAME)


def state_dir(workspace: str | os.PathLike[str]) -> Path:
    """The workspace's private state folder (`.greenloop/`)."""
    from pathlib import Path

    return Path(workspace) / STATE_DIR


# Everything under .greenloop/ is greenloop's own (state database, run folders, caches):
# never the user's to commit, so the folder ignores itself as tools such as pytest's cache do.
_IGNORE_ALL = "# Created by greenloop: its state, runs and caches are never committed.\n*\n"


def make_state_dir(folder: str | os.PathLike[str]) -> None:
    """Make a `.greenloop/` folder (and its parents) holding a `.gitignore` that ignores it all."""
    os.makedirs(folder, exist_ok=True)
    ignore = os.path.join(folder, ".gitignore")
    if os.path.exists(ignore):
        return
    tmp = f"{ignore}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(_IGNORE_ALL)
        os.replace(tmp, ignore)  # whole or absent, whoever of two racing writers wins
    except OSError:
        pass  # a read-only folder still runs; only `git status` shows the folder


def new_run_id(now: float | None = None, prefix: str = "run") -> str:
    """A sortable, unique id: `<prefix>-YYYYMMDD-HHMMSS-xxxxxx` (UTC); jobs use prefix "job"."""
    t = time.gmtime(time.time() if now is None else now)
    # os.urandom, not secrets: importing secrets loads OpenSSL (~10 ms of every start-up)
    return f"{prefix}-" + time.strftime("%Y%m%d-%H%M%S-", t) + os.urandom(3).hex()


def cache_dir(workspace: str | os.PathLike[str]) -> Path:
    """The workspace's tool caches (npm, XDG, Go, bun) that a sandboxed run writes to and keeps."""
    return state_dir(workspace) / "cache"


def is_under(path: str, root: str) -> bool:
    """Is `path` the folder `root` or inside it (both already normalised)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def runs_dir(workspace: str | os.PathLike[str]) -> Path:
    """The folder of a workspace's stored runs (`.greenloop/runs/`)."""
    return state_dir(workspace) / "runs"


def run_dir(workspace: str | os.PathLike[str], run_id: str) -> Path:
    """One run's folder (`.greenloop/runs/<run id>/`): its output, reports and result."""
    return runs_dir(workspace) / run_id


def rerun_dir(run_folder: Path, attempt: int) -> Path:
    """The folder of a red run's `attempt`-th rerun of its failing tests, inside its own folder."""
    return run_folder / f"rerun-{attempt}"


def unit_run_dir(project: Path, unit: str, run_id: str) -> Path:
    """A DevLoop unit's copy of a run (`units/<unit>/runs/<run id>/`), as the seeds lay it out."""
    return project / "units" / unit / "runs" / run_id


def git_root(start: str | os.PathLike[str]) -> str | None:
    """Walk up from `start` (made absolute) to the first folder holding `.git` (a folder or a file)."""
    folder = os.path.abspath(os.fspath(start))
    while True:
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def find_project_root(start: str | os.PathLike[str]) -> Path | None:
    """Walk up from `start` to the folder holding `units.json` or `bugs.ndjson` (a DevLoop
    project, or a workspace whose bug log is still at its root from before `.greenloop/`)."""
    from pathlib import Path

    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / "units.json").is_file() or (folder / BUG_LOG_NAME).is_file():
            return folder
    return None


BUG_LOG_NAME = "bugs.ndjson"
TIMELINE_NAME = "timeline.ndjson"


def records_dir(workspace: str | os.PathLike[str], configured: str = "") -> Path:
    """The folder of a workspace's bug log and timeline (docs/bugs.md, "Where the log lives"):
    - `configured` (the config's `records_dir`), relative to a DevLoop project's root, else
      to the workspace, when given;
    - a DevLoop project's root (`units.json`), where the seeds keep `bugs.ndjson`;
    - the folder of a `bugs.ndjson` already at or above the workspace, or of a
      `timeline.ndjson` at it: the place greenloop used before, still read and appended, so
      an existing log is never left behind;
    - else the workspace's `.greenloop/`, which ignores itself: nothing in `git status`."""
    from pathlib import Path

    here = Path(workspace).resolve()
    found = find_project_root(here)
    if configured:  # relative to a DevLoop project's root, else to the workspace
        devloop = found is not None and (found / "units.json").is_file()
        return (found if devloop and found is not None else here) / configured
    if found is not None:
        return found
    if (here / TIMELINE_NAME).is_file():
        return here
    return here / STATE_DIR


def unit_of(workspace: str | os.PathLike[str]) -> tuple[Path, str] | None:
    """If `workspace` is (inside) a DevLoop unit `units/<unit>/`, return (project root, unit id)."""
    from pathlib import Path

    here = Path(workspace).resolve()
    for folder in (here, *here.parents):
        if folder.parent.name == "units" and (folder.parent.parent / "units.json").is_file():
            return folder.parent.parent, folder.name
        if (folder / "units.json").is_file():
            return None
    return None
