"""Live Prometheus endpoint for scheduler health (`conductor run|simulate --metrics-port N`).

`HealthExporter` wraps a `HealthTracker`: every `observe`/`batch` call also updates
`conductor_`-prefixed counters, gauges and histograms on its own registry, served on /metrics.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from rollout.core.scheduler_events import Promote, StartGeneration
from rollout.observe.health import HealthTracker

__all__ = ["HealthExporter"]

REFRESH_INTERVAL_S = 1.0  # gauges from the summary at most this often between steps (s)


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
                ("arrival_rate_per_s", "Samples finished per second"),
                ("consumption_rate_per_s", "Samples consumed per second"),
            )
        }
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

    def _refresh(self) -> None:
        self._refreshed_at = time.monotonic()
        s = self.tracker.summary()
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
