"""`RecomputeLimit`: samples wait, oldest first, while the recompute-driven cap is reached.

The asyncio side of `rollout.core.recompute_control.RecomputeControl`. A sample is live from
`enter` to `leave` (its whole trajectory, tool calls included); the conductor calls `poll`
every `poll_interval_s`, and the limit reads the engines' recomputed tokens through the
callable it was given (the conductor's per-engine counters, summed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from rollout.core.recompute_control import RecomputeControl
from rollout.engines.base import EngineStats
from rollout.runtime.fifo_gate import FifoGate

__all__ = ["RecomputeLimit"]


class RecomputeLimit(FifoGate):
    """FIFO gate on the number of live samples under `RecomputeControl`'s cap."""

    def __init__(self, control: RecomputeControl, recomputed_tokens: Callable[[], int]) -> None:
        super().__init__()
        self.control = control
        self._recomputed_tokens = recomputed_tokens
        self._live: set[str] = set()

    @property
    def poll_interval_s(self) -> float:
        return self.control.config.poll_interval_s

    @property
    def live(self) -> int:
        return len(self._live)

    def update(self, sample_id: str, context_tokens: int) -> None:
        """Contexts are not charged: the cap counts samples."""

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up)."""
        if sample_id not in self._live:
            return
        self._live.discard(sample_id)
        self.control.sample_finished(live=len(self._live), waiting=self.waiting)
        self._wake()

    def poll(self, engines: Mapping[str, EngineStats], now_s: float) -> None:
        """Read the recomputed tokens (the engines' stats are not needed)."""
        self.control.poll(self._recomputed_tokens(), now_s)
        self._wake()

    def _fits(self, sample_id: str) -> bool:
        return len(self._live) < self.control.limit

    def _admit(self, sample_id: str) -> None:
        self._live.add(sample_id)
