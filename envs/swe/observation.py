"""Render what the model reads: the first prompt, tool results and format errors, as text.

A tool result is `<returncode>N</returncode>` followed by `<output>…</output>`; output longer
than `max_output_chars` keeps its head and tail halves with a note saying how many characters
were elided (the command's end, where errors and summaries are, matters as much as its start).
Notes about the step itself (a timeout, dropped extra actions, the end of the episode) follow
in `<note>` tags. Structured facts go to the step's `info`, never only into the text. The env's
own tags inside tool output are escaped (`&lt;note&gt;`), so a command cannot print a note that
seems to come from the env, or close `<output>` early.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from envs.swe.actions import ToolSpec
from envs.swe.tool_formats import ToolFormat, render_call

__all__ = [
    "RenderedOutput",
    "escape_env_markup",
    "ignored_actions_note",
    "render_format_error",
    "render_initial_prompt",
    "render_notice",
    "render_tool_result",
    "timeout_note",
    "truncate_middle",
]


_ENV_TAGS = re.compile(r"<(/?)(note|output|returncode|error|issue)\s*>", re.IGNORECASE)


def escape_env_markup(text: str) -> str:
    """`text` with the env's own observation tags escaped (they are the env's to write)."""
    return _ENV_TAGS.sub(r"&lt;\1\2&gt;", text)


@dataclass(frozen=True, slots=True)
class RenderedOutput:
    """Observation text plus what truncation did to the tool output."""

    text: str
    output_chars: int
    elided_chars: int

    @property
    def truncated(self) -> bool:
        return self.elided_chars > 0


def truncate_middle(text: str, max_chars: int) -> tuple[str, int]:
    """Keep the first and last halves of `max_chars`; return (text, characters elided)."""
    if len(text) <= max_chars:
        return text, 0
    head_chars = max_chars // 2
    tail_chars = max_chars - head_chars
    elided = len(text) - head_chars - tail_chars
    note = (
        f"\n[... {elided} characters elided: the output was too long. Narrow the command "
        "(grep, head, tail, sed -n 'a,bp') to see the part you need ...]\n"
    )
    return text[:head_chars] + note + text[-tail_chars:], elided


def render_tool_result(
    exit_code: int, output: str, *, max_output_chars: int, notes: Sequence[str] = ()
) -> RenderedOutput:
    """`<returncode>` + (possibly truncated) `<output>` + notes."""
    body, elided = truncate_middle(escape_env_markup(output), max_output_chars)
    if body and not body.endswith("\n"):
        body += "\n"
    text = f"<returncode>{exit_code}</returncode>\n<output>\n{body}</output>" + _notes(notes)
    return RenderedOutput(text=text, output_chars=len(output), elided_chars=elided)


def render_format_error(message: str, *, notes: Sequence[str] = ()) -> str:
    """The observation for a message that held no usable tool call."""
    return (
        f"<error>Format error: {message}</error>\n"
        "Nothing was run. Reply with exactly one tool call." + _notes(notes)
    )


def render_notice(message: str) -> str:
    """An observation that is a note from the env, not the result of a tool."""
    return f"<note>{message}</note>"


def timeout_note(timeout_s: float) -> str:
    return (
        f"The command timed out after {timeout_s:g} s and was killed. Avoid interactive or "
        "long-running commands; run a narrower command instead."
    )


def ignored_actions_note(ignored: int) -> str:
    return (
        f"Your message held {ignored + 1} actions; only the first one was run. "
        "Send one action per turn."
    )


def render_initial_prompt(
    problem_statement: str,
    *,
    workdir: str,
    tools: Sequence[ToolSpec],
    max_steps: int,
    tool_format: ToolFormat = "tool_call",
) -> str:
    """The first observation: the issue to fix and how to act, with a call example written in
    `tool_format` (the one the system message describes)."""
    tool_lines = "\n".join(f"- {tool.name}: {tool.description}" for tool in tools)
    example = render_call(tool_format, "bash", {"command": "ls"}).strip()
    fenced = "(or a ```bash fenced block for a bash command). "
    if tool_format != "tool_call":  # the fenced fallback is Hermes-style prose only
        fenced = ""
    return (
        f"<issue>\n{problem_statement.strip()}\n</issue>\n\n"
        f"The repository is checked out at {workdir}. Change its non-test source files so that "
        "the issue is resolved; test files you change are ignored when grading.\n\n"
        f"Tools:\n{tool_lines}\n\n"
        f"Call exactly one tool per reply, as\n{example}\n"
        f"{fenced}You have at most {max_steps} steps. Call `submit` when you are done."
    )


def _notes(notes: Sequence[str]) -> str:
    return "".join(f"\n<note>{note}</note>" for note in notes)
