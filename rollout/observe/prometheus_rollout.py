"""Prometheus metrics of the engines, their KV cache manager and the env pool.

Read on the event loop (`update`, at most every `refresh_interval_s`, from the engines' own
`stats()` and the conductor's per-engine counters; `on_event`, from the step events) into a
snapshot; a scrape reads only the snapshot, never a live object from the server's thread.
Names follow Prometheus' rules: the `conductor_` prefix, base units in the name (`_seconds`,
`_bytes`, `_tokens`), `_total` on counters, and cumulative values exported *as counters*
(`rate(conductor_engine_generated_tokens_total[1m])` is tokens per second).

Engines (label `engine`):

* gauges `conductor_engine_running_requests`, `_queued_requests`, `_max_running_requests`;
  `conductor_engine_kv_used_tokens` and `_kv_capacity_tokens` (label `tier`: device, host);
* counters `conductor_engine_generated_tokens_total`, `_prompt_tokens_total`,
  `_cached_prompt_tokens_total`, `_busy_seconds_total` (engines that report busy time) and
  `_kv_transfer_bytes_total` (label `direction`: host_to_device, device_to_host).

KV cache manager (label `engine`): gauge `conductor_kv_pinned_sessions` (label `ref`: high,
low; engines that report pins); counters `conductor_kv_offloads_total`, `_prefetches_total`,
`_offloaded_tokens_total`, `_loaded_tokens_total`, `_recomputed_tokens_total` and, of those,
`_recomputed_after_update_tokens_total` (computed by older weights: a weight update lost them).

Env pool: gauges `conductor_env_pool_sandboxes` (label `state`: warm, leased, starting) and
`conductor_env_pool_live_sandboxes`; counters `conductor_env_pool_cold_starts_total`,
`_warm_hits_total`, `_replaced_dead_total`; histogram `conductor_env_acquire_seconds` (label
`warm`: true, false).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from harness.events import Phase, StepEvent
from rollout.engines.base import EngineStats
from rollout.observe.timeseries import EngineCounters

__all__ = ["ACQUIRE_BUCKETS_S", "PoolSnapshot", "RolloutMetrics", "StatsSource"]

ACQUIRE_BUCKETS_S: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
"""Default env-acquire histogram buckets (s): a warm hand-out takes milliseconds, a cold
container start seconds to a minute (docs/benchmarks.md, env pool)."""


class StatsSource(Protocol):
    """What the metrics read of an engine (every `rollout.engines.base.Engine` has it)."""

    def stats(self) -> EngineStats: ...


class PoolSnapshot(Protocol):
    """What the metrics read of the env pool (`harness.pool.PoolStats`)."""

    @property
    def live(self) -> int: ...
    @property
    def warm(self) -> int: ...
    @property
    def leased(self) -> int: ...
    @property
    def cold_starts(self) -> int: ...
    @property
    def warm_hits(self) -> int: ...
    @property
    def replaced_dead(self) -> int: ...


@dataclass(frozen=True, slots=True)
class _Sample:
    name: str
    kind: str  # "gauge" | "counter" (name without `_total`)
    help: str
    labels: tuple[tuple[str, str], ...]
    value: float


# (extra key of EngineStats, metric, kind, help, fixed labels)
_KV_EXTRA: tuple[tuple[str, str, str, str, tuple[tuple[str, str], ...]], ...] = (
    ("h2d_bytes", "conductor_engine_kv_transfer_bytes", "counter",
     "KV bytes copied between tiers", (("direction", "host_to_device"),)),
    ("d2h_bytes", "conductor_engine_kv_transfer_bytes", "counter",
     "KV bytes copied between tiers", (("direction", "device_to_host"),)),
    ("kv_pins_high", "conductor_kv_pinned_sessions", "gauge",
     "Open sessions whose KV the cache manager pins", (("ref", "high"),)),
    ("kv_pins_low", "conductor_kv_pinned_sessions", "gauge",
     "Open sessions whose KV the cache manager pins", (("ref", "low"),)),
    ("kv_offloads", "conductor_kv_offloads", "counter",
     "KV copies from device to host (proactive or by eviction)", ()),
    ("kv_offloaded_tokens", "conductor_kv_offloaded_tokens", "counter",
     "KV tokens copied from device to host", ()),
    ("kv_prefetches", "conductor_kv_prefetches", "counter",
     "KV loads from host started ahead of a session's return", ()),
    ("kv_loaded_tokens", "conductor_kv_loaded_tokens", "counter",
     "KV tokens copied from host to device (prefetches and load-backs)", ()),
    ("busy_s", "conductor_engine_busy_seconds", "counter",
     "Seconds the engine had work (engines that report it)", ()),
)  # fmt: skip


class RolloutMetrics:
    """A Prometheus collector of engine, KV-manager and env-pool metrics; see the module
    docstring. Register it with `registry` (done here); call `update` and `on_event` from the
    event loop."""

    def __init__(
        self, registry: CollectorRegistry, acquire_buckets_s: Sequence[float] = ACQUIRE_BUCKETS_S
    ) -> None:
        self._samples: tuple[_Sample, ...] = ()
        self._acquire = Histogram(
            "conductor_env_acquire_seconds",
            "From a sample asking for its env to the env handed out (seconds)",
            ["warm"],
            buckets=tuple(acquire_buckets_s),
            registry=registry,
        )
        registry.register(self)

    def on_event(self, event: StepEvent) -> None:
        """A step event: an `env_init` is one env acquire (failed acquires are not timed)."""
        if event.phase is Phase.ENV_INIT and not event.data.get("error"):
            warm = "true" if event.data.get("warm") else "false"
            self._acquire.labels(warm=warm).observe(max(0.0, event.end_s - event.start_s))

    def update(
        self,
        engines: Mapping[str, StatsSource],
        counters: Mapping[str, EngineCounters],
        pool: PoolSnapshot | None = None,
    ) -> None:
        """Take a snapshot of the engines, their counters and the pool (on the event loop)."""
        samples: list[_Sample] = []
        for name, engine in sorted(engines.items()):
            samples += _engine_samples(name, engine.stats(), counters.get(name))
        if pool is not None:
            samples += _pool_samples(pool)
        self._samples = tuple(samples)  # one assignment: a scrape sees one snapshot or the next

    def collect(self) -> Iterator[Metric]:
        """Called by the Prometheus client at each scrape (from its own thread)."""
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for sample in self._samples:
            family = families.get(sample.name)
            if family is None:
                labels = [key for key, _ in sample.labels]
                family = families[sample.name] = (
                    CounterMetricFamily(sample.name, sample.help, labels=labels)
                    if sample.kind == "counter"
                    else GaugeMetricFamily(sample.name, sample.help, labels=labels)
                )
            family.add_metric([value for _, value in sample.labels], sample.value)
        yield from families.values()

    def describe(self) -> Iterator[Metric]:
        return iter(())  # names vary with what the engines report: no fixed description


def _engine_samples(
    name: str, stats: EngineStats, counters: EngineCounters | None
) -> list[_Sample]:
    engine = (("engine", name),)
    extra = stats.extra
    samples = [
        _Sample("conductor_engine_running_requests", "gauge", "Requests running", engine,
                stats.running_requests),
        _Sample("conductor_engine_queued_requests", "gauge", "Requests queued", engine,
                stats.waiting_requests),
        _Sample("conductor_engine_max_running_requests", "gauge", "Generation slots", engine,
                stats.max_running_requests),
        _Sample("conductor_engine_kv_used_tokens", "gauge", "KV tokens in use, by tier",
                (*engine, ("tier", "device")), stats.kv_used_tokens),
        _Sample("conductor_engine_kv_capacity_tokens", "gauge", "KV token capacity, by tier",
                (*engine, ("tier", "device")), stats.kv_capacity_tokens),
    ]  # fmt: skip
    if "kv_host_capacity_tokens" in extra:
        samples += [
            _Sample("conductor_engine_kv_used_tokens", "gauge", "KV tokens in use, by tier",
                    (*engine, ("tier", "host")), extra.get("kv_host_used_tokens", 0.0)),
            _Sample("conductor_engine_kv_capacity_tokens", "gauge", "KV token capacity, by tier",
                    (*engine, ("tier", "host")), extra["kv_host_capacity_tokens"]),
        ]  # fmt: skip
    if counters is not None:
        samples += [
            _Sample("conductor_engine_generated_tokens", "counter",
                    "Tokens generated (rate() is tokens per second)", engine,
                    counters.generated_tokens),
            _Sample("conductor_engine_prompt_tokens", "counter", "Prompt tokens sent", engine,
                    counters.prompt_tokens),
            _Sample("conductor_engine_cached_prompt_tokens", "counter",
                    "Prompt tokens served from the prefix cache", engine,
                    counters.cached_tokens),
            _Sample("conductor_kv_recomputed_tokens", "counter",
                    "Prompt tokens computed again after their KV was lost", engine,
                    counters.recomputed_tokens),
            _Sample("conductor_kv_recomputed_after_update_tokens", "counter",
                    "Of the recomputed tokens, those older weights had computed (a weight "
                    "update lost them)", engine, counters.recomputed_after_update_tokens),
        ]  # fmt: skip
    for key, metric, kind, help_, labels in _KV_EXTRA:
        if key in extra:
            samples.append(_Sample(metric, kind, help_, (*engine, *labels), extra[key]))
    return samples


def _pool_samples(pool: PoolSnapshot) -> list[_Sample]:
    starting = max(0, pool.live - pool.warm - pool.leased)
    return [
        _Sample("conductor_env_pool_sandboxes", "gauge", "Sandboxes by state",
                (("state", "warm"),), pool.warm),
        _Sample("conductor_env_pool_sandboxes", "gauge", "Sandboxes by state",
                (("state", "leased"),), pool.leased),
        _Sample("conductor_env_pool_sandboxes", "gauge", "Sandboxes by state",
                (("state", "starting"),), starting),
        _Sample("conductor_env_pool_live_sandboxes", "gauge",
                "Live sandboxes (warm, starting and leased)", (), pool.live),
        _Sample("conductor_env_pool_cold_starts", "counter",
                "Acquires that had to start a sandbox", (), pool.cold_starts),
        _Sample("conductor_env_pool_warm_hits", "counter",
                "Acquires served by a warm sandbox", (), pool.warm_hits),
        _Sample("conductor_env_pool_replaced_dead", "counter",
                "Dead sandboxes replaced", (), pool.replaced_dead),
    ]  # fmt: skip
