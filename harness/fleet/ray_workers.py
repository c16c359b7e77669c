"""Env workers on Ray: `ray_fleet` puts one `EnvWorker` on each node and returns one pool.

Each alive node (or each that has `ray.node_resource`) gets an `EnvWorker` actor pinned to it
(`NodeAffinitySchedulingStrategy`, not soft) holding an `EnvPool` over that node's Docker engine,
with the pool's limits (`max_live`, `act_slots`, ...) per node, adjusted by `ray.per_node`. The
conductor sees them as one `PoolFleet` of `RayPoolMember`s: leases are placed by warm set,
image home and load; a worker that dies costs its running samples a retry (infra error), and
its member is marked down.

Ray is optional (`pip install 'aio-conductor[ray]'`) and imported only when a fleet starts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

from foundation.clock import Clock
from harness.errors import ConfigError, PoolClosedError
from harness.events import EventBus
from harness.fleet.pool_fleet import FleetMember, PoolFleet
from harness.fleet.protocol import Lease
from harness.fleet.ray_config import RayPoolConfig, require_ray
from harness.fleet.ray_member import FactoryCache, RayNode, RayPoolMember
from harness.fleet.ray_worker import EnvWorker
from harness.pool import PoolConfig, PoolStats

__all__ = ["RayFleet", "RayPoolConfig", "node_pool_config", "ray_fleet", "select_nodes"]

log = logging.getLogger(__name__)


def select_nodes(nodes: Iterable[Mapping[str, Any]], resource: str | None) -> list[RayNode]:
    """The nodes (records of `ray.nodes()`) that get a worker: alive, and holding `resource`
    if one is named; in the given order."""
    chosen = []
    for record in nodes:
        if not record.get("Alive"):
            continue
        if resource is not None and not record.get("Resources", {}).get(resource):
            continue
        chosen.append(RayNode(str(record["NodeID"]), str(record["NodeManagerAddress"])))
    return chosen


def node_pool_config(
    base: PoolConfig, per_node: Mapping[str, Mapping[str, Any]], node: RayNode
) -> PoolConfig:
    """`base` with the node's `per_node` settings over it (by node id, then IP; nested
    sections such as `container` merge key by key)."""
    raw = base.model_dump()
    for key in (node.address, node.node_id):  # the id is more specific: applied last
        if key in per_node:
            raw = _merged(raw, per_node[key])
    return PoolConfig.model_validate(raw)


def _merged(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def ray_fleet(
    pool_config: PoolConfig, ray_config: RayPoolConfig, *, bus: EventBus, clock: Clock
) -> RayFleet:
    """The env pool of a Ray cluster: one worker per node, seen as one `LeasePool`.

    Nothing starts until the fleet is entered (`async with`): then it joins the cluster (unless
    this process already has), places the workers and waits for their pools.

    Raises:
        ConfigError: `pool.hosts` is set as well (each Ray worker uses its own node's Docker).
    """
    if getattr(pool_config, "hosts", ()):
        raise ConfigError(
            "pool.hosts and Ray env workers do not combine: each Ray worker uses the Docker "
            "engine of its own node; drop pool.hosts, or run without Ray"
        )
    return RayFleet(pool_config, ray_config, bus=bus, clock=clock)


class RayFleet:
    """See `ray_fleet`. A `LeasePool`; use it as an async context manager."""

    def __init__(
        self, pool_config: PoolConfig, config: RayPoolConfig, *, bus: EventBus, clock: Clock
    ) -> None:
        self._pool_config = pool_config
        self._config = config
        self.bus = bus
        self.clock = clock
        self._members: list[RayPoolMember] = []
        self._fleet: PoolFleet | None = None
        self._joined_ray = False

    @property
    def members(self) -> tuple[RayPoolMember, ...]:
        """The node members, in node order (for reports and tests)."""
        return tuple(self._members)

    def down(self) -> dict[str, str]:
        """The members marked down, with the reason."""
        return self._started().down()

    def member_stats(self) -> dict[str, PoolStats]:
        return self._started().member_stats()

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Join the cluster, place one worker per node and wait for their pools.

        Raises:
            DockerGoneError: no node has a worker that started (the message says why each not).
            ConfigError: Ray is not installed, or no alive node qualifies.
        """
        if self._fleet is not None:
            raise RuntimeError("the Ray fleet is already open; enter it once")
        ray = require_ray()
        if not ray.is_initialized():
            ray.init(address=self._config.address, namespace=self._config.namespace)
            self._joined_ray = True
        try:
            nodes = select_nodes(ray.nodes(), self._config.node_resource)
            if not nodes:
                wanted = self._config.node_resource
                raise ConfigError(
                    "no alive Ray node"
                    + (f" has the resource {wanted!r}" if wanted else "")
                    + "; start nodes with `ray start` (and --resources) or fix ray.node_resource"
                )
            self._warn_unknown_nodes(nodes)
            factories = FactoryCache()
            self._members = [self._member(node, factories) for node in nodes]
            fleet = PoolFleet([FleetMember(member.name, member) for member in self._members])
            await fleet.__aenter__()
        except BaseException:
            for member in self._members:  # never entered (or closed by the fleet): no sandbox
                ray.kill(member.actor, no_restart=True)
            self._leave_ray()
            raise
        self._fleet = fleet
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every worker (each destroys its sandboxes) and leave Ray if it joined it."""
        fleet, self._fleet = self._fleet, None
        try:
            if fleet is not None:
                await fleet.aclose()
        finally:
            self._leave_ray()

    # -- the LeasePool API --------------------------------------------------------------------

    def prewarm(self, images: Iterable[str]) -> None:
        self._started().prewarm(images)

    async def acquire(
        self,
        factory: Any,
        image: str,
        *,
        sample_id: str = "",
        group_id: str = "",
        priority: int = 0,
    ) -> Lease:
        """A lease on the best node (see `PoolFleet.acquire`).

        Raises:
            DockerGoneError: every worker is down.
        """
        return await self._started().acquire(
            factory, image, sample_id=sample_id, group_id=group_id, priority=priority
        )

    def warm_count(self, image: str) -> int:
        return self._started().warm_count(image)

    def stats(self) -> PoolStats:
        return self._started().stats()

    @property
    def capacity(self) -> int:
        return self._started().capacity

    @property
    def leased(self) -> int:
        return self._started().leased

    # -- internals ----------------------------------------------------------------------------

    def _member(self, node: RayNode, factories: FactoryCache) -> RayPoolMember:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        config = self._config
        pool_config = node_pool_config(self._pool_config, config.per_node, node)
        actor = (
            require_ray()
            .remote(EnvWorker)
            .options(
                num_cpus=config.actor_num_cpus,
                resources=dict(config.actor_resources),
                max_concurrency=config.max_concurrency,
                max_restarts=0,  # a restarted worker would not know its leases: it is down
                scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            )
            .remote(pool_config)
        )
        return RayPoolMember(
            actor, node, pool_config, config, bus=self.bus, clock=self.clock, factories=factories
        )

    def _warn_unknown_nodes(self, nodes: Sequence[RayNode]) -> None:
        known = {key for node in nodes for key in (node.node_id, node.address)}
        for key in self._config.per_node:
            if key not in known:
                log.warning(
                    "ray.per_node names %s, which is no node that gets a worker (known: %s)",
                    key,
                    ", ".join(sorted(known)),
                )

    def _leave_ray(self) -> None:
        if self._joined_ray:
            self._joined_ray = False
            require_ray().shutdown()

    def _started(self) -> PoolFleet:
        if self._fleet is None:
            raise PoolClosedError("the Ray fleet is not open; use `async with ray_fleet(...)`")
        return self._fleet
