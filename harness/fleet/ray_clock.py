"""A remote worker's clock readings mapped onto the conductor's clock: a pure estimator.

Each reply carries the worker's clock reading; the caller knows when it sent the request and
when the reply came. The offset `conductor - worker` is estimated from the round trip with the
smallest delay among the last few (as NTP's clock filter does: a short round trip bounds the
error tightly, ±half of it), so a slow reply does not disturb the estimate. Event times are
shifted by it and never placed after the reply that reported them arrived.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["ClockOffset", "ClockSample"]


@dataclass(frozen=True, slots=True)
class ClockSample:
    """One round trip: sent and received on the conductor's clock, the worker's reading between."""

    sent_s: float
    received_s: float
    remote_s: float

    def __post_init__(self) -> None:
        if self.received_s < self.sent_s:
            raise ValueError(
                f"a reply cannot arrive before its request was sent "
                f"({self.received_s} < {self.sent_s}); pass (sent, received) in that order"
            )

    @property
    def round_trip_s(self) -> float:
        return self.received_s - self.sent_s

    @property
    def offset_s(self) -> float:
        """`conductor - worker`, assuming the reading was taken halfway through the trip."""
        return (self.sent_s + self.received_s) / 2 - self.remote_s


class ClockOffset:
    """The offset of one worker's clock, from the best of its last `window` round trips.

    Args:
        window: how many recent round trips the estimate is chosen from (older ones age out,
            so a drifting clock is followed).
    """

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"a clock window needs at least one sample, got {window}")
        self._samples: deque[ClockSample] = deque(maxlen=window)

    def observe(self, sample: ClockSample) -> None:
        self._samples.append(sample)

    @property
    def known(self) -> bool:
        return bool(self._samples)

    @property
    def offset_s(self) -> float:
        """The current estimate (0 before any round trip)."""
        if not self._samples:
            return 0.0
        return min(self._samples, key=lambda sample: sample.round_trip_s).offset_s

    @property
    def error_s(self) -> float:
        """The estimate's error bound: half the best round trip (0 before any)."""
        if not self._samples:
            return 0.0
        return min(sample.round_trip_s for sample in self._samples) / 2

    def to_local(self, remote_s: float, *, received_s: float) -> float:
        """A worker clock reading on the conductor's clock, no later than `received_s` (the
        reply that reported it arrived then, so it happened before)."""
        return min(remote_s + self.offset_s, received_s)
