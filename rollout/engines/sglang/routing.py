"""Which endpoint serves a session: sticky, with load-aware spill-over. Pure decisions.

A session's turns go to the server that holds its prefix cache, until that server is loaded
clearly more than the least-loaded one (`spill_margin`, as a fraction of its slots): then the
session moves there and stays. Pure stickiness can lock one server into KV thrash (prime-rl
PR #3255 saw the hit rate fall from 98 % to 5 %); pure balancing throws every prefix away.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["EndpointLoad", "StickyRouter"]


@dataclass(frozen=True, slots=True)
class EndpointLoad:
    """One endpoint's load as the router sees it (requests in flight over its slots)."""

    in_flight: int
    max_running: int

    @property
    def fraction(self) -> float:
        return self.in_flight / self.max_running if self.max_running > 0 else float("inf")


class StickyRouter:
    """Session -> endpoint index (see the module docstring)."""

    def __init__(self, endpoints: int, *, spill_margin: float) -> None:
        if endpoints < 1:
            raise ValueError(f"a router needs at least one endpoint, got {endpoints}")
        self._endpoints = endpoints
        self._spill_margin = spill_margin
        self._home: dict[str, int] = {}

    def route(self, session_id: str, loads: Sequence[EndpointLoad]) -> int:
        """The endpoint for the session's next request (an empty id is routed by load alone)."""
        if len(loads) != self._endpoints:
            raise ValueError(f"expected {self._endpoints} endpoint loads, got {len(loads)}")
        least = min(range(self._endpoints), key=lambda i: (loads[i].fraction, i))
        home = self._home.get(session_id) if session_id else None
        if home is not None and loads[home].fraction <= loads[least].fraction + self._spill_margin:
            return home
        if session_id:
            self._home[session_id] = least
        return least

    def move(self, session_id: str, index: int) -> None:
        """The session's request was retried on endpoint `index` (its old one failed): its
        prefix now lives there, so it stays there."""
        if not 0 <= index < self._endpoints:
            raise ValueError(f"endpoint {index} out of range (0..{self._endpoints - 1})")
        self._home[session_id] = index

    def forget(self, session_id: str) -> None:
        """The session ended; its next use (if any) is routed afresh."""
        self._home.pop(session_id, None)

    def home_of(self, session_id: str) -> int | None:
        return self._home.get(session_id)
