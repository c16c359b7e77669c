"""Policies are objects in a registry; presets differ only where they must; users add their own."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from foundation.errors import ConfigError
from rollout.core.config import RolloutConfig
from rollout.engines.registry import SimBackend
from rollout.engines.sim.config import KVBackendKind, SchedulePolicy, SimEngineConfig
from rollout.jobs.policies import (
    PolicyRegistry,
    UnknownPolicyError,
    builtin_policies,
    default_policy_registry,
    resolve_policy,
    resolve_policy_spec,
)
from rollout.jobs.simulation_plan import plan_simulation
from rollout.runtime.policy import RolloutPolicy
from tests.paths import CONFIGS
from tests.rollout.fakes import engine_config

SIMULATE = CONFIGS / "simulate" / "short_context.yaml"


def _engine(policy: RolloutPolicy) -> SimEngineConfig:
    configured, notes = SimBackend().configure(engine_config(), policy.engine_asks())
    assert isinstance(configured, SimEngineConfig) and notes == ()
    return configured


def test_every_preset_is_found_by_its_name() -> None:
    for name, policy in builtin_policies().items():
        assert resolve_policy(name).config == policy.config and policy.name == name


def test_an_unknown_policy_name_suggests_the_closest_preset() -> None:
    with pytest.raises(UnknownPolicyError, match="did you mean 'traj_async'"):
        resolve_policy("traj-async")


@pytest.mark.parametrize(
    ("name", "critical", "preemption", "kv", "admission", "holding"),
    [
        ("conductor", True, True, "priority", "staleness_bound", "action"),
        ("sync", False, False, "radix_lru", "synchronous", "action"),
        ("traj_async", False, False, "radix_lru", "staleness_bound", "trajectory"),
    ],
)
def test_the_three_compared_policies_have_their_documented_flags(
    name: str, critical: bool, preemption: bool, kv: str, admission: str, holding: str
) -> None:
    flags = resolve_policy(name).config
    assert (
        flags.critical_priority,
        flags.preemption,
        flags.kv_policy,
        flags.admission,
        flags.slot_holding,
    ) == (critical, preemption, kv, admission, holding)


def test_sync_admission_is_the_staleness_bound_with_async_factor_one() -> None:
    rollout = RolloutConfig()
    assert rollout.admission.async_factor > 1
    assert resolve_policy("sync").shape_rollout(rollout).admission.async_factor == 1
    assert resolve_policy("traj_async").shape_rollout(rollout).admission == rollout.admission


def test_fcfs_baselines_turn_off_preemption_and_the_throttle() -> None:
    for name in ("sync", "traj_async", "aggressive"):
        scheduler = resolve_policy(name).shape_rollout(RolloutConfig()).scheduler
        assert not scheduler.preemption and scheduler.low_priority_kv_watermark == 0.0


def test_the_residency_projects_the_live_set_only_where_the_live_gate_charges_no_growth() -> None:
    rollout = RolloutConfig()
    shaped = {
        name: resolve_policy(name).shape_rollout(rollout).scheduler.kv_residency_live_projection
        for name in ("conductor", "no_growth_charge", "no_live_gate")
    }
    assert shaped == {"conductor": False, "no_growth_charge": True, "no_live_gate": True}


def test_without_critical_groups_there_is_nothing_to_preempt_for() -> None:
    assert not resolve_policy("no_priority").shape_rollout(RolloutConfig()).scheduler.preemption


def test_the_sim_engine_gets_the_policys_kv_backend_and_queue_order() -> None:
    ours = _engine(resolve_policy("conductor"))
    assert ours.kv_backend is KVBackendKind.KVCACHE
    assert ours.schedule_policy is SchedulePolicy.PRIORITY
    baseline = _engine(resolve_policy("sync"))
    assert baseline.kv_backend is KVBackendKind.RADIX_LRU
    assert baseline.schedule_policy is SchedulePolicy.FCFS


def test_policies_change_nothing_else_in_the_engine() -> None:
    ours = _engine(resolve_policy("conductor")).model_dump()
    fcfs = _engine(resolve_policy("sync")).model_dump()
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
    ours = resolve_policy("conductor").config.model_dump()
    ablation = resolve_policy(name).config.model_dump()
    changed = {key for key in ours if ours[key] != ablation[key]} - {"name", "description"}
    assert changed == removed


def test_a_derived_policy_is_its_base_with_the_given_flags() -> None:
    policy = resolve_policy_spec({"name": "gate_half", "base": "conductor", "live_kv_budget": 0.5})
    expected = resolve_policy("conductor").config.model_copy(
        update={"name": "gate_half", "live_kv_budget": 0.5}
    )
    assert policy.config.model_dump(exclude={"description"}) == expected.model_dump(
        exclude={"description"}
    )
    assert "live_kv_budget=0.5" in policy.description


def test_a_derived_policy_defaults_to_ours_and_names_a_bad_flag() -> None:
    assert resolve_policy_spec({"name": "x", "preemption": False}).critical_priority
    with pytest.raises(ConfigError, match="premption"):
        resolve_policy_spec({"name": "x", "premption": False})
    with pytest.raises(UnknownPolicyError, match="did you mean 'traj_async'"):
        resolve_policy_spec({"name": "x", "base": "traj-async"})


def test_simulate_plans_take_derived_policies_from_the_command_line() -> None:
    override = "policies=[conductor, {name: lru_ours, base: conductor, kv_policy: radix_lru}]"
    simulation = plan_simulation(SIMULATE, [override])
    assert [policy.config.kv_policy for policy in simulation.policies] == ["priority", "radix_lru"]
    with pytest.raises(ConfigError, match="repeat"):
        plan_simulation(SIMULATE, ["policies=[sync, {name: sync, base: sync}]"])


def test_the_registry_refuses_empty_and_duplicate_names() -> None:
    registry = default_policy_registry()
    with pytest.raises(ValueError, match="non-empty"):
        registry.register(" ", lambda: resolve_policy("sync"))
    with pytest.raises(ValueError, match="already registered"):
        registry.register("sync", lambda: resolve_policy("sync"))


def test_a_registered_policy_is_found_by_name() -> None:
    registry = PolicyRegistry()
    registry.register("mine", lambda: resolve_policy("sync").renamed("mine"))
    assert registry.resolve("mine").name == "mine"
    assert registry.names() == ("mine",)


MY_POLICY = textwrap.dedent(
    '''
    from rollout.jobs.policies import resolve_policy
    from rollout.runtime.policy import AgentSlots, RolloutPolicy


    class TwoAtATime(RolloutPolicy):
        """Ours, but at most two samples live at once."""

        def live_limit(self, context):
            return AgentSlots(2)


    def make():
        return TwoAtATime(resolve_policy("conductor").config.model_copy(update={"name": "two"}))
    '''
)


def test_a_policy_from_outside_the_package_runs_a_simulation(tmp_path: Path) -> None:
    (tmp_path / "my_policy.py").write_text(MY_POLICY)
    spec = f"{tmp_path / 'my_policy.py'}:make"
    simulation = plan_simulation(SIMULATE, [f"policies=['{spec}']", "steps=1"])
    (policy,) = simulation.policies
    assert type(policy).__name__ == "TwoAtATime" and policy.name == "two"

    from rollout.jobs.simulation import simulate_policy
    from rollout.simulation.vtime import run_virtual

    run = run_virtual(simulate_policy(simulation, policy))
    assert run.summary.policy == "two" and run.summary.samples > 0


def test_a_dotted_path_that_is_not_a_policy_says_what_it_must_be(tmp_path: Path) -> None:
    (tmp_path / "nothing.py").write_text("VALUE = 3\n")
    with pytest.raises(ConfigError, match="not a RolloutPolicy"):
        resolve_policy_spec(f"{tmp_path / 'nothing.py'}:VALUE")
