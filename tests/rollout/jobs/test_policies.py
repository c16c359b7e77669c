"""Policies are presets of one conductor's flags; baselines differ only where they must."""

from __future__ import annotations

import pytest

from foundation.config import load_config
from foundation.errors import ConfigError
from rollout.core.config import RolloutConfig
from rollout.engines.sim.config import KVBackendKind, SchedulePolicy
from rollout.jobs.config import SimulateConfig
from rollout.jobs.policies import (
    UnknownPolicyError,
    builtin_policies,
    resolve_policy,
    resolve_policy_spec,
)
from rollout.runtime.config import rollout_config_for
from rollout.simulation.setup import engine_config_for
from tests.paths import CONFIGS
from tests.rollout.fakes import engine_config

SIMULATE = CONFIGS / "simulate" / "short_context.yaml"


def test_every_preset_is_found_by_its_name() -> None:
    for name, policy in builtin_policies().items():
        assert resolve_policy(name) == policy and policy.name == name


def test_an_unknown_policy_name_suggests_the_closest_preset() -> None:
    with pytest.raises(UnknownPolicyError, match="did you mean 'traj_async'"):
        resolve_policy("traj-async")


@pytest.mark.parametrize(
    ("name", "critical", "preemption", "kv", "admission", "holding"),
    [
        ("conductor", True, True, "priority", "staleness_bound", "action"),
        ("sync", False, False, "lru", "synchronous", "action"),
        ("traj_async", False, False, "lru", "staleness_bound", "trajectory"),
    ],
)
def test_the_three_compared_policies_have_their_documented_flags(
    name: str, critical: bool, preemption: bool, kv: str, admission: str, holding: str
) -> None:
    policy = resolve_policy(name)
    assert (
        policy.critical_priority,
        policy.preemption,
        policy.kv_policy,
        policy.admission,
        policy.slot_holding,
    ) == (critical, preemption, kv, admission, holding)


def test_sync_admission_is_the_staleness_bound_with_async_factor_one() -> None:
    rollout = RolloutConfig()
    assert rollout.admission.async_factor > 1
    assert rollout_config_for(resolve_policy("sync"), rollout).admission.async_factor == 1
    assert rollout_config_for(resolve_policy("traj_async"), rollout).admission == rollout.admission


def test_fcfs_baselines_turn_off_preemption_and_the_throttle() -> None:
    for name in ("sync", "traj_async", "aggressive"):
        scheduler = rollout_config_for(resolve_policy(name), RolloutConfig()).scheduler
        assert not scheduler.preemption and scheduler.low_priority_kv_watermark == 0.0


def test_without_critical_groups_there_is_nothing_to_preempt_for() -> None:
    policy = resolve_policy("no_priority")
    assert not rollout_config_for(policy, RolloutConfig()).scheduler.preemption


def test_the_engine_gets_the_policys_kv_backend_and_queue_order() -> None:
    ours = engine_config_for(resolve_policy("conductor"), engine_config())
    assert ours.kv_backend is KVBackendKind.PRIORITY
    assert ours.schedule_policy is SchedulePolicy.PRIORITY
    baseline = engine_config_for(resolve_policy("sync"), engine_config())
    assert baseline.kv_backend is KVBackendKind.LRU
    assert baseline.schedule_policy is SchedulePolicy.FCFS


def test_policies_change_nothing_else_in_the_engine() -> None:
    base = engine_config()
    ours = engine_config_for(resolve_policy("conductor"), base).model_dump()
    fcfs = engine_config_for(resolve_policy("sync"), base).model_dump()
    differing = {key for key in ours if ours[key] != fcfs[key]}
    assert differing <= {"kv_backend", "schedule_policy", "priority_preemption"}


ABLATIONS = {
    "no_priority": {"critical_priority"},
    "no_preemption": {"preemption"},
    "no_kv_hints": {"kv_hints", "kv_policy"},
    "no_live_gate": {"live_kv_budget"},
}


@pytest.mark.parametrize(("name", "removed"), ABLATIONS.items())
def test_each_ablation_differs_from_ours_in_exactly_its_mechanism(
    name: str, removed: set[str]
) -> None:
    ours = resolve_policy("conductor").model_dump()
    ablation = resolve_policy(name).model_dump()
    changed = {key for key in ours if ours[key] != ablation[key]} - {"name", "description"}
    assert changed == removed


def test_a_derived_policy_is_its_base_with_the_given_flags() -> None:
    policy = resolve_policy_spec({"name": "gate_half", "base": "conductor", "live_kv_budget": 0.5})
    expected = resolve_policy("conductor").model_copy(
        update={"name": "gate_half", "live_kv_budget": 0.5}
    )
    assert policy.model_dump(exclude={"description"}) == expected.model_dump(
        exclude={"description"}
    )
    assert "live_kv_budget=0.5" in policy.description


def test_a_derived_policy_defaults_to_ours_and_names_a_bad_flag() -> None:
    assert resolve_policy_spec({"name": "x", "preemption": False}).critical_priority
    with pytest.raises(ValueError, match="premption"):
        resolve_policy_spec({"name": "x", "premption": False})
    with pytest.raises(UnknownPolicyError, match="did you mean 'traj_async'"):
        resolve_policy_spec({"name": "x", "base": "traj-async"})


def test_simulate_configs_take_derived_policies_from_the_command_line() -> None:
    override = "policies=[conductor, {name: lru_ours, base: conductor, kv_policy: lru}]"
    config = load_config(SimulateConfig, SIMULATE, [override])
    assert [resolve_policy_spec(spec).kv_policy for spec in config.policies] == ["priority", "lru"]
    with pytest.raises(ConfigError, match="repeat"):
        load_config(SimulateConfig, SIMULATE, ["policies=[sync, {name: sync, base: sync}]"])
