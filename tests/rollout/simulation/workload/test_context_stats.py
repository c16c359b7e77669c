"""Context statistics: first and final context, growth per trajectory, turn percentiles; and
the growth workload draws what its comments say (mean first turn ~13-14k, ~5-7x growth)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from foundation.config import load_config
from rollout.cli.app import app
from rollout.simulation.workload import (
    SUBMIT_TOOL,
    SampleScript,
    SyntheticWorkload,
    TurnScript,
    WorkloadConfig,
)
from rollout.simulation.workload.context_stats import context_stats, final_context_tokens, quantile
from tests.paths import CONFIGS

GROWTH = CONFIGS / "workload" / "growth.yaml"


def script(prompt: int, *turns: tuple[int, int], truncated: bool = False) -> SampleScript:
    return SampleScript(
        session_id=f"w/g0/s{prompt}",
        group_index=0,
        sample_index=0,
        seed=0,
        prompt_ids=tuple(range(prompt)),
        turns=tuple(
            TurnScript(out, obs, SUBMIT_TOOL if obs == 0 else "shell", 1.0) for out, obs in turns
        ),
        reset_s=0.1,
        reward=0.0,
        truncated=truncated,
    )


def test_the_final_context_holds_the_prompt_every_output_and_every_observation() -> None:
    assert final_context_tokens(script(100, (10, 50), (20, 0))) == 180


def test_growth_is_the_mean_of_each_trajectorys_final_over_first_context() -> None:
    stats = context_stats([script(100, (50, 50), (100, 0)), script(200, (200, 0))])
    assert stats.first_context_mean == 150
    assert stats.final_context_mean == (300 + 400) / 2
    assert stats.growth_mean == pytest.approx((3.0 + 2.0) / 2)
    assert stats.growth_of_means == pytest.approx(350 / 150)


def test_turn_percentiles_and_the_truncated_share_are_over_trajectories() -> None:
    scripts = [script(10, *([(1, 1)] * (n - 1)), (1, 0), truncated=n == 10) for n in range(1, 11)]
    stats = context_stats(scripts)
    assert (stats.turns_p50, stats.turns_max, stats.truncated_share) == (5.5, 10, 0.1)
    assert stats.turns_p90 == pytest.approx(9.1)


def test_quantiles_interpolate_between_order_statistics() -> None:
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert quantile([7.0], 0.9) == 7.0
    with pytest.raises(ValueError, match="no values"):
        quantile([], 0.5)


def test_no_scripts_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        context_stats([])


def test_the_growth_workload_grows_contexts_five_to_seven_fold_from_a_13k_first_turn() -> None:
    config = load_config(WorkloadConfig, GROWTH, ["corpus_tokens=65536"])
    workload = SyntheticWorkload(config, 0)
    stats = context_stats(s for g in range(48) for s in workload.group(g))
    assert 13_000 <= stats.first_context_mean <= 14_500
    assert 5.0 <= stats.growth_mean <= 7.0
    assert 5.0 <= stats.final_context_mean / stats.first_context_mean <= 7.0
    assert stats.turns_p90 >= 1.5 * stats.turns_p50  # a long tail of turns


def test_workload_show_prints_the_context_statistics() -> None:
    result = CliRunner().invoke(
        app, ["workload", "show", str(GROWTH), "corpus_tokens=65536", "--groups", "4"]
    )
    assert result.exit_code == 0, result.output
    assert "first-turn context" in result.output and "32 trajectories" in result.output


def test_workload_show_names_a_bad_override() -> None:
    result = CliRunner().invoke(app, ["workload", "show", str(GROWTH), "turns.median=-1"])
    assert result.exit_code == 1 and "turns" in result.output
