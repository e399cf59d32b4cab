"""Loading units.json and each unit's contract.json into `Unit` records, and checking that
every unit's start program exists before anything starts."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from greenloop.errors import SpecError
from greenloop.integration.spec.problems import Problems, quoted, read_json
from greenloop.integration.spec.records import (
    DEFAULT_HEALTH,
    DEFAULT_START,
    FE_HEALTH,
    HTTP_METHODS,
    UNIT_KINDS,
    Contract,
    Endpoint,
    Unit,
)

__all__ = ["check_programs", "load_units"]

_UNIT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_UNIT_KEYS = {
    "id", "kind", "path", "start", "health", "depends_on", "env", "name", "description", "calls", "static",
    "status", "status_run",  # the unit registry's status, written by greenloop (units.py)
}


def _load_contract(root: Path, unit_rel: str, unit_id: str, problems: Problems) -> Contract | None:
    path = root / unit_rel / "contract.json"
    rel = f"{unit_rel}/contract.json"
    if not path.is_file():
        return None
    try:
        data = read_json(path, rel, "")
    except SpecError as exc:
        problems.add(f"unit {quoted(unit_id)}", exc.message)
        return None
    http = (
        data.get("exports", {}).get("http")
        if isinstance(data, dict) and isinstance(data.get("exports"), dict)
        else None
    )
    if http is None:
        # A contract without HTTP exports declares nothing to check against.
        return Contract(rel, ())
    if not isinstance(http, dict):
        problems.add(rel, 'field "exports.http" must be an object of "METHOD /path" keys')
        return None
    endpoints: list[Endpoint] = []
    for key in http:
        parts = str(key).split()
        if len(parts) != 2 or parts[0].upper() not in HTTP_METHODS or not parts[1].startswith("/"):
            problems.add(rel, f'endpoint {quoted(key)} in "exports.http" must look like "GET /api/items/:id"')
            continue
        endpoints.append(Endpoint(parts[0].upper(), parts[1]))
    return Contract(rel, tuple(endpoints))


def _static(
    raw: Mapping[str, object], kind: str, folder: Path, rel: str, where: str, problems: Problems
) -> str | None:
    """A frontend unit's "static" folder, resolved; None (and a problem added) when it is wrong."""
    static_rel = raw["static"]
    if kind != "fe":
        problems.add(where, 'field "static" is for frontend units ("kind": "fe"); remove it')
    elif "start" in raw:
        problems.add(
            where,
            'fields "static" and "start" exclude each other: greenloop serves the "static" '
            'folder itself; keep one of them',
        )
    elif not isinstance(static_rel, str) or not static_rel or Path(static_rel).is_absolute():
        problems.add(where, f'field "static" must be a folder relative to the unit '
                            f"(got {quoted(static_rel)})")
    elif not (folder / static_rel).resolve().is_dir():
        problems.add(
            where,
            f'field "static": folder {quoted(static_rel)} does not exist in {quoted(rel)}; '
            "create it or fix the path",
        )
    else:
        return str((folder / static_rel).resolve())
    return None


def load_units(project: str | Path) -> tuple[Unit, ...]:
    """Read and validate `units.json` (and each unit's contract.json, where present)."""
    root = Path(project).resolve()
    data = read_json(
        root / "units.json", "units.json", "run this in a DevLoop project (the folder holding units.json)"
    )
    problems = Problems()
    raw_units = data.get("units") if isinstance(data, dict) else None
    if not isinstance(raw_units, list) or not raw_units:
        raise SpecError(
            'units.json is invalid: field "units" must be a non-empty list of {id, kind, path, start, ...}'
        )
    seen: set[str] = set()
    units: list[Unit] = []
    for i, raw in enumerate(raw_units):
        where = f"units.json units[{i}]"
        if not isinstance(raw, dict):
            problems.add(where, "must be an object with at least an id")
            continue
        uid = raw.get("id")
        if not isinstance(uid, str) or not _UNIT_ID.match(uid):
            problems.add(
                where, f'field "id" must be a name of letters, digits, ".", "_" or "-" (got {quoted(uid)})'
            )
            continue
        where = f"units.json unit {quoted(uid)}"
        if uid in seen:
            problems.add(where, 'field "id": the id is used twice; give each unit its own id')
            continue
        seen.add(uid)
        for key in raw:
            if key not in _UNIT_KEYS:
                problems.add(where, f"unknown field {quoted(key)} (known: {', '.join(sorted(_UNIT_KEYS))})")
        kind = raw.get("kind", "be")
        if kind not in UNIT_KINDS:
            problems.add(where, f'field "kind" must be one of {", ".join(UNIT_KINDS)} (got {quoted(kind)})')
            kind = "be"
        rel = raw.get("path", f"units/{uid}")
        if not isinstance(rel, str) or not rel:
            problems.add(where, 'field "path" must be a folder relative to the project')
            rel = f"units/{uid}"
        folder = (root / rel).resolve()
        if not folder.is_dir():
            problems.add(
                where,
                f'field "path": folder {quoted(rel)} does not exist; create it or fix the path',
            )
        static = _static(raw, kind, folder, rel, where, problems) if "static" in raw else None
        if kind == "fe" and "static" not in raw and "start" not in raw:
            problems.add(
                where,
                'a frontend unit needs "static" (a folder greenloop serves, e.g. "static") or "start" '
                "(the argv of its own server)",
            )
        start = raw.get("start", [] if kind == "fe" else list(DEFAULT_START))
        if kind == "fe" and "start" not in raw:
            pass
        elif not isinstance(start, list) or not start or not all(isinstance(a, str) and a for a in start):
            problems.add(
                where,
                'field "start" must be a non-empty argv list of strings, e.g. ["node", "code/server.js"]',
            )
            start = list(DEFAULT_START)
        health = raw.get("health", FE_HEALTH if kind == "fe" else DEFAULT_HEALTH)
        if not isinstance(health, str) or not health.startswith("/"):
            problems.add(where, f'field "health" must be a path starting with "/" (got {quoted(health)})')
            health = DEFAULT_HEALTH
        deps = raw.get("depends_on", [])
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            problems.add(where, 'field "depends_on" must be a list of unit ids')
            deps = []
        env = raw.get("env", {})
        env_pairs: list[tuple[str, str]] = []
        if not isinstance(env, dict):
            problems.add(where, 'field "env" must be an object of NAME: "value"')
        else:
            for k, v in env.items():
                if isinstance(v, bool) or not isinstance(v, (str, int, float)):
                    problems.add(where, f'field "env.{k}" must be a string (got {quoted(v)})')
                    continue
                env_pairs.append((str(k), str(v)))
        contract = _load_contract(root, rel, uid, problems)
        units.append(
            Unit(
                id=uid,
                kind=str(kind),
                path=str(folder),
                start=tuple(start),
                health=health,
                depends_on=tuple(deps),
                env=tuple(env_pairs),
                contract=contract,
                static=static,
            )
        )
    ids = {u.id for u in units}
    for u in units:
        for d in u.depends_on:
            if d not in ids:
                problems.add(
                    f"units.json unit {quoted(u.id)}",
                    f'field "depends_on": unknown unit {quoted(d)} (units: {", ".join(sorted(ids))})',
                )
            elif d == u.id:
                problems.add(
                    f"units.json unit {quoted(u.id)}", 'field "depends_on": a unit cannot depend on itself'
                )
    problems.raise_if_any("units.json")
    cycle = _find_cycle(units)
    if cycle:
        raise SpecError(
            f'units.json is invalid: field "depends_on" has a cycle: {" -> ".join(cycle)}; '
            "remove one of these dependencies"
        )
    return tuple(units)


def _find_cycle(units: Sequence[Unit]) -> list[str] | None:
    graph = {u.id: u.depends_on for u in units}
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in graph.get(n, ()):
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if d not in state:
                found = visit(d)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in graph:
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None



def _program_problem(unit: Unit, path_var: str | None) -> str | None:
    """Why `unit.start[0]` cannot be executed as the unit's spawn would look it up, or None.

    The lookup is exec's: a name with a "/" is a file relative to the unit's folder (or
    absolute); a bare name is searched on PATH only, never in the unit's folder."""
    program = unit.start[0]
    if "/" in program:
        target = Path(unit.path) / program
        if not target.is_file():
            return (
                f'field "start": program {quoted(program)} does not exist in the unit folder '
                f"{quoted(unit.path)}; fix the path or create the file"
            )
        if not os.access(target, os.X_OK):
            return (
                f'field "start": program {quoted(program)} is not executable; run chmod +x on it '
                f'or start it through its interpreter (e.g. ["python3", {json.dumps(program)}])'
            )
        return None
    if shutil.which(program, path=path_var if path_var is not None else os.defpath) is not None:
        return None
    hint = "install it or fix the name"
    if (Path(unit.path) / program).is_file():
        hint = f'to run the file in the unit folder write "./{program}"'
    return f'field "start": program {quoted(program)} is not on PATH; {hint}'


def check_programs(units: Sequence[Unit], env: Mapping[str, str]) -> None:
    """Raise SpecError (nothing started) when a unit's start program does not exist.

    `env` is the environment the units are started with (its PATH is searched). Frontend units
    that greenloop serves itself (`static`) have no program. A program that exists but fails
    when started (a broken interpreter line, a crash) is still reported by the run itself.
    """
    problems = Problems()
    for u in units:
        if u.static is not None or not u.start:
            continue
        problem = _program_problem(u, env.get("PATH"))
        if problem is not None:
            problems.add(f"units.json unit {quoted(u.id)}", problem)
    problems.raise_if_any("units.json")


