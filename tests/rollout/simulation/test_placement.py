"""Spec of env placement: a sample's env goes to the least loaded node, ties to the lowest index."""

from __future__ import annotations

import pytest

from rollout.simulation.placement import least_loaded_node


@pytest.mark.parametrize(
    ("live_envs", "expected"),
    [
        ([0], 0),
        ([3, 1, 2], 1),
        ([2, 2, 2], 0),  # a tie goes to the lowest index
        ([5, 0, 0], 1),
        ([1, 4, 0, 0], 2),
    ],
)
def test_the_node_with_the_fewest_live_envs_takes_the_sample(
    live_envs: list[int], expected: int
) -> None:
    assert least_loaded_node(live_envs) == expected


def test_an_idle_fleet_fills_in_node_order_one_env_each() -> None:
    loads = [0, 0, 0]
    order = []
    for _ in range(6):
        node = least_loaded_node(loads)
        loads[node] += 1
        order.append(node)
    assert order == [0, 1, 2, 0, 1, 2]


@pytest.mark.parametrize("live_envs", [[], [1, -1]])
def test_an_empty_fleet_or_a_negative_count_is_refused(live_envs: list[int]) -> None:
    with pytest.raises(ValueError, match=r"node|negative"):
        least_loaded_node(live_envs)
