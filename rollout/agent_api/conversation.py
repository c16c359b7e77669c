"""An agent's OpenAI-style chat history against the trajectory the conductor records.

An agent that speaks `/v1/chat/completions` resends its whole history on every call. The
trajectory, though, is append-only token ids: the model's ids exactly as sampled, template and
tool tokens around them. So each call must *continue* what the trajectory holds: the messages
already recorded, unchanged (the assistant ones as we returned them), then only new user or
tool messages. Anything else (an edited, dropped or agent-written message) is a `Fork`, which
the caller records as such; it is never re-tokenized into the same trajectory.

Tool calls travel in the Hermes/Qwen form the chat templates use:
`<tool_call>{"name": …, "arguments": {…}}</tool_call>` in the model's text, OpenAI
`tool_calls` in the messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "Continuation",
    "Fork",
    "Message",
    "MessageError",
    "ToolCall",
    "assistant_message",
    "continue_history",
    "parse_messages",
    "tools_system_text",
]

Role = Literal["system", "user", "assistant", "tool"]
_ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)


class MessageError(ValueError):
    """The request's messages are malformed; the text says which and how (an HTTP 400)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call of an assistant message; `arguments` is JSON text, as in OpenAI's."""

    id: str
    name: str
    arguments: str

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    def same_call(self, other: ToolCall) -> bool:
        """Same function and the same arguments (as JSON values; ids and spacing aside)."""
        return self.name == other.name and _json_or_text(self.arguments) == _json_or_text(
            other.arguments
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A chat message in the form the trajectory records (text content only)."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    def to_openai(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message

    def same_as(self, other: Message) -> bool:
        """Whether `other` says the same: role, content and calls (tool-call ids aside, since
        some agents renumber them)."""
        return (
            self.role == other.role
            and self.content == other.content
            and len(self.tool_calls) == len(other.tool_calls)
            and all(a.same_call(b) for a, b in zip(self.tool_calls, other.tool_calls, strict=True))
        )


@dataclass(frozen=True, slots=True)
class Continuation:
    """The call continues the recorded history with `new` (user and tool messages)."""

    new: tuple[Message, ...]


@dataclass(frozen=True, slots=True)
class Fork:
    """The call does not continue the recorded history: it differs from message `at` on."""

    at: int
    reason: str


def parse_messages(raw: Any) -> tuple[Message, ...]:
    """Validate an OpenAI `messages` list. Content may be a string, null (an assistant message
    with tool calls) or a list of text parts.

    Raises:
        MessageError: not a non-empty list of messages, an unknown role, non-text content, a
            malformed tool call; the message names the index and the field.
    """
    if not isinstance(raw, list) or not raw:
        raise MessageError("`messages` must be a non-empty list of {role, content} objects")
    return tuple(_parse_message(index, item) for index, item in enumerate(raw))


def continue_history(known: Sequence[Message], incoming: Sequence[Message]) -> Continuation | Fork:
    """How a call's messages relate to the `known` ones the trajectory holds."""
    for index, message in enumerate(known):
        if index >= len(incoming):
            return Fork(index, f"the call dropped messages from #{index} on")
        if not message.same_as(incoming[index]):
            return Fork(index, f"message #{index} ({incoming[index].role}) was changed")
    new = tuple(incoming[len(known) :])
    if not new:
        return Fork(len(known), "the call adds no message after the last answer")
    for offset, message in enumerate(new):
        if message.role == "assistant":
            at = len(known) + offset
            return Fork(at, f"message #{at} is an assistant message the model did not write")
    return Continuation(new)


def assistant_message(text: str, turn: int) -> Message:
    """The model's text as an OpenAI assistant message: each well-formed `<tool_call>` block
    becomes a tool call (ids `call_<turn>_<k>`), the rest is the content. A block whose JSON
    does not parse stays in the content, for the agent to see."""
    calls: list[ToolCall] = []
    kept: list[str] = []
    position = 0
    for match in _TOOL_CALL.finditer(text):
        call = _tool_call(match.group(1), f"call_{turn}_{len(calls)}")
        if call is None:
            continue
        kept.append(text[position : match.start()])
        position = match.end()
        calls.append(call)
    kept.append(text[position:])
    return Message("assistant", "".join(kept).strip(), tuple(calls))


def tools_system_text(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tools block the Hermes/Qwen chat templates put in the system message (for ChatML,
    which has no tools block of its own)."""
    # As the Qwen templates' `tojson` writes them: the keys in the order the agent sent them.
    schemas = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{schemas}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def _parse_message(index: int, item: Any) -> Message:
    if not isinstance(item, Mapping):
        raise MessageError(f"messages[{index}] must be an object with `role` and `content`")
    role = item.get("role")
    if role not in _ROLES:
        raise MessageError(
            f"messages[{index}].role must be one of {', '.join(_ROLES)}; got {role!r}"
        )
    content = _text_content(index, item.get("content"))
    calls = tuple(
        _parse_tool_call(index, k, call) for k, call in enumerate(item.get("tool_calls") or ())
    )
    if calls and role != "assistant":
        raise MessageError(f"messages[{index}]: only assistant messages carry tool_calls")
    tool_call_id = item.get("tool_call_id")
    if tool_call_id is not None and not isinstance(tool_call_id, str):
        raise MessageError(f"messages[{index}].tool_call_id must be a string")
    return Message(role, content, calls, tool_call_id)


def _text_content(index: int, content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, Mapping) or part.get("type") != "text":
                raise MessageError(
                    f"messages[{index}].content: only text parts are supported "
                    "({'type': 'text', 'text': ...})"
                )
            parts.append(str(part.get("text", "")))
        return "".join(parts)
    raise MessageError(f"messages[{index}].content must be a string or a list of text parts")


def _parse_tool_call(index: int, k: int, call: Any) -> ToolCall:
    where = f"messages[{index}].tool_calls[{k}]"
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
        raise MessageError(
            f"{where} must be {{'type': 'function', 'function': {{name, arguments}}}}"
        )
    arguments = function.get("arguments", "{}")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(str(call.get("id") or f"call_{index}_{k}"), function["name"], arguments)


def _tool_call(body: str, call_id: str) -> ToolCall | None:
    try:
        decoded = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(decoded, Mapping) or not isinstance(decoded.get("name"), str):
        return None
    arguments = decoded.get("arguments", {})
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(call_id, decoded["name"], text)


def _json_or_text(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
