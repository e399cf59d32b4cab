"""`integrate()`: validate, pick ports, start the units, run the cases, tear down, record.

The one place where the run's exceptions become outcomes: a bad spec raises SpecError before
anything starts or is written; everything after the run folder exists ends in a result.json,
a process.log and a teardown that leaves no process behind (also on Ctrl-C, which is re-raised
after the teardown so the CLI can exit 130).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from greenloop.errors import UsageError
from greenloop.integration import verdict
from greenloop.integration.browser import BrowserSession
from greenloop.integration.case_loop import CaseLoop
from greenloop.integration.cases import CASE_TIMEOUT_S, CaseOutcome
from greenloop.integration.chromium import require_browser
from greenloop.integration.health import HEALTH_INTERVAL_S, HEALTH_TIMEOUT_S
from greenloop.integration.http_call import Transport, http_transport
from greenloop.integration.ports import HOST, PortPicker, PortUnavailable
from greenloop.integration.process_log import LOG_CAP_BYTES, ProcessLog
from greenloop.integration.processes import GRACE_S, Supervisor
from greenloop.integration.result import (
    IntegrationFailure,
    IntegrationResult,
    atomic_write,
    runs_dir,
    write_junit,
)
from greenloop.integration.spec.loading import load_spec
from greenloop.integration.spec.records import Spec, Unit
from greenloop.integration.spec.units import check_programs
from greenloop.integration.static import StaticServer, serve_unit
from greenloop.integration.trace import TraceWriter
from greenloop.integration.unit_process import StartFailure
from greenloop.layout import new_run_id
from greenloop.timefmt import iso_seconds

__all__ = ["RUN_TIMEOUT_S", "integrate"]

RUN_TIMEOUT_S = 300.0


def _write_env(path: Path, ports: Mapping[str, int]) -> None:
    data = {uid: {"port": port, "url": f"http://{HOST}:{port}"} for uid, port in ports.items()}
    atomic_write(path, json.dumps(data, indent=2) + "\n")


_iso = iso_seconds


def _resuming(
    project: str | os.PathLike[str], token: str
) -> tuple[str, Path, tuple[str, ...], dict[str, tuple[CaseOutcome, int]]]:
    """A resumed run's id, folder, cases and the outcomes it kept; checked before anything
    starts: the token, its project, an unchanged spec."""
    from greenloop.integration import attempts as attempts_mod

    base = Path(load_spec(project).root)
    run_id, resumed = attempts_mod.check_token(base, runs_dir(base), token)
    cases = tuple(attempts_mod.attempts(resumed)[0].get("cases") or ())
    return run_id, resumed, cases, attempts_mod.load_cases(resumed)


def _finished(
    resumed: Path | None, prior: dict[str, tuple[CaseOutcome, int]], spec: Spec
) -> IntegrationResult | None:
    """A resumed run whose every case had finished: its result, said so; else None."""
    done_file = resumed / "result.json" if resumed is not None else None
    if done_file is None or not done_file.is_file() or not all(c.id in prior for c in spec.cases):
        return None
    finished = IntegrationResult.from_json(json.loads(done_file.read_text(encoding="utf-8")))
    nothing = "resume: every case of this run had finished; nothing ran"
    return replace(finished, notes=(*finished.notes, nothing))


def _junit_path(junit: str | os.PathLike[str] | None) -> Path | None:
    """Where `--junit` writes, checked before anything starts (its folder must exist)."""
    junit_path = Path(junit).resolve() if junit is not None else None
    if junit_path is not None and not junit_path.parent.is_dir():
        raise UsageError(
            f"--junit {str(junit)!r}: folder {str(junit_path.parent)!r} does not exist; create it first"
        )
    return junit_path


def _resume_notes(log: ProcessLog, attempt: int, run_id: str,
                  prior: dict[str, tuple[CaseOutcome, int]]) -> list[str]:
    """A resumed attempt: which cases earlier attempts finished (in the log) and the result's note."""
    done = ", ".join(f"{cid} (attempt {n})" for cid, (_, n) in prior.items()) or "none"
    log.note(f"attempt {attempt}: resuming {run_id}; cases already finished: {done}")
    return [f"attempt {attempt} of this run: {len(prior)} case(s) came from earlier attempts "
            "(each case row names its attempt)"]


def _serve_static(
    units: Sequence[Unit], backend_urls: dict[str, str], picker: PortPicker, log: ProcessLog,
    servers: dict[str, StaticServer], ports_changed: Callable[[], None],
) -> StartFailure | None:
    """Serve each frontend unit's static folder (into `servers`); the first that cannot get a
    port is the run's start failure."""
    for u in units:
        try:
            srv = servers[u.id] = serve_unit(u, backend_urls, picker, write=log.write)
        except PortUnavailable as exc:
            return StartFailure(u.id, "port_unavailable", str(exc))
        ports_changed()
        log.note(f"serving {u.id} ({u.static}) on {srv.url}, api_base {srv.config['api_base']}")
    return None


def integrate(
    project: str | os.PathLike[str],
    *,
    cases: Sequence[str] = (),
    junit: str | os.PathLike[str] | None = None,
    case_timeout_s: float = CASE_TIMEOUT_S,
    run_timeout_s: float = RUN_TIMEOUT_S,
    health_timeout_s: float = HEALTH_TIMEOUT_S,
    health_interval_s: float = HEALTH_INTERVAL_S,
    grace_s: float = GRACE_S,
    log_cap_bytes: int = LOG_CAP_BYTES,
    env: Mapping[str, str] | None = None,
    port_picker: PortPicker | None = None,
    transport: Transport = http_transport,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
    run_id: str | None = None,
    record_bugs: bool = True,
    on_event: Callable[[str], None] | None = None,
    sandbox: str | None = None,
    cancel: threading.Event | None = None,
    resume_token: str | None = None,
) -> IntegrationResult:
    """Run a DevLoop project's integration cases against its real units on loopback ports.

    Raises SpecError (exit 2) when units.json, integration/spec.json or a contract is wrong;
    then nothing was started and no run folder written. Otherwise always returns a result
    (written to integration/runs/<run_id>/result.json) after a full teardown; a Ctrl-C is
    re-raised after the teardown and the result are written.

    `cancel` (as `api.test_run` takes it): once set, the run stops within about 50 ms of the
    current wait (a unit's start, a case, or between cases), tears everything down and returns
    a result with `aborted = true`, `ok = false`, `crashed = false`, `category_hint = null`
    and exit code 130; the case that was running is `"status": "aborted"`, later ones
    `"not_run"`, and no bug is opened or moved. With `cancel`, each case runs in a worker
    thread so that the wait can be cut; without it, the run behaves exactly as before.
    """
    from greenloop.integration import attempts as attempts_mod

    prior: dict[str, tuple[CaseOutcome, int]] = {}
    resumed: Path | None = None
    if resume_token is not None:
        run_id, resumed, cases, prior = _resuming(project, resume_token)
    spec: Spec = load_spec(project, cases)
    root = Path(spec.root)
    finished = _finished(resumed, prior, spec)
    if finished is not None:
        return finished
    junit_path = _junit_path(junit)
    # Units run under the same sandbox mechanism as test runs: this call's mode, else the
    # project's configured default. Refused before anything starts when bwrap cannot enforce it.
    from greenloop import config as config_mod
    from greenloop.system import enforcers
    from greenloop.system import sandbox as sandbox_mod

    base_env = dict(os.environ if env is None else env)
    needed = spec.needed_units()
    check_programs(needed, base_env)
    policy = sandbox_mod.resolve(root, explicit=sandbox, default=config_mod.load(root, env=base_env).sandbox)
    bwrap = enforcers.probe_bwrap(base_env) if policy.sandboxed else None
    # bubblewrap, else Landlock, else (auto only) nothing, said in the notes; a named mode
    # that neither can enforce is refused here, before anything starts.
    chosen = enforcers.enforce(policy, base_env, bwrap=bwrap)
    chromium = require_browser(base_env) if spec.has_browser_steps else None
    say = on_event or (lambda _m: None)
    t_start = clock()
    started_at = _iso(wall())
    run_id = run_id or new_run_id(wall())
    folder = runs_dir(root) / run_id
    folder.mkdir(parents=True, exist_ok=resumed is not None)
    token = attempts_mod.resume_token(root, run_id)
    digest = attempts_mod.spec_digest(root)
    attempt = attempts_mod.begin_attempt(folder, digest, started_at, list(cases), token)
    say(f"run {run_id}, attempt {attempt} (if it is cut short: --mode resume --resume-token {token})")
    rel = f"integration/runs/{run_id}"
    from greenloop.devloop import timeline

    timeline_file = timeline.timeline_path(root)
    timeline.append(timeline_file, [timeline.event(
        "integration_started", "integration", run_id,
        f"attempt {attempt}: {len(spec.cases) - len(prior)} case(s) to run, units "
        f"{', '.join(u.id for u in needed)}; resume token {token}", now=wall())])
    env_path = folder / "env.json"
    _write_env(env_path, {})
    log = ProcessLog(folder / "process.log", cap_bytes=log_cap_bytes, wall=wall)
    notes: list[str] = _resume_notes(log, attempt, run_id, prior) if resumed is not None else []
    trace = TraceWriter(folder / "http-trace.ndjson")
    scratch = Path(tempfile.mkdtemp(prefix=f"greenloop-{run_id}-"))
    picker = port_picker or PortPicker()
    units = [u for u in needed if u.static is None]  # the ones with a process
    static_units = [u for u in needed if u.static is not None]  # served by greenloop
    static_servers: dict[str, StaticServer] = {}
    browser: BrowserSession | None = None
    outcomes: dict[str, CaseOutcome] = {cid: o for cid, (o, _) in prior.items()}
    attempt_of: dict[str, int] = {cid: n for cid, (_, n) in prior.items()}
    failures: list[IntegrationFailure] = []
    startup: StartFailure | None = None
    crashed = interrupted = aborted = False
    aborted_case: tuple[str, int] | None = None  # (case id, ms it ran) when cancelled mid-case
    loop: CaseLoop | None = None
    category: str | None = None
    survivors: list[dict[str, Any]] = []

    def close_front() -> None:
        """The browser (it holds connections to every unit), then the static servers."""
        if browser is not None:
            browser.close()
            left = browser.survivors()
            log.note("browser closed" + (f"; still alive: {left}" if left else ""))
        for srv in static_servers.values():
            srv.stop()

    sup = Supervisor(
        log,
        scratch,
        base_env=base_env,
        picker=picker,
        clock=clock,
        on_ports=lambda ports: _write_env(env_path, ports),
        grace_s=grace_s,
        before_teardown=close_front,
        sandbox_policy=policy,
        bwrap=chosen.bwrap_path or "bwrap",
        landlock_abi=chosen.landlock_abi,
        unconfined=policy.sandboxed and chosen.enforcer is None,
    )
    if chosen.enforcer is not None:
        notes.append(
            f"units ran in sandbox mode {policy.mode} ({chosen.enforced_by}); they share the host loopback"
        )
    notes.extend(chosen.notes)  # Landlock leaves the network alone; or nothing enforced it
    deadline = t_start + run_timeout_s

    def all_ports() -> dict[str, int]:
        return {**sup.ports(), **{uid: srv.port for uid, srv in static_servers.items()}}

    def teardown() -> list[dict[str, Any]]:
        """Everything: the Supervisor calls close_front first, then stops the units."""
        left = sup.teardown(grace_s)
        return left + (browser.survivors() if browser is not None else [])

    log.note(
        f"integration run {run_id} in {root}: {len(spec.cases)} cases, "
        f"units {', '.join(u.id for u in needed)}"
    )
    try:
        with sup:
            try:
                sup.assign_ports(units)
            except PortUnavailable as exc:
                startup = StartFailure("", "port_unavailable", str(exc))
            if startup is None:
                say(f"starting {len(units)} units")
                startup = sup.start_all(
                    units,
                    health_timeout_s=health_timeout_s,
                    health_interval_s=health_interval_s,
                    deadline=deadline,
                    cancel=cancel,
                )
                if startup is not None and startup.reason == "cancelled":
                    aborted = True
                    notes.append(f"cancelled: {startup.message}; every unit was stopped")
                    startup = None
            backend_urls = {uid: up.url for uid, up in sup.units.items()}
            if startup is None:
                startup = _serve_static(static_units, backend_urls, picker, log, static_servers,
                                        lambda: _write_env(env_path, all_ports()))
            if startup is None and not aborted:
                urls = {**backend_urls, **{uid: srv.url for uid, srv in static_servers.items()}}
                log.note(f"all units healthy after {clock() - t_start:.2f} s; running cases")
                if chromium is not None:
                    browser = BrowserSession(
                        executable=chromium,
                        run_folder=folder,
                        run_ref=rel,
                        urls=urls,
                        backends=[u.id for u in units if u.kind == "be"],
                        trace=trace,
                        log=log.write,
                        labels={uid: f"[{uid}:{port}]" for uid, port in all_ports().items()},
                        env=base_env,
                        clock=clock,
                    )
                loop = CaseLoop(
                    cases=spec.cases,
                    urls=urls,
                    sup=sup,
                    log=log,
                    trace=trace,
                    folder=folder,
                    attempt=attempt,
                    deadline=deadline,
                    case_timeout_s=case_timeout_s,
                    run_timeout_s=run_timeout_s,
                    transport=transport,
                    clock=clock,
                    wall=wall,
                    say=say,
                    notes=notes,
                    outcomes=outcomes,
                    attempt_of=attempt_of,
                    browser=browser,
                    cancel=cancel,
                )
                loop.run()
            survivors = teardown()
    except KeyboardInterrupt:
        interrupted = True
        notes.append("interrupted; every unit was stopped")
        with contextlib.suppress(KeyboardInterrupt):
            survivors = teardown()
    except Exception as exc:  # greenloop's own failure: still no survivors, still a result
        crashed, category = True, "infra_flake"
        notes.append(f"greenloop failed during the run: {type(exc).__name__}: {exc}")
        log.note(f"internal error: {type(exc).__name__}: {exc}")
        survivors = teardown()
    finally:
        straggler = loop.straggler if loop is not None else None
        if straggler is not None and not straggler.join(grace_s + 10.0):
            # Its request is cut by the teardown; a transport that ignores that is left behind.
            notes.append("the cancelled case's thread was still running after the teardown")
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if loop is not None:  # what stopped the cases early, if anything
        crashed, aborted = crashed or loop.crashed, aborted or loop.aborted
        category = category or loop.category
        aborted_case = loop.aborted_case

    if startup is not None:
        crashed = True
        category = "infra_flake" if startup.infra else "unit_crash"
        if not startup.infra:
            failures.append(verdict.startup_failure(startup))
    failures.extend(verdict.case_failure(o, sup.units) for o in outcomes.values() if not o.passed)
    category = verdict.category_hint(category, failures, survivors)
    case_rows = verdict.case_rows(spec.cases, outcomes, attempt_of, aborted_case, attempt)
    passed = [o.case_id for o in outcomes.values() if o.passed]
    n_timeout = sum(1 for o in outcomes.values() if o.status == "timeout")
    n_failed = sum(1 for o in outcomes.values() if o.status == "failed")
    ok = not crashed and not interrupted and not aborted and not survivors and len(passed) == len(spec.cases)

    bugs_opened: tuple[str, ...] = ()
    moved: tuple[Mapping[str, str], ...] = ()
    browser_broken = browser is not None and browser.launch_error is not None  # no bug: infrastructure
    stopped = interrupted or aborted or browser_broken or (startup is not None and startup.infra)
    if record_bugs and not stopped:
        failures, bugs_opened, moved = verdict.bridge_bugs(
            root,
            failures,
            run_id=run_id,
            ok=ok,
            covered_units=[u.id for u in needed],
            passed_cases=passed,
            notes=notes,
        )

    result = IntegrationResult(
        ok=ok,
        run_id=run_id,
        result_ref=f"{rel}/result.json",
        cases_total=len(spec.cases),
        cases_passed=len(passed),
        cases_failed=n_failed,
        cases_timeout=n_timeout,
        failures=tuple(failures),
        ports_used=all_ports(),
        surviving_processes=tuple(survivors),
        category_hint=category,
        crashed=crashed,
        duration_ms=int((clock() - t_start) * 1000),
        project=str(root),
        started_at=started_at,
        cases=tuple(case_rows),
        startup_failure=None if startup is None else startup.to_json(),
        interrupted=interrupted,
        aborted=aborted or interrupted,
        process_log=f"{rel}/process.log",
        http_trace=f"{rel}/http-trace.ndjson",
        env_ref=f"{rel}/env.json",
        junit=None if junit_path is None else str(junit_path),
        notes=tuple(notes),
        bugs_opened=bugs_opened,
        bugs_transitioned=moved,
        resume_token=token,
        attempts=attempt,
    )
    atomic_write(folder / "result.json", json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
    problem = timeline.append(timeline_file, timeline.events_of_integration(result, now=wall()))
    if problem:
        result = replace(result, notes=(*result.notes, problem))
    if junit_path is not None:
        write_junit(result, junit_path)
    if interrupted:
        raise KeyboardInterrupt
    return result
