"""`RecomputeLimit`: samples wait, oldest first, while the recompute-driven cap is reached.

The asyncio side of `rollout.core.recompute_control.RecomputeControl`. A sample is live from
`enter` to `leave` (its whole trajectory, tool calls included); the conductor calls `poll`
every `poll_interval_s`, and the limit reads the engines' recomputed tokens through the
callable it was given (the conductor's per-engine counters, summed).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Mapping

from rollout.core.recompute_control import RecomputeControl
from rollout.engines.base import EngineStats

__all__ = ["RecomputeLimit"]


class RecomputeLimit:
    """FIFO gate on the number of live samples under `RecomputeControl`'s cap."""

    def __init__(self, control: RecomputeControl, recomputed_tokens: Callable[[], int]) -> None:
        self.control = control
        self._recomputed_tokens = recomputed_tokens
        self._live: set[str] = set()
        self._waiting: deque[tuple[str, asyncio.Future[None]]] = deque()

    @property
    def poll_interval_s(self) -> float:
        return self.control.config.poll_interval_s

    @property
    def live(self) -> int:
        return len(self._live)

    async def enter(self, sample_id: str) -> None:
        """Wait until `sample_id` may start; it is live from then on."""
        if not self._waiting and len(self._live) < self.control.limit:
            self._live.add(sample_id)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((sample_id, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.leave(sample_id)  # admitted just as it was cancelled
            raise

    def update(self, sample_id: str, context_tokens: int) -> None:
        """Contexts are not charged: the cap counts samples."""

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up)."""
        if sample_id not in self._live:
            return
        self._live.discard(sample_id)
        waiting = sum(1 for _, future in self._waiting if not future.done())
        self.control.sample_finished(live=len(self._live), waiting=waiting)
        self._wake()

    def poll(self, engines: Mapping[str, EngineStats], now_s: float) -> None:
        """Read the recomputed tokens (the engines' stats are not needed)."""
        self.control.poll(self._recomputed_tokens(), now_s)
        self._wake()

    def _wake(self) -> None:
        while self._waiting and len(self._live) < self.control.limit:
            sample_id, future = self._waiting.popleft()
            if future.done():
                continue
            self._live.add(sample_id)
            future.set_result(None)
