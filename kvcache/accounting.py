"""KV accounting: hit rates, recomputation, link traffic, offloads/prefetches and occupancy.

`KVAccounting` is the mutable tally a policy owns; `KVStats` is the frozen snapshot it hands out.
Token counts are tokens of KV; bytes are derived from the transfer model's bytes per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["KVAccounting", "KVStats", "OccupancyTracker"]


@dataclass(slots=True)
class OccupancyTracker:
    """Device occupancy over time: a time-weighted mean, the peak and spaced samples."""

    sample_interval_s: float
    samples: list[tuple[float, int]] = field(default_factory=list)
    peak_tokens: int = 0
    _start_s: float | None = None
    _last_s: float = 0.0
    _last_tokens: int = 0
    _token_seconds: float = 0.0

    def record(self, now_s: float, used_tokens: int) -> None:
        """Note that `used_tokens` are in use from `now_s` on (earlier times are clamped)."""
        if self._start_s is None:
            self._start_s = now_s
            self._last_s = now_s
        now_s = max(now_s, self._last_s)
        self._token_seconds += self._last_tokens * (now_s - self._last_s)
        self._last_s = now_s
        self._last_tokens = used_tokens
        self.peak_tokens = max(self.peak_tokens, used_tokens)
        if not self.samples or now_s - self.samples[-1][0] >= self.sample_interval_s:
            self.samples.append((now_s, used_tokens))

    def mean_tokens(self) -> float:
        """Time-weighted mean occupancy since the first record (last value if no time passed)."""
        if self._start_s is None:
            return 0.0
        elapsed = self._last_s - self._start_s
        if elapsed <= 0:
            return float(self._last_tokens)
        return self._token_seconds / elapsed


@dataclass(frozen=True, slots=True)
class KVStats:
    """A snapshot of a policy's accounting.

    Tokens are KV tokens. `d2h_tokens`/`h2d_tokens` crossed the link (offloads; load-backs and
    prefetches); `offloads` counts node copies to host, whether eviction or the policy chose
    them; `demoted_tokens` were freed on device with a host copy already there; `dropped_tokens`
    were discarded from either tier. `recomputed_tokens` are misses inside a session's previous
    context. A prefetch is in time when it landed before the session's `tool_done`;
    `returns_without_prefetch` counts offloaded sessions that came back before one started.
    """

    policy: str
    device_capacity_tokens: int
    host_capacity_tokens: int
    device_used_tokens: int
    host_used_tokens: int
    reserved_tokens: int
    lookups: int
    device_hit_tokens: int
    host_hit_tokens: int
    miss_tokens: int
    recomputed_tokens: int
    d2h_tokens: int
    h2d_tokens: int
    d2h_bytes: int
    h2d_bytes: int
    offloads: int
    offloaded_tokens: int
    demoted_tokens: int
    dropped_tokens: int
    load_backs: int
    loaded_back_tokens: int
    prefetches: int
    prefetched_tokens: int
    prefetches_in_time: int
    prefetches_late: int
    returns_without_prefetch: int
    mean_device_used_tokens: float
    peak_device_used_tokens: int
    occupancy_samples: tuple[tuple[float, int], ...]

    @property
    def looked_up_tokens(self) -> int:
        return self.device_hit_tokens + self.host_hit_tokens + self.miss_tokens

    def _rate(self, tokens: int) -> float:
        total = self.looked_up_tokens
        return tokens / total if total else 0.0

    @property
    def device_hit_rate(self) -> float:
        """Share of looked-up tokens found on device."""
        return self._rate(self.device_hit_tokens)

    @property
    def host_hit_rate(self) -> float:
        """Share of looked-up tokens found on host only."""
        return self._rate(self.host_hit_tokens)

    @property
    def miss_rate(self) -> float:
        """Share of looked-up tokens that had to be prefilled."""
        return self._rate(self.miss_tokens)


@dataclass(slots=True)
class KVAccounting:
    """Running totals; the cache and the policy add to them, `snapshot` freezes them."""

    occupancy: OccupancyTracker
    lookups: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    miss_tokens: int = 0
    recomputed_tokens: int = 0
    d2h_tokens: int = 0
    h2d_tokens: int = 0
    offloads: int = 0
    offloaded_tokens: int = 0
    demoted_tokens: int = 0
    dropped_tokens: int = 0
    load_backs: int = 0
    loaded_back_tokens: int = 0
    prefetches: int = 0
    prefetched_tokens: int = 0
    prefetches_in_time: int = 0
    prefetches_late: int = 0
    returns_without_prefetch: int = 0

    def snapshot(
        self,
        *,
        policy: str,
        bytes_per_token: int,
        device_capacity_tokens: int,
        host_capacity_tokens: int,
        device_used_tokens: int,
        host_used_tokens: int,
        reserved_tokens: int,
    ) -> KVStats:
        """Freeze the totals together with the cache's current occupancy."""
        return KVStats(
            policy=policy,
            device_capacity_tokens=device_capacity_tokens,
            host_capacity_tokens=host_capacity_tokens,
            device_used_tokens=device_used_tokens,
            host_used_tokens=host_used_tokens,
            reserved_tokens=reserved_tokens,
            lookups=self.lookups,
            device_hit_tokens=self.device_hit_tokens,
            host_hit_tokens=self.host_hit_tokens,
            miss_tokens=self.miss_tokens,
            recomputed_tokens=self.recomputed_tokens,
            d2h_tokens=self.d2h_tokens,
            h2d_tokens=self.h2d_tokens,
            d2h_bytes=self.d2h_tokens * bytes_per_token,
            h2d_bytes=self.h2d_tokens * bytes_per_token,
            offloads=self.offloads,
            offloaded_tokens=self.offloaded_tokens,
            demoted_tokens=self.demoted_tokens,
            dropped_tokens=self.dropped_tokens,
            load_backs=self.load_backs,
            loaded_back_tokens=self.loaded_back_tokens,
            prefetches=self.prefetches,
            prefetched_tokens=self.prefetched_tokens,
            prefetches_in_time=self.prefetches_in_time,
            prefetches_late=self.prefetches_late,
            returns_without_prefetch=self.returns_without_prefetch,
            mean_device_used_tokens=self.occupancy.mean_tokens(),
            peak_device_used_tokens=self.occupancy.peak_tokens,
            occupancy_samples=tuple(self.occupancy.samples),
        )
