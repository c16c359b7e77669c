"""Engine metrics from the conductor's periodic engine samples: busy time, KV occupancy, hits.

Pure: `TimeseriesSample`s in, frozen summaries out. Busy fraction is the mean of the sampled
``busy`` values (samples are taken at a fixed interval). Hit rates come from the last cumulative
counters: device hits, host hits and misses as fractions of the prefix tokens looked up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from rollout.observe.run_records import TimeseriesSample
from rollout.observe.stats import mean_or_none

__all__ = ["EngineTimeline", "KVCacheStats", "engine_timelines", "kv_cache_stats"]


@dataclass(frozen=True, slots=True)
class EngineTimeline:
    """One engine's samples over time (seconds since run start); NaN where undefined (`busy`
    of an engine that reports no busy time).

    `hit_rate` is the cumulative prefix hit rate (device + host hits over tokens looked up) at
    each sample, NaN before the first lookup; `kv_occupancy` is NaN without a KV capacity.
    """

    engine: str
    t_s: tuple[float, ...]
    busy: tuple[float, ...]
    kv_occupancy: tuple[float, ...]
    hit_rate: tuple[float, ...]

    @property
    def busy_fraction(self) -> float | None:
        """Mean of the busy samples (taken at a fixed interval); None if the engine reported
        no busy time (NaN samples)."""
        return mean_or_none(value for value in self.busy if not math.isnan(value))

    @property
    def mean_kv_occupancy(self) -> float | None:
        return mean_or_none(value for value in self.kv_occupancy if not math.isnan(value))

    @property
    def peak_kv_occupancy(self) -> float | None:
        return max((value for value in self.kv_occupancy if not math.isnan(value)), default=None)


def engine_timelines(
    timeseries: Iterable[TimeseriesSample], start_s: float
) -> tuple[EngineTimeline, ...]:
    """One timeline per engine, engines by name, samples by time."""
    by_engine: dict[str, list[TimeseriesSample]] = {}
    for sample in timeseries:
        by_engine.setdefault(sample.engine, []).append(sample)
    timelines = []
    for engine in sorted(by_engine):
        samples = sorted(by_engine[engine], key=lambda sample: sample.t_s)
        timelines.append(
            EngineTimeline(
                engine=engine,
                t_s=tuple(sample.t_s - start_s for sample in samples),
                busy=tuple(_nan_if_none(sample.busy) for sample in samples),
                kv_occupancy=tuple(_nan_if_none(sample.kv_occupancy) for sample in samples),
                hit_rate=tuple(_nan_if_none(_counters(sample).hit_rate) for sample in samples),
            )
        )
    return tuple(timelines)


@dataclass(frozen=True, slots=True)
class KVCacheStats:
    """Prefix-cache outcome in tokens: where looked-up prefix tokens were found, and recompute."""

    device_hit_tokens: float
    host_hit_tokens: float
    miss_tokens: float
    recomputed_tokens: float
    # of recomputed_tokens, those older weights had computed (lost to a weight update)
    recomputed_after_update_tokens: float = 0.0
    # KV traffic between the tiers (0 when the engine does not report it).
    h2d_bytes: float = 0.0
    d2h_bytes: float = 0.0
    offloads: float = 0.0
    prefetches: float = 0.0
    prefetches_in_time: float = 0.0

    @property
    def lookup_tokens(self) -> float:
        return self.device_hit_tokens + self.host_hit_tokens + self.miss_tokens

    @property
    def device_hit_rate(self) -> float | None:
        return _ratio(self.device_hit_tokens, self.lookup_tokens)

    @property
    def host_hit_rate(self) -> float | None:
        return _ratio(self.host_hit_tokens, self.lookup_tokens)

    @property
    def miss_rate(self) -> float | None:
        return _ratio(self.miss_tokens, self.lookup_tokens)

    @property
    def hit_rate(self) -> float | None:
        """Device plus host hits over tokens looked up."""
        return _ratio(self.device_hit_tokens + self.host_hit_tokens, self.lookup_tokens)


# Optional cumulative counters a sample may carry in `extra` (see rollout/observe/timeseries.py).
_TRAFFIC_KEYS = ("h2d_bytes", "d2h_bytes", "offloads", "prefetches", "prefetches_in_time")


def _counters(sample: TimeseriesSample) -> KVCacheStats:
    traffic = {key: float(sample.extra.get(f"kv_{key}", 0.0)) for key in _TRAFFIC_KEYS}
    after_update = float(sample.extra.get("recomputed_after_update_tokens", 0.0))
    return KVCacheStats(
        device_hit_tokens=sample.kv_device_hits,
        host_hit_tokens=sample.kv_host_hits,
        miss_tokens=sample.kv_misses,
        recomputed_tokens=sample.recomputed_tokens,
        recomputed_after_update_tokens=after_update,
        **traffic,
    )


def kv_cache_stats(timeseries: Iterable[TimeseriesSample]) -> KVCacheStats | None:
    """Summed last cumulative counters of every engine; None without samples."""
    last: dict[str, TimeseriesSample] = {}
    for sample in timeseries:
        seen = last.get(sample.engine)
        if seen is None or sample.t_s >= seen.t_s:
            last[sample.engine] = sample
    if not last:
        return None
    totals = [_counters(sample) for sample in last.values()]
    return KVCacheStats(
        device_hit_tokens=sum(t.device_hit_tokens for t in totals),
        host_hit_tokens=sum(t.host_hit_tokens for t in totals),
        miss_tokens=sum(t.miss_tokens for t in totals),
        recomputed_tokens=sum(t.recomputed_tokens for t in totals),
        recomputed_after_update_tokens=sum(t.recomputed_after_update_tokens for t in totals),
        **{key: sum(getattr(t, key) for t in totals) for key in _TRAFFIC_KEYS},
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value
