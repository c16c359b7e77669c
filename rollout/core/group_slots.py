"""`GroupSlotBudget`: sample slots that a new group takes all at once, and gives back one by one.

AReaL's sample-level refill (areal-project/AReaL PR #1722, `rollout.max_concurrent_samples`):
capacity is counted in samples, and a finished sample gives its slot back at once, but a new
prompt group is admitted whole, when as many slots as it has samples are free ("with group size
8 and 128 sample slots, eight completed episodes across unfinished groups can admit another
eight-member group without waiting for one original group to finish"). Its default, group-level
admission, gives a group's slots back only when the whole group is done.

Pure accounting: a group *starts* when its size (at most every slot) is free and takes that
many slots, reserved for its members; each member then claims one. A member of a group that
started before (a sample re-run from scratch) needs one free slot. The asyncio gate that makes
samples wait, oldest group first, is `rollout.runtime.group_slots.GroupSampleSlots`.
"""

from __future__ import annotations

__all__ = ["GroupSlotBudget"]


class GroupSlotBudget:
    """`slots` sample slots, handed out a group at a time (see the module docstring)."""

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"sample slots must be at least 1, got {slots}")
        self.slots = slots
        self.free = slots
        self._reserved: dict[str, int] = {}  # group -> slots held for members not in yet
        self._started: set[str] = set()

    def need(self, group_id: str, size: int) -> int:
        """Free slots `group_id` needs before its next member may go live."""
        if self._reserved.get(group_id, 0) > 0:
            return 0
        return 1 if group_id in self._started else min(size, self.slots)

    def fits(self, group_id: str, size: int) -> bool:
        return self.free >= self.need(group_id, size)

    def take(self, group_id: str, size: int) -> None:
        """One member of `group_id` goes live (call only when `fits`): it claims a slot its
        group reserved, or a new group takes its slots (one for this member, the rest reserved
        for its siblings), or a member of a started group takes one free slot."""
        reserved = self._reserved.get(group_id, 0)
        if reserved:
            if reserved == 1:
                del self._reserved[group_id]
            else:
                self._reserved[group_id] = reserved - 1
            return
        need = self.need(group_id, size)
        if self.free < need:
            raise ValueError(f"group {group_id} needs {need} free slots, {self.free} are free")
        self.free -= need
        self._started.add(group_id)
        if need > 1:
            self._reserved[group_id] = need - 1

    def give_back(self) -> None:
        """A live member finished: its slot is free."""
        if self.free >= self.slots:
            raise ValueError("every slot is already free: a sample left twice")
        self.free += 1
