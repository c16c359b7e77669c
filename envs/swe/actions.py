"""Turn a model's text into one validated tool call (`ParsedAction`) or a `ParseError` value.

Accepted formats, tried in this order (reasoning inside `<think>…</think>` is ignored):

1. Hermes/Qwen tool calls: `<tool_call>{"name": …, "arguments": {…}}</tool_call>`; the
   arguments may also be a JSON string; the Qwen3-Coder XML body
   (`<function=bash><parameter=command>ls</parameter></function>`) is accepted inside the tags.
   A final `<tool_call>` left open (generation stopped at the closing tag) still counts.
2. A structured action as the whole text: `{"name": …, "arguments": …}` (OpenAI-style
   `{"function": {"name": …, "arguments": "…"}}` too), optionally in a ```json fence; a JSON
   list of such objects is a message with several actions.
3. A fenced ```bash (or ```sh / ```shell) block: a `bash` call with the block as the command.

Exactly one action runs per turn. When a message holds several, the FIRST is used and
`ParsedAction.ignored_actions` says how many were dropped, so the env can tell the model (the
usual choice of SWE-agent-style harnesses: the rest may depend on the first one's output).

Arguments are checked against the tools' JSON schemas (`ToolSpec`): unknown tools, missing or
unknown arguments and wrong types are `ParseError`s. Values a model commonly stringifies are
coerced: an integer given as "12", an integer list given as "[1, 20]".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = [
    "ActionFormat",
    "ParseError",
    "ParsedAction",
    "ToolSpec",
    "openai_tool_schemas",
    "parse_action",
    "swe_tool_specs",
    "validate_arguments",
]

ActionFormat = str
"""One of "tool_call", "tool_call_xml", "json", "bash_block"."""

_EMPTY_ARGS: Mapping[str, Any] = MappingProxyType({})

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL)
_THINK_TAIL = re.compile(r"^.*?</think>", re.DOTALL)  # the opening tag was in the prompt
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
_XML_FUNCTION = re.compile(r"<function=([^>\s]+)\s*>(.*?)(?:</function>|\Z)", re.DOTALL)
_XML_PARAMETER = re.compile(
    r"<parameter=([^>\s]+)\s*>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL
)
_JSON_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*?)\n?```\Z", re.DOTALL)
_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)[ \t]*\n(.*?)```", re.DOTALL)
_MAX_ERROR_EXCERPT_CHARS = 200


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call: its name, what it does, and its arguments as JSON schema.

    `parameters` is an object schema with `properties` and `required`; property types used here
    are "string", "integer" and "array" (of integers), optionally with an `enum`.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]

    def openai_schema(self) -> dict[str, Any]:
        """This tool in the OpenAI function-calling format (`{"type": "function", …}`)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json.loads(json.dumps(self.parameters)),
            },
        }


@dataclass(frozen=True, slots=True)
class ParsedAction:
    """One tool call ready to run; `ignored_actions` counts further calls that were dropped."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=lambda: _EMPTY_ARGS)
    format: ActionFormat = "tool_call"
    ignored_actions: int = 0


@dataclass(frozen=True, slots=True)
class ParseError:
    """Why no action could be taken from the text; `message` is written for the model."""

    message: str
    ignored_actions: int = 0


def parse_action(text: str, tools: Sequence[ToolSpec]) -> ParsedAction | ParseError:
    """Extract the first tool call from `text` and validate it against `tools`. Never raises."""
    by_name = {tool.name: tool for tool in tools}
    visible = _strip_reasoning(text)
    candidates = _tool_call_candidates(visible)
    if candidates is None:
        candidates = _json_candidates(visible)
    if candidates is None:
        candidates = _bash_block_candidates(visible)
    if not candidates:
        return ParseError(_no_action_message(by_name))
    first, extra = candidates[0], len(candidates) - 1
    if isinstance(first, ParseError):
        return ParseError(first.message, ignored_actions=extra)
    name, raw_arguments, action_format = first
    spec = by_name.get(name)
    if spec is None:
        known = ", ".join(sorted(by_name))
        return ParseError(f"unknown tool {name!r}; the tools are: {known}", ignored_actions=extra)
    checked = validate_arguments(spec, raw_arguments)
    if isinstance(checked, ParseError):
        return ParseError(checked.message, ignored_actions=extra)
    return ParsedAction(name, MappingProxyType(checked), action_format, extra)


def validate_arguments(spec: ToolSpec, arguments: Any) -> dict[str, Any] | ParseError:
    """Check `arguments` against `spec.parameters`; return them coerced, or a ParseError."""
    if not isinstance(arguments, Mapping):
        return ParseError(
            f"the arguments of {spec.name!r} must be a JSON object, got {type(arguments).__name__}"
        )
    properties: Mapping[str, Any] = spec.parameters.get("properties", {})
    unknown = sorted(str(key) for key in arguments if key not in properties)
    if unknown:
        allowed = ", ".join(properties) or "none"
        return ParseError(
            f"unknown argument(s) {', '.join(unknown)} for {spec.name!r}; allowed: {allowed}"
        )
    missing = [key for key in spec.parameters.get("required", ()) if key not in arguments]
    if missing:
        return ParseError(f"{spec.name!r} needs the argument(s): {', '.join(missing)}")
    checked: dict[str, Any] = {}
    for key, value in arguments.items():
        coerced = _coerce(spec.name, str(key), properties[key], value)
        if isinstance(coerced, ParseError):
            return coerced
        checked[str(key)] = coerced
    return checked


def openai_tool_schemas(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools in OpenAI function-calling format (for chat templates and `info["tools"]`)."""
    return [tool.openai_schema() for tool in tools]


def swe_tool_specs(workdir: str = "/testbed") -> tuple[ToolSpec, ...]:
    """The SWE env's three tools: `bash`, `str_replace_editor` and `submit`."""
    bash = ToolSpec(
        name="bash",
        description=(
            f"Run a bash command in the repository (cwd {workdir}). Each call is a fresh shell: "
            "`cd` and variables do not persist between calls. Commands are killed at a timeout; "
            "do not start interactive programs or servers."
        ),
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command to run"}},
            "required": ["command"],
        },
    )
    editor = ToolSpec(
        name="str_replace_editor",
        description=(
            "View, create and edit files. `view` shows a file with line numbers (or a directory "
            "2 levels deep); `create` writes a new file; `str_replace` replaces `old_str`, which "
            "must occur exactly once, with `new_str`; `insert` adds `new_str` after line "
            "`insert_line` (0 = top of file); `undo_edit` reverts the last edit of `path`. "
            "Paths must be absolute."
        ),
        parameters={
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "enum": ["view", "create", "str_replace", "insert", "undo_edit"],
                    "description": "the operation",
                },
                "path": {"type": "string", "description": f"absolute path, e.g. {workdir}/x.py"},
                "file_text": {"type": "string", "description": "content for `create`"},
                "old_str": {"type": "string", "description": "exact text to replace"},
                "new_str": {"type": "string", "description": "replacement or inserted text"},
                "insert_line": {"type": "integer", "description": "insert after this line"},
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "[first, last] lines to view, 1-based; last = -1 means end",
                },
            },
            "required": ["command", "path"],
        },
    )
    submit = ToolSpec(
        name="submit",
        description="Finish: your changes to the repository are graded by its tests.",
        parameters={"type": "object", "properties": {}, "required": []},
    )
    return (bash, editor, submit)


# -- extraction ----------------------------------------------------------------------------------

_Candidate = tuple[str, Any, ActionFormat] | ParseError


def _strip_reasoning(text: str) -> str:
    without_blocks = _THINK_BLOCK.sub("", text)
    return _THINK_TAIL.sub("", without_blocks, count=1)


def _tool_call_candidates(text: str) -> list[_Candidate] | None:
    bodies = _TOOL_CALL.findall(text)
    if not bodies:
        return None
    return [_parse_tool_call_body(body) for body in bodies]


def _parse_tool_call_body(body: str) -> _Candidate:
    stripped = body.strip()
    xml = _XML_FUNCTION.search(stripped)
    if xml is not None and stripped.startswith("<function="):
        arguments = {
            key: _strip_one_newline(value) for key, value in _XML_PARAMETER.findall(xml.group(2))
        }
        return xml.group(1), arguments, "tool_call_xml"
    fenced = _JSON_FENCE.match(stripped)
    decoded = _loads(fenced.group(1) if fenced else stripped)
    if isinstance(decoded, ParseError):
        return ParseError(f"the <tool_call> body is not valid JSON ({decoded.message})")
    return _call_from_object(decoded, "tool_call")


def _json_candidates(text: str) -> list[_Candidate] | None:
    stripped = text.strip()
    fenced = _JSON_FENCE.match(stripped)
    if fenced is not None:
        stripped = fenced.group(1).strip()
    if not stripped.startswith(("{", "[")):
        return None
    decoded = _loads(stripped)
    if isinstance(decoded, ParseError):
        return None  # not meant as an action (e.g. a code snippet); try the other formats
    if isinstance(decoded, list):
        objects = [item for item in decoded if isinstance(item, dict)]
        if not objects:
            return None
        return [_call_from_object(item, "json") for item in objects]
    if isinstance(decoded, dict) and ("name" in decoded or "function" in decoded):
        return [_call_from_object(decoded, "json")]
    return None


def _bash_block_candidates(text: str) -> list[_Candidate]:
    return [
        ("bash", {"command": block.strip("\n")}, "bash_block")
        for block in _BASH_BLOCK.findall(text)
    ]


def _call_from_object(decoded: Any, action_format: ActionFormat) -> _Candidate:
    if not isinstance(decoded, dict):
        return ParseError(
            "a tool call must be a JSON object like "
            '{"name": "bash", "arguments": {"command": "ls"}}'
        )
    function = decoded.get("function")
    call: dict[str, Any] = function if isinstance(function, dict) else decoded
    name = call.get("name")
    if not isinstance(name, str) or not name:
        return ParseError('the tool call has no "name" (a string naming the tool)')
    arguments = call.get("arguments", call.get("parameters", {}))
    if isinstance(arguments, str):
        decoded_arguments = _loads(arguments) if arguments.strip() else {}
        if isinstance(decoded_arguments, ParseError):
            return ParseError(
                f'the "arguments" string is not valid JSON ({decoded_arguments.message})'
            )
        arguments = decoded_arguments
    if arguments is None:
        arguments = {}
    return name, arguments, action_format


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        return ParseError(_excerpt(str(exc)))


def _strip_one_newline(value: str) -> str:
    value = value.removeprefix("\n")
    return value.removesuffix("\n")


# -- argument coercion ---------------------------------------------------------------------------


def _coerce(tool: str, key: str, schema: Mapping[str, Any], value: Any) -> Any:
    expected = schema.get("type")
    where = f"argument {key!r} of {tool!r}"
    if expected == "string":
        if not isinstance(value, str):
            return ParseError(f"{where} must be a string, got {_describe(value)}")
        allowed = schema.get("enum")
        if allowed is not None and value not in allowed:
            return ParseError(f"{where} must be one of {', '.join(allowed)}; got {value!r}")
        return value
    if expected == "integer":
        integer = _as_int(value)
        if integer is None:
            return ParseError(f"{where} must be an integer, got {_describe(value)}")
        return integer
    if expected == "array":
        items = _loads(value) if isinstance(value, str) else value
        if not isinstance(items, list):
            return ParseError(f"{where} must be a list of integers, got {_describe(value)}")
        integers = [_as_int(item) for item in items]
        if any(item is None for item in integers):
            return ParseError(f"{where} must be a list of integers, got {_describe(value)}")
        return integers
    return value


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d{1,18}\s*", value):
        return int(value)
    return None


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {_excerpt(repr(value))}"


def _excerpt(text: str) -> str:
    if len(text) <= _MAX_ERROR_EXCERPT_CHARS:
        return text
    return text[:_MAX_ERROR_EXCERPT_CHARS] + "…"


def _no_action_message(tools: Mapping[str, ToolSpec]) -> str:
    names = ", ".join(sorted(tools))
    return (
        "no tool call found. Reply with exactly one tool call, e.g. "
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call> '
        f"or a ```bash fenced block. The tools are: {names}."
    )
