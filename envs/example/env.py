"""FileCheckEnv: the agent must write a file whose content passes a check run in the sandbox.

The smallest complete env: a seeded task in `_areset` (no container needed yet), shell commands
as actions, grading inside the sandbox, and errors as observations.
"""

from __future__ import annotations

from typing import Any

from harness.env import AgentEnv, ResetReturn, StepReturn
from harness.handle import SandboxHandle
from harness.standalone import BackendName, standalone_handle

__all__ = ["FileCheckEnv"]

WORDS = ("conductor", "sandbox", "rollout", "gradient", "container", "priority")


class FileCheckEnv(AgentEnv):
    """Each action is a bash command; `submit` ends the episode and grades the file."""

    def __init__(
        self,
        sandbox: SandboxHandle | None = None,
        *,
        backend: BackendName = "auto",
        max_steps: int = 10,
        command_timeout_s: float = 10.0,
    ) -> None:
        super().__init__()
        self._sandbox = sandbox or standalone_handle(backend)
        self._max_steps = max_steps
        self._timeout_s = command_timeout_s
        self._word = ""

    async def _areset(self, seed: int | None, options: dict[str, Any] | None) -> ResetReturn:
        self._word = str(self.np_random.choice(WORDS))
        prompt = (
            f"Create the file answer.txt in the current directory containing the word "
            f"'{self._word}' reversed, then send the action `submit`. Every other action is "
            f"run as a bash command."
        )
        return prompt, {"word": self._word}

    async def _astep(self, action: str) -> StepReturn:
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
