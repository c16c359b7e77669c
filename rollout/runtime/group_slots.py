"""`GroupSampleSlots`: samples wait, oldest first, until their group's sample slots are free.

The asyncio side of `rollout.core.group_slots.GroupSlotBudget` (the live limit of the
`sample_refill` peer): a sample holds its slot for its whole trajectory (tool calls included),
as an AReaL rollout does; the first member of a new group waits until the whole group's slots
are free and takes them all, its siblings then go live at once; a finished sample gives its
slot back at once. Nobody overtakes the head of the queue.
"""

from __future__ import annotations

from collections.abc import Callable

from rollout.core.group_slots import GroupSlotBudget
from rollout.core.types import group_id_of
from rollout.runtime.fifo_gate import FifoGate

__all__ = ["GroupSampleSlots"]


class GroupSampleSlots(FifoGate):
    """FIFO gate on sample slots taken a whole group at a time (see the module docstring)."""

    def __init__(self, slots: int, group_size_of: Callable[[str], int]) -> None:
        super().__init__()
        self._budget = GroupSlotBudget(slots)
        self._group_size_of = group_size_of
        self._live: set[str] = set()

    @property
    def slots(self) -> int:
        return self._budget.slots

    @property
    def live(self) -> int:
        return len(self._live)

    def leave(self, sample_id: str) -> None:
        """The sample finished (or gave up): its slot is free."""
        if sample_id not in self._live:
            return
        self._live.discard(sample_id)
        self._budget.give_back()
        self._wake()

    def update(self, sample_id: str, context_tokens: int) -> None:
        """Slots count samples, not tokens."""

    def _fits(self, sample_id: str) -> bool:
        group = group_id_of(sample_id)
        return self._budget.fits(group, self._group_size_of(group))

    def _admit(self, sample_id: str) -> None:
        group = group_id_of(sample_id)
        self._budget.take(group, self._group_size_of(group))
        self._live.add(sample_id)
