"""`LiveKVGate`: new samples wait, oldest first, until the live contexts leave room for them.

The asyncio side of `rollout.core.live_gate.LiveKVBudget` (which decides whether one more sample
fits): `enter` returns at once when the budget has room and nobody waits before the caller,
otherwise it queues the caller, and every change of the live set wakes waiters in arrival order
while they fit.
"""

from __future__ import annotations

from collections.abc import Callable

from rollout.core.live_gate import LiveKVBudget
from rollout.runtime.fifo_gate import FifoGate

__all__ = ["LiveKVGate"]


class LiveKVGate(FifoGate):
    """FIFO gate on the live samples' total context tokens (see the module docstring)."""

    def __init__(
        self,
        budget_tokens: float,
        prior_first_tokens: float = 0.0,
        newcomer_tokens: Callable[[], float | None] | None = None,
    ) -> None:
        super().__init__()
        self._budget = LiveKVBudget(budget_tokens, prior_first_tokens, newcomer_tokens)

    @property
    def live(self) -> int:
        return self._budget.live

    @property
    def live_tokens(self) -> int:
        return self._budget.live_tokens

    def update(self, sample_id: str, context_tokens: int) -> None:
        """A live sample's context is now `context_tokens` long (after a generation)."""
        self._budget.update(sample_id, context_tokens)
        self._wake()

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up); its context no longer counts."""
        self._budget.leave(sample_id)
        self._wake()

    def _fits(self, sample_id: str) -> bool:
        return self._budget.fits()

    def _admit(self, sample_id: str) -> None:
        self._budget.admit(sample_id)
