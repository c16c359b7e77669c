"""Drift: trajectories lengthen with the training step of their group (index // B), linearly up
to `over_steps`; without drift (or with factors of 1) every draw is what it always was."""

from __future__ import annotations

import statistics

import pytest

from foundation.config import load_config
from foundation.errors import ConfigError
from rollout.jobs.simulation_plan import plan_simulation
from rollout.simulation.workload import SyntheticWorkload, WorkloadConfig
from rollout.simulation.workload.config import DriftConfig
from tests.paths import CONFIGS

SWE = CONFIGS / "workload" / "swe_like.yaml"
DRIFT = CONFIGS / "workload" / "drift.yaml"
LOOSE = ["corpus_tokens=65536", "max_context_tokens=1000000", "turns.max=1000"]


def swe(*overrides: str) -> WorkloadConfig:
    return load_config(WorkloadConfig, SWE, [*LOOSE, *overrides])


def test_the_drift_factor_rises_linearly_to_its_final_value_then_stays() -> None:
    drift = DriftConfig(over_steps=20, turns=2.5, output_tokens=1.5)
    assert drift.factors(0) == (1.0, 1.0)
    assert drift.factors(10) == pytest.approx((1.75, 1.25))
    assert drift.factors(20) == pytest.approx((2.5, 1.5)) == drift.factors(400)


def test_factors_of_one_draw_exactly_the_scripts_of_a_workload_without_drift() -> None:
    plain = SyntheticWorkload(swe(), 3)
    flat = SyntheticWorkload(swe("drift={over_steps: 5, turns: 1.0, output_tokens: 1.0}"), 3)
    assert [plain.group(g) for g in range(12)] == [flat.group(g) for g in range(12)]


def test_a_group_at_step_zero_is_not_lengthened() -> None:
    config = swe("drift={over_steps: 4, turns: 3.0}", "groups_per_step=2")
    plain, drifting = SyntheticWorkload(swe(), 0), SyntheticWorkload(config, 0)
    assert [plain.group(g) for g in (0, 1)] == [drifting.group(g) for g in (0, 1)]


def test_a_groups_turns_grow_by_the_factor_of_its_step_index_over_groups_per_step() -> None:
    config = swe("drift={over_steps: 4, turns: 3.0}", "groups_per_step=2")
    plain, drifting = SyntheticWorkload(swe(), 0), SyntheticWorkload(config, 0)
    for group, factor in ((2, 1.5), (3, 1.5), (4, 2.0), (8, 3.0), (13, 3.0)):  # steps 1, 2, 4, 6
        for before, after in zip(plain.group(group), drifting.group(group), strict=True):
            assert abs(len(after.turns) - factor * len(before.turns)) <= factor, group
            assert after.prompt_ids == before.prompt_ids


def test_output_drift_lengthens_each_turn_and_keeps_the_turn_count() -> None:
    config = swe("drift={over_steps: 1, output_tokens: 2.0}")
    plain, drifting = SyntheticWorkload(swe(), 0), SyntheticWorkload(config, 0)
    ratios = []
    for before, after in zip(plain.group(5), drifting.group(5), strict=True):
        assert len(after.turns) == len(before.turns)
        ratios += [
            b.output_tokens / a.output_tokens
            for a, b in zip(before.turns, after.turns, strict=True)
        ]
    assert statistics.median(ratios) == pytest.approx(2.0, rel=0.05)


def test_drifted_lengths_stay_within_their_clip_bounds() -> None:
    config = load_config(
        WorkloadConfig, SWE, ["corpus_tokens=65536", "drift={over_steps: 1, turns: 50.0}"]
    )
    workload = SyntheticWorkload(config, 0)
    assert max(len(s.turns) for g in range(2, 6) for s in workload.group(g)) <= config.turns.max


def test_drift_and_a_replayed_trace_together_are_an_error() -> None:
    with pytest.raises(ConfigError, match="drift"):
        load_config(WorkloadConfig, SWE, ["trace=x.jsonl", "drift={over_steps: 3, turns: 2}"])


def test_the_shipped_drift_workload_lengthens_trajectories_two_to_three_fold_over_20_steps() -> (
    None
):
    config = load_config(WorkloadConfig, DRIFT, ["corpus_tokens=65536", "groups_per_step=4"])
    workload = SyntheticWorkload(config, 0)

    def mean_turns(first_step: int, last_step: int) -> float:
        groups = range(4 * first_step, 4 * (last_step + 1))
        return statistics.fmean(len(s.turns) for g in groups for s in workload.group(g))

    assert 1.8 <= mean_turns(17, 20) / mean_turns(0, 3) <= 3.0


def test_the_simulation_plan_gives_the_workload_the_runs_groups_per_step() -> None:
    simulation = plan_simulation(CONFIGS / "simulate" / "drift.yaml", ["groups_per_step=16"])
    assert simulation.workload.groups_per_step == 16
    assert simulation.workload.drift is not None and simulation.config.steps == 20


def test_a_workload_file_that_sets_groups_per_step_is_an_error_naming_the_run_setting() -> None:
    with pytest.raises(ConfigError, match="groups_per_step=N"):
        plan_simulation(
            CONFIGS / "simulate" / "drift.yaml", ["workload.overrides=[groups_per_step=2]"]
        )
