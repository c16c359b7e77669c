"""Which fleet member takes a lease, and which one keeps an image warm: pure decisions.

A group's K samples share an image, so an image gets a *home*: the member that warms it (its
look-ahead starts there) and that its leases go to first. Homes are spread over the members in
proportion to their capacity, which spreads groups by load. A lease goes to a member holding a
warm sandbox of its image (no cold start), else to its home, else to the least loaded member;
a member that is full takes a lease only when every member is (it then queues there).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["MemberLoad", "choose_home", "choose_member"]


@dataclass(frozen=True, slots=True)
class MemberLoad:
    """What placement knows of one member at the moment of a decision."""

    name: str
    up: bool
    leased: int
    capacity: int
    warm: int = 0  # warm sandboxes of the image being placed
    homes: int = 0  # images homed on this member

    @property
    def load(self) -> float:
        return self.leased / self.capacity

    @property
    def has_room(self) -> bool:
        return self.leased < self.capacity


def choose_member(loads: Sequence[MemberLoad], home: str | None) -> str | None:
    """The member that takes a lease whose image is homed on `home`; None if none is up."""
    up = [load for load in loads if load.up]
    if not up:
        return None
    with_room = [load for load in up if load.has_room] or up
    order = {load.name: index for index, load in enumerate(loads)}
    best = min(
        with_room,
        key=lambda load: (load.warm == 0, load.name != home, load.load, order[load.name]),
    )
    return best.name


def choose_home(loads: Sequence[MemberLoad]) -> str | None:
    """The member that a new image is homed on: fewest homes per capacity, then least loaded."""
    up = [load for load in loads if load.up]
    if not up:
        return None
    order = {load.name: index for index, load in enumerate(loads)}
    best = min(up, key=lambda load: (load.homes / load.capacity, load.load, order[load.name]))
    return best.name
