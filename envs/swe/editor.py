"""`FileEditor`: the `str_replace_editor` tool, run host-side over a sandbox's file API.

Commands and messages follow SWE-agent's and OpenHands' editor (so prompts and models trained on
them carry over): `view` (a file as `cat -n` with an optional `view_range`, a directory two levels
deep without hidden entries, long results clipped), `create` (never overwrites), `str_replace`
(`old_str` must occur exactly once; otherwise nothing changes and the message lists the lines of
every match), `insert` (after line N, 0 = top) and `undo_edit` (per-file history of this episode).
After an edit the result shows the changed region with `snippet_context_lines` of context.

Files are read and written with `Sandbox.read_file/write_file`; a command runs in the sandbox
only to list a directory or to tell why a path could not be read. Two deliberate differences
from SWE-agent: tabs are kept as they are (expanding them corrupts Makefiles), and `insert`
treats `new_str` as whole lines (a trailing newline does not add an empty line). A `view_range`
whose end lies past the file's end is clamped instead of rejected.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.swe.config import ToolsConfig
from harness.errors import SandboxDeadError, SandboxError
from harness.sandbox.base import Sandbox

__all__ = [
    "EditorResult",
    "FileEditor",
    "clip_text",
    "insert_after_line",
    "match_line_numbers",
    "number_lines",
    "split_lines",
]

_CLIP_NOTE = (
    "<response clipped><NOTE>Only part of this output is shown to save context. Search the file "
    "with `grep -n` and view the lines you need with `view_range`.</NOTE>"
)
_EDIT_REVIEW = (
    "Review the changes and make sure they are as expected. Edit the file again if necessary."
)
_INSERT_REVIEW = (
    "Review the changes and make sure they are as expected (correct indentation, no duplicate "
    "lines, etc). Edit the file again if necessary."
)
# Exit codes of the path probe script (see `_probe_script`).
_PROBE_MISSING, _PROBE_SYMLINK, _PROBE_SPECIAL, _PROBE_DIRECTORY = 10, 11, 12, 13
_COMMANDS = ("view", "create", "str_replace", "insert", "undo_edit")


@dataclass(frozen=True, slots=True)
class EditorResult:
    """What the editor says back; `ok` is False when nothing was done (a usage error)."""

    output: str
    ok: bool


class _EditorError(Exception):
    """A usage error; its message is the observation."""


# -- pure text operations ------------------------------------------------------------------------


def split_lines(text: str) -> list[str]:
    """Lines as `cat -n` and `grep -n` count them (only `\\n` ends a line), ends kept."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def number_lines(text: str, first_line: int = 1) -> str:
    """`text` with right-aligned line numbers starting at `first_line`, as `cat -n` prints."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return "\n".join(f"{number:6}\t{line}" for number, line in enumerate(lines, first_line))


def match_line_numbers(text: str, needle: str) -> list[int]:
    """1-based line numbers where each non-overlapping occurrence of `needle` starts."""
    numbers: list[int] = []
    start = text.find(needle)
    while start != -1 and needle:
        numbers.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + len(needle))
    return numbers


def insert_after_line(text: str, line: int, new_str: str) -> str:
    """`text` with `new_str` inserted as whole lines after line `line` (0 = before line 1)."""
    lines = split_lines(text)
    block = new_str if new_str.endswith("\n") else new_str + "\n"
    if line == len(lines) and lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines[:line]) + block + "".join(lines[line:])


def clip_text(text: str, max_chars: int) -> str:
    """`text`, cut after `max_chars` characters with a note saying how to see the rest."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + "\n" + _CLIP_NOTE


# -- the tool ------------------------------------------------------------------------------------


class FileEditor:
    """The editor of one episode; it owns the undo history, so make one per episode."""

    def __init__(self, sandbox: Sandbox, config: ToolsConfig) -> None:
        self._sandbox = sandbox
        self._config = config
        self._history: dict[str, list[bytes]] = {}

    async def run(self, arguments: Mapping[str, Any]) -> EditorResult:
        """Carry out one editor call. Raises only SandboxDeadError (the episode must end)."""
        try:
            output = await self._dispatch(arguments)
        except _EditorError as exc:
            return EditorResult(str(exc), ok=False)
        except SandboxDeadError:
            raise
        except SandboxError as exc:
            return EditorResult(f"The sandbox could not carry out this edit: {exc}", ok=False)
        return EditorResult(output, ok=True)

    async def _dispatch(self, arguments: Mapping[str, Any]) -> str:
        command = arguments.get("command")
        if command not in _COMMANDS:
            allowed = ", ".join(_COMMANDS)
            raise _EditorError(
                f"Unrecognized command {command!r}. The allowed commands are: {allowed}"
            )
        path = self._absolute_path(str(arguments.get("path", "")))
        if command == "view":
            return await self._view(path, arguments.get("view_range"))
        if command == "create":
            return await self._create(path, _required(arguments, "file_text", command))
        if command == "str_replace":
            old_str = _required(arguments, "old_str", command)
            return await self._str_replace(path, old_str, str(arguments.get("new_str", "")))
        if command == "insert":
            line = _required(arguments, "insert_line", command)
            if not isinstance(line, int) or isinstance(line, bool):
                raise _EditorError(
                    f"Invalid `insert_line` parameter: {line!r}. It must be an integer."
                )
            return await self._insert(path, line, _required(arguments, "new_str", command))
        return await self._undo(path)

    # -- commands -------------------------------------------------------------------------------

    async def _view(self, path: str, view_range: Sequence[int] | None) -> str:
        try:
            content = await self._sandbox.read_file(path)
        except FileNotFoundError:
            return await self._view_directory(path, view_range)
        text = content.decode("utf-8", errors="replace")
        first = 1
        if view_range is not None:
            lines = split_lines(text)
            first, last = _check_view_range(view_range, len(lines))
            text = "".join(lines[first - 1 : last])
        numbered = number_lines(text, first)
        body = clip_text(numbered, self._config.view_max_chars)
        return f"Here's the result of running `cat -n` on {path}:\n{body}\n"

    async def _view_directory(self, path: str, view_range: Sequence[int] | None) -> str:
        depth = self._config.directory_depth
        script = _probe_script(
            self._exec_path(path),
            f'cd -- "$p" && find . -mindepth 1 -maxdepth {depth} '
            "-not -path '*/.*' | LC_ALL=C sort",
        )
        result = await self._sandbox.exec(script, timeout_s=self._config.editor_exec_timeout_s)
        self._raise_for_probe(path, result.exit_code)
        if view_range is not None:
            raise _EditorError(
                "The `view_range` parameter is not allowed when `path` points to a directory."
            )
        entries = [
            posixpath.join(path, line[2:]) for line in result.output.splitlines() if line[2:]
        ]
        listing = clip_text("\n".join([path, *entries]), self._config.view_max_chars)
        return (
            f"Here's the files and directories up to {depth} levels deep in {path}, "
            f"excluding hidden items:\n{listing}\n"
        )

    async def _create(self, path: str, file_text: str) -> str:
        try:
            await self._sandbox.read_file(path)
        except FileNotFoundError:
            probe = await self._sandbox.exec(
                _probe_script(self._exec_path(path), f"exit {_PROBE_DIRECTORY}"),
                timeout_s=self._config.editor_exec_timeout_s,
            )
            if probe.exit_code != _PROBE_MISSING:
                self._raise_for_probe(path, probe.exit_code, directory_ok=False)
                raise _EditorError(
                    f"Could not create {path} (probe exit code {probe.exit_code})."
                ) from None
            await self._sandbox.write_file(path, file_text.encode("utf-8"))
            return f"File created successfully at: {path}"
        raise _EditorError(
            f"File already exists at: {path}. Cannot overwrite files using command `create`."
        )

    async def _str_replace(self, path: str, old_str: str, new_str: str) -> str:
        if not old_str:
            raise _EditorError("No replacement was performed: `old_str` must not be empty.")
        content, text = await self._read_text(path)
        matches = match_line_numbers(text, old_str)
        if not matches:
            raise _EditorError(
                f"No replacement was performed, old_str `{old_str}` did not appear verbatim "
                f"in {path}."
            )
        if len(matches) > 1:
            raise _EditorError(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in "
                f"lines {matches}. Please ensure it is unique."
            )
        if old_str == new_str:
            raise _EditorError("No replacement was performed: `new_str` is identical to `old_str`.")
        new_text = text.replace(old_str, new_str, 1)
        await self._write_edit(path, content, new_text)
        first_changed = matches[0]
        last_changed = first_changed + max(len(split_lines(new_str)), 1) - 1
        snippet = self._snippet(new_text, first_changed, last_changed)
        return (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a "
            f"snippet of {path}:\n{snippet}\n{_EDIT_REVIEW}"
        )

    async def _insert(self, path: str, line: int, new_str: str) -> str:
        content, text = await self._read_text(path)
        line_count = len(split_lines(text))
        if not 0 <= line <= line_count:
            raise _EditorError(
                f"Invalid `insert_line` parameter: {line}. It should be within the range of "
                f"lines of the file: [0, {line_count}]"
            )
        new_text = insert_after_line(text, line, new_str)
        await self._write_edit(path, content, new_text)
        inserted_lines = max(1, len(split_lines(new_str)))
        snippet = self._snippet(new_text, line + 1, line + inserted_lines)
        return (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a "
            f"snippet of the edited file:\n{snippet}\n{_INSERT_REVIEW}"
        )

    async def _undo(self, path: str) -> str:
        history = self._history.get(path)
        if not history:
            raise _EditorError(f"No edit history found for {path}.")
        previous = history.pop()
        await self._sandbox.write_file(path, previous)
        text = previous.decode("utf-8", errors="replace")
        body = clip_text(number_lines(text), self._config.view_max_chars)
        return (
            f"Last edit to {path} undone successfully. Here's the result of running `cat -n` "
            f"on {path}:\n{body}\n"
        )

    # -- helpers --------------------------------------------------------------------------------

    async def _read_text(self, path: str) -> tuple[bytes, str]:
        try:
            content = await self._sandbox.read_file(path)
        except FileNotFoundError:
            probe = await self._sandbox.exec(
                _probe_script(self._exec_path(path), f"exit {_PROBE_DIRECTORY}"),
                timeout_s=self._config.editor_exec_timeout_s,
            )
            self._raise_for_probe(path, probe.exit_code, directory_ok=False)
            raise _EditorError(f"The path {path} does not exist.") from None
        try:
            return content, content.decode("utf-8")
        except UnicodeDecodeError:
            raise _EditorError(
                f"The file {path} is not UTF-8 text; inspect or change it with bash instead."
            ) from None

    async def _write_edit(self, path: str, old_content: bytes, new_text: str) -> None:
        await self._sandbox.write_file(path, new_text.encode("utf-8"))
        self._history.setdefault(path, []).append(old_content)

    def _snippet(self, text: str, first_changed: int, last_changed: int) -> str:
        context = self._config.snippet_context_lines
        lines = split_lines(text)
        first = max(1, first_changed - context)
        last = min(len(lines), last_changed + context)
        return number_lines("".join(lines[first - 1 : last]), first)

    def _absolute_path(self, path: str) -> str:
        if not path.startswith("/"):
            suggestion = posixpath.join(self._sandbox.workdir, path)
            raise _EditorError(
                f"The path {path} is not an absolute path, it should start with `/`. "
                f"Maybe you meant {suggestion}?"
            )
        return posixpath.normpath(path)

    def _exec_path(self, path: str) -> str:
        """`path` as a command should name it: relative to the workdir when inside it (a local
        sandbox maps only the workdir, so absolute workdir paths do not exist for its shell)."""
        workdir = posixpath.normpath(self._sandbox.workdir)
        if path == workdir:
            return "."
        if path.startswith(workdir + "/"):
            return path[len(workdir) + 1 :]
        return path

    @staticmethod
    def _raise_for_probe(path: str, exit_code: int, *, directory_ok: bool = True) -> None:
        if exit_code == _PROBE_MISSING:
            raise _EditorError(f"The path {path} does not exist. Please provide a valid path.")
        if exit_code == _PROBE_SYMLINK:
            raise _EditorError(f"The path {path} is a symbolic link; use the path it points to.")
        if exit_code == _PROBE_SPECIAL:
            raise _EditorError(f"The path {path} is not a regular file or directory.")
        if exit_code == _PROBE_DIRECTORY and not directory_ok:
            raise _EditorError(
                f"The path {path} is a directory and only the `view` command can be used on "
                "directories."
            )
        if exit_code != 0:
            raise _EditorError(f"Could not access {path} (exit code {exit_code}).")


def _probe_script(path: str, if_directory: str) -> str:
    """A script that runs `if_directory` for a directory and exits with a probe code otherwise."""
    return (
        f"p={shlex.quote(path)}; "
        f'if [ -L "$p" ]; then exit {_PROBE_SYMLINK}; '
        f'elif [ -d "$p" ]; then {if_directory}; '
        f'elif [ -e "$p" ]; then exit {_PROBE_SPECIAL}; '
        f"else exit {_PROBE_MISSING}; fi"
    )


def _required(arguments: Mapping[str, Any], name: str, command: str) -> Any:
    if arguments.get(name) is None:
        raise _EditorError(f"Parameter `{name}` is required for command: {command}")
    return arguments[name]


def _check_view_range(view_range: Sequence[int], line_count: int) -> tuple[int, int]:
    if len(view_range) != 2 or not all(isinstance(item, int) for item in view_range):
        raise _EditorError("Invalid `view_range`. It should be a list of two integers.")
    first, last = view_range
    if line_count == 0:
        raise _EditorError("The file is empty; view it without `view_range`.")
    if not 1 <= first <= line_count:
        raise _EditorError(
            f"Invalid `view_range`: {list(view_range)}. Its first element `{first}` should be "
            f"within the range of lines of the file: [1, {line_count}]"
        )
    if last == -1 or last > line_count:
        return first, line_count
    if last < first:
        raise _EditorError(
            f"Invalid `view_range`: {list(view_range)}. Its second element `{last}` should be "
            f"larger or equal than its first `{first}`"
        )
    return first, last
