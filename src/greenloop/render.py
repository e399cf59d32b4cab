"""Human rendering of the records the JSON shows: detections, live progress, run summaries.

Nothing here decides anything; it only formats. Colour is used only on a terminal and never
when NO_COLOR is set.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TextIO

from greenloop.model import Detection, Failure, Progress
from greenloop.result import RunResult

if TYPE_CHECKING:
    from greenloop.doctor.report import Report

__all__ = [
    "LiveProgress",
    "detection_text",
    "doctor_text",
    "duration",
    "progress_line",
    "run_text",
    "use_colour",
]

NON_TTY_INTERVAL_S = 5.0  # a progress line at most this often when stderr is not a terminal
TTY_INTERVAL_S = 0.2
MAX_FAILURES_SHOWN = 20
TAIL_LINES = 15


def use_colour(stream: TextIO, env: Mapping[str, str] | None = None) -> bool:
    """Whether to colour output on `stream`: a terminal, and neither NO_COLOR nor TERM=dumb."""
    env = os.environ if env is None else env
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and "NO_COLOR" not in env and env.get("TERM") != "dumb"


class _Style:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.colour else text

    def red(self, t: str) -> str:
        return self._wrap("31", t)

    def green(self, t: str) -> str:
        return self._wrap("32", t)

    def yellow(self, t: str) -> str:
        return self._wrap("33", t)

    def bold(self, t: str) -> str:
        return self._wrap("1", t)

    def dim(self, t: str) -> str:
        return self._wrap("2", t)


def duration(ms: int) -> str:
    """A duration for people: `850 ms`, `12.3s`, `2m05s`."""
    if ms < 1000:
        return f"{ms} ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    return f"{m}m{sec:02d}s"


def progress_line(p: Progress) -> str:
    """One live progress line: counts so far and the test running."""
    parts = [f"{p.passed} passed"]
    if p.failed:
        parts.append(f"{p.failed} failed")
    if p.skipped:
        parts.append(f"{p.skipped} skipped")
    return f"running… {', '.join(parts)} · {duration(p.elapsed_ms)}"


class LiveProgress:
    """Live progress on a stream (stderr): redrawn in place on a terminal (at once on the first
    update, then at most every TTY_INTERVAL_S, the latest state at the latest by `close`),
    otherwise a plain line at most every NON_TTY_INTERVAL_S. `update` is safe to call from
    any thread."""

    def __init__(
        self,
        stream: TextIO,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float | None = None,
    ) -> None:
        self.stream = stream
        if tty is None:
            try:
                tty = stream.isatty()
            except (AttributeError, ValueError):
                tty = False
        self.tty = tty
        self.clock = clock
        self.started = clock()
        default_interval = TTY_INTERVAL_S if tty else NON_TTY_INTERVAL_S
        self.interval = interval_s if interval_s is not None else default_interval
        self.last: Progress = Progress()
        self.last_drawn = self.started
        self.width = 0
        self.undrawn = False  # on a terminal: an update not drawn yet
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None

    def __enter__(self) -> LiveProgress:
        self.thread = threading.Thread(target=self._tick, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _elapsed_ms(self) -> int:
        return int((self.clock() - self.started) * 1000)

    def update(self, p: Progress) -> None:
        """Take progress `p`; redraw the line on a terminal at most every `interval` seconds."""
        with self.lock:
            self.last = p
            due = self.tty and (not self.width or self.clock() - self.last_drawn >= self.interval)
            self.undrawn = self.tty and not due
        if due:
            self._draw()

    def _tick(self) -> None:
        while not self.stop_event.wait(self.interval):
            self._draw()

    def _draw(self) -> None:
        with self.lock:
            now = self.clock()
            p = self.last
            shown = Progress(p.passed, p.failed, p.skipped, self._elapsed_ms())
            text = progress_line(shown)
            try:
                if self.tty:
                    pad = max(0, self.width - len(text))
                    self.stream.write("\r" + text + " " * pad)
                    self.width = len(text)
                else:
                    if now - self.last_drawn < self.interval:
                        return
                    self.stream.write(text + "\n")
                self.last_drawn = now
                self.undrawn = False
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """Stop redrawing, draw what is pending, then clear the line on a terminal."""
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        if self.undrawn:
            self._draw()
        with self.lock:
            if self.tty and self.width:
                try:
                    self.stream.write("\r" + " " * self.width + "\r")
                    self.stream.flush()
                except (OSError, ValueError):
                    pass
                self.width = 0


def detection_text(d: Detection, *, colour: bool = False) -> str:
    """A detection for people: the framework, where it was found and why."""
    st = _Style(colour)
    lines: list[str] = []
    if d.framework:
        lines.append(f"{st.bold('framework')}  {d.framework}")
    else:
        lines.append(f"{st.bold('framework')}  {st.yellow('none detected')}")
    lines.append(f"{st.bold('root')}       {d.root}")
    if d.config_path:
        lines.append(f"{st.bold('config')}     {d.config_path}")
    if d.package_manager:
        lines.append(f"{st.bold('packages')}   {d.package_manager}")
    if d.command:
        import shlex

        lines.append(f"{st.bold('command')}    {shlex.join(d.command)}")
    if d.test_files:
        shown = ", ".join(d.test_files[:8])
        more = f" (+{len(d.test_files) - 8} more)" if len(d.test_files) > 8 else ""
        lines.append(f"{st.bold('tests')}      {len(d.test_files)} file(s): {shown}{more}")
    for s in d.suites:
        lines.append(f"{st.bold('suite')}      {s.root}/ ({s.framework})")
    for n in d.notes:
        lines.append(st.dim(f"note: {n}"))
    return "\n".join(lines)


def _failure_text(f: Failure, st: _Style) -> list[str]:
    where = ""
    if f.file:
        where = f"  ({f.file}{':' + str(f.line) if f.line else ''})"
    label = {"load": "LOAD ERROR", "hook": "HOOK ERROR", "timeout": "TIMED OUT",
             "cancelled": "CANCELLED"}.get(f.kind, "FAILED")
    if f.flaky:
        label = "FLAKY"  # failed, then passed when rerun
    out = [f"{st.red(label)} {st.bold(f.test)}{st.dim(where)}"]
    if f.message:
        msg_lines = f.message.strip().splitlines()
        out += [f"    {line}" for line in msg_lines[:6]]
        if len(msg_lines) > 6:
            out.append(st.dim(f"    … {len(msg_lines) - 6} more line(s)"))
    if f.expected is not None or f.got is not None:
        out.append(f"    expected: {_one_line(f.expected)}")
        out.append(f"    got:      {_one_line(f.got)}")
    if f.hint:
        out.append(f"    {st.yellow('hint:')} {f.hint}")
    return out


def _one_line(text: str | None, limit: int = 200) -> str:
    if text is None:
        return "—"
    flat = " ⏎ ".join(text.strip().splitlines())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def run_text(r: RunResult, *, colour: bool = False, cwd: str | None = None) -> str:
    """The end-of-run summary a person reads: verdict, counts, failing tests, pointers."""
    st = _Style(colour)
    s = r.summary
    counts = f"{s.failed} failed, {s.passed} passed" + (f", {s.skipped} skipped" if s.skipped else "")
    counts += f", {s.flaky} flaky" if s.flaky else ""
    counts += f" ({s.total} tests)"
    fw = f" [{r.framework}]" if r.framework else ""
    if r.shard is not None:  # one part of a split suite: say which, so no one reads it as the whole
        fw = f" [{r.framework or 'unknown'}, shard {r.shard.index}/{r.shard.total}]"
    lines: list[str] = []
    if r.failures:
        lines.append("")
        for f in r.failures[:MAX_FAILURES_SHOWN]:
            lines += _failure_text(f, st)
            lines.append("")
        if len(r.failures) > MAX_FAILURES_SHOWN:
            more = len(r.failures) - MAX_FAILURES_SHOWN
            lines.append(st.dim(f"… and {more} more failing test(s) in result.json"))
            lines.append("")
    if r.outcome == "broken" and r.output_tail.strip():
        tail = r.output_tail.rstrip().splitlines()[-TAIL_LINES:]
        lines.append(st.dim("last output:"))
        lines += [f"  {st.dim(t)}" for t in tail]
        lines.append("")
    if r.outcome == "green":
        head = st.green(st.bold("✓ green")) + f"  {counts} in {duration(r.duration_ms)}{fw}"
    elif r.outcome == "red":
        head = st.red(st.bold("✗ red")) + f"  {counts} in {duration(r.duration_ms)}{fw}"
    else:
        reason = r.crash_reason or "broken"
        head = st.yellow(st.bold("! broken")) + f"  {reason}{fw}"
        if s.total:
            head += f"\n  counts so far: {counts}"
    if r.sandbox.note and r.sandbox.enforced_by is None:  # asked for (auto), but nothing enforced it
        head += "  " + st.yellow(f"(sandbox {r.sandbox.mode}: NOT enforced, see the note)")
    lines.append(head)
    lines.append(st.dim(f"  command: {r.command}"))
    if r.result_ref:
        ref = r.result_ref
        if cwd:
            try:
                rel = os.path.relpath(ref, cwd)
                ref = rel if not rel.startswith("../..") else ref
            except ValueError:
                pass
        lines.append(st.dim(f"  result:  {ref}"))
    if r.next_action:
        lines.append(st.dim(f"  next:    {r.next_action}"))
    for n in r.notes:
        lines.append(st.dim(f"  note: {n}"))
    return "\n".join(lines).lstrip("\n")


def doctor_text(report: Report, *, colour: bool = False) -> str:
    """`greenloop doctor`: one line per check (✓ ok, ! warn, ✗ fail), each problem's fix under it."""
    st = _Style(colour)
    mark = {"ok": st.green("✓"), "warn": st.yellow("!"), "fail": st.red("✗")}
    area_w = max((len(c.area) for c in report.checks), default=0)
    name_w = max((len(c.name) for c in report.checks), default=0)
    lines = [f"{st.bold('workspace')}  {report.workspace}", ""]
    for c in report.checks:
        lines.append(
            f"{mark.get(c.status, '?')} {c.area:<{area_w}}  {st.bold(f'{c.name:<{name_w}}')}  {c.detail}"
        )
        if c.fix and c.status != "ok":
            lines.append(f"  {' ' * area_w}  {' ' * name_w}  {st.dim('fix:')} {c.fix}")
    fails = sum(c.status == "fail" for c in report.checks)
    warns = sum(c.status == "warn" for c in report.checks)
    advice = f" ({warns} warning{'s' if warns != 1 else ''})" if warns else ""
    lines.append("")
    if fails:
        lines.append(
            st.red(
                st.bold(f"✗ {fails} problem{'s' if fails != 1 else ''} need{'s' if fails == 1 else ''} a fix")
            )
            + advice
        )
    else:
        lines.append(st.green(st.bold("✓ all well")) + advice)
    return "\n".join(lines)
