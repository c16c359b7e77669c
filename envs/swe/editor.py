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

import asyncio
import posixpath
import shlex
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.swe.config import ToolsConfig
from envs.swe.editor_text import (
    clip_text,
    find_matches,
    insert_after_line,
    line_count,
    numbered_view,
    quote,
    snippet,
)
from harness.errors import FileTooLargeError, SandboxDeadError, SandboxError
from harness.sandbox.base import Sandbox

__all__ = ["EditorResult", "FileEditor"]

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
_MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class EditorResult:
    """What the editor says back; `ok` is False when nothing was done (a usage error)."""

    output: str
    ok: bool


class _EditorError(Exception):
    """A usage error; its message is the observation."""


# -- the tool ------------------------------------------------------------------------------------


class FileEditor:
    """The editor of one episode; it owns the undo history, so make one per episode.

    Every text operation runs in a worker thread and is linear in the file (`editor_text`),
    so an agent's call never holds the event loop; files over `tools.editor_max_file_mb` are
    refused (bash can still handle them), matches listed and strings quoted are bounded, and
    the undo history keeps at most `tools.editor_undo_max_mb` per episode.
    """

    def __init__(self, sandbox: Sandbox, config: ToolsConfig) -> None:
        self._sandbox = sandbox
        self._config = config
        self._history: dict[str, list[bytes]] = {}
        self._history_order: deque[str] = deque()  # path of each kept version, oldest first
        self._history_bytes = 0

    async def run(self, arguments: Mapping[str, Any]) -> EditorResult:
        """Carry out one editor call. Raises only SandboxDeadError (the episode must end)."""
        try:
            output = await self._dispatch(arguments)
        except _EditorError as exc:
            return EditorResult(str(exc), ok=False)
        except SandboxDeadError:
            raise
        except FileTooLargeError as exc:
            return EditorResult(self._too_large(exc.path, exc.size_bytes), ok=False)
        except SandboxError as exc:
            return EditorResult(f"The sandbox could not carry out this edit: {exc}", ok=False)
        return EditorResult(output, ok=True)

    async def _dispatch(self, arguments: Mapping[str, Any]) -> str:
        command = arguments.get("command")
        if command not in _COMMANDS:
            allowed = ", ".join(_COMMANDS)
            raise _EditorError(
                f"Unrecognized command {quote(repr(command), 100)}. The allowed commands are: "
                f"{allowed}"
            )
        path = self._absolute_path(str(arguments.get("path", "")))
        if command == "view":
            return await self._view(path, arguments.get("view_range"))
        if command == "create":
            return await self._create(path, _required_text(arguments, "file_text", command))
        if command == "str_replace":
            old_str = _required_text(arguments, "old_str", command)
            new_str = arguments.get("new_str")
            return await self._str_replace(path, old_str, "" if new_str is None else str(new_str))
        if command == "insert":
            line = _required(arguments, "insert_line", command)
            if not isinstance(line, int) or isinstance(line, bool):
                raise _EditorError(
                    f"Invalid `insert_line` parameter: {quote(repr(line), 100)}. It must be an "
                    "integer."
                )
            return await self._insert(path, line, _required_text(arguments, "new_str", command))
        return await self._undo(path)

    # -- commands -------------------------------------------------------------------------------

    async def _view(self, path: str, view_range: Sequence[int] | None) -> str:
        try:
            content = await self._sandbox.read_file(path, max_bytes=self._max_file_bytes)
        except FileNotFoundError:
            return await self._view_directory(path, view_range)
        max_chars = self._config.view_max_chars
        body = await asyncio.to_thread(_view_body, content, view_range, max_chars)
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
        content = file_text.encode("utf-8")
        if len(content) > self._max_file_bytes:
            raise _EditorError(self._too_large(path, len(content), writing=True))
        try:
            await self._sandbox.read_file(path, max_bytes=self._max_file_bytes)
        except FileTooLargeError:
            pass  # it exists: refused below
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
            await self._sandbox.write_file(path, content)
            return f"File created successfully at: {path}"
        raise _EditorError(
            f"File already exists at: {path}. Cannot overwrite files using command `create`."
        )

    async def _str_replace(self, path: str, old_str: str, new_str: str) -> str:
        if not old_str:
            raise _EditorError("No replacement was performed: `old_str` must not be empty.")
        content = await self._read(path)
        edit = await asyncio.to_thread(
            _replace_unique,
            content,
            path,
            old_str,
            new_str,
            max_listed=self._config.editor_max_listed_matches,
            max_quoted=self._config.editor_max_quoted_chars,
            context=self._config.snippet_context_lines,
        )
        await self._write_edit(path, content, edit)
        return (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a "
            f"snippet of {path}:\n{edit.snippet}\n{_EDIT_REVIEW}"
        )

    async def _insert(self, path: str, line: int, new_str: str) -> str:
        content = await self._read(path)
        edit = await asyncio.to_thread(
            _insert, content, path, line, new_str, context=self._config.snippet_context_lines
        )
        await self._write_edit(path, content, edit)
        return (
            f"The file {path} has been edited. Here's the result of running `cat -n` on a "
            f"snippet of the edited file:\n{edit.snippet}\n{_INSERT_REVIEW}"
        )

    async def _undo(self, path: str) -> str:
        history = self._history.get(path)
        if not history:
            raise _EditorError(f"No edit history found for {path}.")
        previous = history.pop()
        self._forget_newest(path, len(previous))
        await self._sandbox.write_file(path, previous)
        body = await asyncio.to_thread(_view_body, previous, None, self._config.view_max_chars)
        return (
            f"Last edit to {path} undone successfully. Here's the result of running `cat -n` "
            f"on {path}:\n{body}\n"
        )

    # -- helpers --------------------------------------------------------------------------------

    @property
    def _max_file_bytes(self) -> int:
        return int(self._config.editor_max_file_mb * _MB)

    def _too_large(self, path: str, size_bytes: int, *, writing: bool = False) -> str:
        limit = self._config.editor_max_file_mb
        what = "The new content" if writing else f"The file {path}"
        return (
            f"{what} is {size_bytes / _MB:.1f} MB, over the editor's limit of {limit:g} MB; "
            "nothing was done. Inspect and change it with bash (`grep -n`, `sed -n '10,20p'`, "
            "`sed -i`) instead."
        )

    async def _read(self, path: str) -> bytes:
        try:
            return await self._sandbox.read_file(path, max_bytes=self._max_file_bytes)
        except FileNotFoundError:
            probe = await self._sandbox.exec(
                _probe_script(self._exec_path(path), f"exit {_PROBE_DIRECTORY}"),
                timeout_s=self._config.editor_exec_timeout_s,
            )
            self._raise_for_probe(path, probe.exit_code, directory_ok=False)
            raise _EditorError(f"The path {path} does not exist.") from None

    async def _write_edit(self, path: str, old_content: bytes, edit: _Edit) -> None:
        if len(edit.content) > self._max_file_bytes:
            raise _EditorError(self._too_large(path, len(edit.content), writing=True))
        await self._sandbox.write_file(path, edit.content)
        self._remember(path, old_content)

    def _remember(self, path: str, old_content: bytes) -> None:
        """Keep `old_content` for `undo_edit`, forgetting the oldest versions of any file once
        the history passes `tools.editor_undo_max_mb` (an agent editing a 10 MB file a
        hundred times would otherwise hold a gigabyte)."""
        limit = int(self._config.editor_undo_max_mb * _MB)
        if len(old_content) > limit:
            return
        self._history.setdefault(path, []).append(old_content)
        self._history_order.append(path)
        self._history_bytes += len(old_content)
        while self._history_bytes > limit:
            oldest_path = self._history_order.popleft()
            dropped = self._history[oldest_path].pop(0)
            self._history_bytes -= len(dropped)

    def _forget_newest(self, path: str, size: int) -> None:
        """Account for the newest version of `path` leaving the history (an undo)."""
        for index in range(len(self._history_order) - 1, -1, -1):
            if self._history_order[index] == path:
                del self._history_order[index]
                break
        self._history_bytes -= size

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


@dataclass(frozen=True, slots=True)
class _Edit:
    """A changed file and the snippet that shows the change."""

    content: bytes
    snippet: str


def _decode(content: bytes, path: str) -> str:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError:
        raise _EditorError(
            f"The file {path} is not UTF-8 text; inspect or change it with bash instead."
        ) from None


def _view_body(content: bytes, view_range: Sequence[int] | None, max_chars: int) -> str:
    """The numbered, clipped text `view` shows (worker thread)."""
    text = content.decode("utf-8", errors="replace")
    if view_range is None:
        return numbered_view(text, 1, None, max_chars)
    first, last = _check_view_range(view_range, line_count(text))
    return numbered_view(text, first, last, max_chars)


def _replace_unique(
    content: bytes,
    path: str,
    old_str: str,
    new_str: str,
    *,
    max_listed: int,
    max_quoted: int,
    context: int,
) -> _Edit:
    """`old_str` replaced by `new_str` where it occurs exactly once (worker thread)."""
    text = _decode(content, path)
    matches = find_matches(text, old_str, max_listed=max_listed)
    shown = quote(old_str, max_quoted)
    if matches.count == 0:
        raise _EditorError(
            f"No replacement was performed, old_str `{shown}` did not appear verbatim in {path}."
        )
    if matches.count > 1:
        lines = list(matches.lines)
        more = matches.count - len(lines)
        listed = f"{lines}" if not more else f"{lines} and {more} more"
        raise _EditorError(
            f"No replacement was performed. Multiple occurrences of old_str `{shown}` in "
            f"lines {listed}. Please ensure it is unique."
        )
    if old_str == new_str:
        raise _EditorError("No replacement was performed: `new_str` is identical to `old_str`.")
    offset = matches.first_offset
    new_text = text[:offset] + new_str + text[offset + len(old_str) :]
    first_changed = matches.lines[0]
    last_changed = first_changed + max(line_count(new_str), 1) - 1
    return _Edit(new_text.encode("utf-8"), snippet(new_text, first_changed, last_changed, context))


def _insert(content: bytes, path: str, line: int, new_str: str, *, context: int) -> _Edit:
    """`new_str` inserted after line `line` (worker thread)."""
    text = _decode(content, path)
    lines = line_count(text)
    if not 0 <= line <= lines:
        raise _EditorError(
            f"Invalid `insert_line` parameter: {line}. It should be within the range of "
            f"lines of the file: [0, {lines}]"
        )
    new_text = insert_after_line(text, line, new_str)
    inserted = max(1, line_count(new_str))
    return _Edit(new_text.encode("utf-8"), snippet(new_text, line + 1, line + inserted, context))


def _required_text(arguments: Mapping[str, Any], name: str, command: str) -> str:
    value = _required(arguments, name, command)
    if not isinstance(value, str):
        raise _EditorError(
            f"Parameter `{name}` of command {command} must be a string, not {type(value).__name__}."
        )
    return value
