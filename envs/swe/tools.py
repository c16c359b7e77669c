"""`ToolBox`: run one parsed action (`bash`, `str_replace_editor`, `submit`) in a sandbox.

A command's failure (non-zero exit, timeout, a bad editor call) is a value in `ToolOutcome`;
only a dead sandbox raises (`SandboxDeadError`), because then the episode must end. `bash` is
stateless: one `Sandbox.exec` per call in the workdir, so `cd` and variables do not carry over
(mini-swe-agent shows this loses nothing and survives hung shells).
"""

from __future__ import annotations

from dataclasses import dataclass

from envs.swe.actions import ParsedAction
from envs.swe.config import ToolsConfig
from envs.swe.editor import FileEditor
from foundation.clock import Clock
from harness.sandbox.base import Sandbox

__all__ = ["EDITOR_ERROR_EXIT_CODE", "ToolBox", "ToolOutcome"]

EDITOR_ERROR_EXIT_CODE = 1
"""The return code shown for an editor call that did nothing (a usage error)."""

_USAGE_ERROR_EXIT_CODE = 2  # as bash reports a misuse of a builtin


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What one tool call did. `output_bytes` is the output size before any capping."""

    tool: str
    output: str
    exit_code: int
    timed_out: bool = False
    duration_s: float = 0.0
    output_bytes: int = 0
    sandbox_truncated: bool = False
    submitted: bool = False


class ToolBox:
    """The tools of one episode over one sandbox (the editor's undo history lives here)."""

    def __init__(self, sandbox: Sandbox, config: ToolsConfig, *, clock: Clock) -> None:
        self._sandbox = sandbox
        self._config = config
        self._clock = clock
        self._editor = FileEditor(sandbox, config)

    @property
    def sandbox(self) -> Sandbox:
        return self._sandbox

    async def run(self, action: ParsedAction) -> ToolOutcome:
        """Run `action` (already validated by the parser). Raises SandboxDeadError only."""
        if action.name == "bash":
            return await self._bash(str(action.arguments.get("command", "")))
        if action.name == "str_replace_editor":
            return await self._edit(action)
        if action.name == "submit":
            return ToolOutcome(tool="submit", output="Submitted.", exit_code=0, submitted=True)
        return ToolOutcome(
            tool=action.name,
            output=f"the tool {action.name!r} does not exist here",
            exit_code=_USAGE_ERROR_EXIT_CODE,
        )

    async def _bash(self, command: str) -> ToolOutcome:
        if not command.strip():
            return ToolOutcome(
                tool="bash", output="The command is empty; nothing was run.",
                exit_code=_USAGE_ERROR_EXIT_CODE,
            )  # fmt: skip
        result = await self._sandbox.exec(
            command, timeout_s=self._config.bash_timeout_s, env=self._config.bash_env
        )
        return ToolOutcome(
            tool="bash",
            output=result.output,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_s=result.duration_s,
            output_bytes=result.output_bytes,
            sandbox_truncated=result.truncated,
        )

    async def _edit(self, action: ParsedAction) -> ToolOutcome:
        started_s = self._clock.now()
        result = await self._editor.run(action.arguments)
        duration_s = self._clock.now() - started_s
        return ToolOutcome(
            tool="str_replace_editor",
            output=result.output,
            exit_code=0 if result.ok else EDITOR_ERROR_EXIT_CODE,
            duration_s=duration_s,
            output_bytes=len(result.output.encode("utf-8")),
        )
