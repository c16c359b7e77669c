"""`SimulatedTrainer`: a trainer that consumes batches and publishes weights, but learns nothing.

Each step takes B groups from `conductor.batches()`, spends `train_time_s` on the loop clock
(the optimizer step), then publishes the next policy version with `update_weights` — which
pauses the engines, so generations in flight are interrupted and resume with the new weights.
That is exactly the pressure a real trainer puts on the rollout, so simulated runs measure
T_next, staleness and interruptions honestly. `examples/trainer_loop.py` shows a real update.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Protocol

from rollout.observe.run_summary import BatchDigest, digest_batch
from rollout.standins.config import TrainerSimConfig
from rollout.trajectories.batch import Batch

__all__ = ["BatchSource", "SimulatedTrainer"]


class BatchSource(Protocol):
    """The trainer side of the conductor."""

    def batches(self) -> AsyncGenerator[Batch, None]: ...

    async def update_weights(self, version: int) -> None: ...


class SimulatedTrainer:
    """See the module docstring. `on_batch` sees each batch as it arrives (to record it)."""

    def __init__(
        self,
        config: TrainerSimConfig,
        *,
        on_batch: Callable[[Batch], None] | None = None,
        on_trained: Callable[[Batch], None] | None = None,
    ) -> None:
        self._config = config
        self._on_batch = on_batch
        self._on_trained = on_trained  # after the step's weights are published (checkpoints)

    async def run(self, source: BatchSource, steps: int) -> list[BatchDigest]:
        """Train `steps` steps; returns a digest of each batch, in order (the batches, with
        their token arrays, are let go once `on_batch` has seen them)."""
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        consumed: list[BatchDigest] = []
        async with contextlib.aclosing(source.batches()) as stream:
            async for batch in stream:
                consumed.append(digest_batch(batch))
                if self._on_batch is not None:
                    self._on_batch(batch)
                await asyncio.sleep(self._config.train_time_s)
                await source.update_weights(batch.policy_version + 1)
                if self._on_trained is not None:
                    self._on_trained(batch)
                if len(consumed) == steps:
                    break
        return consumed
