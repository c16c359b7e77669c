"""Live Prometheus endpoint (`conductor run|simulate --metrics-port N`): scheduler health, and
the engines, KV cache manager and env pool (`rollout.observe.prometheus_rollout`).

`HealthExporter` wraps a `HealthTracker`: every `observe`/`batch` call also updates
`conductor_`-prefixed counters, gauges and histograms on its own registry, served on /metrics;
`watch` hands it the engines and the pool, read on the same (throttled) refresh. Cumulative
figures are counters (`conductor_samples_finished_total`: `rate()` is the arrival rate), not
rates exported as gauges. A dashboard for all of it: docs/grafana-dashboard.json.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from harness.events import StepEvent
from rollout.core.held_samples import HoldReason
from rollout.core.scheduler_events import Promote, StartGeneration
from rollout.observe.health import HealthTracker
from rollout.observe.prometheus_rollout import PoolSnapshot, RolloutMetrics, StatsSource
from rollout.observe.timeseries import EngineCounters

__all__ = ["HealthExporter", "PoolSource"]

REFRESH_INTERVAL_S = 1.0  # gauges from the summary at most this often between steps (s)


class PoolSource(Protocol):
    """The env pool, as the exporter reads it (`harness.fleet.LeasePool`)."""

    def stats(self) -> PoolSnapshot: ...


class HealthExporter:
    """A `HealthTracker` that mirrors itself on a Prometheus /metrics endpoint."""

    def __init__(self, tracker: HealthTracker | None = None) -> None:
        self.tracker = tracker or HealthTracker()
        self.registry = CollectorRegistry()
        r = self.registry
        self._starts = Counter(
            "conductor_generation_starts", "StartGeneration decisions", registry=r
        )
        self._promotions = Counter("conductor_promotions", "Promote decisions", registry=r)
        self._wait = Histogram(
            "conductor_wait_seconds",
            "Wait from ready to StartGeneration, by priority class (seconds)",
            ["priority_class"],
            registry=r,
        )
        self._steps = Counter("conductor_trainer_steps", "Trainer batches delivered", registry=r)
        self._misses = Counter(
            "conductor_deadline_misses", "Batches after their deadline", registry=r
        )
        self._blocked = Histogram(
            "conductor_trainer_blocked_seconds", "Trainer blocked per step (seconds)", registry=r
        )
        self._gauges = {
            key: Gauge(f"conductor_{key}", help_, registry=r)
            for key, help_ in (
                ("deadline_miss_rate", "Deadline misses / steps"),
                ("starved_requests", "Starved requests"),
                ("prefix_hit_rate", "Cached prompt tokens / prompt tokens"),
            )
        }
        self._finished = Counter(
            "conductor_samples_finished", "Samples finished (rate() is the arrival rate)",
            registry=r,
        )  # fmt: skip
        self._consumed = Counter(
            "conductor_samples_consumed", "Samples the trainer consumed", registry=r
        )
        self._held = Counter(
            "conductor_held_sample_seconds",
            "Sample-seconds ready samples waited at the conductor, by what held them "
            "(rate() is the mean number held)",
            ["reason"],
            registry=r,
        )
        for reason in HoldReason:  # every series exists from the start, at 0
            self._held.labels(reason=str(reason))
        self._held_counted: dict[str, float] = {}
        self._held_source: Callable[[], Mapping[str, float]] | None = None
        self._counted = {"finished": 0, "consumed": 0}
        self.rollout = RolloutMetrics(r)
        self._engines: Mapping[str, StatsSource] = {}
        self._counters: Mapping[str, EngineCounters] = {}
        self._pool: PoolSource | None = None
        self._fill = {
            key: Gauge(f"conductor_engine_step_fill_{key}", help_, registry=r)
            for key, help_ in (
                ("mean", "Tokens per engine step / its token budget, mean over steps"),
                ("p99", "Tokens per engine step / its token budget, p99 over steps"),
            )
        }
        self._server: Any = None
        self._refreshed_at = -REFRESH_INTERVAL_S

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Serve /metrics on `port`; raises `RuntimeError` with a clear message if it is taken."""
        try:
            self._server = start_http_server(port, addr=addr, registry=self.registry)
        except OSError as exc:
            raise RuntimeError(f"--metrics-port {port}: cannot listen ({exc})") from exc

    def close(self) -> None:
        """Stop the server, if any."""
        if isinstance(self._server, tuple):
            server, _thread = self._server
            server.shutdown()
            server.server_close()
        self._server = None

    def watch(
        self,
        engines: Mapping[str, StatsSource],
        counters: Mapping[str, EngineCounters],
        pool: PoolSource | None = None,
        held: Callable[[], Mapping[str, float]] | None = None,
    ) -> None:
        """Export the engines, their counters and the pool too, read on each refresh; `held`:
        the cumulative sample-seconds samples waited at the conductor, by reason
        (`Conductor.held_sample_s`)."""
        self._engines, self._counters, self._pool = engines, counters, pool
        self._held_source = held
        self._refresh()

    def on_event(self, event: StepEvent) -> None:
        """A step event (subscribe this to the run's event bus): env acquire latency."""
        self.rollout.on_event(event)

    def _refresh(self) -> None:
        self._refreshed_at = time.monotonic()
        tracker = self.tracker
        self._finished.inc(tracker.finished - self._counted["finished"])
        self._consumed.inc(tracker.consumed_samples - self._counted["consumed"])
        self._counted = {"finished": tracker.finished, "consumed": tracker.consumed_samples}
        pool = self._pool.stats() if self._pool is not None else None
        self.rollout.update(self._engines, self._counters, pool)
        if self._held_source is not None:
            for reason, seconds in self._held_source().items():
                self._held.labels(reason=reason).inc(
                    max(0.0, seconds - self._held_counted.get(reason, 0.0))
                )
                self._held_counted[reason] = seconds
        s = tracker.summary()
        for key, gauge in self._gauges.items():
            value = s[key]
            assert isinstance(value, int | float)
            gauge.set(value)
        fill = s.get("engine_step_fill")
        for key, gauge in self._fill.items():  # NaN: the engines report no steps (n/a)
            value = fill.get(f"{key}_fill") if isinstance(fill, dict) else None
            gauge.set(value if isinstance(value, int | float) else math.nan)

    def observe(self, event: object, decisions: Sequence[object] = ()) -> None:
        """Feed the tracker and update the live metrics."""
        before = {c: len(w) for c, w in self.tracker.waits.items()}
        self.tracker.observe(event, decisions)
        for cls, waits in self.tracker.waits.items():
            for wait in waits[before.get(cls, 0) :]:
                self._wait.labels(priority_class=cls.value).observe(wait)
        for d in decisions:
            if isinstance(d, StartGeneration):
                self._starts.inc()
            elif isinstance(d, Promote):
                self._promotions.inc()
        now = time.monotonic()
        if now - self._refreshed_at >= REFRESH_INTERVAL_S:  # the summary sorts every wait
            self._refresh()

    def batch(self, requested_s: float, ready_s: float, deadline_s: float | None = None) -> None:
        """One trainer step (see `HealthTracker.batch`)."""
        misses = self.tracker.deadline_misses
        self.tracker.batch(requested_s, ready_s, deadline_s)
        self._steps.inc()
        self._blocked.observe(max(0.0, ready_s - requested_s))
        if self.tracker.deadline_misses > misses:
            self._misses.inc()
        self._refresh()
