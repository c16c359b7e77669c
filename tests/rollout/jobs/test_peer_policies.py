"""The knob-free peers in the registry: `adaptive_inflight` (prime-rl) and `sample_refill`
(AReaL) are `traj_async` with another live limit, with their sources' constants as
configuration, and run in a simulation by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from rollout.jobs.policies import resolve_policy, resolve_policy_spec
from rollout.jobs.simulation import simulate_policy
from rollout.jobs.simulation_plan import plan_simulation
from rollout.runtime.config import PolicyConfig
from rollout.runtime.group_slots import GroupSampleSlots
from rollout.runtime.inflight_limit import AdaptiveInflightLimit
from rollout.runtime.peer_policies import SampleRefillPolicy
from rollout.runtime.policy import LiveLimitContext
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.batch import Batch
from tests.paths import CONFIGS

SIMULATE = CONFIGS / "simulate" / "short_context.yaml"
FLAGS = set(PolicyConfig.model_fields) - {"name", "description"}


def context(**changes: object) -> LiveLimitContext:
    fields: dict[str, object] = {
        "generation_slots": 64,
        "kv_capacity_tokens": 774_720,
        "agent_slots": 0,
        "max_context_tokens": 131_072,
        "groups_per_step": 4,
        "group_size": 8,
        "now_s": lambda: 0.0,
        "group_size_of": lambda group: 8,
        "shed_groups": lambda groups: None,
    }
    return LiveLimitContext(**{**fields, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["adaptive_inflight", "sample_refill"])
def test_a_peer_is_traj_async_in_every_flag(name: str) -> None:
    peer, baseline = resolve_policy(name).config, resolve_policy("traj_async").config
    assert {flag: getattr(peer, flag) for flag in FLAGS} == {
        flag: getattr(baseline, flag) for flag in FLAGS
    }


def test_adaptive_inflight_starts_at_kv_capacity_over_the_longest_episode() -> None:
    limit = resolve_policy("adaptive_inflight").live_limit(context())
    assert isinstance(limit, AdaptiveInflightLimit) and limit.cap == 5


def test_adaptive_inflight_needs_the_conductors_clock_and_shedding() -> None:
    with pytest.raises(ValueError, match="shed_groups"):
        resolve_policy("adaptive_inflight").live_limit(context(shed_groups=None))


@pytest.mark.parametrize(("per_batch", "slots"), [(1.0, 32), (2.0, 64), (0.01, 8)])
def test_sample_refill_has_one_batch_of_samples_as_slots_and_at_least_one_group(
    per_batch: float, slots: int
) -> None:
    policy = resolve_policy_spec(
        {"name": "r", "base": "sample_refill", "sample_slots_per_batch": per_batch}
    )
    assert isinstance(policy, SampleRefillPolicy)
    limit = policy.live_limit(context())
    assert isinstance(limit, GroupSampleSlots) and limit.slots == slots


def test_a_derived_peer_changes_its_constants() -> None:
    policy = resolve_policy_spec(
        {"name": "grow_07", "base": "adaptive_inflight", "inflight": {"kv_usage_grow": 0.7}}
    )
    assert policy.config.inflight.kv_usage_grow == 0.7  # type: ignore[attr-defined]
    assert type(policy) is type(resolve_policy("adaptive_inflight"))


def test_a_peer_constant_out_of_range_is_a_config_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"inflight\.kv_usage_hard_cap"):
        resolve_policy_spec(
            {"name": "x", "base": "adaptive_inflight", "inflight": {"kv_usage_hard_cap": 1.5}}
        )


@pytest.mark.parametrize("name", ["adaptive_inflight", "sample_refill"])
def test_a_peer_runs_in_a_simulation_by_name(name: str) -> None:
    simulation = plan_simulation(SIMULATE, [f"policies=[{name}]", "steps=1"])
    (policy,) = simulation.policies
    run = run_virtual(simulate_policy(simulation, policy))
    assert run.summary.policy == name and run.summary.samples == 8 * 4


def test_groups_the_adaptive_cap_sheds_run_again_and_every_consumed_group_is_whole(
    tmp_path: Path,
) -> None:
    """KV thresholds so low that every poll trims hard: groups are shed and restarted, and the
    run still consumes B whole groups a step, none twice."""
    eager = (
        "policies=[{name: eager_shed, base: adaptive_inflight, inflight: {initial_inflight: 32, "
        "kv_usage_grow: 0.01, kv_usage_soft_cap: 0.01, kv_usage_hard_cap: 0.01, "
        "kv_usage_target: 0.001, kv_trim_cooldown_polls: 0, min_inflight: 8, "
        "refill_burst_fraction: 1.0}}]"
    )
    simulation = plan_simulation(SIMULATE, [eager, "steps=2"])
    (policy,) = simulation.policies
    batches: list[Batch] = []
    run = run_virtual(
        simulate_policy(simulation, policy, run_dir=tmp_path, on_batch=batches.append)
    )
    records = [json.loads(line) for line in (tmp_path / "decisions.jsonl").open()]
    assert sum(record.get("kind") == "shed" for record in records) > 0
    groups = [group for batch in batches for group in batch.groups]
    assert len(groups) == 2 * 8 and all(len(group) == 4 for group in groups)
    assert len({group[0].group_id for group in groups}) == len(groups)
    assert run.summary.samples == 2 * 8 * 4
