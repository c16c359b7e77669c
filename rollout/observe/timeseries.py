"""Engine time series: per-engine request counters and the periodic `timeseries.jsonl` records.

`EngineCounters` counts, from every `GenerateResult`, the prompt tokens sent, the ones the
engine served from its prefix cache, and the ones it had to *recompute*: tokens it had computed
for the same sample before (rounded down to whole cache pages) but no longer held, and of those
the ones computed under older weights (`recomputed_after_update_tokens`: a weight update flushed
them, or put them in another cache namespace; the rest were evicted or dropped). A request
aborted before its first output token counts no recompute (the engine may never have admitted
it; the sample's next request counts what is lost). These need
nothing engine-specific, so they work for SGLang as for the simulator.

`timeseries_record` is one line of the run-directory contract::

    {"t_s", "engine", "running", "waiting", "max_running", "busy", "kv_used_tokens",
     "kv_capacity_tokens", "kv_device_hits", "kv_host_hits", "kv_misses", "recomputed_tokens"}

with `busy` the fraction of the interval since the previous sample that the engine was busy
(from the engine's cumulative `busy_s`, also written as an extra key; null when the engine
reports no busy time, e.g. an SGLang server without `/metrics`) and cumulative token
counters for the rest. Extra keys: KV traffic between tiers, the host tier's used and capacity
tokens (`kv_host_used_tokens`, `kv_host_capacity_tokens`; 0 without a host tier), the
cumulative `generated_tokens` and `recomputed_after_update_tokens`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rollout.engines.base import (
    Engine,
    EngineStats,
    FinishReason,
    GenerateRequest,
    GenerateResult,
)

__all__ = ["EngineCounters", "TimeseriesSampler", "timeseries_record"]


@dataclass(slots=True)
class EngineCounters:
    """Cumulative request-level token counts of one engine."""

    requests: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    recomputed_tokens: int = 0
    recomputed_after_update_tokens: int = 0  # of recomputed_tokens: computed by older weights
    generated_tokens: int = 0

    def count(
        self,
        request: GenerateRequest,
        result: GenerateResult,
        *,
        computed_prefix_tokens: int,
        page_tokens: int,
        prefix_from_older_weights: bool = False,
    ) -> None:
        """Add one result; `computed_prefix_tokens` were computed for this sample before (by
        weights older than the request's when `prefix_from_older_weights`)."""
        prompt = len(request.input_ids)
        self.requests += 1
        self.prompt_tokens += prompt
        self.cached_tokens += result.cached_tokens
        self.generated_tokens += len(result.output_ids)
        if result.finish_reason is FinishReason.ABORT and not result.output_ids:
            # Aborted before it produced anything (often before the engine admitted it, when it
            # reports no cached tokens): it computed nothing again, and the sample's next
            # request counts whatever it must recompute.
            return
        # The engine can match at most prompt - 1 tokens, in whole pages.
        cacheable = min(computed_prefix_tokens, prompt - 1)
        cacheable -= cacheable % page_tokens
        recomputed = max(0, cacheable - result.cached_tokens)
        self.recomputed_tokens += recomputed
        if prefix_from_older_weights:
            self.recomputed_after_update_tokens += recomputed

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from the prefix cache."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


def timeseries_record(
    t_s: float, engine: str, stats: EngineStats, counters: EngineCounters, busy: float | None
) -> dict[str, Any]:
    """One `timeseries.jsonl` line (see the module docstring); `t_s` from the run's start."""
    extra = stats.extra
    host_hits = int(extra.get("host_hit_tokens", 0))
    return {
        "t_s": t_s,
        "engine": engine,
        "running": stats.running_requests,
        "waiting": stats.waiting_requests,
        "max_running": stats.max_running_requests,
        "busy": busy,
        "kv_used_tokens": stats.kv_used_tokens,
        "kv_capacity_tokens": stats.kv_capacity_tokens,
        "kv_device_hits": max(0, counters.cached_tokens - host_hits),
        "kv_host_hits": host_hits,
        "kv_misses": counters.prompt_tokens - counters.cached_tokens,
        "recomputed_tokens": counters.recomputed_tokens,
        "recomputed_after_update_tokens": counters.recomputed_after_update_tokens,
        "busy_s": float(extra.get("busy_s", 0.0)),
        # KV traffic between tiers, cumulative (read by rollout.observe.engine_metrics).
        "kv_h2d_bytes": float(extra.get("h2d_bytes", 0.0)),
        "kv_d2h_bytes": float(extra.get("d2h_bytes", 0.0)),
        "kv_offloads": float(extra.get("kv_offloads", 0.0)),
        "kv_prefetches": float(extra.get("kv_prefetches", 0.0)),
        "kv_prefetches_in_time": float(extra.get("kv_prefetches_in_time", 0.0)),
        # Host KV tier (0 for an engine without one) and decode output, for the bench figures.
        "kv_host_used_tokens": float(extra.get("kv_host_used_tokens", 0.0)),
        "kv_host_capacity_tokens": float(extra.get("kv_host_capacity_tokens", 0.0)),
        "generated_tokens": counters.generated_tokens,
    }


class TimeseriesSampler:
    """Turns engine stats into records, remembering each engine's last busy reading."""

    def __init__(
        self,
        engines: Mapping[str, Engine],
        counters: Mapping[str, EngineCounters],
        start_s: float,
    ) -> None:
        self._engines = engines
        self._counters = counters
        self._last = {  # engine -> (t_s, busy seconds credited so far) at the previous sample
            name: (start_s, float(engine.stats().extra.get("busy_s", 0.0)))
            for name, engine in engines.items()
        }

    def sample(self, t_s: float) -> list[dict[str, Any]]:
        """One record per engine at `t_s` (on the clock `start_s` was read from)."""
        records = []
        for name, engine in self._engines.items():
            stats = engine.stats()
            if "busy_s" not in stats.extra:  # the engine cannot tell (no /metrics)
                records.append(timeseries_record(t_s, name, stats, self._counters[name], None))
                continue
            busy_s = float(stats.extra["busy_s"])
            last_t, credited_s = self._last.get(name, (t_s, busy_s))
            interval = t_s - last_t
            # An engine books a forward's whole duration when it starts, so busy seconds can run
            # ahead of the clock: an interval is credited at most its own length and the rest
            # carries to the next ones (clamping it away made the samples' mean read low).
            credit_s = min(max(0.0, busy_s - credited_s), interval) if interval > 0 else 0.0
            busy = credit_s / interval if interval > 0 else 0.0
            self._last[name] = (t_s, credited_s + credit_s)
            records.append(timeseries_record(t_s, name, stats, self._counters[name], busy))
        return records
