"""Policies are presets of one conductor's flags; baselines differ only where they must."""

from __future__ import annotations

import pytest

from rollout.core.config import RolloutConfig
from rollout.engines.sim.config import KVBackendKind, SchedulePolicy
from rollout.jobs.policies import UnknownPolicyError, builtin_policies, resolve_policy
from rollout.runtime.config import rollout_config_for
from rollout.sim.setup import engine_config_for
from tests.rollout.fakes import engine_config


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
