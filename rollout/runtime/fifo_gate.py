"""`FifoGate`: samples wait in arrival order until a live limit's rule lets the head in.

The waiting machinery every live limit shares (the live-KV gate, the recompute-driven count,
the knob-free peers' slots and in-flight cap): a sample that fits while nobody waits starts at
once; otherwise it queues, and each change of the live set wakes the queue from its head while
the head fits (nobody overtakes it). A waiter cancelled just as it was admitted leaves again.
A subclass says what fits and what admitting takes (`_fits`, `_admit`), and calls `_wake`
whenever room may have appeared.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["FifoGate"]


class FifoGate:
    """The arrival-ordered queue of a live limit (see the module docstring)."""

    def __init__(self) -> None:
        self._waiting: deque[tuple[str, asyncio.Future[None]]] = deque()

    @property
    def waiting(self) -> int:
        """Samples waiting to start."""
        return sum(1 for _, future in self._waiting if not future.done())

    async def enter(self, sample_id: str) -> None:
        """Wait until `sample_id` may start; it is live from then on."""
        if not self._waiting and self._fits(sample_id):
            self._admit(sample_id)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((sample_id, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.leave(sample_id)  # admitted just as it was cancelled
            raise

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up)."""
        raise NotImplementedError

    def _fits(self, sample_id: str) -> bool:
        """Whether `sample_id` may start now."""
        raise NotImplementedError

    def _admit(self, sample_id: str) -> None:
        """`sample_id` starts: take what it holds."""
        raise NotImplementedError

    def _wake(self) -> None:
        """Admit waiters from the head of the queue while the head fits."""
        while self._waiting:
            sample_id, future = self._waiting[0]
            if future.done():  # cancelled while it waited
                self._waiting.popleft()
                continue
            if not self._fits(sample_id):
                return
            self._waiting.popleft()
            self._admit(sample_id)
            future.set_result(None)
