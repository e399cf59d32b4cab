"""Background runs (`greenloop run --background`, `test_run(run_in_background=True)`).

`start()` records a job in the state database and starts a detached worker process through
proc.spawn (its own session, stdin closed, output in `.greenloop/jobs/<id>/worker.log`) and
answers at once with the job id. The worker (`python -m greenloop.closure.jobs WORKSPACE JOB_ID`)
calls `greenloop.api.test_run`, which records the run for the session like any other run, so
the gate sees it as soon as the job ends; then it stores the result on the job.
`status()` reports on a job, optionally waiting for it; a worker that died without a word is
reported as `lost`. `cancel()` stops a running job's whole process tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

from greenloop.closure.store import JobRow, Store, state_root
from greenloop.errors import ExitCode, UsageError
from greenloop.layout import PACKAGE_DIR, new_run_id

__all__ = ["JobState", "JobStatus", "cancel", "new_job_id", "start", "status", "worker_main"]

JobState = Literal["starting", "running", "done", "failed", "lost", "cancelled"]
POLL_S = 0.1
# The keyword arguments of api.test_run a job may carry (json-serialisable ones).
JOB_KWARGS = frozenset(
    {"framework", "target", "last_failed", "command", "timeout_ms", "sandbox", "mode", "resume_token",
     "shard", "rerun_failures", "affected"}
)


def new_job_id(now: float | None = None) -> str:
    """A new, sortable background job id (`job-YYYYMMDD-HHMMSS-xxxxxx`)."""
    return new_run_id(now, prefix="job")


class JobStatus(NamedTuple):
    """Where a background run stands: starting, running, or ended with its result or error."""
    job_id: str
    status: JobState
    session_id: str | None
    workspace: str
    created_at: float
    ended_at: float | None = None
    run_id: str | None = None
    ok: bool | None = None
    result: dict[str, Any] | None = None  # the RunResult's JSON when done
    error: str | None = None
    log_path: str | None = None
    host: str | None = None  # the machine the worker runs on (None: recorded before hosts were)

    @property
    def finished(self) -> bool:
        """Whether the job has ended (done, failed, lost or cancelled)."""
        return self.status not in ("starting", "running")

    def to_json(self) -> dict[str, Any]:
        """The status as JSON (what `greenloop job` and the MCP tool `test_job` return)."""
        from greenloop.closure.transitions import iso

        return {
            "job_id": self.job_id,
            "status": self.status,
            "finished": self.finished,
            "session_id": self.session_id,
            "workspace": self.workspace,
            "created_at": iso(self.created_at),
            "ended_at": None if self.ended_at is None else iso(self.ended_at),
            "run_id": self.run_id,
            "ok": self.ok,
            "result": self.result,
            "error": self.error,
            "log_path": self.log_path,
            "host": self.host,
        }


def this_host() -> str:
    """This machine's name, as a job's row records where its worker runs."""
    return socket.gethostname()


def _elsewhere(row: JobRow) -> str | None:
    """The other machine a job's worker runs on, or None when it is this one (or unknown)."""
    host = row.get("host")
    return str(host) if host and host != this_host() else None


def _job_dir(workspace: str, job_id: str) -> str:
    return os.path.join(state_root(workspace), ".greenloop", "jobs", job_id)


def start(
    workspace: str | os.PathLike[str],
    *,
    session_id: str | None = None,
    python: str | None = None,
    **test_run_kwargs: Any,
) -> str:
    """Start a background run and return its job id at once."""
    ws = os.path.abspath(os.fspath(workspace))
    if not os.path.isdir(ws):
        raise UsageError(f"workspace {ws} is not a folder; pass an existing folder")
    unknown = set(test_run_kwargs) - JOB_KWARGS
    if unknown:
        raise UsageError(f"a background run cannot take {', '.join(sorted(unknown))}")
    # (affected None is kept: it means the config's `affected`, as for a call in the foreground)
    kwargs = {k: v for k, v in test_run_kwargs.items() if v is not None or k == "affected"}
    try:
        json.dumps(kwargs)
    except TypeError as exc:
        raise UsageError(f"background run arguments must be plain values: {exc}") from None
    job_id = new_job_id()
    from greenloop.system import proc

    log_path = os.path.join(_job_dir(ws, job_id), "worker.log")
    with Store(ws) as store:
        store.add_job(job_id, ws, session_id, kwargs)
        env = dict(os.environ)
        # The worker must import this very greenloop, installed or not.
        package_root = os.path.dirname(PACKAGE_DIR)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        try:
            child = proc.spawn(
                [python or sys.executable, "-m", "greenloop.closure.jobs", ws, job_id],
                cwd=ws,
                env=env,
                stdout_path=log_path,
            )
        except OSError as exc:
            store.update_job(job_id, status="failed", error=f"could not start the worker: {exc}")
            raise UsageError(f"could not start a background run: {exc}", exit_code=ExitCode.BROKEN) from None
        # The worker may already have moved past "starting"; only fill in what it cannot know.
        store.update_job(job_id, pid=child.pid, token=child.token, log_path=log_path, host=this_host())
    # The worker is detached (own session) and outlives this call; a daemon thread collects its
    # exit status, so a long-lived caller (the MCP server) never keeps it <defunct>.
    threading.Thread(target=child.popen.wait, name="greenloop-job-reap", daemon=True).start()
    return job_id


def _pid_alive(pid: int | None, token: str | None) -> bool:
    """The job's worker is still running: the pid is alive and (when known) still carries its
    token, so a recycled pid is not taken for the worker."""
    from greenloop.system import proc

    if not pid or not proc.alive(pid):
        return False
    return not token or proc.carries_token(pid, token) is not False  # unreadable: trust the pid


def _status_from_row(row: JobRow) -> JobStatus:
    result = None
    if row.get("result"):
        try:
            result = json.loads(row["result"])
        except ValueError:
            result = None
    ok = row.get("ok")
    return JobStatus(
        job_id=str(row["job_id"]),
        status=row["status"],
        session_id=row.get("session_id"),
        workspace=str(row["workspace"]),
        created_at=float(row["created_at"]),
        ended_at=row.get("ended_at"),
        run_id=row.get("run_id"),
        ok=None if ok is None else bool(ok),
        result=result,
        error=row.get("error"),
        log_path=row.get("log_path"),
        host=row.get("host"),
    )


def _look(store: Store, ws: str, job_id: str) -> tuple[JobStatus, JobRow]:
    """The job as it stands (a worker found dead is marked lost), and its row."""
    row = store.job(job_id)
    if row is None:
        raise UsageError(
            f"no job {job_id!r} in {state_root(ws)}; "
            "`greenloop job` takes an id that `run --background` printed"
        )
    if (
        row["status"] in ("starting", "running")
        and row.get("pid")
        and _elsewhere(row) is None  # another machine's pid says nothing here
        and not _pid_alive(row.get("pid"), row.get("token"))
    ):
        # Dead worker: re-read first, since it may have written its result just now.
        row = store.job(job_id) or row
        if row["status"] in ("starting", "running"):
            log = row.get("log_path") or "its log"
            store.finish_job_if_running(
                job_id, "lost", f"the worker process ended without recording a result; see {log}"
            )
            row = store.job(job_id) or row
    return _status_from_row(row), row


def status(
    workspace: str | os.PathLike[str],
    job_id: str,
    wait: bool = False,
    timeout_s: float | None = None,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> JobStatus:
    """Report on a job; with `wait`, until it ends or `timeout_s` passes (then as it stands)."""
    ws = os.fspath(workspace)
    deadline = None if timeout_s is None else clock() + timeout_s
    with Store(ws) as store:
        while True:
            current, _row = _look(store, ws, job_id)
            if current.finished or not wait or (deadline is not None and clock() >= deadline):
                return current
            time.sleep(POLL_S)


def cancel(workspace: str | os.PathLike[str], job_id: str) -> JobStatus:
    """Stop a running job: SIGTERM lets the worker stop its run's process tree; then SIGKILL."""
    ws = os.fspath(workspace)
    with Store(ws) as store:
        current, row = _look(store, ws, job_id)
        if current.finished:
            return current
        host = _elsewhere(row)
        if host is not None:
            raise UsageError(f"job {job_id} runs on {host}, not on this machine ({this_host()}): its "
                             "worker can only be stopped there (test_job with cancel, from an agent on "
                             f"{host})")
        pid, token = row.get("pid"), row.get("token")
        if pid and _pid_alive(pid, token):
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGTERM)
        store.finish_job_if_running(job_id, "cancelled", "cancelled on request")
    deadline = time.monotonic() + 5.0
    while pid and _pid_alive(pid, token) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    if pid and _pid_alive(pid, token) and token:
        from greenloop.system.proc import kill_token

        kill_token(str(token))
    return status(ws, job_id)


def worker_main(workspace: str, job_id: str) -> int:
    """The detached worker: run the suite through the API, record the result on the job."""
    import threading

    with Store(workspace) as store:
        row = store.job(job_id)
        if row is None:
            print(f"greenloop job worker: no job {job_id}", file=sys.stderr)
            return ExitCode.USAGE
        store.update_job(job_id, status="running", pid=os.getpid(), host=this_host())
        kwargs = json.loads(row.get("kwargs") or "{}")
        session_id = row.get("session_id")
    cancel_event = threading.Event()

    def on_term(signum: int, frame: Any) -> None:
        cancel_event.set()

    signal.signal(signal.SIGTERM, on_term)
    try:
        from greenloop import api

        result = api.test_run(workspace, session_id=session_id, cancel=cancel_event, **kwargs)
    except BaseException as exc:
        with Store(workspace) as store:
            store.finish_job_if_running(job_id, "failed", f"{type(exc).__name__}: {exc}")
        print(f"greenloop job worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        return ExitCode.BROKEN
    with Store(workspace) as store:
        store.update_job(
            job_id,
            status="cancelled" if cancel_event.is_set() else "done",
            ended_at=time.time(),
            run_id=result.run_id,
            ok=int(result.ok),
            result=json.dumps(result.to_json()),
        )
    return ExitCode.OK


if __name__ == "__main__":  # pragma: no cover - the worker entry point, exercised by tests as a process
    sys.exit(worker_main(sys.argv[1], sys.argv[2]))
