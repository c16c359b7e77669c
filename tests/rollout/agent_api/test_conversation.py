"""An agent's chat history against the recorded trajectory: continue, or fork explicitly."""

from __future__ import annotations

import json

import pytest

from rollout.agent_api import (
    Continuation,
    Fork,
    Message,
    MessageError,
    ToolCall,
    assistant_message,
    continue_history,
    parse_messages,
    tools_system_text,
)

SYSTEM = {"role": "system", "content": "You fix bugs."}
USER = {
    "role": "user",
    "content": [{"type": "text", "text": "Fix "}, {"type": "text", "text": "it"}],
}
BASH = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'


def test_messages_parse_with_text_parts_and_tool_calls() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"x": 1}'}}
    messages = parse_messages(
        [SYSTEM, USER, {"role": "assistant", "content": None, "tool_calls": [call]},
         {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    )  # fmt: skip
    assert messages[1].content == "Fix it"
    assert messages[2] == Message("assistant", "", (ToolCall("c1", "bash", '{"x": 1}'),))
    assert messages[3].tool_call_id == "c1"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([], "non-empty list"),
        ([{"role": "robot", "content": "hi"}], r"messages\[0\]\.role"),
        ([{"role": "user", "content": [{"type": "image_url"}]}], "only text parts"),
        ([{"role": "user", "content": "x", "tool_calls": [{"function": {"name": "a"}}]}],
         "only assistant messages"),
        ([{"role": "assistant", "content": "", "tool_calls": [{"function": {}}]}],
         r"tool_calls\[0\]"),
    ],
)  # fmt: skip
def test_malformed_messages_say_which_field(raw: object, says: str) -> None:
    with pytest.raises(MessageError, match=says):
        parse_messages(raw)


def test_the_models_tool_call_text_becomes_an_openai_tool_call() -> None:
    message = assistant_message(f"I will look first.\n{BASH}", turn=2)
    assert message.content == "I will look first."
    [call] = message.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == (
        "call_2_0",
        "bash",
        {"command": "ls -la"},
    )
    assert message.to_openai()["tool_calls"][0]["type"] == "function"


def test_a_tool_call_that_does_not_parse_stays_in_the_content() -> None:
    broken = "<tool_call>{not json</tool_call>"
    message = assistant_message(broken, turn=0)
    assert message.tool_calls == () and message.content == broken
    open_call = assistant_message('<tool_call>{"name": "submit", "arguments": {}}', turn=1)
    assert [c.name for c in open_call.tool_calls] == ["submit"]  # stopped at the closing tag


def test_a_call_that_resends_the_history_plus_tool_results_continues_it() -> None:
    known = [*parse_messages([SYSTEM, USER]), assistant_message(BASH, turn=0)]
    echoed = known[2].to_openai()
    echoed["tool_calls"][0]["id"] = "renumbered"  # some agents renumber ids: still the same call
    echoed["tool_calls"][0]["function"]["arguments"] = '{"command":"ls -la"}'  # and re-space JSON
    result = {"role": "tool", "tool_call_id": "renumbered", "content": "README.md"}
    step = continue_history(known, parse_messages([SYSTEM, USER, echoed, result]))
    assert isinstance(step, Continuation) and [m.role for m in step.new] == ["tool"]


@pytest.mark.parametrize(
    ("change", "at"),
    [
        (lambda h: h[:2], 2),  # the assistant answer was dropped
        (lambda h: [h[0], {"role": "user", "content": "other task"}, *h[2:]], 1),  # edited
        (lambda h: [*h, {"role": "assistant", "content": "I wrote this myself"}], 3),
        (lambda h: h, 3),  # the same history again: a second sample, not a continuation
    ],
)
def test_a_history_that_does_not_continue_is_a_fork_at_the_first_difference(
    change: object, at: int
) -> None:
    known = [*parse_messages([SYSTEM, USER]), assistant_message(BASH, turn=0)]
    history = [SYSTEM, USER, known[2].to_openai()]
    step = continue_history(known, parse_messages(change(history)))  # type: ignore[operator]
    assert isinstance(step, Fork) and step.at == at, step


def test_the_tools_block_lists_every_schema() -> None:
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
    text = tools_system_text(tools)
    assert "<tools>" in text and '"name": "bash"' in text and "<tool_call>" in text
