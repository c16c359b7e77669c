"""Plug in a new env: subclass `AgentEnv`, implement three coroutines, take a `SandboxHandle`.

With no handle the env starts its own sandbox (Docker; a local directory that is not isolated
only with `backend="local"` or `CONDUCTOR_ALLOW_HOST_SANDBOX=1`). Run it from the repository root:
`.venv/bin/python examples/my_env.py`
"""

from typing import Any

from harness import AgentEnv, SandboxHandle, standalone_handle


class MyEnv(AgentEnv):
    def __init__(self, sandbox: SandboxHandle | None = None) -> None:
        super().__init__()
        self._sandbox = sandbox or standalone_handle("auto")

    async def _areset(self, seed: int | None, options: dict[str, Any] | None):
        return "Say hello with a bash command.", {}  # no container needed yet

    async def _astep(self, action: str):  # a malformed action is an error observation
        result = await (await self._sandbox.get()).exec(action, timeout_s=30)
        reward = 1.0 if "hello" in result.output else 0.0
        return result.output, reward, True, False, {"exit_code": result.exit_code}

    async def _aclose(self) -> None:
        await self._sandbox.aclose()


if __name__ == "__main__":
    env = MyEnv()
    observation, info = env.reset(seed=0)
    observation, reward, terminated, truncated, info = env.step("echo hello")
    print(repr(observation), reward, info)
    env.close()
