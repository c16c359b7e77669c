"""`SimEnv`: a token-level simulated agent environment that replays a sample's hidden script.

`reset()` waits the env's start-up time and returns the prompt; each `step(action)` waits the
turn's tool latency with `asyncio.sleep` (so virtual time fast-forwards it) and returns an
observation of the scripted number of tokens. The action's content is ignored: in the
simulation the scripted token model already decided what the agent wrote and when it submits.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from typing import Any

from rollout.simulation.workload.corpus import TokenCorpus
from rollout.simulation.workload.distributions import derive_seed
from rollout.simulation.workload.script import SampleScript

__all__ = ["SimEnv", "StepResult"]

StepResult = tuple[tuple[int, ...], bool, float, dict[str, Any]]


class SimEnv:
    """One sample's environment. Not reusable across samples; `reset()` restarts the episode."""

    def __init__(self, script: SampleScript, corpus: TokenCorpus) -> None:
        self.script = script
        self._corpus = corpus
        self._turn = -1  # -1: not reset yet

    @property
    def session_id(self) -> str:
        return self.script.session_id

    async def reset(self) -> tuple[int, ...]:
        """Start the episode; returns the prompt token ids."""
        await asyncio.sleep(self.script.reset_s)
        self._turn = 0
        return self.script.prompt_ids

    async def step(self, action_tokens: Sequence[int]) -> StepResult:
        """Run the tool call that answers turn k; returns (observation, done, reward, info).

        Raises RuntimeError when called before `reset()` or after the episode ended.
        """
        turns = self.script.turns
        if not 0 <= self._turn < len(turns):
            raise RuntimeError(
                f"{self.session_id}: step() needs a running episode; call reset() first"
            )
        index = self._turn
        turn = turns[index]
        await asyncio.sleep(turn.tool_latency_s)
        self._turn += 1
        done = self._turn == len(turns)
        info: dict[str, Any] = {
            "turn": index,
            "tool": turn.tool,
            "tool_latency_s": turn.tool_latency_s,
            "action_tokens": len(action_tokens),
            "truncated": done and self.script.truncated,
        }
        if done:
            return (), True, self.script.reward, info
        rng = random.Random(derive_seed(self.script.seed, "observation", index))
        observation = self._corpus.ids(rng.randrange(self._corpus.size), turn.observation_tokens)
        return observation, False, 0.0, info
