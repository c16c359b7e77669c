"""Per-engine figures of a simulated run: busy fraction, KV occupancy and prefix-cache work.

A cluster run reports each engine on its own and the aggregate (busy = mean over engines), so a
skewed placement (one engine saturated, another idle) is visible instead of averaged away.
`KVSampleLog` reads the conductor's `timeseries.jsonl` records (one per engine per
`timeseries_interval_s`), so KV occupancy is *sampled*: the peak is the largest sample, not an
exact maximum. Pure: values in, values out (SIMULATED, virtual seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rollout.observe.timeseries import EngineCounters

__all__ = ["EngineFigures", "KVSampleLog", "engine_figures", "mean_busy_fraction"]


@dataclass(frozen=True, slots=True)
class EngineFigures:
    """One engine's share of a run (KV in tokens, busy as a fraction of the run)."""

    name: str
    busy_fraction: float | None
    kv_capacity_tokens: int
    kv_used_mean_tokens: float | None  # over the timeseries samples
    kv_used_peak_tokens: int | None  # the largest sample
    requests: int
    prompt_tokens: int
    cached_tokens: int
    recomputed_tokens: int

    @property
    def kv_peak_fraction(self) -> float | None:
        """Sampled peak KV over the engine's pool (never above 1 for a sound engine)."""
        if self.kv_used_peak_tokens is None or self.kv_capacity_tokens <= 0:
            return None
        return self.kv_used_peak_tokens / self.kv_capacity_tokens


class KVSampleLog:
    """Device-KV samples per engine, fed with `timeseries.jsonl` records (see module doc)."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._counts: dict[str, int] = {}
        self._peaks: dict[str, int] = {}

    def record(self, record: Mapping[str, Any]) -> None:
        """Add one record (keys `engine` and `kv_used_tokens`)."""
        name = str(record["engine"])
        used = int(record["kv_used_tokens"])
        self._sums[name] = self._sums.get(name, 0.0) + used
        self._counts[name] = self._counts.get(name, 0) + 1
        self._peaks[name] = max(self._peaks.get(name, used), used)

    def mean(self, name: str) -> float | None:
        count = self._counts.get(name, 0)
        return self._sums[name] / count if count else None

    def peak(self, name: str) -> int | None:
        return self._peaks.get(name)


def engine_figures(
    busy_s: Mapping[str, float],
    *,
    capacity_tokens: Mapping[str, int],
    elapsed_s: float,
    counters: Mapping[str, EngineCounters],
    kv: KVSampleLog,
) -> tuple[EngineFigures, ...]:
    """One `EngineFigures` per engine of `busy_s` (its busy seconds), in its order;
    `capacity_tokens` is each engine's device KV pool."""
    figures = []
    for name, busy in busy_s.items():
        count = counters.get(name, EngineCounters())
        figures.append(
            EngineFigures(
                name=name,
                busy_fraction=busy / elapsed_s if elapsed_s > 0 else None,
                kv_capacity_tokens=capacity_tokens[name],
                kv_used_mean_tokens=kv.mean(name),
                kv_used_peak_tokens=kv.peak(name),
                requests=count.requests,
                prompt_tokens=count.prompt_tokens,
                cached_tokens=count.cached_tokens,
                recomputed_tokens=count.recomputed_tokens,
            )
        )
    return tuple(figures)


def mean_busy_fraction(figures: Sequence[EngineFigures]) -> float | None:
    """The cluster's busy fraction: the mean over engines (each engine counts once)."""
    known = [figure.busy_fraction for figure in figures if figure.busy_fraction is not None]
    return sum(known) / len(known) if known else None
