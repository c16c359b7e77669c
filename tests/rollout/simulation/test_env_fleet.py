"""Spec of the simulated env fleet: start and act slots queue envs in virtual time, critical
tool calls go first, and envs are placed by load and given back on close."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from foundation.clock import LoopClock
from rollout.simulation.config import ClusterConfig, EnvNodeConfig
from rollout.simulation.env_fleet import SimEnvFleet, SimEnvNode
from rollout.simulation.vtime import run_virtual

Log = list[tuple[str, float]]


async def _tool(node: SimEnvNode, name: str, seconds: float, log: Log, *, high: bool) -> float:
    async with node.acting(high=high) as waited_s:
        log.append((name, asyncio.get_running_loop().time()))
        await asyncio.sleep(seconds)
    return waited_s


def test_one_act_slot_runs_the_tool_calls_one_after_another_in_virtual_time() -> None:
    log: Log = []

    async def main() -> list[float]:
        node = SimEnvNode(0, EnvNodeConfig(act_slots=1), LoopClock())
        return list(
            await asyncio.gather(*(_tool(node, f"s{i}", 2.0, log, high=False) for i in range(3)))
        )

    waits = run_virtual(main())
    assert log == [("s0", 0.0), ("s1", 2.0), ("s2", 4.0)]
    assert waits == [0.0, 2.0, 4.0]


def test_without_an_act_limit_every_tool_call_starts_at_once() -> None:
    log: Log = []

    async def main() -> None:
        node = SimEnvNode(0, EnvNodeConfig(), LoopClock())
        await asyncio.gather(*(_tool(node, f"s{i}", 2.0, log, high=False) for i in range(3)))

    run_virtual(main())
    assert log == [("s0", 0.0), ("s1", 0.0), ("s2", 0.0)]


def test_a_critical_tool_call_overtakes_waiting_low_priority_ones() -> None:
    log: Log = []

    async def main() -> None:
        node = SimEnvNode(0, EnvNodeConfig(act_slots=1), LoopClock())
        first = asyncio.ensure_future(_tool(node, "running", 1.0, log, high=False))
        await asyncio.sleep(0)
        low = asyncio.ensure_future(_tool(node, "low", 1.0, log, high=False))
        await asyncio.sleep(0)
        high = asyncio.ensure_future(_tool(node, "critical", 1.0, log, high=True))
        await asyncio.gather(first, low, high)

    run_virtual(main())
    assert log == [("running", 0.0), ("critical", 1.0), ("low", 2.0)]


def test_start_slots_bound_concurrent_container_starts_each_taking_start_s() -> None:
    log: Log = []

    async def start(node: SimEnvNode, name: str) -> None:
        async with node.starting():
            log.append((name, asyncio.get_running_loop().time()))

    async def main() -> SimEnvNode:
        node = SimEnvNode(0, EnvNodeConfig(start_concurrency=2, start_s=3.0), LoopClock())
        await asyncio.gather(*(start(node, f"s{i}") for i in range(4)))
        return node

    node = run_virtual(main())
    # Two starts at a time, each 3 s of container start before the body (the env's reset).
    assert log == [("s0", 3.0), ("s1", 3.0), ("s2", 6.0), ("s3", 6.0)]
    assert node.counters.starts == 4
    assert node.counters.start_wait_s == pytest.approx(0 + 0 + 3 + 3)
    assert node.counters.peak_starting == 2


def test_envs_go_to_the_least_loaded_node_and_closing_one_frees_its_place() -> None:
    fleet = SimEnvFleet(2, EnvNodeConfig(), LoopClock())
    first, second, third = fleet.place(), fleet.place(), fleet.place()
    assert [first.index, second.index, third.index] == [0, 1, 0]
    fleet.release(first)
    fleet.release(third)
    assert fleet.place().index == 0  # node 0 is empty again, node 1 still holds one
    assert fleet.figures().peak_live_envs_per_node == 2


def test_releasing_more_envs_than_were_placed_is_a_broken_count() -> None:
    fleet = SimEnvFleet(1, EnvNodeConfig(), LoopClock())
    with pytest.raises(RuntimeError, match="released more"):
        fleet.release(fleet.nodes[0])


def test_node_limits_without_env_nodes_are_refused_rather_than_ignored() -> None:
    with pytest.raises(ValidationError, match="env_nodes"):
        ClusterConfig(node=EnvNodeConfig(act_slots=1))
    assert ClusterConfig(env_nodes=2, node=EnvNodeConfig(act_slots=1)).node.act_slots == 1
