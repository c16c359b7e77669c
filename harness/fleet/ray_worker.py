"""`EnvWorker`: the env pool of one Ray node, run as an asyncio actor on that node.

The worker holds an `EnvPool` over its node's local Docker engine. The conductor's proxy
(`harness.fleet.ray_member`) leases envs through it: every reply carries the step events the
pool emitted for that lease since the last reply (the pool emits them when a step ends, or when
the sandbox is ready, so nothing is late) and the worker's clock reading, from which the proxy
places them on the conductor's clock.

Inside the worker each lease is known to its pool by its lease id (as the pool's sample id),
so the events of two attempts of one sample never mix; replies give the real sample id back.
Env factories arrive pickled, once per distinct factory (`acquire`'s `factory_payload`).

This module does not import Ray: the proxy makes the actor with `ray.remote(EnvWorker)`.
`reap_worker_containers` runs as a Ray task on a dead worker's node to remove its containers.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from foundation.clock import LoopClock
from harness.env import ResetReturn, StepReturn
from harness.errors import HarnessError, PoolClosedError
from harness.events import EventBus, Phase, StepEvent
from harness.pool import EnvFactory, EnvLease, EnvPool, PoolConfig, PoolStats
from harness.reaper import pid_alive, reap_containers
from harness.sandbox.docker import docker_client
from harness.standalone import make_backend

__all__ = [
    "EnvWorker",
    "LeaseReply",
    "ResetReply",
    "StepReply",
    "WireEvent",
    "WorkerInfo",
    "WorkerView",
    "event_from_wire",
    "event_to_wire",
    "reap_worker_containers",
]


WireEvent = dict[str, Any]
"""A `StepEvent` as it crosses the hop (`StepEvent.to_dict()`; plain types only)."""


def event_to_wire(event: StepEvent, sample_id: str) -> WireEvent:
    """The event for the conductor, with its real sample id in place of the lease id."""
    wire = event.to_dict()
    wire["sample_id"] = sample_id
    return wire


def event_from_wire(wire: Mapping[str, Any], start_s: float, end_s: float) -> StepEvent:
    """The event on the conductor's side, with its times already on the conductor's clock."""
    return StepEvent(
        Phase(wire["phase"]),
        start_s,
        end_s,
        str(wire["sample_id"]),
        str(wire["group_id"]),
        dict(wire["data"]),
    )


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """Who a worker is: its node, and the owner its containers are labelled with (for reaping)."""

    node_id: str
    host: str
    pid: int
    now_s: float


@dataclass(frozen=True, slots=True)
class WorkerView:
    """The worker pool's state for the proxy's local view (`warm` counts per image)."""

    stats: PoolStats
    warm: dict[str, int]
    now_s: float
    events: list[WireEvent] = field(default_factory=list)  # events of no open lease


@dataclass(frozen=True, slots=True)
class LeaseReply:
    lease_id: str
    view: WorkerView
    events: list[WireEvent]

    @property
    def now_s(self) -> float:
        return self.view.now_s


@dataclass(frozen=True, slots=True)
class ResetReply:
    result: ResetReturn
    events: list[WireEvent]
    now_s: float


@dataclass(frozen=True, slots=True)
class StepReply:
    result: StepReturn
    infra_error: str | None
    events: list[WireEvent]
    now_s: float


@dataclass(slots=True)
class _OpenLease:
    lease: EnvLease
    sample_id: str
    outbox: list[WireEvent] = field(default_factory=list)


class EnvWorker:
    """See the module docstring. Call `start` first and `close` last; the rest in any order.

    Args:
        pool_config: this node's pool limits (its `backend` is made here, on the node).
    """

    def __init__(self, pool_config: PoolConfig) -> None:
        self._config = pool_config
        self._clock = LoopClock()
        self._bus = EventBus()
        self._bus.subscribe(self._route_event)
        self._pool: EnvPool | None = None
        self._leases: dict[str, _OpenLease] = {}
        self._loose: list[WireEvent] = []
        self._factories: dict[str, EnvFactory] = {}
        self._images: set[str] = set()  # in demand here: the view reports their warm counts
        self._lease_ids = itertools.count()

    async def start(self) -> WorkerInfo:
        """Make the node's backend and enter its pool (which reaps leftovers of dead owners).

        Raises:
            SandboxError: the node has no Docker engine that answers.
        """
        if self._pool is None:
            config = self._config
            backend = await asyncio.to_thread(
                make_backend,
                config.backend,
                workdir=config.workdir,
                limits=config.container,
                exec_limits=config.exec,
            )
            pool = EnvPool(backend, config, clock=self._clock, bus=self._bus)
            await pool.__aenter__()
            self._pool = pool
        return WorkerInfo(
            node_id=_node_id(), host=socket.gethostname(), pid=os.getpid(), now_s=self._now()
        )

    async def close(self) -> None:
        """Close the pool: every sandbox it made is destroyed. Idempotent."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()
        self._leases.clear()

    # -- pool -------------------------------------------------------------------------------

    def prewarm(self, images: list[str]) -> None:
        self._started().prewarm(images)
        self._images.update(images)

    async def wait_warm(self, image: str, count: int) -> WorkerView:
        """Wait until `count` warm sandboxes of `image` are ready; returns the view then."""
        await self._started().wait_warm(image, count)
        self._images.add(image)
        return self.view()

    def view(self) -> WorkerView:
        """The pool's stats and warm counts, and the events of no open lease."""
        pool = self._started()
        loose, self._loose = self._loose, []
        warm = {image: pool.warm_count(image) for image in self._images}
        return WorkerView(pool.stats(), warm, self._now(), loose)

    # -- leases -----------------------------------------------------------------------------

    async def acquire(
        self,
        factory_key: str,
        factory_payload: bytes | None,
        image: str,
        sample_id: str,
        group_id: str,
        priority: int,
    ) -> LeaseReply:
        """A lease (see `EnvPool.acquire`); `factory_payload` is the pickled factory the first
        time this worker sees `factory_key`, else None.

        Raises:
            DockerGoneError: the node's daemon stayed away (`pool.daemon_outage_s`).
            HarnessError: the factory was never sent (a proxy bug).
        """
        pool = self._started()
        if factory_payload is not None and factory_key not in self._factories:
            # The payload comes from this run's own conductor (Ray unpickles every call anyway).
            self._factories[factory_key] = pickle.loads(factory_payload)
        factory = self._factories.get(factory_key)
        if factory is None:
            raise HarnessError(
                f"env factory {factory_key} was never sent to this worker; the proxy must send "
                "its payload with the first acquire that uses it"
            )
        lease_id = f"lease-{next(self._lease_ids)}"
        self._images.add(image)
        lease = await pool.acquire(
            factory, image, sample_id=lease_id, group_id=group_id, priority=priority
        )
        self._leases[lease_id] = _OpenLease(lease, sample_id)
        return LeaseReply(lease_id, self.view(), self._drain(lease_id))

    async def reset(
        self, lease_id: str, seed: int | None, options: dict[str, Any] | None
    ) -> ResetReply:
        result = await self._open(lease_id).lease.areset(seed=seed, options=options)
        return ResetReply(result, self._drain(lease_id), self._now())

    async def step(self, lease_id: str, action: str, priority: int) -> StepReply:
        """One step at `priority` (the proxy's latest `set_priority`, sent with each step: the
        pool reads it only when the step asks for an act slot)."""
        open_lease = self._open(lease_id)
        open_lease.lease.set_priority(priority)
        result = await open_lease.lease.astep(action)
        return StepReply(result, open_lease.lease.infra_error, self._drain(lease_id), self._now())

    def set_priority(self, lease_id: str, priority: int) -> None:
        """Change a lease's act-slot priority between steps (`step` also carries it)."""
        self._open(lease_id).lease.set_priority(priority)

    async def release(self, lease_id: str) -> LeaseReply:
        """End the lease (its sandbox is destroyed); returns its last events. Idempotent."""
        open_lease = self._leases.get(lease_id)
        if open_lease is not None:
            await open_lease.lease.release()
        events = self._drain(lease_id)
        self._leases.pop(lease_id, None)
        return LeaseReply(lease_id, self.view(), events)

    # -- internals --------------------------------------------------------------------------

    def _route_event(self, event: StepEvent) -> None:
        open_lease = self._leases.get(event.sample_id)
        if open_lease is None:
            self._loose.append(event.to_dict())
        else:
            open_lease.outbox.append(event_to_wire(event, open_lease.sample_id))

    def _drain(self, lease_id: str) -> list[WireEvent]:
        open_lease = self._leases.get(lease_id)
        if open_lease is None:
            return []
        events, open_lease.outbox = open_lease.outbox, []
        return events

    def _open(self, lease_id: str) -> _OpenLease:
        open_lease = self._leases.get(lease_id)
        if open_lease is None:
            raise HarnessError(f"{lease_id} is not an open lease of this worker (released?)")
        return open_lease

    def _started(self) -> EnvPool:
        if self._pool is None:
            raise PoolClosedError("the env worker is not started (or closed); call start()")
        return self._pool

    def _now(self) -> float:
        return self._clock.now()


def _node_id() -> str:
    import ray  # only ever called inside a Ray worker process

    return str(ray.get_runtime_context().get_node_id())


def reap_worker_containers(dead_pid: int) -> int:
    """Remove the containers of a dead worker on this node; returns how many went.

    Runs as a Ray task on the dead worker's node, so it reaches that node's Docker engine. It is
    the reaper's own rule (owner process gone on this host, or past its TTL), told that
    `dead_pid` is gone even if the number was already reused.
    """
    client = docker_client()
    try:
        report = reap_containers(client, owner_alive=lambda pid: pid != dead_pid and pid_alive(pid))
    finally:
        client.close()
    return len(report.removed)
