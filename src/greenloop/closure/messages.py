"""What the gate says: the steer that sends an agent back and the release that lets a turn
end unresolved, in English and Chinese (`hint_language = "zh"`).

A steer names what is owed (up to MAX_NAMED tests, then a count), why each is owed (failed
in run X, skipped in this session, no longer in the suite, a `.only` mark, with file:line
where the working tree shows it), and the command that reruns exactly them.
"""

from __future__ import annotations

from greenloop.closure.owed import OwedTest
from greenloop.closure.transitions import ClosureState, RunRecord

__all__ = ["MAX_NAMED", "RULE_REASONS", "release_message", "rerun_command", "steer_message", "why_owed"]

MAX_NAMED = 5
# The rule that held a turn -> the reason an unresolved record keeps.
RULE_REASONS = {
    "red": "red",
    "owed": "owed",
    "taken_away": "taken away",
    "stale": "stale",
    "not_run": "not run",
    "uncovered": "change not covered",
}


def _what_failed(run: RunRecord, zh: bool) -> str:
    s = run.summary
    if run.outcome == "broken" or (not run.ok and s.failed == 0):
        why = run.reason or ("没有完成" if zh else "did not complete")
        return (
            f"最近一次测试运行 {run.run_id} 未能完成（{why}）"
            if zh
            else (f"the last test run ({run.run_id}) did not complete: {why}")
        )
    counts = (
        f"{s.failed} 个失败，{s.passed} 个通过，共 {s.total} 个"
        if zh
        else f"{s.failed} failed, {s.passed} passed of {s.total}"
    )
    return (
        f"最近一次测试运行 {run.run_id} 仍为红色：{counts}"
        if zh
        else (f"the last test run ({run.run_id}) is red: {counts}")
    )


def _more(shown: str, total: int, zh: bool) -> str:
    more = total - MAX_NAMED
    if more > 0:
        shown += f"（另有 {more} 个）" if zh else f" (+{more} more)"
    return shown


def _named(failing: tuple[str, ...], zh: bool) -> str:
    if not failing:
        return ""
    shown = _more(", ".join(failing[:MAX_NAMED]), len(failing), zh)
    return f"失败的测试：{shown}。" if zh else f" Failing: {shown}."


def why_owed(o: OwedTest, zh: bool = False) -> str:
    """Why one test is owed, in a few words (with file:line where the working tree shows it)."""
    where = f"{o.file}:{o.line}" if o.file and o.line else ""
    mark = f"{where} {o.detail}".strip() if o.detail else where
    if o.reason == "failed":
        return f"在运行 {o.run_id} 中失败" if zh else f"failed in {o.run_id}"
    if o.reason == "skipped":
        text = "在本会话中被跳过" if zh else "skipped in this session"
    elif o.reason == "removed":
        text = "已不在测试套件中" if zh else "no longer in the suite"
    else:
        text = ".only 标记使之后每次运行都被缩小" if zh else "a .only mark narrows every later run"
    return f"{text}：{mark}" if zh and mark else (f"{text}: {mark}" if mark else text)


def rerun_command(owed: tuple[OwedTest, ...], framework: str | None) -> tuple[str, str]:
    """(the shell command, the test_run target) that reruns exactly the owed tests: their node
    ids where the runner takes them (pytest), else their files; the whole suite when neither
    is known (a `.only` mark is named by its file)."""
    import shlex

    names = [o.test for o in owed if o.reason != "only"]
    if names and all("::" in n for n in names) and framework in (None, "pytest"):
        targets = names
    else:
        targets = list(dict.fromkeys(o.file for o in owed if o.file))
    if not targets:
        return "greenloop run", ""
    target = " ".join(targets)
    return f"greenloop run --target {shlex.quote(target)}", target


def _owed_items(owed: tuple[OwedTest, ...], count: int, zh: bool) -> str:
    items = [
        f"{o.test}（{why_owed(o, True)}）" if zh else f"{o.test} ({why_owed(o)})" for o in owed[:MAX_NAMED]
    ]
    return _more("；".join(items) if zh else "; ".join(items), count, zh)


def _tail(round_no: int, budget: int, zh: bool) -> str:
    return (
        f"（本回合第 {round_no}/{budget} 次拦截）"
        if zh
        else f" (Intercept {round_no} of {budget} this turn.)"
    )


def steer_message(
    run: RunRecord | None,
    round_no: int,
    budget: int,
    language: str = "en",
    *,
    rule: str = "red",
    state: ClosureState | None = None,
) -> str:
    """The corrective message of one rule (red, owed, taken_away, stale, not_run)."""
    zh = language == "zh"
    owed = state.owed if state is not None else ()
    count = state.owed_count if state is not None else 0
    again = "test_run" if run is None or run.source != "hook" else ("测试" if zh else "the tests")
    details = ""
    if run is not None and run.result_ref and rule == "red":
        details = f"详情：{run.result_ref}" if zh else f" Details: {run.result_ref}"
    if rule == "stale" and run is not None:
        if zh:
            return (
                f"greenloop：自上次运行（{run.run_id}）以来文件已更改；"
                "请重新运行测试（test_run 或 `greenloop run`）。" + _tail(round_no, budget, True)
            )
        return (
            f"greenloop: files changed since the last run ({run.run_id}); run the tests again "
            "(test_run, or `greenloop run` from a shell)." + _tail(round_no, budget, False)
        )
    if rule == "uncovered":
        return _uncovered(run, state, zh) + _tail(round_no, budget, zh)
    if rule == "not_run":
        if zh:
            return (
                "greenloop：本会话修改了文件，但没有记录任何测试运行；"
                "结束前请运行测试（test_run 或 `greenloop run`）。" + _tail(round_no, budget, True)
            )
        return (
            "greenloop: this session changed files but recorded no test run; run the tests before "
            "ending the turn (test_run, or `greenloop run` from a shell)." + _tail(round_no, budget, False)
        )
    head = ""
    if run is not None and not run.ok:
        head = (
            f"greenloop：{_what_failed(run, True)}。{_named(run.failing, True)}"
            if zh
            else f"greenloop: {_what_failed(run, False)}.{_named(run.failing, False)}"
        )
    others = tuple(o for o in owed if run is None or run.ok or o.test not in run.failing)
    owed_text = ""
    if others:
        n = count - (len(owed) - len(others))
        tests = f"{n} test{'s' if n != 1 else ''}"
        if zh:
            owed_text = f"本会话仍欠 {n} 个测试：{_owed_items(others, n, True)}。"
        elif head:
            owed_text = f" Also owed by this session ({tests}): {_owed_items(others, n, False)}."
        else:
            owed_text = (
                f" this session owes {tests} that no later run has shown passing: "
                f"{_owed_items(others, n, False)}."
            )
    if not head:
        head = "greenloop：" if zh else "greenloop:"
    taken = any(o.reason != "failed" for o in owed)
    rerun = ""
    if owed:
        shell, target = rerun_command(owed, run.framework if run is not None else None)
        rerun = (
            f"只重跑它们：`{shell}`" + (f'（或 test_run，target="{target}"）' if target else "") + "。"
            if zh
            else f" Rerun exactly them: `{shell}`"
            + (f' (or test_run with target="{target}")' if target else "")
            + "."
        )
    if taken:
        rerun += (
            "被跳过、删除或 .only 的测试不算通过：恢复它并运行它（只有人可以在自己的终端里接受它）。"
            if zh
            else " A skipped, removed or .only test does not count as passing: restore it and run it "
            "(only a person can accept it, from their own terminal)."
        )
    if zh:
        return (
            f"{head}{owed_text}请修复后重新运行 {again} 验证。{rerun}"
            + _tail(round_no, budget, True)
            + details
        )
    return (
        f"{head}{owed_text} Fix it, then run {again} again to verify (`greenloop run` from a shell).{rerun}"
        + _tail(round_no, budget, False)
        + details
    )


def _uncovered(run: RunRecord | None, state: ClosureState | None, zh: bool) -> str:
    """The steer of `release = "affected"|"full"`: the session changed files and no green run
    of the kind the release needs has tested them as they are."""
    full = state is not None and state.release == "full"
    last = f"（上次运行 {run.run_id} 只运行了部分测试）" if zh and run else (
        f" (the last run, {run.run_id}, ran part of the suite)" if run else "")
    if full:
        if zh:
            return (f"greenloop：本会话修改了文件，但还没有整套测试在当前文件上通过{last}；"
                    "请运行整套测试：`greenloop run`（或不带 target 的 test_run）。")
        return ("greenloop: this session changed files and no green whole-suite run has tested them as they "
                f"are now{last}; run the whole suite: `greenloop run` (or test_run with no target).")
    if zh:
        return (f"greenloop：本会话修改了文件，但还没有 --affected 或整套测试在当前文件上通过{last}；"
                "请运行 `greenloop run --affected`（或 test_run，affected=true），证明改动没有破坏其他测试。")
    return ("greenloop: this session changed files and no green --affected or whole-suite run has tested "
            f"them as they are now{last}; run `greenloop run --affected` (or test_run with affected=true) "
            "to show the change broke nothing else.")


def release_message(
    run: RunRecord | None,
    session_id: str,
    budget: int,
    language: str = "en",
    *,
    rule: str = "red",
    state: ClosureState | None = None,
) -> str:
    """The message of a release: the turn may end, the session is recorded unresolved, and why."""
    zh = language == "zh"
    reason = RULE_REASONS.get(rule, rule)
    # stale, not_run and uncovered ask once; the others use the turn's whole budget
    asked = 1 if rule in ("stale", "not_run", "uncovered") else budget
    rounds = f"{asked} corrective round{'s' if asked != 1 else ''}"
    if rule in ("red",) and run is not None:
        what = _what_failed(run, zh)
    elif rule in ("owed", "taken_away") and state is not None:
        what = (
            f"本会话仍欠 {state.owed_count} 个测试：{_owed_items(state.owed, state.owed_count, True)}"
            if zh
            else f"this session still owes {state.owed_count} test{'s' if state.owed_count != 1 else ''}: "
            f"{_owed_items(state.owed, state.owed_count, False)}"
        )
    elif rule == "uncovered":
        what = (
            "本会话修改了文件，但没有覆盖这些改动的测试运行通过"
            if zh
            else "this session changed files and no run that covers the change passed"
        )
    elif rule == "stale":
        what = (
            "自上次运行以来文件已更改，测试未重新运行"
            if zh
            else "files changed since the last run and the tests did not run again"
        )
    else:
        what = "本会话修改了文件但没有运行测试" if zh else "this session changed files and ran no test"
    if zh:
        return (
            f"greenloop：{what}，已拦截 {asked} 次仍未解决；本回合结束，"
            f"会话 {session_id} 记录为未解决（unresolved，原因：{reason}）。之后一次通过的运行会清除该记录。"
        )
    still = "still red" if rule == "red" else "still unresolved"
    return (
        f"greenloop: {what}, {still} after {rounds}; the turn ends and session {session_id} is recorded "
        f"as unresolved ({reason}). A later passing run clears it."
    )
