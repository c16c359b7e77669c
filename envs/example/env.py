"""FileCheckEnv: the agent must write a file whose content passes a check run in the sandbox.

The smallest complete env: a seeded task in `_areset` (no container needed yet), shell commands
as actions, grading inside the sandbox, and errors as observations.

Reset options: ``{"task": i}`` picks task i (`task_word(i)`) instead of a seeded draw, so a
rollout's prompt index names the task. With `tool_calls=True` the action is a model's reply
holding one tool call (`example_tool_specs`: `bash` and `submit`, in any format
`envs.swe.actions.parse_action` reads) rather than a raw command.
"""

from __future__ import annotations

from typing import Any

from envs.swe.actions import ParsedAction, ToolSpec, parse_action
from harness.env import AgentEnv, ResetReturn, StepReturn
from harness.handle import SandboxHandle
from harness.standalone import BackendName, standalone_handle

__all__ = ["WORDS", "FileCheckEnv", "example_tool_specs", "task_word"]

WORDS = ("conductor", "sandbox", "rollout", "gradient", "container", "priority")


def task_word(index: int) -> str:
    """The word of task `index` (the env's tasks are the `WORDS`, cycled)."""
    return WORDS[index % len(WORDS)]


def example_tool_specs() -> tuple[ToolSpec, ...]:
    """The env's two tools when it reads tool calls: `bash` and `submit`."""
    bash = ToolSpec(
        name="bash",
        description="Run a bash command in the current directory.",
        parameters={
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command to run"}},
            "required": ["command"],
        },
    )
    submit = ToolSpec(
        name="submit",
        description="Finish: answer.txt is checked.",
        parameters={"type": "object", "properties": {}, "required": []},
    )
    return (bash, submit)


class FileCheckEnv(AgentEnv):
    """Each action is a bash command; `submit` ends the episode and grades the file.

    With `tool_calls`, each action is a reply holding a `bash` or `submit` tool call.
    """

    def __init__(
        self,
        sandbox: SandboxHandle | None = None,
        *,
        backend: BackendName = "auto",
        max_steps: int = 10,
        command_timeout_s: float = 10.0,
        tool_calls: bool = False,
    ) -> None:
        super().__init__()
        self._sandbox = sandbox or standalone_handle(backend)
        self._max_steps = max_steps
        self._timeout_s = command_timeout_s
        self._tool_specs = example_tool_specs() if tool_calls else None
        self._word = ""

    async def _areset(self, seed: int | None, options: dict[str, Any] | None) -> ResetReturn:
        task = (options or {}).get("task")
        self._word = str(self.np_random.choice(WORDS)) if task is None else task_word(int(task))
        how = (
            "then call the tool `submit`. Use the tool `bash` to run commands."
            if self._tool_specs is not None
            else "then send the action `submit`. Every other action is run as a bash command."
        )
        prompt = (
            f"Create the file answer.txt in the current directory containing the word "
            f"'{self._word}' reversed, {how}"
        )
        return prompt, {"word": self._word}

    async def _astep(self, action: str) -> StepReturn:
        if self._tool_specs is not None:
            parsed = parse_action(action, self._tool_specs)
            if not isinstance(parsed, ParsedAction):
                return f"error: {parsed.message}", 0.0, False, self._out_of_steps(), {}
            action = "submit" if parsed.name == "submit" else str(parsed.arguments["command"])
        sandbox = await self._sandbox.get()
        if action.strip() == "submit":
            expected = self._word[::-1]
            check = await sandbox.exec(
                f'test "$(cat answer.txt)" = "{expected}"', timeout_s=self._timeout_s
            )
            reward = 1.0 if check.ok else 0.0
            return f"graded: reward {reward:g}", reward, True, False, {"exit_code": check.exit_code}
        if not action.strip():
            return (
                "error: empty action; send a bash command or `submit`",
                0.0,
                False,
                self._out_of_steps(),
                {},
            )
        result = await sandbox.exec(action, timeout_s=self._timeout_s)
        observation = f"<returncode>{result.exit_code}</returncode>\n{result.output}"
        if result.timed_out:
            observation += f"\n[killed after {self._timeout_s:g} s]"
        info = {"exit_code": result.exit_code, "timed_out": result.timed_out}
        return observation, 0.0, False, self._out_of_steps(), info

    def _out_of_steps(self) -> bool:
        return self.steps >= self._max_steps

    async def _aclose(self) -> None:
        await self._sandbox.aclose()
