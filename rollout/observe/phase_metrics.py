"""Per-sample phase metrics from step events: time per phase, turns, and per-sample timelines.

Pure: events (or trajectories) in, frozen summaries out. `E_rollout` (DESIGN.md §2) is
``Σ(T_gen + T_act) / Σ(T_pre_gen + T_gen + T_pre_act + T_act)`` over all samples; ``T_env_init``
is left out of the denominator because it overlaps the first generation.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.events import Phase, StepEvent
from rollout.core.types import Trajectory

__all__ = [
    "SAMPLE_PHASES",
    "PhaseSpan",
    "PhaseTotals",
    "SampleTimeline",
    "phase_totals",
    "phase_totals_from_trajectories",
    "sample_timelines",
]

SAMPLE_PHASES: tuple[Phase, ...] = (Phase.PRE_GEN, Phase.GEN, Phase.PRE_ACT, Phase.ACT)
"""The phases whose durations add up to a sample's time (the denominator of E_rollout)."""

_ABORT_PHASES = (Phase.PREEMPT, Phase.INTERRUPT)


@dataclass(frozen=True, slots=True)
class PhaseTotals:
    """Seconds per phase summed over samples, and how many samples and turns they cover."""

    pre_gen_s: float = 0.0
    gen_s: float = 0.0
    pre_act_s: float = 0.0
    act_s: float = 0.0
    env_init_s: float = 0.0
    samples: int = 0
    turns: int = 0

    def seconds(self, phase: Phase) -> float:
        """Summed seconds of `phase` (env_init or one of `SAMPLE_PHASES`)."""
        return float(getattr(self, f"{phase}_s"))

    @property
    def sample_time_s(self) -> float:
        """Σ(T_pre_gen + T_gen + T_pre_act + T_act)."""
        return self.pre_gen_s + self.gen_s + self.pre_act_s + self.act_s

    @property
    def e_rollout(self) -> float | None:
        """Useful share of sample time, Σ(T_gen + T_act) / sample time; None without time."""
        return _ratio(self.gen_s + self.act_s, self.sample_time_s)

    def share(self, phase: Phase) -> float | None:
        """`phase`'s share of the sample time; None without time."""
        return _ratio(self.seconds(phase), self.sample_time_s)

    def mean_per_turn_s(self, phase: Phase) -> float | None:
        """Mean seconds of `phase` per turn; None without turns."""
        return _ratio(self.seconds(phase), self.turns)


def phase_totals(events: Iterable[StepEvent]) -> PhaseTotals:
    """Sum the sample phases of `events` (events without a sample id are skipped).

    Turns are counted as `gen` events minus `preempt` and `interrupt` events: an aborted
    generation resumes within the same turn, which adds one `gen` event to that turn.
    """
    seconds: defaultdict[Phase, float] = defaultdict(float)
    counts: Counter[Phase] = Counter()
    samples: set[str] = set()
    for event in events:
        if not event.sample_id:
            continue
        counts[event.phase] += 1
        if event.phase in SAMPLE_PHASES or event.phase is Phase.ENV_INIT:
            seconds[event.phase] += event.duration_s
            samples.add(event.sample_id)
    aborts = sum(counts[phase] for phase in _ABORT_PHASES)
    return PhaseTotals(
        pre_gen_s=seconds[Phase.PRE_GEN],
        gen_s=seconds[Phase.GEN],
        pre_act_s=seconds[Phase.PRE_ACT],
        act_s=seconds[Phase.ACT],
        env_init_s=seconds[Phase.ENV_INIT],
        samples=len(samples),
        turns=max(counts[Phase.GEN] - aborts, 0),
    )


def phase_totals_from_trajectories(trajectories: Iterable[Trajectory]) -> PhaseTotals:
    """The same sums from the per-turn timings the trajectories carry (finished samples only)."""
    seconds: defaultdict[str, float] = defaultdict(float)
    samples = turns = 0
    for trajectory in trajectories:
        for phase, phase_s in trajectory.phase_totals_s().items():
            seconds[phase] += phase_s
        samples += 1
        turns += len(trajectory.turns)
    return PhaseTotals(
        pre_gen_s=seconds["pre_gen"],
        gen_s=seconds["gen"],
        pre_act_s=seconds["pre_act"],
        act_s=seconds["act"],
        env_init_s=seconds["env_init"],
        samples=samples,
        turns=turns,
    )


@dataclass(frozen=True, slots=True)
class PhaseSpan:
    """One step event of one sample, in seconds since run start."""

    phase: Phase
    start_s: float
    end_s: float


@dataclass(frozen=True, slots=True)
class SampleTimeline:
    """Every event of one sample, by start time (for the Gantt chart)."""

    sample_id: str
    group_id: str
    spans: tuple[PhaseSpan, ...]


def sample_timelines(
    events: Iterable[StepEvent], start_s: float, max_samples: int
) -> tuple[SampleTimeline, ...]:
    """The first `max_samples` samples by their first event, each with all its events."""
    by_sample: dict[str, list[StepEvent]] = {}
    for event in events:
        if event.sample_id:
            by_sample.setdefault(event.sample_id, []).append(event)
    first = sorted(by_sample, key=lambda sid: (min(e.start_s for e in by_sample[sid]), sid))
    timelines = []
    for sample_id in first[:max_samples]:
        sample_events = sorted(by_sample[sample_id], key=lambda e: (e.start_s, e.end_s))
        timelines.append(
            SampleTimeline(
                sample_id=sample_id,
                group_id=sample_events[0].group_id,
                spans=tuple(
                    PhaseSpan(e.phase, e.start_s - start_s, e.end_s - start_s)
                    for e in sample_events
                ),
            )
        )
    return tuple(timelines)


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None
