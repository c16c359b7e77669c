"""Hidden scripts: seeded, correlated within a group, and within the configured bounds."""

from __future__ import annotations

import random
import statistics

import pytest

from foundation.config import load_config
from rollout.simulation.workload import SUBMIT_TOOL, SyntheticWorkload, WorkloadConfig
from rollout.simulation.workload.distributions import derive_seed, draw_length, draw_tool
from tests.paths import CONFIGS

WORKLOAD_CONFIGS = CONFIGS / "workload"


def swe(*overrides: str) -> WorkloadConfig:
    return load_config(
        WorkloadConfig, WORKLOAD_CONFIGS / "swe_like.yaml", ["corpus_tokens=65536", *overrides]
    )


@pytest.mark.parametrize("name", ["swe_like", "short_context", "heavy_tail", "growth", "drift"])
def test_every_shipped_workload_config_loads(name: str) -> None:
    assert load_config(WorkloadConfig, WORKLOAD_CONFIGS / f"{name}.yaml").name == name


def test_scripts_are_a_function_of_the_seed() -> None:
    config = swe()
    assert SyntheticWorkload(config, 1).group(5) == SyntheticWorkload(config, 1).group(5)
    assert SyntheticWorkload(config, 1).group(5) != SyntheticWorkload(config, 2).group(5)


def test_siblings_share_the_prompt_and_groups_do_not() -> None:
    workload = SyntheticWorkload(swe(), 0)
    first, second = workload.group(0), workload.group(1)
    assert len({script.prompt_ids for script in first}) == 1
    assert first[0].prompt_ids != second[0].prompt_ids


def test_turn_counts_correlate_more_within_groups_than_across_groups() -> None:
    workload = SyntheticWorkload(swe("sibling_correlation=0.8"), 0)
    groups = [[len(s.turns) for s in workload.group(g)] for g in range(60)]
    within = statistics.mean(statistics.pvariance(g) for g in groups)
    overall = statistics.pvariance([n for g in groups for n in g])
    assert within < 0.5 * overall


def test_every_trajectory_ends_with_one_submit_turn_without_observation() -> None:
    workload = SyntheticWorkload(swe(), 0)
    for script in workload.group(0) + workload.group(1):
        assert [t.tool for t in script.turns].count(SUBMIT_TOOL) == 1
        assert script.turns[-1].tool == SUBMIT_TOOL
        assert script.turns[-1].observation_tokens == 0


def test_a_trajectory_that_would_outgrow_the_context_is_truncated_with_reward_zero() -> None:
    config = swe("max_context_tokens=8000")
    for script in SyntheticWorkload(config, 0).group(0):
        context = len(script.prompt_ids) + sum(
            t.output_tokens + t.observation_tokens for t in script.turns[:-1]
        )
        assert context <= config.max_context_tokens
        if script.truncated:
            assert script.reward == 0.0
    assert any(s.truncated for s in SyntheticWorkload(config, 0).group(0))


def test_lengths_stay_within_their_clip_bounds() -> None:
    config = swe()
    workload = SyntheticWorkload(config, 0)
    turns = [t for g in range(20) for s in workload.group(g) for t in s.turns]
    assert all(
        config.output_tokens.min <= t.output_tokens <= config.output_tokens.max for t in turns
    )
    assert all(t.observation_tokens <= config.observation_tokens.max for t in turns)


def test_log_normal_draws_center_on_the_configured_median() -> None:
    spec = swe().output_tokens
    rng = random.Random(0)
    draws = [draw_length(spec, rng) for _ in range(4000)]
    assert statistics.median(draws) == pytest.approx(spec.median, rel=0.1)


def test_log_t_draws_have_a_heavier_tail_than_log_normal_draws() -> None:
    normal = swe().output_tokens.model_copy(update={"max": 1e9})
    heavy = normal.model_copy(update={"tail_df": 2.0})
    rng = random.Random(0)
    p999 = [sorted(draw_length(spec, rng) for _ in range(4000))[3995] for spec in (normal, heavy)]
    assert p999[1] > 2 * p999[0]


def test_tool_kinds_follow_their_weights() -> None:
    tools = swe().tools
    rng = random.Random(0)
    picks = [draw_tool(tools, rng).name for _ in range(10_000)]
    for tool in tools:
        assert picks.count(tool.name) / len(picks) == pytest.approx(tool.weight, abs=0.02)


def test_derived_seeds_are_stable_and_distinct() -> None:
    assert derive_seed(1, "group", 2) == derive_seed(1, "group", 2)
    assert derive_seed(1, "group", 2) != derive_seed(1, "group", 3)
