"""Priority classes of a mixed rollout: the coarse order above critical-group priority.

A run may draw from several task sources (`rollout.core.sources`); each has a class. The
scheduler serves classes in `PriorityClass.rank` order, and inside a class the five-level slot
order of DESIGN.md §3 (critical groups first) still holds. A sample that waits longer than the
starvation bound is promoted one class at a time, so no class waits forever.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["PriorityClass"]


class PriorityClass(StrEnum):
    """`urgent` > `high` > `normal` > `low`; a single-source run is all `normal`."""

    URGENT = "urgent"
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 for `urgent` … 3 for `low`: the order classes are served in (lower first)."""
        return _RANKS[self]

    def promoted(self) -> PriorityClass:
        """The class one step up (`urgent` stays `urgent`)."""
        return _ORDER[max(0, self.rank - 1)]


_ORDER = (PriorityClass.URGENT, PriorityClass.HIGH, PriorityClass.NORMAL, PriorityClass.LOW)
_RANKS = {cls: rank for rank, cls in enumerate(_ORDER)}
