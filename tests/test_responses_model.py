"""The scripted Responses model the Codex e2e tests drive: a retried request keeps the story."""

from __future__ import annotations

from typing import Any

from e2e.responses_server import Model, call, say


def _body(*items: dict[str, Any]) -> dict[str, Any]:
    return {"input": list(items)}


PROMPT: dict[str, Any] = {
    "type": "message",
    "role": "user",
    "content": [{"type": "input_text", "text": "go"}],
}
OUTPUT: dict[str, Any] = {
    "type": "function_call_output",
    "call_id": "call_1",
    "output": "Process exited with code 1",
}


def test_a_retried_request_gets_the_answer_it_got_before_and_the_plan_keeps_its_place() -> None:
    model = Model([call("exec_command", cmd="pytest"), say("fixed")])
    first = model(_body(PROMPT))
    assert first.name == "exec_command"
    assert model(_body(PROMPT)) == first  # Codex lost the stream and asked again
    assert model.plan == [say("fixed")]
    assert model(_body(PROMPT, OUTPUT)) == say("fixed")
    assert model(_body(PROMPT, OUTPUT, PROMPT)) == say("done")  # the plan is spent: "done" for ever


def test_a_command_still_running_is_waited_for_before_the_plan_goes_on() -> None:
    model = Model([say("fixed")])
    running = {"type": "function_call_output", "output": "Process running with session ID 7"}
    answer = model(_body(PROMPT, running))
    assert answer.name == "write_stdin" and answer.arguments["session_id"] == 7
    assert model.plan == [say("fixed")]
