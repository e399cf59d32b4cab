"""Doctor checks of the sandbox: the mode a run would get, and each enforcer that could confine it."""

from __future__ import annotations

from collections.abc import Mapping

from greenloop.doctor.report import Check

__all__ = ["sandbox_checks"]

def sandbox_checks(workspace: str, env: Mapping[str, str]) -> list[Check]:
    """The mode a run gets, and each enforcer (`enforcers.available_enforcers`, strongest first).

    An unavailable enforcer is a failure only when it leaves a named mode (read-only,
    workspace-write) unenforceable, since such runs are refused; under `auto` runs go on
    unconfined and say so (a warning); with a stronger enforcer working it is only information.
    """
    from greenloop.errors import GreenloopError
    from greenloop.system.enforcers import available_enforcers
    from greenloop.system.sandbox import resolve_for

    checks: list[Check] = []
    mode: str | None = None
    try:
        policy = resolve_for(workspace, env=env)
        mode = policy.mode
        checks.append(Check("sandbox", "mode", "ok", f"{policy.mode} (from {policy.source})"))
    except GreenloopError as exc:
        checks.append(
            Check(
                "sandbox",
                "mode",
                "fail",
                exc.message,
                "correct the config field it names (greenloop config show)",
            )
        )
    found = available_enforcers(env)
    used = next((e.name for e in found if e.available), None)
    for e in found:
        if e.available:
            verdict = "used by sandboxed runs" if e.name == used else f"available (after {used})"
            checks.append(Check("sandbox", e.name, "ok", f"{e.detail}; {verdict}"))
        elif used is not None:
            checks.append(
                Check(
                    "sandbox", e.name, "ok", f"unavailable, not needed ({used} enforces): {e.detail}", e.fix
                )
            )
        elif mode == "full-access":
            checks.append(
                Check("sandbox", e.name, "ok", f"unavailable, not needed (full-access): {e.detail}", e.fix)
            )
        elif mode == "auto":
            why = f"{e.detail}; no enforcer works here, so auto runs are not sandboxed"
            checks.append(Check("sandbox", e.name, "warn", why, e.fix))
        else:
            why = f"{e.detail}; no enforcer works here, so {mode} runs are refused"
            checks.append(Check("sandbox", e.name, "fail", why, e.fix))
    return checks
