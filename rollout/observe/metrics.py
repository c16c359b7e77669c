"""Run metrics: one `RunMetrics` from a run's steps, step events, engine samples and trajectories.

Pure: records in, frozen summaries out (no files, no clock). All times in the results are
seconds since the run start (the earliest event or engine sample; 0 when there are neither).
``T_next`` of step k (DESIGN.md §2) runs from the completion of step k-1's batch (the run start
for step 1) until step k's B groups were complete: the objective, lower is better. Phase
metrics (E_rollout) come from `phase_metrics`, engine metrics (busy fraction, KV) from
`engine_metrics`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.events import Phase, StepEvent
from rollout.core.held_samples import HoldReason
from rollout.core.types import Trajectory
from rollout.errors import RolloutError
from rollout.observe.engine_metrics import (
    EngineTimeline,
    KVCacheStats,
    engine_timelines,
    kv_cache_stats,
)
from rollout.observe.phase_metrics import (
    SAMPLE_PHASES,
    PhaseTotals,
    phase_totals,
    phase_totals_from_trajectories,
)
from rollout.observe.run_records import StepRecord, TimeseriesSample
from rollout.observe.stats import mean_or_none

__all__ = [
    "MetricsError",
    "RunMetrics",
    "StepTiming",
    "SummaryRow",
    "compute_run_metrics",
    "format_value",
    "run_start_s",
    "staleness_histogram",
    "step_timings",
]


class MetricsError(RolloutError, ValueError):
    """The records cannot be aggregated: none, or they contradict each other."""


# -- training steps ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepTiming:
    """One training step: its batch was complete at `completed_s`, `t_next_s` after the last."""

    step: int
    completed_s: float
    t_next_s: float
    groups: int
    policy_version: int
    rewards_mean: float | None
    max_staleness: int


def run_start_s(
    events: Sequence[StepEvent] = (), timeseries: Sequence[TimeseriesSample] = ()
) -> float:
    """The earliest event start or engine sample; 0.0 (virtual time starts at 0) without any."""
    times = [event.start_s for event in events] + [sample.t_s for sample in timeseries]
    return min(times) if times else 0.0


def step_timings(steps: Sequence[StepRecord], start_s: float) -> tuple[StepTiming, ...]:
    """T_next of every step, in step order; `start_s` is the run start on the steps' clock."""
    if not steps:
        raise MetricsError(
            "no training step was recorded, so T_next is undefined; the conductor writes "
            "steps.jsonl when it hands a batch to the trainer"
        )
    ordered = sorted(steps, key=lambda record: record.step)
    timings = []
    previous_s, previous_label = start_s, "the run start"
    for index, record in enumerate(ordered):
        if index and record.step == ordered[index - 1].step:
            raise MetricsError(f"step {record.step} is recorded twice; keep one line per step")
        if record.t_s < previous_s:
            raise MetricsError(
                f"step {record.step} completed at t={record.t_s:g} s, before {previous_label} "
                f"at t={previous_s:g} s; steps, events and engine samples must use one clock "
                "and batches complete in step order"
            )
        timings.append(
            StepTiming(
                step=record.step,
                completed_s=record.t_s - start_s,
                t_next_s=record.t_s - previous_s,
                groups=len(record.groups),
                policy_version=record.policy_version,
                rewards_mean=record.rewards_mean,
                max_staleness=max(record.staleness, default=0),
            )
        )
        previous_s, previous_label = record.t_s, f"step {record.step}"
    return tuple(timings)


def staleness_histogram(steps: Iterable[StepRecord]) -> tuple[tuple[int, int], ...]:
    """(staleness in steps, groups consumed at that staleness), by increasing staleness."""
    counts = Counter(value for record in steps for value in record.staleness)
    return tuple(sorted(counts.items()))


def _phase_totals_per_step(
    steps: Sequence[StepRecord], events: Sequence[StepEvent], trajectories: Sequence[Trajectory]
) -> tuple[PhaseTotals, ...]:
    """Phase totals of the samples of each step's groups (events if any, else trajectories)."""
    ordered = sorted(steps, key=lambda record: record.step)
    if events:
        by_group: dict[str, list[StepEvent]] = {}
        for event in events:
            by_group.setdefault(event.group_id, []).append(event)
        return tuple(
            phase_totals(e for group in record.groups for e in by_group.get(group, ()))
            for record in ordered
        )
    by_group_t: dict[str, list[Trajectory]] = {}
    for trajectory in trajectories:
        by_group_t.setdefault(trajectory.group_id, []).append(trajectory)
    return tuple(
        phase_totals_from_trajectories(
            t for group in record.groups for t in by_group_t.get(group, ())
        )
        for record in ordered
    )


# -- the run ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """One line of a summary table. `key` is stable (JSON, comparisons); None = not measured."""

    key: str
    name: str
    value: float | None
    unit: str

    @property
    def text(self) -> str:
        return format_value(self.value, self.unit)


def format_value(value: float | None, unit: str) -> str:
    """Human text for a summary value: fractions as percentages, counts with separators."""
    if value is None or math.isnan(value):
        return "n/a"
    if unit == "fraction":
        return f"{value:.1%}"
    if unit in ("count", "tokens"):
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:,.2f} s"
    if unit == "bytes":
        return f"{value / 1e9:,.2f} GB"
    return f"{value:.3g} {unit}".rstrip()


@dataclass(frozen=True, slots=True)
class RunMetrics:
    """Everything the report shows about one run; see the module docstring for definitions."""

    run_start_s: float
    steps: tuple[StepTiming, ...]
    phases: PhaseTotals
    step_phases: tuple[PhaseTotals, ...]
    engines: tuple[EngineTimeline, ...]
    kv: KVCacheStats | None
    preemptions: int
    interruptions: int
    infra_errors: int
    infra_error_causes: tuple[tuple[str, int], ...]
    lost_samples: int
    staleness_histogram: tuple[tuple[int, int], ...]
    reward_mean: float | None
    inputs: tuple[str, ...]
    # sample-seconds ready samples waited at the conductor, by reason (None: not recorded)
    held_sample_s: tuple[tuple[str, float], ...] | None = None

    @property
    def mean_t_next_s(self) -> float:
        return sum(step.t_next_s for step in self.steps) / len(self.steps)

    @property
    def max_t_next_s(self) -> float:
        return max(step.t_next_s for step in self.steps)

    @property
    def last_step_s(self) -> float:
        """When the last batch was complete (seconds since run start)."""
        return self.steps[-1].completed_s

    @property
    def e_rollout(self) -> float | None:
        return self.phases.e_rollout

    @property
    def busy_fraction(self) -> float | None:
        """Mean busy fraction over engines (each engine weighs the same)."""
        return mean_or_none(
            fraction for engine in self.engines if (fraction := engine.busy_fraction) is not None
        )

    @property
    def mean_kv_occupancy(self) -> float | None:
        return mean_or_none(
            value for engine in self.engines if (value := engine.mean_kv_occupancy) is not None
        )

    @property
    def peak_kv_occupancy(self) -> float | None:
        return max(
            (value for engine in self.engines if (value := engine.peak_kv_occupancy) is not None),
            default=None,
        )

    @property
    def groups_consumed(self) -> int:
        return sum(step.groups for step in self.steps)

    @property
    def mean_staleness(self) -> float | None:
        total = sum(count for _, count in self.staleness_histogram)
        return _ratio(sum(value * count for value, count in self.staleness_histogram), total)

    @property
    def max_staleness(self) -> int | None:
        return max((value for value, _ in self.staleness_histogram), default=None)

    @property
    def mean_held_samples(self) -> float | None:
        """Samples ready to generate that waited at the conductor, on average up to the last
        batch (None: the run did not record it)."""
        if self.held_sample_s is None:
            return None
        return _ratio(sum(seconds for _, seconds in self.held_sample_s), self.last_step_s)

    def held_share(self, reason: HoldReason) -> float | None:
        """The part of the held sample-seconds that `reason` held."""
        if self.held_sample_s is None:
            return None
        held = dict(self.held_sample_s)
        return _ratio(held.get(str(reason), 0.0), sum(held.values()))

    def summary_rows(self) -> tuple[SummaryRow, ...]:
        """The headline numbers, in report order."""
        kv = self.kv
        phases = self.phases
        rows = [
            SummaryRow("steps", "training steps", len(self.steps), "count"),
            SummaryRow("mean_t_next_s", "mean T_next", self.mean_t_next_s, "s"),
            SummaryRow("max_t_next_s", "max T_next", self.max_t_next_s, "s"),
            SummaryRow("last_step_s", "time to the last batch", self.last_step_s, "s"),
            SummaryRow("e_rollout", "E_rollout", self.e_rollout, "fraction"),
            SummaryRow("busy_fraction", "engine busy fraction", self.busy_fraction, "fraction"),
        ]
        if len(self.engines) > 1:
            rows.extend(
                SummaryRow(
                    f"busy_fraction[{engine.engine}]",
                    f"busy fraction of {engine.engine}",
                    engine.busy_fraction,
                    "fraction",
                )
                for engine in self.engines
            )
        rows += [
            SummaryRow(
                "mean_kv_occupancy", "mean KV occupancy", self.mean_kv_occupancy, "fraction"
            ),
            SummaryRow(
                "peak_kv_occupancy", "peak KV occupancy", self.peak_kv_occupancy, "fraction"
            ),
            SummaryRow(
                "kv_device_hit_rate", "KV device hit rate", _get(kv, "device_hit_rate"), "fraction"
            ),
            SummaryRow(
                "kv_host_hit_rate", "KV host hit rate", _get(kv, "host_hit_rate"), "fraction"
            ),
            SummaryRow("kv_miss_rate", "KV miss rate", _get(kv, "miss_rate"), "fraction"),
            SummaryRow(
                "recomputed_tokens", "recomputed tokens", _get(kv, "recomputed_tokens"), "tokens"
            ),
            SummaryRow(
                "recomputed_after_update_tokens",
                "of which computed by older weights",
                _get(kv, "recomputed_after_update_tokens"),
                "tokens",
            ),
            SummaryRow("kv_h2d_bytes", "KV moved host→device", _get(kv, "h2d_bytes"), "bytes"),
            SummaryRow("kv_d2h_bytes", "KV moved device→host", _get(kv, "d2h_bytes"), "bytes"),
            SummaryRow("kv_offloads", "KV offloads", _get(kv, "offloads"), "count"),
            SummaryRow("kv_prefetches", "KV prefetches", _get(kv, "prefetches"), "count"),
            SummaryRow(
                "kv_prefetches_in_time",
                "KV prefetches in time",
                _get(kv, "prefetches_in_time"),
                "count",
            ),
        ]
        for phase in (Phase.PRE_GEN, Phase.PRE_ACT):
            rows += [
                SummaryRow(f"{phase}_total_s", f"{phase} total", phases.seconds(phase), "s"),
                SummaryRow(
                    f"{phase}_mean_per_turn_s",
                    f"{phase} per turn",
                    phases.mean_per_turn_s(phase),
                    "s",
                ),
                SummaryRow(
                    f"{phase}_share",
                    f"{phase} share of sample time",
                    phases.share(phase),
                    "fraction",
                ),
            ]
        rows += [
            SummaryRow("env_time_share", "env (act) share", phases.share(Phase.ACT), "fraction"),
            SummaryRow(
                "mean_held_samples",
                "ready samples held at the conductor (mean)",
                self.mean_held_samples,
                "samples",
            ),
            *(
                SummaryRow(
                    f"held_share[{reason}]",
                    f"of which held for {_HOLD_LABELS[reason]}",
                    self.held_share(reason),
                    "fraction",
                )
                for reason in HoldReason
            ),
            SummaryRow("preemptions", "preemptions", self.preemptions, "count"),
            SummaryRow("interruptions", "interruptions", self.interruptions, "count"),
            SummaryRow("mean_staleness", "mean staleness", self.mean_staleness, "steps"),
            SummaryRow("max_staleness", "max staleness", self.max_staleness, "steps"),
            SummaryRow("reward_mean", "mean reward", self.reward_mean, ""),
            SummaryRow(
                "infra_errors", "infra errors (failed attempts)", self.infra_errors, "count"
            ),
            SummaryRow("lost_samples", "samples lost to infra errors", self.lost_samples, "count"),
            SummaryRow("samples", "samples seen", phases.samples, "count"),
            SummaryRow("turns", "turns", phases.turns, "count"),
        ]
        return tuple(rows)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict for metrics.json (summary, steps, phases, staleness, engines)."""
        return {
            "inputs": list(self.inputs),
            "run_start_s": self.run_start_s,
            "summary": {row.key: _json_number(row.value) for row in self.summary_rows()},
            "units": {row.key: row.unit for row in self.summary_rows()},
            "steps": [
                {
                    "step": step.step,
                    "completed_s": step.completed_s,
                    "t_next_s": step.t_next_s,
                    "groups": step.groups,
                    "policy_version": step.policy_version,
                    "rewards_mean": _json_number(step.rewards_mean),
                    "max_staleness": step.max_staleness,
                    "phases_s": _phase_dict(phases),
                }
                for step, phases in zip(self.steps, self.step_phases, strict=True)
            ],
            "phases_s": _phase_dict(self.phases),
            "infra_error_causes": dict(self.infra_error_causes),
            "staleness_histogram": {str(value): count for value, count in self.staleness_histogram},
            "engines": [
                {
                    "engine": engine.engine,
                    "samples": len(engine.t_s),
                    "busy_fraction": _json_number(engine.busy_fraction),
                    "mean_kv_occupancy": _json_number(engine.mean_kv_occupancy),
                    "peak_kv_occupancy": _json_number(engine.peak_kv_occupancy),
                }
                for engine in self.engines
            ],
        }


def compute_run_metrics(
    steps: Sequence[StepRecord],
    events: Sequence[StepEvent] = (),
    timeseries: Sequence[TimeseriesSample] = (),
    trajectories: Sequence[Trajectory] = (),
    *,
    start_s: float | None = None,
) -> RunMetrics:
    """Aggregate one run. Only `steps` is required; the rest may be empty.

    Phase times and counts come from `events` when there are any, else from `trajectories`
    (finished samples only). The mean reward comes from the trainable trajectories, else from
    the `reward` events, else from the steps' batch means weighted by group count. `start_s`
    overrides the run start (default: `run_start_s(events, timeseries)`).
    """
    start = run_start_s(events, timeseries) if start_s is None else start_s
    timings = step_timings(steps, start)
    inputs = tuple(
        name
        for name, records in (
            ("steps", steps),
            ("events", events),
            ("timeseries", timeseries),
            ("trajectories", trajectories),
        )
        if records
    )
    if events:
        phases = phase_totals(events)
        kinds = Counter(event.phase for event in events if event.sample_id)
        preemptions, interruptions = kinds[Phase.PREEMPT], kinds[Phase.INTERRUPT]
        infra_errors = kinds[Phase.INFRA_ERROR]
        causes = Counter(
            str(event.data.get("cause", "unknown"))
            for event in events
            if event.phase is Phase.INFRA_ERROR and event.sample_id
        )
    else:
        phases = phase_totals_from_trajectories(trajectories)
        preemptions = sum(t.num_preemptions for t in trajectories)
        interruptions = sum(t.num_interruptions for t in trajectories)
        infra_errors = sum(1 for t in trajectories if t.infra_error is not None)
        causes = Counter(
            t.infra_error.split(":", 1)[0] for t in trajectories if t.infra_error is not None
        )
    return RunMetrics(
        run_start_s=start,
        steps=timings,
        phases=phases,
        step_phases=_phase_totals_per_step(steps, events, trajectories),
        engines=engine_timelines(timeseries, start),
        kv=kv_cache_stats(timeseries),
        preemptions=preemptions,
        interruptions=interruptions,
        infra_errors=infra_errors,
        infra_error_causes=tuple(sorted(causes.items())),
        lost_samples=sum(1 for t in trajectories if t.infra_error is not None),
        staleness_histogram=staleness_histogram(steps),
        reward_mean=_reward_mean(steps, events, trajectories),
        inputs=inputs,
        held_sample_s=_held_sample_s(steps),
    )


_HOLD_LABELS = {
    HoldReason.SLOT: "a generation slot",
    HoldReason.KV_ROOM: "device KV room (KV residency)",
    HoldReason.LIVE_SET: "the live set (device and host KV)",
    HoldReason.LOW_PRIORITY_HEADROOM: "the low-priority KV watermark",
}


def _held_sample_s(steps: Sequence[StepRecord]) -> tuple[tuple[str, float], ...] | None:
    """The steps' held sample-seconds summed by reason (None when no step recorded them)."""
    recorded = [step.held_sample_s for step in steps if step.held_sample_s is not None]
    if not recorded:
        return None
    total: Counter[str] = Counter()
    for held in recorded:
        total.update(held)
    return tuple(sorted(total.items()))


def _reward_mean(
    steps: Sequence[StepRecord], events: Sequence[StepEvent], trajectories: Sequence[Trajectory]
) -> float | None:
    rewards = [t.reward for t in trajectories if t.is_trainable and t.reward is not None]
    if not rewards:
        rewards = [
            float(event.data["reward"])
            for event in events
            if event.phase is Phase.REWARD
            and event.data.get("reward") is not None
            and not event.data.get("infra_error")
        ]
    if rewards:
        return sum(rewards) / len(rewards)
    weighted = [
        (record.rewards_mean, len(record.groups))
        for record in steps
        if record.rewards_mean is not None and math.isfinite(record.rewards_mean)
    ]
    return _ratio(sum(mean * n for mean, n in weighted), sum(n for _, n in weighted))


# -- helpers ----------------------------------------------------------------------------------


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _get(kv: KVCacheStats | None, name: str) -> float | None:
    return None if kv is None else getattr(kv, name)


def _json_number(value: float | None) -> float | None:
    """JSON has no NaN: undefined values are written as null."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def _phase_dict(phases: PhaseTotals) -> Mapping[str, float | int]:
    return {
        "env_init": phases.env_init_s,
        **{str(phase): phases.seconds(phase) for phase in SAMPLE_PHASES},
        "samples": phases.samples,
        "turns": phases.turns,
    }
