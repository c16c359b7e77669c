"""Tool formats of a task source: a call written in a format is read back in that format only,
and the system-message text names every tool."""

from __future__ import annotations

from typing import Any

import pytest

from envs.example.env import example_tool_specs
from envs.swe.actions import ParsedAction, parse_action, swe_tool_specs
from envs.swe.observation import render_initial_prompt
from envs.swe.tool_formats import (
    TOOL_FORMATS,
    ToolFormat,
    called_tool,
    render_call,
    tool_instructions,
)

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("bash", {"command": "ls -la\ngrep -rn x ."}),
    (
        "str_replace_editor",
        {"command": "insert", "path": "/testbed/a.py", "insert_line": 0, "new_str": "# x\n"},
    ),
    ("str_replace_editor", {"command": "view", "path": "/testbed/a.py", "view_range": [1, 20]}),
    ("submit", {}),
]


@pytest.mark.parametrize("tool_format", TOOL_FORMATS)
def test_a_call_written_in_a_format_parses_back_to_the_same_call(tool_format: ToolFormat) -> None:
    tools = swe_tool_specs()
    for name, arguments in CALLS:
        text = render_call(tool_format, name, arguments, "Thinking it over.")
        parsed = parse_action(text, tools)
        assert isinstance(parsed, ParsedAction), text
        assert (parsed.name, dict(parsed.arguments), parsed.format) == (
            name,
            arguments,
            tool_format,
        )
        assert called_tool(tool_format, text, tools) == name
        others = [f for f in TOOL_FORMATS if f != tool_format]
        assert all(called_tool(other, text, tools) is None for other in others)


@pytest.mark.parametrize("tool_format", TOOL_FORMATS)
def test_the_instructions_name_every_tool_and_differ_per_format(tool_format: ToolFormat) -> None:
    tools = example_tool_specs()
    text = tool_instructions(tool_format, tools)
    assert all(tool.name in text for tool in tools)
    others = {tool_instructions(other, tools) for other in TOOL_FORMATS if other != tool_format}
    assert text not in others


@pytest.mark.parametrize("tool_format", TOOL_FORMATS)
def test_the_swe_first_observation_shows_its_call_example_in_the_sources_tool_format(
    tool_format: ToolFormat,
) -> None:
    tools = swe_tool_specs()
    prompt = render_initial_prompt(
        "Fix it.", workdir="/testbed", tools=tools, max_steps=5, tool_format=tool_format
    )
    after = prompt.split("Call exactly one tool per reply, as\n", 1)[1]
    example = after.split("\n(or a ", 1)[0].split("\nYou have at most", 1)[0]
    parsed = parse_action(example, tools)
    assert isinstance(parsed, ParsedAction)
    assert (parsed.name, parsed.format) == ("bash", tool_format)
    # only the Hermes format keeps the fenced-bash fallback hint
    assert ("```bash" in prompt) == (tool_format == "tool_call")
