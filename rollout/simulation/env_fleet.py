"""`SimEnvFleet`: simulated env nodes whose container starts and tool calls queue in virtual time.

Each `SimEnvNode` has `start_concurrency` start slots (a start holds one for the node's
`start_s` plus the workload's reset time) and `act_slots` act slots (a tool call holds one while
it runs; critical samples are granted first, then arrival order). A limit of 0 is no limit.
The fleet places each opened env on the node with the fewest live envs
(`rollout.simulation.placement`) and counts what the nodes did, so a fleet that is too small
shows up as env-side queueing (T_pre_act, a longer T_env_init) instead of vanishing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from foundation.clock import Clock
from harness.slots import PrioritySlots
from rollout.simulation.config import EnvNodeConfig
from rollout.simulation.placement import least_loaded_node

__all__ = ["FleetFigures", "NodeCounters", "SimEnvFleet", "SimEnvNode"]

# `PrioritySlots` grants the larger priority first: critical samples' tool calls go first.
_HIGH, _LOW = 1, 0


@dataclass(slots=True)
class NodeCounters:
    """What one node did (counts, and seconds of virtual time summed over envs)."""

    starts: int = 0
    start_wait_s: float = 0.0  # waiting for a start slot
    acts: int = 0
    act_wait_s: float = 0.0  # waiting for an act slot
    peak_live_envs: int = 0
    peak_starting: int = 0
    peak_acting: int = 0


@dataclass(frozen=True, slots=True)
class FleetFigures:
    """A fleet's totals over its nodes (SIMULATED, virtual seconds)."""

    nodes: int
    starts: int
    start_wait_s_mean: float
    acts: int
    act_wait_s_mean: float
    peak_live_envs_per_node: int
    peak_acting_per_node: int


class SimEnvNode:
    """One env node's start and act slots (see the module docstring)."""

    def __init__(self, index: int, config: EnvNodeConfig, clock: Clock) -> None:
        self.index = index
        self.config = config
        self.counters = NodeCounters()
        self.live_envs = 0
        self._clock = clock
        self._starting = 0
        self._acting = 0
        starts, acts = config.start_concurrency, config.act_slots
        self._start_slots = PrioritySlots(starts) if starts > 0 else None
        self._act_slots = PrioritySlots(acts) if acts > 0 else None

    @asynccontextmanager
    async def starting(self) -> AsyncIterator[None]:
        """Hold a start slot for the body, after the node's `start_s` of container start."""
        queued_s = self._clock.now()
        slots = self._start_slots
        if slots is not None:
            await slots.acquire()
        try:
            counters = self.counters
            counters.starts += 1
            counters.start_wait_s += self._clock.now() - queued_s
            self._starting += 1
            counters.peak_starting = max(counters.peak_starting, self._starting)
            if self.config.start_s > 0:
                await asyncio.sleep(self.config.start_s)
            yield
        finally:
            self._starting -= 1
            if slots is not None:
                slots.release()

    @asynccontextmanager
    async def acting(self, *, high: bool) -> AsyncIterator[float]:
        """Hold an act slot for the body; yields the seconds waited for it."""
        queued_s = self._clock.now()
        slots = self._act_slots
        if slots is not None:
            await slots.acquire(_HIGH if high else _LOW)
        try:
            waited_s = self._clock.now() - queued_s
            counters = self.counters
            counters.acts += 1
            counters.act_wait_s += waited_s
            self._acting += 1
            counters.peak_acting = max(counters.peak_acting, self._acting)
            yield waited_s
        finally:
            self._acting -= 1
            if slots is not None:
                slots.release()


class SimEnvFleet:
    """`nodes` env nodes of one `EnvNodeConfig`; `place` and `release` track live envs."""

    def __init__(self, nodes: int, config: EnvNodeConfig, clock: Clock) -> None:
        if nodes < 1:
            raise ValueError(f"an env fleet needs at least one node, got {nodes}")
        self.nodes = tuple(SimEnvNode(index, config, clock) for index in range(nodes))

    def place(self) -> SimEnvNode:
        """The node a newly opened env goes to (it counts as live there until `release`)."""
        node = self.nodes[least_loaded_node([node.live_envs for node in self.nodes])]
        node.live_envs += 1
        node.counters.peak_live_envs = max(node.counters.peak_live_envs, node.live_envs)
        return node

    def release(self, node: SimEnvNode) -> None:
        """An env on `node` closed."""
        if node.live_envs <= 0:
            raise RuntimeError(f"env node {node.index} released more envs than it placed")
        node.live_envs -= 1

    def figures(self) -> FleetFigures:
        """Totals over the nodes, for the run summary."""
        counters = [node.counters for node in self.nodes]
        starts = sum(c.starts for c in counters)
        acts = sum(c.acts for c in counters)
        return FleetFigures(
            nodes=len(counters),
            starts=starts,
            start_wait_s_mean=sum(c.start_wait_s for c in counters) / starts if starts else 0.0,
            acts=acts,
            act_wait_s_mean=sum(c.act_wait_s for c in counters) / acts if acts else 0.0,
            peak_live_envs_per_node=max(c.peak_live_envs for c in counters),
            peak_acting_per_node=max(c.peak_acting for c in counters),
        )
