"""Server-rendered HTML for the dashboard. Every value that comes from a run, a test, a bug or
a trace goes through `esc` (test names and output are attacker-controlled text: a test named
`<img src=x onerror=alert(1)>` must render as those characters)."""

from __future__ import annotations

import difflib
import html
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlencode

__all__ = [
    "bug_page",
    "bugs_page",
    "diff_table",
    "esc",
    "integration_page",
    "integration_run_page",
    "layout",
    "not_found",
    "run_page",
    "runs_page",
    "session_page",
    "sessions_page",
    "trend_svg",
    "verdict_section",
]

OUTCOME_MARK = {"green": "✓", "red": "✗", "broken": "!", "running": "…"}


def esc(value: object) -> str:
    """HTML-escape any value (None becomes an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _when(at: float | None) -> str:
    if not at:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _ms(ms: int | None) -> str:
    if ms is None:
        return ""
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms} ms"


def _href(path: str, **params: object) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "", 0)})
    return esc(path + ("?" + query if query else ""))


def layout(title: str, body: str, *, active: str, stream: str | None = None, state: str = "") -> str:
    """The page frame: navigation, the page's body, the SSE stream it listens to."""
    nav = "".join(
        f'<a href="{path}" class="{"active" if name == active else ""}">{label}</a>'
        for name, path, label in (("runs", "/", "Runs"), ("sessions", "/sessions", "Sessions"),
                                  ("bugs", "/bugs", "Bugs"), ("integration", "/integration", "Integration"))
    )
    data_stream = f' data-stream="{esc(stream)}"' if stream else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · greenloop</title>"
        '<link rel=stylesheet href="/static/style.css"></head>'
        f'<body class="{esc(state)}"{data_stream}>'
        f'<header><span class=brand>greenloop</span><nav>{nav}</nav>'
        '<span id=live-status title="live updates">●</span></header>'
        f'<main id=main>{body}</main><div id=toast></div>'
        '<script src="/static/app.js"></script></body></html>'
    )


def not_found(what: str) -> str:
    """The page for something that does not exist (status 404)."""
    return layout("Not found", f"<h1>Not found</h1><p>{esc(what)}</p>", active="")


# ------------------------------------------------------------------------------- runs


def trend_svg(points: Sequence[tuple[str, int, int, str]], width: int = 720, height: int = 120) -> str:
    """Passed (green) and failed (red) counts of the last runs as stacked bars, oldest left."""
    if not points:
        return '<svg class=trend width="0" height="0" role="img" aria-label="no runs yet"></svg>'
    top = max(max(p + f for _, p, f, _ in points), 1)
    slot = min(width / len(points), 24.0)  # a few runs are a few bars, not one wide block
    bar = max(slot * 0.7, 1.0)
    parts = []
    for i, (run_id, passed, failed, outcome) in enumerate(points):
        x = i * slot + (slot - bar) / 2
        hp = (passed / top) * (height - 4)
        hf = (failed / top) * (height - 4)
        hb = 4.0 if outcome == "broken" and passed + failed == 0 else 0.0
        link = f"/runs/{quote(run_id)}"
        label = esc(f"{run_id}: {passed} passed, {failed} failed ({outcome})")
        parts.append(
            f'<a href="{esc(link)}"><title>{label}</title>'
            f'<rect class=pass x="{x:.1f}" y="{height - hp:.1f}" width="{bar:.1f}" height="{hp:.1f}"/>'
            f'<rect class=fail x="{x:.1f}" y="{height - hp - hf:.1f}" width="{bar:.1f}" height="{hf:.1f}"/>'
            + (f'<rect class=broken x="{x:.1f}" y="{height - hb:.1f}" width="{bar:.1f}" height="{hb}"/>'
               if hb else "")
            + "</a>"
        )
    return (f'<svg class=trend viewBox="0 0 {width} {height}" width="100%" height="{height}" role="img" '
            f'aria-label="pass/fail trend of the last {len(points)} runs">{"".join(parts)}</svg>')


def _run_row(r: Any) -> str:
    counts = f"{r.passed} passed, {r.failed} failed" + (f", {r.skipped} skipped" if r.skipped else "")
    session = (f'<a href="{_href("/", session=r.session_id)}">{esc(r.session_id)}</a>'
               if r.session_id else '<span class=muted>workspace</span>')
    return (
        f'<tr class="{esc(r.outcome)}"><td class=outcome>{OUTCOME_MARK.get(r.outcome, "?")} {esc(r.outcome)}</td>'
        f'<td><a href="/runs/{esc(quote(r.run_id))}">{esc(r.run_id)}</a></td>'
        f"<td>{esc(counts)} <span class=muted>({r.total})</span></td><td>{esc(r.framework)}</td>"
        f"<td>{session}</td><td>{esc(_ms(r.duration_ms))}</td><td>{esc(_when(r.at))}</td></tr>"
    )


def runs_page(rows: Sequence[Any], live: Sequence[tuple[str, str, str | None]], trend: Sequence[tuple[str, int, int, str]],
              *, outcome: str | None, session: str | None, page: int, more: bool) -> str:
    """The runs page: runs in progress, the pass/fail trend and the recorded runs."""
    filters = "".join(
        f'<a class="chip {"on" if (outcome or "") == value else ""}" href="{_href("/", outcome=value, session=session)}">'
        f"{esc(label)}</a>"
        for value, label in (("", "all"), ("green", "green"), ("red", "red"), ("broken", "broken"))
    )
    if session:
        filters += f' <span class="chip on">session {esc(session)} <a href="{_href("/", outcome=outcome)}">×</a></span>'
    running = "".join(
        f'<tr class=running><td class=outcome>… running</td><td><a href="/runs/{esc(quote(rid))}">{esc(rid)}</a>'
        "</td><td colspan=5 class=muted>in progress</td></tr>"
        for rid, _, _ in live
    )
    body = "".join(_run_row(r) for r in rows) or '<tr><td colspan=7 class=muted>No runs yet.</td></tr>'
    pager = ""
    if page > 0:
        pager += f'<a href="{_href("/", outcome=outcome, session=session, page=page - 1)}">← newer</a> '
    if more:
        pager += f'<a href="{_href("/", outcome=outcome, session=session, page=page + 1)}">older →</a>'
    return (
        f"<h1>Runs</h1><section class=trend-box>{trend_svg(trend)}</section>"
        f"<p class=filters>{filters}</p>"
        "<table class=runs><thead><tr><th>outcome</th><th>run</th><th>counts</th><th>framework</th>"
        f"<th>session</th><th>duration</th><th>when</th></tr></thead><tbody id=run-rows>{running}{body}</tbody></table>"
        f"<p class=pager>{pager}</p>"
    )


def diff_table(expected: str | None, got: str | None) -> str:
    """Expected and got side by side, lines that differ marked."""
    left = (expected or "").splitlines() or [""]
    right = (got or "").splitlines() or [""]
    rows = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        span = max(i2 - i1, j2 - j1)
        for k in range(span):
            a = left[i1 + k] if i1 + k < i2 else ""
            b = right[j1 + k] if j1 + k < j2 else ""
            cls = "same" if tag == "equal" else "diff"
            rows.append(f'<tr class={cls}><td><pre>{esc(a)}</pre></td><td><pre>{esc(b)}</pre></td></tr>')
    return ('<table class=diff><thead><tr><th>expected</th><th>got</th></tr></thead><tbody>'
            + "".join(rows[:400]) + "</tbody></table>")


def _failure(f: Mapping[str, Any], index: int) -> str:
    where = f.get("file") or ""
    if where and f.get("line") is not None:
        where = f"{where}:{f['line']}"
    parts = [f'<details class=failure id="failure-{index}" {"open" if index < 3 else ""}>',
             f'<summary><span class=test-name>{esc(f.get("test"))}</span> <span class=where>{esc(where)}</span>'
             f'{" <span class=kind>" + esc(f.get("kind")) + "</span>" if f.get("kind") not in (None, "test") else ""}'
             "</summary>"]
    if f.get("message"):
        parts.append(f'<pre class=message>{esc(f["message"])}</pre>')
    if f.get("expected") is not None or f.get("got") is not None:
        parts.append(diff_table(f.get("expected"), f.get("got")))
    if f.get("hint"):
        parts.append(f'<p class=hint><b>hint</b> {esc(f["hint"])}</p>')
    if f.get("bug_id"):
        parts.append(f'<p class=muted>bug <a href="/bugs/{esc(quote(str(f["bug_id"])))}">{esc(f["bug_id"])}</a></p>')
    if f.get("stack"):
        parts.append(f'<details class=stack><summary>stack</summary><pre>{esc(f["stack"])}</pre></details>')
    parts.append("</details>")
    return "".join(parts)


def run_body(run_id: str, result: Mapping[str, Any] | None, output: str) -> str:
    """The run page's main content: live output while it runs, the result once it has one."""
    if result is None:
        return (
            f'<h1><span class=badge id=outcome>… running</span> {esc(run_id)}</h1>'
            '<p class=progress id=progress>waiting for the first test…</p>'
            f'<pre id=output class=output>{esc(output)}</pre>'
        )
    outcome = str(result.get("outcome") or "broken")
    s = result.get("summary") or {}
    counts = (f"{s.get('passed', 0)} passed, {s.get('failed', 0)} failed, {s.get('skipped', 0)} skipped "
              f"({s.get('total', 0)} tests)")
    meta = [("framework", result.get("framework")), ("command", result.get("command")),
            ("session", result.get("session_id") or "workspace"), ("duration", _ms(result.get("duration_ms"))),
            ("exit code", result.get("exit_code")), ("started", result.get("started_at")),
            ("sandbox", _sandbox(result.get("sandbox"))), ("next", result.get("next_action")),
            ("result", result.get("result_ref"))]
    if result.get("crash_reason"):
        meta.insert(0, ("why", result["crash_reason"]))
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in meta if v not in (None, ""))
    failures = "".join(_failure(f, i) for i, f in enumerate(result.get("failures") or ()))
    notes = "".join(f"<li>{esc(n)}</li>" for n in result.get("notes") or ())
    return (
        f'<h1><span class="badge {esc(outcome)}" id=outcome data-outcome="{esc(outcome)}">'
        f'{OUTCOME_MARK.get(outcome, "?")} {esc(outcome)}</span> '
        f"{esc(run_id)}</h1><p class=counts>{esc(counts)}</p><dl class=meta>{dl}</dl>"
        + (f"<h2>Failures</h2>{failures}" if failures else "")
        + (f"<h2>Notes</h2><ul class=notes>{notes}</ul>" if notes else "")
        + f'<h2>Output (tail)</h2><pre class=output>{esc(result.get("output_tail") or output)}</pre>'
    )


def _sandbox(info: object) -> str:
    if not isinstance(info, Mapping):
        return ""
    enforced = info.get("enforced_by")
    return f"{info.get('mode')} ({'enforced by ' + str(enforced) if enforced else 'not enforced'})"


def run_page(run_id: str, result: Mapping[str, Any] | None, output: str) -> str:
    """One run's page: failures with expected/got, hints, stack and output."""
    state = "running" if result is None else str(result.get("outcome") or "broken")
    stream = f"/runs/{quote(run_id)}/stream" if result is None else None
    return layout(f"run {run_id}", run_body(run_id, result, output), active="runs", stream=stream, state=state)


# --------------------------------------------------------------------------- sessions


def _last_run(run_id: str | None, outcome: str | None) -> str:
    if not run_id:
        return '<span class=muted>none</span>'
    return (f'<span class="{esc(outcome)}">{OUTCOME_MARK.get(outcome or "", "?")}</span> '
            f'<a href="/runs/{esc(quote(run_id))}">{esc(run_id)}</a>')


def sessions_page(rows: Sequence[Mapping[str, Any]], *, page: int, more: bool) -> str:
    """The sessions page: every session that sent a hook event or recorded a run, with its runs,
    turns and verdicts."""
    body = "".join(
        f'<tr class="{"unresolved" if r["unresolved"] else ""}">'
        f'<td><a href="/sessions/{esc(quote(str(r["id"])))}">{esc(r["id"])}</a></td>'
        f'<td>{esc(r["harness"]) or "<span class=muted>no hook event</span>"}</td>'
        f'<td><a href="{_href("/", session=r["id"])}">{r["runs"]}</a></td>'
        f'<td class=last-run>{_last_run(r["last_run_id"], r["last_run_outcome"])}</td>'
        f'<td>{r["turns"]}</td><td>{r["interceptions"]}</td><td>{r["unresolved"]}</td>'
        f'<td>{esc(r["last_kind"])} <span class=muted>{esc((r["last_message"] or "")[:140])}</span></td>'
        f'<td>{esc(_when(r["last_seen"]))}</td></tr>'
        for r in rows
    ) or '<tr><td colspan=9 class=muted>No sessions yet.</td></tr>'
    pager = (f'<a href="{_href("/sessions", page=page - 1)}">← newer</a> ' if page > 0 else "") + (
        f'<a href="{_href("/sessions", page=page + 1)}">older →</a>' if more else "")
    return ("<h1>Sessions</h1><table class=sessions><thead><tr><th>session</th><th>harness</th><th>runs</th>"
            "<th>last run</th><th>turns</th><th>interceptions</th><th>unresolved</th><th>gate's last decision</th>"
            f"<th>last seen</th></tr></thead><tbody>{body}</tbody></table><p class=pager>{pager}</p>")


_OWED_WHY = {"failed": "failed", "skipped": "skipped in this session", "removed": "no longer in the suite",
             "only": "a .only mark narrows every later run"}


def verdict_section(v: Any) -> str:
    """The gate's verdict for a session (data.Verdict), read-only: unresolved and why, the owed
    tests with the run that made each owed, and the acceptances a person recorded."""
    if v is None:
        return ("<section id=verdict><h2>Gate verdict</h2><p class=muted>this state database predates "
                "owed tests and acceptances; the next run or hook event upgrades it</p></section>")
    if v.unresolved:
        state = (f'<p id=verdict-state class="unresolved"><b>unresolved</b> — reason: '
                 f'<span id=verdict-reason>{esc(v.reason or "not recorded")}</span>'
                 f' <span class=muted>(now: {esc(v.why)})</span></p>')
    elif v.holding:
        state = (f'<p id=verdict-state class="held"><b>held</b> — the gate holds the turn '
                 f'(<span id=verdict-reason>{esc(v.holding)}</span>): {esc(v.why)}</p>')
    else:
        state = (f'<p id=verdict-state class="resolved"><b>clear</b> — {esc(v.why)} '
                 '<span class=muted>(whether files changed since is <code>greenloop check</code>\'s to say)'
                 '</span></p>')
    run = v.last_run
    judged = (f"<p class=muted>the run the gate judges: {_run_link(run.run_id)} ({esc(run.outcome)}"
              f"{', workspace run' if run.session_id is None else ''})</p>" if run is not None
              else "<p class=muted>no run recorded for this session</p>")
    owed_rows = "".join(
        f'<tr class="{"accepted" if o.test in v.accepted else esc(o.reason)}"><td class=test-name>{esc(o.test)}</td>'
        f'<td>{esc(_OWED_WHY.get(o.reason, o.reason))}</td>'
        f'<td>{_run_link(o.run_id)}</td><td>{esc(_when(o.at))}</td>'
        f'<td>{esc(f"{o.file}:{o.line}" if o.file and o.line else o.file)} {esc(o.detail)}</td>'
        f'<td>{"accepted (not counted)" if o.test in v.accepted else ""}</td></tr>'
        for o in v.owed
    )
    owed = (f"<h3>Owed tests <span class=muted>{v.owed_count} counted</span></h3>"
            + ("<table id=owed class=owed><thead><tr><th>test</th><th>why</th><th>made owed by</th><th>when</th>"
               f"<th>where</th><th></th></tr></thead><tbody>{owed_rows}</tbody></table>" if owed_rows
               else "<p class=muted>none: the session owes no test</p>"))
    accepted_rows = "".join(
        f"<tr><td class=test-name>{esc(a.test)}</td><td>{esc(a.by)}</td><td>{esc(_when(a.at))}</td>"
        f"<td>{esc(a.reason)}</td><td>{'this session' if a.session_id else 'the whole workspace'}</td></tr>"
        for a in v.acceptances
    )
    acceptances = ("<h3>Acceptances</h3>"
                   + ("<table id=acceptances class=acceptances><thead><tr><th>test</th><th>who</th><th>when</th>"
                      f"<th>why</th><th>applies to</th></tr></thead><tbody>{accepted_rows}</tbody></table>"
                      if accepted_rows else "<p class=muted>none recorded (<code>greenloop accept</code>)</p>"))
    return f"<section id=verdict><h2>Gate verdict</h2>{state}{judged}{owed}{acceptances}</section>"


def session_page(d: Mapping[str, Any], run_rows: str) -> str:
    """One session's page: the gate's verdict, its runs, turns, interceptions and unresolved records."""
    s = d["session"]
    turns = []
    for t in d["turns"]:
        decisions = "".join(
            f'<li class="{esc(x["kind"])}"><b>{esc(x["kind"])}</b> {esc(_when(x["at"]))} '
            f'{"run " + esc(x["run_id"]) if x["run_id"] else ""}<pre>{esc(x["message"])}</pre></li>'
            for x in t["decisions"]
        ) or "<li class=muted>no interception</li>"
        released = f", released {esc(_when(t['released_at']))}" if t["released_at"] else ""
        turns.append(f'<li><b>turn {t["seq"]}</b> started {esc(_when(t["started_at"]))}{released}'
                     f"<ul>{decisions}</ul></li>")
    unresolved = "".join(
        f'<li>turn {u["turn_seq"]}, run {esc(u["run_id"])}, {esc(_when(u["at"]))}'
        + (f', reason {esc(u["reason"])}' if u.get("reason") else "")
        + (f' — cleared {esc(_when(u["cleared_at"]))} by {esc(u["cleared_by"])}' if u["cleared_at"] else
           " — <b>open</b>") + "</li>"
        for u in d["unresolved"]
    ) or "<li class=muted>none</li>"
    shown, count = len(d["runs"]), d.get("run_count", len(d["runs"]))
    more = (f' <a href="{_href("/", session=s["id"])}">all {count} on the runs page →</a>' if count > shown else "")
    runs_table = (f'<table class=runs id=session-runs><tbody>{run_rows}</tbody></table>' if run_rows
                  else "<p class=muted>no run recorded for this session</p>")
    harness = esc(s["harness"]) if s["harness"] else "no hook event (runs only)"
    return (f"<h1>Session {esc(s['id'])}</h1><p class=muted>{harness} · first seen "
            f"{esc(_when(s['first_seen']))} · last seen {esc(_when(s['last_seen']))}</p>"
            f"{verdict_section(d.get('verdict'))}"
            f"<h2>Runs <span class=muted>{count}</span>{more}</h2>{runs_table}"
            f"<h2>Unresolved records</h2><ul>{unresolved}</ul><h2>Turns</h2>"
            + (f"<ol class=turns>{''.join(turns)}</ol>" if turns else "<p class=muted>none: no hook event</p>"))


def run_rows(rows: Iterable[Any]) -> str:
    return "".join(_run_row(r) for r in rows)


# ------------------------------------------------------------------------------- bugs


def bugs_page(board: Mapping[str, Any]) -> str:
    """The bug board, one column per status."""
    cols = []
    for status, cards in board["columns"].items():
        items = "".join(
            f'<li class="card {esc(c.bug.severity)}"><a href="/bugs/{esc(quote(c.bug.id))}">{esc(c.bug.title)}</a>'
            f'<span class=muted>{esc(c.bug.id)} · {esc(c.bug.unit_id)} · {esc(c.bug.severity)} · seen in {c.seen} run(s)'
            + (f" · closed by {esc(c.bug.closed_by)} ({esc(c.bug.evidence)})" if c.bug.closed_by else "")
            + "</span></li>"
            for c in cards
        )
        total = board["totals"].get(status, 0)
        more = f'<li class=muted>{total - len(cards)} more</li>' if total > len(cards) else ""
        cols.append(f'<section class="column {esc(status)}"><h2>{esc(status)} <span class=muted>{total}</span></h2>'
                    f"<ul>{items}{more}</ul></section>")
    warnings = "".join(f"<li>{esc(w)}</li>" for w in board.get("warnings") or ())
    return ("<h1>Bugs</h1>" + (f"<ul class=warnings>{warnings}</ul>" if warnings else "")
            + f'<div class=board>{"".join(cols)}</div>')


def bug_page(history: Any, seen: int) -> str:
    """One bug's page: its whole history."""
    b = history.bug
    rows = "".join(
        f"<tr><td>{h.line}</td><td>{esc(h.bug.status)}</td><td>{esc(h.bug.updated_at)}</td>"
        f"<td>{esc(h.bug.by)}</td><td>{_run_link(h.bug.run_id)}</td>"
        f"<td>{_run_link(h.bug.closed_by)} {esc(h.bug.evidence)}</td></tr>"
        for h in history.history
    )
    return (
        f'<h1><span class="badge {esc(b.status)}">{esc(b.status)}</span> {esc(b.title)}</h1>'
        f"<dl class=meta><dt>id</dt><dd>{esc(b.id)}</dd><dt>test</dt><dd>{esc(b.test_name)}</dd>"
        f"<dt>unit</dt><dd>{esc(b.unit_id)}</dd><dt>source</dt><dd>{esc(b.source)}</dd>"
        f"<dt>severity</dt><dd>{esc(b.severity)}</dd><dt>seen in</dt><dd>{seen} run(s)</dd>"
        f"<dt>opened by</dt><dd>{_run_link(b.run_id)}</dd><dt>closed by</dt><dd>{_run_link(b.closed_by)} "
        f"{esc(b.evidence)}</dd><dt>fix refs</dt><dd>{esc(', '.join(b.fix_refs))}</dd></dl>"
        f"<pre class=message>{esc(b.detail)}</pre><h2>History</h2><table><thead><tr><th>line</th><th>status</th>"
        "<th>at</th><th>by</th><th>run</th><th>closed by</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _run_link(run_id: str | None) -> str:
    if not run_id:
        return ""
    return f'<a href="/runs/{esc(quote(run_id))}">{esc(run_id)}</a>'


# ------------------------------------------------------------------------ integration


def integration_page(rows: Sequence[Mapping[str, Any]], *, page: int, more: bool) -> str:
    """The integration runs page."""
    body = "".join(
        f'<tr class="{"green" if r.get("ok") else "red" if r.get("ok") is False else ""}">'
        f'<td>{"✓" if r.get("ok") else "✗" if r.get("ok") is False else "?"}</td>'
        f'<td><a href="/integration/{esc(quote(str(r.get("run_id"))))}">{esc(r.get("run_id"))}</a></td>'
        f'<td>{esc(r.get("cases_passed"))}/{esc(r.get("cases_total"))} passed</td>'
        f'<td>{esc(_ms(r.get("duration_ms")))}</td><td>{esc(r.get("started_at"))}</td></tr>'
        for r in rows
    ) or '<tr><td colspan=5 class=muted>No integration runs.</td></tr>'
    pager = (f'<a href="{_href("/integration", page=page - 1)}">← newer</a> ' if page > 0 else "") + (
        f'<a href="{_href("/integration", page=page + 1)}">older →</a>' if more else "")
    return (f"<h1>Integration runs</h1><table><tbody>{body}</tbody></table><p class=pager>{pager}</p>")


def _json_pre(value: object) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    return f"<pre>{esc(text)}</pre>"


def integration_run_page(d: Mapping[str, Any]) -> str:
    """One integration run's page: units and ports, cases with their steps, processes."""
    r = d["result"]
    run_id = str(r.get("run_id"))
    ports = r.get("ports_used") or {}
    env = d.get("env") if isinstance(d.get("env"), Mapping) else {}
    units = "".join(f"<tr><td>{i + 1}</td><td>{esc(u)}</td><td>{esc(p)}</td></tr>"
                    for i, (u, p) in enumerate(ports.items()))
    by_case: dict[str, list[Mapping[str, Any]]] = {}
    for entry in d["trace"]:
        by_case.setdefault(str(entry.get("case_id")), []).append(entry)
    cases = []
    for c in r.get("cases") or ():
        cid = str(c.get("case_id") or c.get("id"))
        steps = "".join(
            f'<details class=step><summary>step {esc(t.get("step"))} · {esc(t.get("unit"))} · '
            f'{esc(t.get("method"))} {esc(t.get("url"))} → <b>{esc(t.get("status"))}</b> · '
            f'{esc(t.get("duration_ms"))} ms{" · " + esc(t.get("error")) if t.get("error") else ""}</summary>'
            f'<div class=pair><div><h4>request</h4>{_json_pre(t.get("request_headers"))}{_json_pre(t.get("request_body"))}'
            f'</div><div><h4>response</h4>{_json_pre(t.get("response_headers"))}{_json_pre(t.get("response_body"))}'
            "</div></div></details>"
            for t in by_case.get(cid, ())
        )
        status = c.get("status") or ("passed" if c.get("passed") else "failed")
        extra = {k: v for k, v in c.items() if k not in ("case_id", "id", "status", "passed")}
        cases.append(f'<section class="case {esc(status)}"><h3>{esc(cid)} <span class=badge>{esc(status)}</span></h3>'
                     f'<details><summary>case record (placeholders, timings)</summary>{_json_pre(extra)}</details>'
                     f"{steps}</section>")
    failures = "".join(
        f'<li><b>{esc(f.get("case_id"))}</b> step {esc(f.get("failed_step"))}: {esc(f.get("reason"))} '
        f'{esc(f.get("message"))}{diff_table(_text(f.get("expected")), _text(f.get("got")))}</li>'
        for f in r.get("failures") or ()
    )
    shots = "".join(
        f'<figure><img alt="{esc(s)}" src="/integration/{esc(quote(run_id))}/file/{esc(quote(s))}">'
        f"<figcaption>{esc(s)}</figcaption></figure>"
        for s in d["screenshots"]
    )
    ok = r.get("ok")
    return (
        f'<h1><span class="badge {"green" if ok else "red"}">{"✓ passed" if ok else "✗ failed"}</span> {esc(run_id)}</h1>'
        f'<p>{esc(r.get("cases_passed"))}/{esc(r.get("cases_total"))} cases passed · {esc(_ms(r.get("duration_ms")))}</p>'
        f"<h2>Units (start order, ports)</h2><table><thead><tr><th>#</th><th>unit</th><th>port</th></tr></thead>"
        f"<tbody>{units}</tbody></table>"
        + (f"<details><summary>env.json</summary>{_json_pre(env)}</details>" if env else "")
        + (f"<h2>Failures</h2><ul>{failures}</ul>" if failures else "")
        + f"<h2>Cases</h2>{''.join(cases)}"
        + (f"<h2>Browser screenshots</h2><div class=shots>{shots}</div>" if shots else "")
        + f'<h2>process.log</h2><pre class=output>{esc(d["process_log"])}</pre>'
    )


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
