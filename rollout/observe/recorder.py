"""`RunRecorder`: writes a run directory while the run goes (layout: `rollout.observe.run_dir`).

config.yaml at once; events.jsonl from the event bus; steps.jsonl per training batch;
timeseries.jsonl per engine sample; trajectories.jsonl (the groups each step consumed) and
unconsumed.jsonl (those no step consumed, at the end) through the sink's writer
(`trajectory_writers`); decisions.jsonl through `decision_log()` (its times are the
scheduler's own clock readings, so that replay feeds it the same events). Every other time in
the directory is seconds since the recorder's origin (the run start), whatever clock produced it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from harness.events import EventBus, StepEvent
from rollout.core.decision_log import DecisionLog
from rollout.errors import RunFileWriteError
from rollout.observe.run_dir import TRAJECTORIES_FILE, JsonlAppender, RunDir
from rollout.observe.run_records import StepRecord
from rollout.trajectories.batch import Batch
from rollout.trajectories.writers import ConsumedJsonlWriter, TrajectoryWriter

__all__ = ["RunRecorder", "step_record"]


def step_record(
    batch: Batch, origin_s: float, held_sample_s: Mapping[str, float] | None = None
) -> StepRecord:
    """The steps.jsonl line of a batch: complete at `t_s` (since the origin); `held_sample_s`:
    the step's sample-seconds waiting at the conductor, by reason (`rollout.core.held_samples`)."""
    return StepRecord(
        step=batch.step,
        t_s=batch.complete_s - origin_s,
        groups=batch.group_ids,
        policy_version=batch.policy_version,
        staleness=tuple(batch.staleness()),
        rewards_mean=batch.rewards_mean(),
        deadline=None if batch.deadline is None else batch.deadline.to_dict(),
        held_sample_s=None if held_sample_s is None else dict(held_sample_s),
    )


class RunRecorder:
    """See the module docstring. A context manager; `close()` flushes every log."""

    def __init__(
        self,
        root: Path,
        config: Mapping[str, Any],
        *,
        origin_s: float,
        record_events: bool = True,
        on_write_failure: Callable[[RunFileWriteError], None] | None = None,
        effective_config: str | None = None,
    ) -> None:
        self.run_dir = RunDir(root).create()
        self.write_failure: RunFileWriteError | None = None
        self._on_write_failure = on_write_failure
        self.origin_s = origin_s
        self.run_dir.config_path.write_text(
            yaml.safe_dump(_plain(config), sort_keys=False), encoding="utf-8"
        )
        if effective_config is not None:  # the plan's settings, each with its origin
            self.run_dir.effective_config_path.write_text(effective_config, encoding="utf-8")
        self._events = self.run_dir.open_log("events") if record_events else None
        self._steps = self.run_dir.open_log("steps", flush_each_record=True)
        self._timeseries = self.run_dir.open_log("timeseries")
        self._decisions: JsonlAppender | None = None
        self._trajectories: ConsumedJsonlWriter | None = None
        self._unsubscribe: list[Any] = []

    @property
    def root(self) -> Path:
        return self.run_dir.root

    def trajectory_writers(self, *, fsync: bool = False) -> list[TrajectoryWriter]:
        """The sink writer that fills trajectories.jsonl with the groups each step consumed
        (and unconsumed.jsonl, at the end, with those no step consumed): `step` tells it."""
        if self._trajectories is None:
            self._trajectories = ConsumedJsonlWriter(self.root / TRAJECTORIES_FILE, fsync=fsync)
        return [self._trajectories]

    def attach(self, bus: EventBus) -> None:
        """Record every step event published on `bus`."""
        if self._events is not None:
            self._unsubscribe.append(bus.subscribe(self.event))

    def event(self, event: StepEvent) -> None:
        """Record one event. A failed write (a full disk) is not raised into the emitter (the
        pool, mid-step): it is kept in `write_failure`, events stop, and `on_write_failure`
        is told, so that the run can stop cleanly."""
        if self._events is None or self.write_failure is not None:
            return
        try:
            self._events.append_event(event, origin_s=self.origin_s)
        except RunFileWriteError as exc:
            self._failed(exc)

    def _failed(self, exc: RunFileWriteError) -> None:
        """Keep the first write failure, stop recording, and tell the run to stop."""
        self.write_failure = exc
        if self._on_write_failure is not None:
            self._on_write_failure(exc)

    def step(self, batch: Batch, held_sample_s: Mapping[str, float] | None = None) -> StepRecord:
        """Record a training batch (and its groups in trajectories.jsonl); returns the record
        written. `held_sample_s`: see `step_record`."""
        record = step_record(batch, self.origin_s, held_sample_s)
        if self._trajectories is not None:
            self._trajectories.consumed(batch.group_ids, batch.step)
        self._steps.append(record.to_dict())
        return record

    def decision_log(self) -> DecisionLog:
        """A `DecisionLog` writing decisions.jsonl (buffered; flushed on `close`). A failed
        write is handled as an event's is (`event`): never raised into the scheduler or an
        agent loop that decided, it stops the run cleanly."""
        if self._decisions is None:
            self._decisions = self.run_dir.open_log("decisions")
        return DecisionLog(self._decision)

    def _decision(self, record: Mapping[str, Any]) -> None:
        if self._decisions is None or self.write_failure is not None:
            return
        try:
            self._decisions.append(record)
        except RunFileWriteError as exc:
            self._failed(exc)

    def timeseries(self, record: Mapping[str, Any]) -> None:
        self._timeseries.append({**record, "t_s": float(record["t_s"]) - self.origin_s})

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe.clear()
        for log in (self._events, self._steps, self._timeseries, self._decisions):
            if log is not None:
                log.close()

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _plain(value: Any) -> Any:
    """`value` with tuples as lists, so YAML stays plain."""
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
