"""`AgentEnv`: the contract of a text-in/text-out agent environment.

An `AgentEnv` is a `gymnasium.Env[str, str]` whose real work is asynchronous (commands run in
sandboxes, many episodes run concurrently on one event loop). The rollout layer calls the async
methods; the sync `reset`/`step`/`close` run the same code on a private event-loop thread so
ordinary Gymnasium code and `gymnasium.utils.env_checker.check_env` work unchanged.

Subclasses implement three coroutines and set two spaces:

* `_areset(seed, options) -> (observation, info)`: start an episode. Called after seeding.
* `_astep(action) -> (observation, reward, terminated, truncated, info)`: act once. A malformed
  action must come back as an error *observation* (and count as a step), never as an exception.
* `_aclose()`: release sandboxes. Called at most once.

The public `areset`/`astep`/`aclose` wrap them: seeding, the closed-state check, the step count,
and `step`-after-episode-end protection.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import gymnasium

from harness.errors import HarnessError
from harness.spaces import UnicodeText

__all__ = ["AgentEnv", "ResetReturn", "StepReturn"]

ResetReturn = tuple[str, dict[str, Any]]
StepReturn = tuple[str, float, bool, bool, dict[str, Any]]
_T = TypeVar("_T")

DEFAULT_TEXT_LENGTH = 1_000_000


class AgentEnv(gymnasium.Env[str, str]):
    """Base class of text agent envs. See the module docstring for the contract."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (Gymnasium API)
    observation_space: UnicodeText = UnicodeText(DEFAULT_TEXT_LENGTH)
    action_space: UnicodeText = UnicodeText(DEFAULT_TEXT_LENGTH)

    def __init__(self) -> None:
        super().__init__()
        self._closed = False
        self._episode_over = True
        self._steps = 0
        self._runner: _LoopThread | None = None

    # -- async API (used by the rollout layer) ---------------------------------------------

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetReturn:
        """Start a new episode; returns the first observation and an info dict."""
        self._check_open()
        gymnasium.Env.reset(self, seed=seed)
        self._steps = 0
        observation, info = await self._areset(seed, options)
        self._episode_over = False
        return observation, info

    async def astep(self, action: str) -> StepReturn:
        """Apply one action. Raises only if the env is closed or no episode is running."""
        self._check_open()
        if self._episode_over:
            raise HarnessError(
                "step() called after the episode ended (or before reset()); call reset() first"
            )
        self._steps += 1
        observation, reward, terminated, truncated, info = await self._astep(action)
        self._episode_over = terminated or truncated
        return observation, float(reward), terminated, truncated, info

    async def aclose(self) -> None:
        """Release everything the env holds. Safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._aclose()
        finally:
            self._episode_over = True

    @property
    def steps(self) -> int:
        """Steps taken in the current episode."""
        return self._steps

    @property
    def closed(self) -> bool:
        return self._closed

    # -- sync API (Gymnasium) ---------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetReturn:
        return self._run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> StepReturn:
        return self._run_sync(self.astep(action))

    def close(self) -> None:
        if self._closed and self._runner is None:
            return
        try:
            if not self._closed:
                self._run_sync(self.aclose())
        finally:
            if self._runner is not None:
                self._runner.stop()
                self._runner = None

    # -- for subclasses ---------------------------------------------------------------------

    async def _areset(self, seed: int | None, options: dict[str, Any] | None) -> ResetReturn:
        raise NotImplementedError

    async def _astep(self, action: str) -> StepReturn:
        raise NotImplementedError

    async def _aclose(self) -> None:
        return None

    # -- internals --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessError(f"{type(self).__name__} is closed; create a new env")

    def _run_sync(self, coro: Coroutine[Any, Any, _T]) -> _T:
        if self._runner is None:
            self._runner = _LoopThread(name=f"{type(self).__name__}-loop")
        return self._runner.run(coro)


class _LoopThread:
    """An event loop on a daemon thread, so sync calls work even inside a running loop."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
