"""The action parser: formats accepted, one action per turn, argument checks, never raising."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.swe.actions import (
    ParsedAction,
    ParseError,
    openai_tool_schemas,
    parse_action,
    swe_tool_specs,
)

TOOLS = swe_tool_specs()


def parsed(text: str) -> ParsedAction:
    result = parse_action(text, TOOLS)
    assert isinstance(result, ParsedAction), result
    return result


def error(text: str) -> ParseError:
    result = parse_action(text, TOOLS)
    assert isinstance(result, ParseError), result
    return result


@pytest.mark.parametrize(
    ("text", "name", "arguments", "action_format"),
    [
        (
            '<tool_call>{"name": "bash", "arguments": {"command": "ls -la"}}</tool_call>',
            "bash", {"command": "ls -la"}, "tool_call",
        ),
        (
            'I will look.\n<tool_call>\n{"name": "bash", "arguments": "{\\"command\\": \\"pwd\\"}"}'
            "\n</tool_call>",
            "bash", {"command": "pwd"}, "tool_call",
        ),
        (
            "<tool_call>\n<function=bash>\n<parameter=command>\ngrep -n x a.py\n</parameter>\n"
            "</function>\n</tool_call>",
            "bash", {"command": "grep -n x a.py"}, "tool_call_xml",
        ),
        (
            '<tool_call>{"name": "submit", "arguments": {}}',  # stopped before the closing tag
            "submit", {}, "tool_call",
        ),
        (
            '<tool_call>```json\n{"name": "submit"}\n```</tool_call>',
            "submit", {}, "tool_call",
        ),
        (
            '{"name": "bash", "arguments": {"command": "echo hi"}}',
            "bash", {"command": "echo hi"}, "json",
        ),
        (
            '{"type": "function", "function": '
            '{"name": "bash", "arguments": "{\\"command\\": \\"x\\"}"}}',
            "bash", {"command": "x"}, "json",
        ),
        (
            '```json\n{"name": "submit", "arguments": {}}\n```',
            "submit", {}, "json",
        ),
        (
            "Let me run the tests.\n```bash\npython -m pytest -q\n```\n",
            "bash", {"command": "python -m pytest -q"}, "bash_block",
        ),
        ("```sh\nls\n```", "bash", {"command": "ls"}, "bash_block"),
        (
            "<think>maybe <tool_call>{\"name\": \"submit\"}</tool_call></think>"
            '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>',
            "bash", {"command": "ls"}, "tool_call",
        ),
        (
            "reasoning whose opening tag was in the prompt</think>\n```bash\nls\n```",
            "bash", {"command": "ls"}, "bash_block",
        ),
        (
            '<tool_call>{"name": "str_replace_editor", "arguments": {"command": "view", '
            '"path": "/testbed/a.py", "view_range": "[1, 20]"}}</tool_call>',
            "str_replace_editor",
            {"command": "view", "path": "/testbed/a.py", "view_range": [1, 20]},
            "tool_call",
        ),
        (
            "<tool_call>\n<function=str_replace_editor>\n<parameter=command>\ninsert\n"
            "</parameter>\n<parameter=path>\n/testbed/a.py\n</parameter>\n<parameter=insert_line>"
            "\n3\n</parameter>\n<parameter=new_str>\n    x = 1\n</parameter>\n</function>"
            "\n</tool_call>",
            "str_replace_editor",
            {"command": "insert", "path": "/testbed/a.py", "insert_line": 3,
             "new_str": "    x = 1"},
            "tool_call_xml",
        ),
    ],
)  # fmt: skip
def test_accepted_formats_give_the_tool_call(
    text: str, name: str, arguments: dict[str, Any], action_format: str
) -> None:
    action = parsed(text)
    assert (action.name, dict(action.arguments), action.format) == (name, arguments, action_format)
    assert action.ignored_actions == 0


def test_only_the_first_of_several_tool_calls_is_taken_and_the_rest_counted() -> None:
    text = (
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
        '<tool_call>{"name": "bash", "arguments": {"command": "pwd"}}</tool_call>\n'
        '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
    )
    action = parsed(text)
    assert action.arguments["command"] == "ls"
    assert action.ignored_actions == 2


def test_only_the_first_of_several_bash_blocks_is_taken() -> None:
    action = parsed("```bash\nls\n```\nthen\n```bash\nrm -rf build\n```")
    assert action.arguments["command"] == "ls" and action.ignored_actions == 1


def test_a_json_list_of_calls_takes_the_first() -> None:
    text = json.dumps([{"name": "submit"}, {"name": "bash", "arguments": {"command": "ls"}}])
    action = parsed(text)
    assert action.name == "submit" and action.ignored_actions == 1


def test_tool_call_tags_win_over_an_illustrative_bash_block() -> None:
    text = (
        "Earlier I ran\n```bash\nrm -rf /\n```\nnow:\n"
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
    )
    assert parsed(text).arguments["command"] == "ls"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "no tool call found"),
        ("I think the bug is in ops.py.", "no tool call found"),
        ("```python\nprint(1)\n```", "no tool call found"),
        ("<tool_call>{not json}</tool_call>", "not valid JSON"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"'),
        ('<tool_call>{"name": "python", "arguments": {}}</tool_call>', "unknown tool 'python'"),
        (
            '<tool_call>{"name": "bash", "arguments": {}}</tool_call>',
            "needs the argument(s): command",
        ),
        (
            '<tool_call>{"name": "bash", "arguments": {"command": "ls", "cwd": "/"}}</tool_call>',
            "unknown argument(s) cwd",
        ),
        (
            '<tool_call>{"name": "bash", "arguments": {"command": 5}}</tool_call>',
            "must be a string",
        ),
        ('<tool_call>{"name": "bash", "arguments": "[1]"}</tool_call>', "must be a JSON object"),
        ('<tool_call>{"name": "bash", "arguments": "{oops"}</tool_call>', '"arguments" string'),
        (
            '<tool_call>{"name": "str_replace_editor", "arguments": {"command": "delete", '
            '"path": "/a"}}</tool_call>',
            "must be one of",
        ),
        (
            '<tool_call>{"name": "str_replace_editor", "arguments": {"command": "insert", '
            '"path": "/a", "insert_line": true}}</tool_call>',
            "must be an integer",
        ),
        (
            '<tool_call>{"name": "str_replace_editor", "arguments": {"command": "view", '
            '"path": "/a", "view_range": [1, "x"]}}</tool_call>',
            "list of integers",
        ),
        ("[" * 100_000, "no tool call found"),
    ],
)  # fmt: skip
def test_unusable_messages_are_parse_errors_that_say_why(text: str, fragment: str) -> None:
    assert fragment in error(text).message


def test_a_parse_error_after_several_calls_still_counts_the_dropped_ones() -> None:
    text = '<tool_call>{bad}</tool_call><tool_call>{"name": "submit"}</tool_call>'
    assert error(text).ignored_actions == 1


def test_tool_schemas_are_in_openai_function_calling_format() -> None:
    schemas = openai_tool_schemas(TOOLS)
    assert [schema["function"]["name"] for schema in schemas] == [
        "bash", "str_replace_editor", "submit",
    ]  # fmt: skip
    assert all(schema["type"] == "function" for schema in schemas)
    editor = schemas[1]["function"]["parameters"]
    assert editor["required"] == ["command", "path"]
    assert json.loads(json.dumps(schemas)) == schemas


_FRAGMENTS = st.sampled_from(
    [
        "<tool_call>", "</tool_call>", "<think>", "</think>", "<function=bash>", "</function>",
        "<parameter=command>", "</parameter>", "```bash\n", "```json\n", "```", "\n", "{", "}",
        "[", "]", '"name"', '"arguments"', ":", ",", '"bash"', '"submit"', '"command"', '"ls"',
        '"str_replace_editor"', '"view_range"', '"[1,2]"', "null", "1e999", '"\\ud800"',
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parser_never_raises_on_arbitrary_text(text: str) -> None:
    assert isinstance(parse_action(text, TOOLS), ParsedAction | ParseError)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=5)), max_size=30).map("".join))
def test_parser_never_raises_on_near_miss_tool_calls(text: str) -> None:
    result = parse_action(text, TOOLS)
    assert isinstance(result, ParsedAction | ParseError)
    if isinstance(result, ParsedAction):
        assert result.name in {tool.name for tool in TOOLS}
