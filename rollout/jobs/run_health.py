"""A run's scheduler-health figures: fed by the scheduler stream, written beside the run's
records as `health.json` (the report folds it into metrics.json), served live on /metrics when
a port is given (`conductor run|simulate --metrics-port N`; simulate: virtual seconds).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rollout.engines.step_fill import StepFill
from rollout.errors import RolloutError
from rollout.observe.health import HealthTracker
from rollout.observe.prometheus import HealthExporter, PoolSource
from rollout.observe.run_dir import HEALTH_FILE
from rollout.runtime.conductor import Conductor
from rollout.trajectories.batch import Batch

__all__ = ["RunHealth"]


class RunHealth:
    """One run's `HealthTracker` (or `HealthExporter` with a port), wired to its conductor."""

    def __init__(
        self,
        *,
        starvation_bound_s: float | None,
        step_budget_s: float | None,
        metrics_port: int = 0,
    ) -> None:
        tracker = HealthTracker(starvation_bound_s=starvation_bound_s)
        self._exporter = HealthExporter(tracker) if metrics_port > 0 else None
        if self._exporter is not None:
            try:
                self._exporter.serve(metrics_port)
            except RuntimeError as exc:
                raise RolloutError(f"{exc}; choose a free port or 0 (off)") from exc
        self.tracker = tracker
        self._step_budget_s = step_budget_s
        self._conductor: Conductor | None = None
        self._unsubscribe: Callable[[], None] | None = None

    def attach(self, conductor: Conductor, pool: PoolSource | None = None) -> None:
        """Observe every scheduler event and the decisions it produced; with a port, export
        the conductor's engines, its step events and `pool` too."""
        sink = self._exporter if self._exporter is not None else self.tracker
        conductor.observe_scheduler(sink.observe)
        self._conductor = conductor
        if self._exporter is not None:
            engines = {name: conductor.engine(name) for name in conductor.engine_counters}
            self._exporter.watch(
                engines, conductor.engine_counters, pool, held=conductor.held_sample_s
            )
            self._unsubscribe = conductor.bus.subscribe(self._exporter.on_event)

    def on_batch(self, batch: Batch) -> None:
        """A trainer step: blocked time, deadline miss, consumed samples."""
        deadline_s = None
        if self._step_budget_s is not None:
            deadline_s = batch.requested_s + self._step_budget_s
        if self._conductor is not None:  # the live prefix hit rate, as of this step
            self._take_engine_tokens(self._conductor)
        sink = self._exporter if self._exporter is not None else self.tracker
        sink.batch(batch.requested_s, batch.ready_s, deadline_s)
        self.tracker.consumed(sum(len(group) for group in batch.groups), batch.ready_s)

    def finish(self, conductor: Conductor, run_dir: Path | None) -> dict[str, object]:
        """Take the engines' prompt-cache counters and write `health.json` (if a run dir)."""
        self._take_engine_tokens(conductor)
        summary = self.tracker.summary()
        if run_dir is not None:
            (run_dir / HEALTH_FILE).write_text(json.dumps(summary, indent=2) + "\n", "utf-8")
        return summary

    def _take_engine_tokens(self, conductor: Conductor) -> None:
        counters = conductor.engine_counters.values()
        self.tracker.engine_tokens(
            sum(c.prompt_tokens for c in counters), sum(c.cached_tokens for c in counters)
        )
        fills = [
            getattr(conductor.engine(name), "step_fill", None) for name in conductor.engine_counters
        ]
        merged = StepFill()
        for fill in fills:
            if isinstance(fill, StepFill):  # (an SGLang server does not report its forwards)
                merged.merge(fill)
        self.tracker.engine_steps(merged.summary())

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self._exporter is not None:
            self._exporter.close()
