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
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from greenloop.errors import ExitCode, UsageError
from greenloop.integration import browser as browser_mod
from greenloop.integration.browser import BrowserSession
from greenloop.integration.cases import (
    CASE_TIMEOUT_S,
    CaseOutcome,
    StepExecutor,
    Transport,
    http_transport,
    run_case,
)
from greenloop.integration.ports import HOST, PortPicker, PortUnavailable
from greenloop.integration.processes import (
    GRACE_S,
    HEALTH_INTERVAL_S,
    HEALTH_TIMEOUT_S,
    LOG_CAP_BYTES,
    ProcessLog,
    StartFailure,
    Supervisor,
)
from greenloop.integration.spec import Spec, check_programs, load_spec
from greenloop.integration.static import StaticServer, serve_unit
from greenloop.integration.trace import TraceWriter, bound_body
from greenloop.layout import new_run_id

__all__ = [
    "MODES",
    "RUN_TIMEOUT_S",
    "IntegrationFailure",
    "IntegrationResult",
    "integrate",
    "latest",
    "retry",
    "runs_dir",
    "write_junit",
]

RUN_TIMEOUT_S = 300.0


def runs_dir(project: str | os.PathLike[str]) -> Path:
    return Path(project) / "integration" / "runs"


@dataclass(frozen=True)
class IntegrationFailure:
    """One failed case (or a unit that failed to start, as case `startup:<unit>`)."""

    case_id: str
    failed_step: int | None
    reason: str
    expected: Any
    got: Any
    involves: tuple[str, ...]
    stderr_excerpt: str
    message: str = ""
    unit: str | None = None
    bug_id: str | None = None
    artifacts: Mapping[str, str] = field(default_factory=dict)  # a browser step's screenshot, html

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "case_id": self.case_id,
            "failed_step": self.failed_step,
            "reason": self.reason,
            "expected": self.expected,
            "got": self.got,
            "involves": list(self.involves),
            "stderr_excerpt": self.stderr_excerpt,
            "message": self.message,
            "unit": self.unit,
            "bug_id": self.bug_id,
        }
        if self.artifacts:
            out["artifacts"] = dict(self.artifacts)
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IntegrationFailure:
        step = d.get("failed_step")
        return cls(
            case_id=str(d.get("case_id", "")),
            failed_step=None if step is None else int(step),
            reason=str(d.get("reason", "")),
            expected=d.get("expected"),
            got=d.get("got"),
            involves=tuple(str(u) for u in d.get("involves") or ()),
            stderr_excerpt=str(d.get("stderr_excerpt") or ""),
            message=str(d.get("message") or ""),
            unit=None if d.get("unit") is None else str(d["unit"]),
            bug_id=None if d.get("bug_id") is None else str(d["bug_id"]),
            artifacts={str(k): str(v) for k, v in (d.get("artifacts") or {}).items()},
        )


@dataclass(frozen=True)
class IntegrationResult:
    """The result of one integration run: where the evidence is and what happened per case."""

    ok: bool
    run_id: str
    result_ref: str
    cases_total: int
    cases_passed: int
    cases_failed: int
    cases_timeout: int
    failures: tuple[IntegrationFailure, ...]
    ports_used: Mapping[str, int]
    surviving_processes: tuple[Mapping[str, Any], ...]
    category_hint: str | None
    crashed: bool
    duration_ms: int
    project: str = ""
    started_at: str = ""
    cases: tuple[Mapping[str, Any], ...] = ()
    startup_failure: Mapping[str, Any] | None = None
    interrupted: bool = False
    aborted: bool = False
    process_log: str = ""
    http_trace: str = ""
    env_ref: str = ""
    junit: str | None = None
    notes: tuple[str, ...] = ()
    bugs_opened: tuple[str, ...] = ()
    bugs_transitioned: tuple[Mapping[str, str], ...] = field(default_factory=tuple)
    resume_token: str | None = None  # continues this run (mode resume) if it did not finish
    attempts: int = 1  # how many attempts ran its cases (each case row names its own)

    @property
    def exit_code(self) -> int:
        """0 all passed; 1 cases failed; 3 infrastructure, crash or survivors; 130 interrupted
        (Ctrl-C) or aborted (the caller's cancel event)."""
        if self.interrupted or self.aborted:
            return ExitCode.INTERRUPTED
        if self.crashed or self.surviving_processes:
            return ExitCode.BROKEN
        return ExitCode.OK if self.ok else ExitCode.FAILED

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "run_id": self.run_id,
            "result_ref": self.result_ref,
            "cases_total": self.cases_total,
            "cases_passed": self.cases_passed,
            "cases_failed": self.cases_failed,
            "cases_timeout": self.cases_timeout,
            "failures": [f.to_json() for f in self.failures],
            "ports_used": dict(self.ports_used),
            "surviving_processes": [dict(p) for p in self.surviving_processes],
            "category_hint": self.category_hint,
            "crashed": self.crashed,
            "duration_ms": self.duration_ms,
            "project": self.project,
            "started_at": self.started_at,
            "cases": [dict(c) for c in self.cases],
            "startup_failure": None if self.startup_failure is None else dict(self.startup_failure),
            "interrupted": self.interrupted,
            "aborted": self.aborted,
            "process_log": self.process_log,
            "http_trace": self.http_trace,
            "env_ref": self.env_ref,
            "junit": self.junit,
            "notes": list(self.notes),
            "bugs_opened": list(self.bugs_opened),
            "bugs_transitioned": [dict(t) for t in self.bugs_transitioned],
            "resume_token": self.resume_token,
            "attempts": self.attempts,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IntegrationResult:
        return cls(
            ok=bool(d.get("ok", False)),
            run_id=str(d.get("run_id", "")),
            result_ref=str(d.get("result_ref", "")),
            cases_total=int(d.get("cases_total") or 0),
            cases_passed=int(d.get("cases_passed") or 0),
            cases_failed=int(d.get("cases_failed") or 0),
            cases_timeout=int(d.get("cases_timeout") or 0),
            failures=tuple(IntegrationFailure.from_json(f) for f in d.get("failures") or ()),
            ports_used={str(k): int(v) for k, v in (d.get("ports_used") or {}).items()},
            surviving_processes=tuple(dict(p) for p in d.get("surviving_processes") or ()),
            category_hint=None if d.get("category_hint") is None else str(d["category_hint"]),
            crashed=bool(d.get("crashed", False)),
            duration_ms=int(d.get("duration_ms") or 0),
            project=str(d.get("project") or ""),
            started_at=str(d.get("started_at") or ""),
            cases=tuple(dict(c) for c in d.get("cases") or ()),
            startup_failure=None if d.get("startup_failure") is None else dict(d["startup_failure"]),
            interrupted=bool(d.get("interrupted", False)),
            aborted=bool(d.get("aborted", False)),
            process_log=str(d.get("process_log") or ""),
            http_trace=str(d.get("http_trace") or ""),
            env_ref=str(d.get("env_ref") or ""),
            junit=None if d.get("junit") is None else str(d["junit"]),
            notes=tuple(str(n) for n in d.get("notes") or ()),
            bugs_opened=tuple(str(b) for b in d.get("bugs_opened") or ()),
            bugs_transitioned=tuple(
                {str(k): str(v) for k, v in t.items()} for t in d.get("bugs_transitioned") or ()
            ),
            resume_token=None if d.get("resume_token") is None else str(d["resume_token"]),
            attempts=int(d.get("attempts") or 1),
        )


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _write_env(path: Path, ports: Mapping[str, int]) -> None:
    data = {uid: {"port": port, "url": f"http://{HOST}:{port}"} for uid, port in ports.items()}
    _atomic_write(path, json.dumps(data, indent=2) + "\n")


def write_junit(result: IntegrationResult, path: str | os.PathLike[str]) -> None:
    """JUnit XML for CI: one testcase per case, a failure element for each failed one."""
    failures = {f.case_id: f for f in result.failures}
    suite = ET.Element(
        "testsuite",
        name="greenloop.integration",
        tests=str(result.cases_total),
        failures=str(result.cases_failed + result.cases_timeout),
        errors="1" if result.crashed else "0",
        time=f"{result.duration_ms / 1000:.3f}",
        timestamp=result.started_at,
    )
    for case in result.cases:
        cid = str(case.get("id"))
        tc = ET.SubElement(
            suite,
            "testcase",
            classname="integration",
            name=cid,
            time=f"{int(case.get('duration_ms') or 0) / 1000:.3f}",
        )
        status = case.get("status")
        if status == "not_run":
            ET.SubElement(tc, "skipped", message="not run: the run stopped before this case")
        elif status == "aborted":
            ET.SubElement(tc, "skipped", message="aborted: the run was cancelled during this case")
        elif status != "passed":
            f = failures.get(cid)
            el = ET.SubElement(
                tc, "failure", message=(f.message if f else str(status)), type=str(f.reason if f else status)
            )
            if f is not None:
                el.text = (
                    f"expected: {json.dumps(f.expected, ensure_ascii=False)}\n"
                    f"got: {json.dumps(f.got, ensure_ascii=False)}\n"
                    + (f"stderr:\n{f.stderr_excerpt}\n" if f.stderr_excerpt else "")
                )
    if result.startup_failure is not None:
        tc = ET.SubElement(suite, "testcase", classname="integration", name="startup")
        el = ET.SubElement(
            tc,
            "error",
            message=str(result.startup_failure.get("message")),
            type=str(result.startup_failure.get("reason")),
        )
        el.text = str(result.startup_failure.get("stderr_excerpt") or "")
    root = ET.Element("testsuites", name="greenloop")
    root.append(suite)
    tree = ET.ElementTree(root)
    ET.indent(tree)
    tree.write(str(path), encoding="utf-8", xml_declaration=True)


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _case_failure(o: CaseOutcome, sup: Supervisor) -> IntegrationFailure:
    excerpts = []
    for uid in o.involves:
        up = sup.units.get(uid)
        if up is not None and up.excerpt():
            excerpts.append(f"[{uid}]\n{up.excerpt()}")
    return IntegrationFailure(
        case_id=o.case_id,
        failed_step=o.failed_step,
        reason=o.reason or "assertion_failed",
        expected=bound_body(o.expected, 2000),  # the value itself when small, else cut JSON text
        got=bound_body(o.got, 2000),
        involves=o.involves,
        stderr_excerpt="\n".join(excerpts),
        message=o.message,
        unit=o.unit,
        artifacts=o.artifacts,
    )


class _CaseThread:
    """One case run in its own thread, so that a cancel can end the run mid-case: the caller
    stops waiting, tears the units (and the browser) down, which ends the case's in-flight
    request, then joins the thread."""

    def __init__(self, fn: Callable[[], CaseOutcome]) -> None:
        self._fn = fn
        self._outcome: CaseOutcome | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._work, name="greenloop-case", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        try:
            self._outcome = self._fn()
        except BaseException as exc:  # handed to the caller
            self._error = exc
        finally:
            self._done.set()

    def wait(self, cancel: threading.Event) -> CaseOutcome | None:
        """The case's outcome, or None when `cancel` is set first (checked every 50 ms)."""
        while not self._done.wait(0.05):
            if cancel.is_set():
                return None
        if self._error is not None:
            raise self._error
        return self._outcome

    def join(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()


def _aborted_row(case_id: str, duration_ms: int) -> dict[str, Any]:
    return {
        "id": case_id,
        "status": "aborted",
        "duration_ms": duration_ms,
        "steps_run": None,
        "failed_step": None,
        "reason": None,
        "message": "the run was cancelled during this case; its outcome is unknown",
    }


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
        # Checked before anything starts: the token, its project, an unchanged spec.
        base = Path(load_spec(project).root)
        run_id, resumed = attempts_mod.check_token(base, runs_dir(base), resume_token)
        cases = tuple(attempts_mod.attempts(resumed)[0].get("cases") or ())
        prior = attempts_mod.load_cases(resumed)
    spec: Spec = load_spec(project, cases)
    root = Path(spec.root)
    done_file = resumed / "result.json" if resumed is not None else None
    if done_file is not None and done_file.is_file() and all(c.id in prior for c in spec.cases):
        finished = IntegrationResult.from_json(json.loads(done_file.read_text(encoding="utf-8")))
        nothing = "resume: every case of this run had finished; nothing ran"
        return replace(finished, notes=(*finished.notes, nothing))
    junit_path = Path(junit).resolve() if junit is not None else None
    if junit_path is not None and not junit_path.parent.is_dir():
        raise UsageError(
            f"--junit {str(junit)!r}: folder {str(junit_path.parent)!r} does not exist; create it first"
        )
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
    chromium = browser_mod.require_browser(base_env) if spec.has_browser_steps else None
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
    notes: list[str] = []
    if resumed is not None:
        done = ", ".join(f"{cid} (attempt {n})" for cid, (_, n) in prior.items()) or "none"
        log.note(f"attempt {attempt}: resuming {run_id}; cases already finished: {done}")
        notes.append(f"attempt {attempt} of this run: {len(prior)} case(s) came from earlier attempts "
                     "(each case row names its attempt)")
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
    straggler: _CaseThread | None = None
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
            for u in static_units if startup is None else ():
                try:
                    srv = static_servers[u.id] = serve_unit(u, backend_urls, picker, write=log.write)
                except PortUnavailable as exc:
                    startup = StartFailure(u.id, "port_unavailable", str(exc))
                    break
                _write_env(env_path, all_ports())
                log.note(f"serving {u.id} ({u.static}) on {srv.url}, api_base {srv.config['api_base']}")
            if startup is None and not aborted:
                urls = {**backend_urls, **{uid: srv.url for uid, srv in static_servers.items()}}
                log.note(f"all units healthy after {clock() - t_start:.2f} s; running cases")
                executors: dict[str, StepExecutor] = {}
                if chromium is not None:
                    browser = browser_mod.BrowserSession(
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
                    executors["browser"] = browser.step
                for index, case in enumerate(spec.cases):
                    if case.id in outcomes:  # finished in an earlier attempt of this run
                        continue
                    if cancel is not None and cancel.is_set():
                        aborted = True
                        notes.append(f"cancelled before case {case.id}; every unit was stopped")
                        break
                    remaining = deadline - clock()
                    if remaining <= 0:
                        crashed, category = True, "infra_flake"
                        notes.append(f"the run exceeded {run_timeout_s:g} s; later cases were not run")
                        break
                    say(f"case {case.id}")

                    def one(case: Any = case, remaining: float = remaining) -> CaseOutcome:
                        return run_case(
                            case,
                            urls=urls,
                            timeout_s=min(case_timeout_s, remaining),
                            trace=trace,
                            crashed=sup.crashed,
                            transport=transport,
                            clock=clock,
                            wall=wall,
                            executors=executors,
                        )

                    if cancel is None:
                        o = one()
                    else:
                        case_start = clock()
                        straggler = _CaseThread(one)
                        got = straggler.wait(cancel)
                        if got is None:
                            aborted = True
                            aborted_case = (case.id, int((clock() - case_start) * 1000))
                            notes.append(f"cancelled during case {case.id}; every unit was stopped")
                            log.note(f"case {case.id}: cancelled")
                            break
                        o, straggler = got, None
                    if browser is not None:
                        browser.end_case()
                        if browser.launch_error is not None:
                            crashed, category = True, "infra_flake"
                            notes.append(
                                f"the browser could not start ({browser.launch_error}); "
                                "later cases were not run"
                            )
                            log.note(f"browser could not start: {browser.launch_error}")
                    sup.pump()
                    outcomes[case.id] = o
                    attempt_of[case.id] = attempt
                    # kept as it ends, so an interrupted run can be resumed without running it again
                    attempts_mod.save_case(folder, index, o, attempt)
                    log.note(f"case {case.id}: {o.status}" + (f" ({o.message})" if o.message else ""))
                    if browser is not None and browser.launch_error is not None:
                        break
                    if o.status == "timeout" and clock() >= deadline:
                        crashed, category = True, "infra_flake"
                        notes.append(f"the run exceeded {run_timeout_s:g} s during case {case.id}")
                        break
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
        if straggler is not None and not straggler.join(grace_s + 10.0):
            # Its request is cut by the teardown; a transport that ignores that is left behind.
            notes.append("the cancelled case's thread was still running after the teardown")
        log.close()
        shutil.rmtree(scratch, ignore_errors=True)

    if startup is not None:
        crashed = True
        category = "infra_flake" if startup.infra else "unit_crash"
        involves = tuple(startup.unit.split(", ")) if startup.unit else ()
        if not startup.infra:
            failures.append(
                IntegrationFailure(
                    case_id=f"startup:{startup.unit}",
                    failed_step=None,
                    reason="unit_crashed",
                    expected="healthy",
                    got={"exit_code": startup.exit_code, "reason": startup.reason},
                    involves=involves,
                    stderr_excerpt=startup.stderr_excerpt,
                    message=startup.message,
                    unit=startup.unit,
                )
            )
    for o in outcomes.values():
        if not o.passed:
            failures.append(_case_failure(o, sup))
    if failures and category is None:
        category = (
            "unit_crash"
            if any(f.reason == "unit_crashed" for f in failures)
            else ("timeout" if all(f.reason == "timeout" for f in failures) else "integration_bug")
        )
    if survivors and category is None:
        category = "infra_flake"
    case_rows: list[dict[str, Any]] = []
    for case in spec.cases:
        o2 = outcomes.get(case.id)
        if o2 is None and aborted_case is not None and aborted_case[0] == case.id:
            case_rows.append(_aborted_row(*aborted_case))
            continue
        case_rows.append(
            {**o2.to_json(), "attempt": attempt_of.get(case.id, attempt)}
            if o2
            else {
                "id": case.id,
                "status": "not_run",
                "duration_ms": 0,
                "steps_run": 0,
                "failed_step": None,
                "reason": None,
                "message": "",
            }
        )
    passed = [o.case_id for o in outcomes.values() if o.passed]
    n_timeout = sum(1 for o in outcomes.values() if o.status == "timeout")
    n_failed = sum(1 for o in outcomes.values() if o.status == "failed")
    ok = not crashed and not interrupted and not aborted and not survivors and len(passed) == len(spec.cases)

    bugs_opened: tuple[str, ...] = ()
    moved: tuple[Mapping[str, str], ...] = ()
    browser_broken = browser is not None and browser.launch_error is not None  # no bug: infrastructure
    stopped = interrupted or aborted or browser_broken or (startup is not None and startup.infra)
    if record_bugs and not stopped:
        try:
            from greenloop import bugs

            bridged = bugs.bridge_integration_run(
                str(root),
                [f.to_json() for f in failures],
                run_id=run_id,
                ok=ok,
                covered_units=[u.id for u in needed],
                passed_cases=passed,
            )
            bugs_opened, moved = bridged.bugs_opened, bridged.bugs_transitioned
            notes.extend(bridged.notes)
            failures = [replace(f, bug_id=bridged.bug_ids.get(f.case_id)) for f in failures]
        except Exception as exc:  # the bug log must never hide the run's own result
            notes.append(f"bugs: could not record this run: {type(exc).__name__}: {exc}")

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
    _atomic_write(folder / "result.json", json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n")
    problem = timeline.append(timeline_file, timeline.events_of_integration(result, now=wall()))
    if problem:
        result = replace(result, notes=(*result.notes, problem))
    if junit_path is not None:
        write_junit(result, junit_path)
    if interrupted:
        raise KeyboardInterrupt
    return result


MODES = ("run", "retry", "resume")


def latest(project: str | os.PathLike[str]) -> IntegrationResult | None:
    """The newest integration run of a project that has a result.json."""
    folder = runs_dir(Path(load_spec(project).root))
    for name in sorted((n for n in os.listdir(folder) if not n.startswith(".")), reverse=True) \
            if folder.is_dir() else ():
        try:
            return IntegrationResult.from_json(json.loads((folder / name / "result.json").read_text("utf-8")))
        except (OSError, ValueError):
            continue
    return None


def retry(project: str | os.PathLike[str], **options: Any) -> IntegrationResult:
    """mode retry: the previous run's failed (and unrun) cases first, then, if they all pass, every
    case, each as a run of its own; the returned result says which cases that was."""
    previous = latest(project)
    if previous is None:
        raise UsageError(f"mode retry needs an earlier integration run in {project}: run it once first")
    again = [c["id"] for c in previous.cases if c.get("status") not in ("passed", None)]
    if not again:
        result = integrate(project, **options)
        note = f"retry: {previous.run_id} had no failed case; every case ran"
        return replace(result, notes=(*result.notes, note))
    first = integrate(project, cases=tuple(again), **options)
    if not first.ok:
        note = (f"retry of {previous.run_id}: its failed cases ({', '.join(again)}) ran first and did "
                "not all pass; the other cases did not run")
        return replace(first, notes=(*first.notes, note))
    result = integrate(project, **options)
    return replace(result, notes=(*result.notes, f"retry of {previous.run_id}: its failed cases "
                                  f"({', '.join(again)}) passed in {first.run_id}; then every case ran"))
