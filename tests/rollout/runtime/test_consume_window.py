"""The enforced bias bound (`admission.consume_window`): each step's batch comes from the oldest
W admitted groups; off, any complete group may be consumed (today's behaviour)."""

from __future__ import annotations

import pytest

from rollout.jobs.simulation import simulate_policy
from rollout.jobs.simulation_plan import plan_simulation
from rollout.simulation.vtime import run_virtual
from rollout.trajectories.batch import Batch
from tests.paths import CONFIGS

SIMULATE = CONFIGS / "simulate" / "short_context.yaml"
B = 8


def consumed(policy: str, *overrides: str) -> list[list[int]]:
    """The admission numbers (g00000012 -> 12) of each step's groups."""
    simulation = plan_simulation(SIMULATE, [f"policies=[{policy}]", "steps=3", *overrides])
    batches: list[Batch] = []
    run_virtual(simulate_policy(simulation, simulation.policies[0], on_batch=batches.append))
    return [sorted(int(group_id[1:]) for group_id in batch.group_ids) for batch in batches]


@pytest.mark.parametrize("policy", ["conductor", "traj_async"])
def test_a_window_of_one_batch_consumes_groups_in_admission_order(policy: str) -> None:
    steps = consumed(policy, "rollout.overrides=[admission.consume_window=1.0]")
    assert steps == [list(range(k * B, (k + 1) * B)) for k in range(3)]


def test_without_a_window_a_step_may_consume_younger_groups_first() -> None:
    steps = consumed("conductor")
    assert steps != [list(range(k * B, (k + 1) * B)) for k in range(3)]


def test_a_wider_window_consumes_only_its_oldest_groups() -> None:
    window = 1.5  # 12 of the admitted groups
    steps = consumed("conductor", f"rollout.overrides=[admission.consume_window={window}]")
    taken: set[int] = set()
    for step in steps:
        live = [g for g in range(10 * B) if g not in taken]
        assert set(step) <= set(live[: int(window * B)])
        taken |= set(step)
