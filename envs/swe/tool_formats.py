"""Tool-call formats a task source may choose: how tools are described in the prompt, how a call
is written, and how it is read back from the model's text.

The formats are the ones `envs.swe.actions.parse_action` already reads:

* ``tool_call``: Hermes/Qwen JSON, ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``;
* ``tool_call_xml``: Qwen3-Coder XML inside the same tags,
  ``<tool_call>\\n<function=bash>\\n<parameter=command>\\nls\\n</parameter>\\n</function>\\n</tool_call>``;
* ``json``: the whole reply is one JSON object ``{"name": …, "arguments": {…}}``.

(``bash_block``, a fenced ```bash block, is read as a fallback by the parser but cannot call
any tool other than `bash`, so an episode could never `submit`: it is not offered.)

Pure functions, no I/O.

>>> tools = (ToolSpec("submit", "Finish.", {"type": "object", "properties": {}}),)
>>> render_call("json", "submit", {})
'{"name": "submit", "arguments": {}}'
>>> called_tool("tool_call_xml", render_call("tool_call_xml", "submit", {}), tools)
'submit'
>>> called_tool("json", render_call("tool_call", "submit", {}), tools) is None
True
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from envs.swe.actions import ParsedAction, ToolSpec, parse_action

__all__ = ["TOOL_FORMATS", "ToolFormat", "called_tool", "render_call", "tool_instructions"]

ToolFormat = Literal["tool_call", "tool_call_xml", "json"]
TOOL_FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)
"""The formats a source may choose, in the order the docs list them."""


def render_call(
    tool_format: ToolFormat, name: str, arguments: Mapping[str, Any], thought: str = ""
) -> str:
    """A call of tool `name` as a model writes it in `tool_format` (the `json` format has no
    room for the `thought`: the whole reply is the object)."""
    if tool_format == "tool_call":
        payload = json.dumps({"name": name, "arguments": dict(arguments)})
        return f"{thought}\n<tool_call>{payload}</tool_call>"
    if tool_format == "tool_call_xml":
        parameters = "".join(
            f"<parameter={key}>\n{_xml_value(value)}\n</parameter>\n"
            for key, value in arguments.items()
        )
        return f"{thought}\n<tool_call>\n<function={name}>\n{parameters}</function>\n</tool_call>"
    if tool_format == "json":
        return json.dumps({"name": name, "arguments": dict(arguments)})
    raise ValueError(f"unknown tool format {tool_format!r}; known: {', '.join(TOOL_FORMATS)}")


def called_tool(tool_format: ToolFormat, text: str, tools: Sequence[ToolSpec]) -> str | None:
    """The tool `text` calls when read in `tool_format` (None if it calls none in that format)."""
    parsed = parse_action(text, tools)
    if isinstance(parsed, ParsedAction) and parsed.format == tool_format:
        return parsed.name
    return None


def tool_instructions(tool_format: ToolFormat, tools: Sequence[ToolSpec]) -> str:
    """The tools and how to call them in `tool_format`, as text for the system message."""
    if tool_format == "tool_call":
        signatures = "\n".join(json.dumps(tool.openai_schema()) for tool in tools)
        return (
            "# Tools\n\nYou may call one function per reply. The function signatures are within "
            f"<tools></tools>:\n<tools>\n{signatures}\n</tools>\n\nCall a function as:\n"
            '<tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>'
        )
    if tool_format == "tool_call_xml":
        functions = "\n".join(_xml_function(tool) for tool in tools)
        return (
            "# Tools\n\nYou may call one function per reply. The functions are within "
            f"<tools></tools>:\n<tools>\n{functions}\n</tools>\n\nCall a function as:\n"
            "<tool_call>\n<function=NAME>\n<parameter=ARGUMENT>\nVALUE\n</parameter>\n"
            "</function>\n</tool_call>"
        )
    if tool_format == "json":
        schemas = json.dumps([tool.openai_schema()["function"] for tool in tools])
        return (
            f"# Tools\n\nThe tools (JSON schema): {schemas}\n\nReply with exactly one JSON "
            'object and nothing else: {"name": <tool-name>, "arguments": <args-json-object>}'
        )
    raise ValueError(f"unknown tool format {tool_format!r}; known: {', '.join(TOOL_FORMATS)}")


def _xml_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _xml_function(tool: ToolSpec) -> str:
    properties: Mapping[str, Any] = tool.parameters.get("properties", {})
    required = set(tool.parameters.get("required", ()))
    parameters = "".join(
        f"<parameter><name>{key}</name><type>{schema.get('type', 'string')}</type>"
        f"<required>{str(key in required).lower()}</required>"
        f"<description>{schema.get('description', '')}</description></parameter>"
        for key, schema in properties.items()
    )
    return (
        f"<function><name>{tool.name}</name><description>{tool.description}</description>"
        f"<parameters>{parameters}</parameters></function>"
    )
