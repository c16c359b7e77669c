"""`TransferModel`: tokens of KV to bytes and seconds over the host↔device link.

The policy uses it to judge whether an offload or prefetch pays off; the engine uses the same
numbers to simulate the copy, so both agree on when KV lands.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kvcache.config import TransferConfig

__all__ = ["Direction", "TransferModel"]


class Direction(StrEnum):
    """Which way KV crosses the link."""

    D2H = "d2h"  # offload, demote-with-copy
    H2D = "h2d"  # load-back, prefetch


@dataclass(frozen=True, slots=True)
class TransferModel:
    """Linear link model: `latency_s + bytes / bandwidth` per transfer; zero tokens cost nothing."""

    bytes_per_token: int
    d2h_bandwidth_bytes_per_s: float
    h2d_bandwidth_bytes_per_s: float
    latency_s: float

    def __post_init__(self) -> None:
        if self.bytes_per_token <= 0:
            raise ValueError(f"bytes_per_token must be positive, got {self.bytes_per_token}")
        for name in ("d2h_bandwidth_bytes_per_s", "h2d_bandwidth_bytes_per_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.latency_s < 0:
            raise ValueError(f"latency_s must be non-negative, got {self.latency_s}")

    @classmethod
    def from_config(cls, config: TransferConfig) -> TransferModel:
        """Build the model from its validated config section."""
        return cls(
            bytes_per_token=config.bytes_per_token,
            d2h_bandwidth_bytes_per_s=config.d2h_bandwidth_bytes_per_s,
            h2d_bandwidth_bytes_per_s=config.h2d_bandwidth_bytes_per_s,
            latency_s=config.latency_s,
        )

    def bytes(self, tokens: int) -> int:
        """KV bytes of `tokens` tokens."""
        return tokens * self.bytes_per_token

    def seconds(self, tokens: int, direction: Direction) -> float:
        """Time to move `tokens` tokens of KV in one transfer."""
        if tokens <= 0:
            return 0.0
        bandwidth = (
            self.d2h_bandwidth_bytes_per_s
            if direction is Direction.D2H
            else self.h2d_bandwidth_bytes_per_s
        )
        return self.latency_s + self.bytes(tokens) / bandwidth

    def round_trip_s(self, tokens: int) -> float:
        """Offload and later reload of `tokens` tokens."""
        return self.seconds(tokens, Direction.D2H) + self.seconds(tokens, Direction.H2D)
