"""`LiveKVGate`: new samples wait, oldest first, until the live contexts leave room for them.

The asyncio side of `rollout.core.live_gate.LiveKVBudget` (which decides whether one more sample
fits): `enter` returns at once when the budget has room and nobody waits before the caller,
otherwise it queues the caller, and every change of the live set wakes waiters in arrival order
while they fit.
"""

from __future__ import annotations

import asyncio
from collections import deque

from rollout.core.live_gate import LiveKVBudget

__all__ = ["LiveKVGate"]


class LiveKVGate:
    """FIFO gate on the live samples' total context tokens (see the module docstring)."""

    def __init__(self, budget_tokens: float, prior_first_tokens: float = 0.0) -> None:
        self._budget = LiveKVBudget(budget_tokens, prior_first_tokens)
        self._waiting: deque[tuple[str, asyncio.Future[None]]] = deque()

    @property
    def live(self) -> int:
        return self._budget.live

    @property
    def waiting(self) -> int:
        return sum(1 for _, future in self._waiting if not future.done())

    @property
    def live_tokens(self) -> int:
        return self._budget.live_tokens

    async def enter(self, sample_id: str) -> None:
        """Wait until `sample_id` may start; it counts as live from then on."""
        if not self._waiting and self._budget.fits():
            self._budget.admit(sample_id)
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
        """A live sample's context is now `context_tokens` long (after a generation)."""
        self._budget.update(sample_id, context_tokens)
        self._wake()

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up); its context no longer counts."""
        self._budget.leave(sample_id)
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self._budget.fits():
            sample_id, future = self._waiting.popleft()
            if future.done():
                continue
            self._budget.admit(sample_id)
            future.set_result(None)
