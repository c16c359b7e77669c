"""Binary backoff of the pressure-offload group: double while pressure persists, then halve."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupBackoff"]


@dataclass(frozen=True, slots=True)
class GroupBackoff:
    """How many low-priority sessions to offload in the next pressured step.

    Immutable: `after_step` returns the next state. The first pressured step offloads
    `group_size` sessions; each further pressured step doubles it up to `max_group`; each step
    without pressure halves it back towards `initial_group`.
    """

    initial_group: int
    max_group: int
    group_size: int

    def __post_init__(self) -> None:
        if not 1 <= self.initial_group <= self.group_size <= self.max_group:
            raise ValueError(
                f"need 1 <= initial_group ({self.initial_group}) <= group_size "
                f"({self.group_size}) <= max_group ({self.max_group})"
            )

    @classmethod
    def start(cls, initial_group: int, max_group: int) -> GroupBackoff:
        return cls(initial_group, max_group, initial_group)

    def after_step(self, *, pressured: bool) -> GroupBackoff:
        """State for the next step, given whether this step was under pressure."""
        if pressured:
            size = min(self.max_group, self.group_size * 2)
        else:
            size = max(self.initial_group, self.group_size // 2)
        return GroupBackoff(self.initial_group, self.max_group, size)

    def reset(self) -> GroupBackoff:
        """Back to the first group size (e.g. after a high-priority session finished)."""
        return GroupBackoff(self.initial_group, self.max_group, self.initial_group)
