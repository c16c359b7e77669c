"""`conductor bench rollout`: the simulated comparison over several seeds, with its spread.

A ratio on one seed says little: the same workload drawn with another seed can reverse it. This
runs every policy of a `SimulateConfig` on each seed (the workload, the run and every policy use
that seed), in virtual time, and reports per policy the mean and the min–max of T_next (mean
over a run's steps) and its other headline numbers; and per baseline the ratio of its T_next to
ours, seed by seed, with the ratio's min–max. A ratio *counts* only when its whole spread lies on
one side of 1 (`Ratio.decisive`). SIMULATED: every figure is virtual time on the cost model.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.config import load_config
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import resolve_policy_spec
from rollout.jobs.simulation import load_simulation, simulate_policy
from rollout.observe.run_summary import RunSummary
from rollout.sim.vtime import run_virtual

__all__ = ["Ratio", "SeedSpread", "Spread", "ratios_to_ours", "run_seeds", "spread"]


@dataclass(frozen=True, slots=True)
class Spread:
    """Mean, smallest and largest of one figure over seeds."""

    mean: float
    low: float
    high: float

    def text(self, unit: str = "", digits: int = 1) -> str:
        return f"{self.mean:,.{digits}f}{unit} [{self.low:,.{digits}f}–{self.high:,.{digits}f}]"


@dataclass(frozen=True, slots=True)
class Ratio:
    """baseline ÷ ours per seed (> 1: ours is faster), summarised."""

    spread: Spread

    @property
    def decisive(self) -> bool:
        """The whole spread is on one side of 1: the ratio counts."""
        return self.spread.low > 1.0 or self.spread.high < 1.0


@dataclass(frozen=True, slots=True)
class SeedSpread:
    """One policy over the seeds."""

    policy: str
    summaries: tuple[RunSummary, ...]

    def t_next(self) -> Spread:
        return spread([s.mean_t_next_s for s in self.summaries])

    def figure(self, pick: Callable[[RunSummary], float | None]) -> Spread | None:
        values = [pick(s) for s in self.summaries]
        known = [v for v in values if v is not None]
        return spread(known) if known else None


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("a spread needs at least one value")
    return Spread(statistics.fmean(values), min(values), max(values))


def ratios_to_ours(results: Sequence[SeedSpread]) -> Mapping[str, Ratio]:
    """Each baseline's T_next over ours (the first policy), seed by seed."""
    ours, *baselines = results
    return {
        result.policy: Ratio(
            spread(
                [
                    theirs.mean_t_next_s / mine.mean_t_next_s
                    for theirs, mine in zip(result.summaries, ours.summaries, strict=True)
                ]
            )
        )
        for result in baselines
    }


def run_seeds(
    config_path: Path,
    overrides: Sequence[str],
    seeds: Sequence[int],
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> list[SeedSpread]:
    """Every policy of the config at `config_path` on every seed (virtual time)."""
    if not seeds:
        raise ValueError("give at least one seed")
    per_policy: dict[str, list[RunSummary]] = {}
    for seed in seeds:
        settings = load_config(SimulateConfig, config_path, [*overrides, f"seed={seed}"])
        simulation = load_simulation(settings, config_path.resolve().parent)
        for spec in settings.policies:
            policy = resolve_policy_spec(spec)
            progress(f"seed {seed}: {policy.name}")
            run = run_virtual(simulate_policy(simulation, policy))
            per_policy.setdefault(policy.name, []).append(run.summary)
    return [SeedSpread(name, tuple(summaries)) for name, summaries in per_policy.items()]
