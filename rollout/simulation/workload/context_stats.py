"""Per-trajectory context statistics of a set of scripts: how long contexts start and end.

A workload's KV demand is set less by its mean context than by how much each trajectory grows
from its first turn to its last: the live-KV gate sees a sample at its current context, the pool
must hold it at its final one. `context_stats` summarises a set of `SampleScript`s the way the
growth and drift workloads are calibrated (`configs/workload/growth.yaml`, `drift.yaml`), and
`conductor workload show` prints it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rollout.simulation.workload.script import SampleScript

__all__ = ["ContextStats", "context_stats", "final_context_tokens", "quantile"]


@dataclass(frozen=True, slots=True)
class ContextStats:
    """Context figures over `samples` trajectories (tokens unless named otherwise)."""

    samples: int
    first_context_mean: float  # the context of the first generation: the prompt
    final_context_mean: float  # prompt + every output and observation: what the last turn holds
    final_context_p50: float
    final_context_p90: float
    growth_mean: float  # mean over trajectories of final ÷ first context (×)
    growth_p90: float
    turns_mean: float
    turns_p50: float
    turns_p90: float
    turns_max: int
    truncated_share: float  # trajectories the context limit cut short (fraction)

    @property
    def growth_of_means(self) -> float:
        """Mean final context over mean first context (×)."""
        return self.final_context_mean / max(self.first_context_mean, 1.0)


def final_context_tokens(script: SampleScript) -> int:
    """What the trajectory's last turn holds: prompt, every output and every observation."""
    return len(script.prompt_ids) + sum(
        t.output_tokens + t.observation_tokens for t in script.turns
    )


def quantile(values: Sequence[float], q: float) -> float:
    """The `q` quantile of `values` (linear interpolation between order statistics)."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q}")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def context_stats(scripts: Iterable[SampleScript]) -> ContextStats:
    """The statistics of `scripts` (at least one); see `ContextStats`."""
    chosen = list(scripts)
    if not chosen:
        raise ValueError("context statistics need at least one script")
    first = [float(len(script.prompt_ids)) for script in chosen]
    final = [float(final_context_tokens(script)) for script in chosen]
    growth = [end / max(start, 1.0) for start, end in zip(first, final, strict=True)]
    turns = [float(len(script.turns)) for script in chosen]
    return ContextStats(
        samples=len(chosen),
        first_context_mean=statistics.fmean(first),
        final_context_mean=statistics.fmean(final),
        final_context_p50=quantile(final, 0.5),
        final_context_p90=quantile(final, 0.9),
        growth_mean=statistics.fmean(growth),
        growth_p90=quantile(growth, 0.9),
        turns_mean=statistics.fmean(turns),
        turns_p50=quantile(turns, 0.5),
        turns_p90=quantile(turns, 0.9),
        turns_max=int(max(turns)),
        truncated_share=sum(script.truncated for script in chosen) / len(chosen),
    )
