"""load_spec: validate a whole DevLoop project (units.json, contracts, integration/spec.json).

Everything is checked before anything starts: the loader either returns a typed `Spec` or
raises one `SpecError` that lists every violation, each naming the file, case, step and field
and saying how to fix it. Nothing here starts a process or writes a file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from greenloop.errors import SpecError
from greenloop.integration.spec.problems import Problems, quoted, read_json
from greenloop.integration.spec.records import Case, Spec, jsonpath_env
from greenloop.integration.spec.steps import parse_step
from greenloop.integration.spec.units import load_units

__all__ = ["load_spec"]

_CASE_KEYS = {"id", "involves", "steps", "description", "name"}


def load_spec(project: str | os.PathLike[str], cases: Sequence[str] = ()) -> Spec:
    """Validate the whole project; return the Spec restricted to `cases` (all when empty)."""
    root = Path(project).resolve()
    if not root.is_dir():
        raise SpecError(f"project folder {str(project)!r} does not exist; pass a DevLoop project folder")
    units = load_units(root)
    by_id = {u.id: u for u in units}
    data = read_json(
        root / "integration" / "spec.json",
        "integration/spec.json",
        'write the integration cases there: {"cases": [{"id", "involves", "steps": [...]}]}',
    )
    problems = Problems()
    raw_cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(raw_cases, list) or not raw_cases:
        raise SpecError('integration/spec.json is invalid: field "cases" must be a non-empty list of cases')
    env = jsonpath_env()
    parsed: list[Case] = []
    seen: set[str] = set()
    for ci, raw in enumerate(raw_cases):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not raw.get("id"):
            problems.add(f"integration/spec.json cases[{ci}]", 'field "id" must be a non-empty string')
            continue
        cid = raw["id"]
        where = f"integration/spec.json case {quoted(cid)}"
        if cid in seen:
            problems.add(where, 'field "id": two cases share this id; give each case its own id')
        seen.add(cid)
        for key in raw:
            if key not in _CASE_KEYS:
                problems.add(where, f"unknown field {quoted(key)} (known: {', '.join(sorted(_CASE_KEYS))})")
        involves = raw.get("involves", [])
        if not isinstance(involves, list) or not all(isinstance(u, str) for u in involves):
            problems.add(where, 'field "involves" must be a list of unit ids')
            involves = []
        for u in involves:
            if u not in by_id:
                problems.add(
                    where,
                    f'field "involves": unknown unit {quoted(u)} '
                    f'(units.json has: {", ".join(sorted(by_id))})',
                )
        steps_raw = raw.get("steps")
        if not isinstance(steps_raw, list) or not steps_raw:
            problems.add(where, 'field "steps" must be a non-empty list of steps')
            continue
        steps = [parse_step(s, i, cid, by_id, env, problems) for i, s in enumerate(steps_raw)]
        opened = False
        for st in steps:
            if st is None or st.kind != "browser":
                continue
            if not (st.page or st.actions or st.checks):
                problems.add(
                    f"{where}, step {st.index}",
                    'a browser step needs "page", "actions" or "expect"; it does nothing as written',
                )
            starts_page = st.page is not None or (bool(st.actions) and st.actions[0].verb == "goto")
            if not opened and not starts_page:
                problems.add(
                    f"{where}, step {st.index}",
                    'field "page": the first browser step of a case must open a page ("page": "/" or '
                    'a first action {"goto": "/"})',
                )
            opened = True
        step_units = [s.unit for s in steps if s is not None and s.unit in by_id]
        all_involved = tuple(dict.fromkeys([*[u for u in involves if u in by_id], *step_units]))
        parsed.append(Case(cid, all_involved, tuple(s for s in steps if s is not None)))
    problems.raise_if_any("integration/spec.json")
    if cases:
        unknown = [c for c in cases if c not in seen]
        if unknown:
            raise SpecError(
                f"--case {', '.join(quoted(c) for c in unknown)}: no such case in integration/spec.json "
                f"(cases: {', '.join(c.id for c in parsed)})"
            )
        parsed = [c for c in parsed if c.id in set(cases)]
    return Spec(str(root), units, tuple(parsed))
