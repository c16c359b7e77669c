"""`RayPoolMember` / `RayLease`: the conductor's proxy of one Ray env worker, as a `LeasePool`.

* **Local view.** `prewarm`, `warm_count`, `stats`, `capacity` and `leased` never wait on Ray:
  they read a view that every reply and a background refresh (`refresh_s`) keep current; the
  member counts its own leases, and `prewarm` is sent by the refresh.
* **Events across the hop.** Each reply carries the step events the worker's pool emitted for
  that lease and the worker's clock reading; the member maps their times onto the conductor's
  clock (`ClockOffset`) and emits them on the conductor's bus.
* **A dead worker** (actor killed or crashed, node gone) is a value for its episodes: the step
  returns the pool's infra-error observation (retried, never graded) and the proxy emits the
  infra_error and reward events the pool would have. The member is gone from then on: the next
  `acquire` raises `WorkerGoneError`, so a `PoolFleet` marks it down. Its containers are removed
  through its node's Docker by a Ray task pinned there (`reap_worker_containers`), once at once
  and again after `reap_settle_s` and at close (a start the daemon finished late); if the node
  itself is gone, its next pool start or `conductor envs reap` removes them (they are labelled
  with the worker's pid and host).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, Self, TypeVar

from foundation.clock import Clock
from harness.env import ResetReturn, StepReturn
from harness.errors import DockerGoneError, SandboxError, WorkerGoneError
from harness.events import EventBus, Phase, StepEvent
from harness.fleet.ray_clock import ClockOffset, ClockSample
from harness.fleet.ray_config import RayPoolConfig, require_ray
from harness.fleet.ray_worker import (
    WireEvent,
    WorkerInfo,
    WorkerView,
    event_from_wire,
    reap_worker_containers,
)
from harness.pool import PoolConfig, PoolStats, infra_error_step

__all__ = ["FactoryCache", "RayLease", "RayPoolMember"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


class _Reply(Protocol):
    @property
    def now_s(self) -> float:
        """The worker's clock when it replied."""
        ...


_R = TypeVar("_R", bound=_Reply)
_NO_STATS = PoolStats(live=0, warm=0, leased=0, cold_starts=0, warm_hits=0, replaced_dead=0)


@dataclass(frozen=True, slots=True)
class _RayErrors:
    """The Ray exception types the proxy tells apart (read from Ray when a member is made)."""

    gone: tuple[type[BaseException], ...]  # the worker (actor, process or node) is dead, or
    # did not answer within its timeout
    unavailable: type[BaseException]  # unreachable for now; it may come back
    lost: tuple[type[BaseException], ...]  # gone or unreachable: a control call gives it up
    task: type[BaseException]  # a worker method raised (`.cause` is its exception)
    any: tuple[type[BaseException], ...]  # any Ray failure, or a timeout

    @classmethod
    def load(cls) -> _RayErrors:
        exceptions = require_ray().exceptions
        gone = (
            exceptions.ActorDiedError,
            exceptions.WorkerCrashedError,
            exceptions.NodeDiedError,
            exceptions.LocalRayletDiedError,
            exceptions.OwnerDiedError,
            exceptions.ActorUnschedulableError,
        )
        return cls(
            gone=(*gone, TimeoutError),
            unavailable=exceptions.ActorUnavailableError,
            lost=(*gone, TimeoutError, exceptions.ActorUnavailableError),
            task=exceptions.RayTaskError,
            any=(exceptions.RayError, TimeoutError),
        )


class FactoryCache:
    """Env factories pickled once each (Ray's cloudpickle), keyed by the digest of the pickle.

    Shared by a fleet's members, so a factory used on every node is pickled once; each worker
    receives a payload once (the members remember which keys their worker holds).
    """

    def __init__(self) -> None:
        self._by_object: dict[int, tuple[object, str, bytes]] = {}  # keeps the factory alive

    def entry(self, factory: object) -> tuple[str, bytes]:
        """(key, payload) of `factory`."""
        known = self._by_object.get(id(factory))
        if known is None:
            payload = require_ray().cloudpickle.dumps(factory)
            known = (factory, hashlib.sha256(payload).hexdigest()[:16], payload)
            self._by_object[id(factory)] = known
        return known[1], known[2]


@dataclass(frozen=True, slots=True)
class RayNode:
    """A Ray node as the fleet names it."""

    node_id: str
    address: str

    @property
    def name(self) -> str:
        return f"ray:{self.address}:{self.node_id[:8]}"


class RayLease:
    """One sample's env on a Ray worker. `areset`, `astep` until the episode ends, `release`."""

    def __init__(
        self,
        member: RayPoolMember,
        lease_id: str,
        *,
        image: str,
        sample_id: str,
        group_id: str,
        priority: int,
    ) -> None:
        self._member = member
        self.lease_id = lease_id
        self.image = image
        self.sample_id = sample_id
        self.group_id = group_id
        self.priority = priority
        self.infra_error: str | None = None
        self._released = False

    @property
    def member(self) -> str:
        """The fleet member (Ray node) this lease runs on."""
        return self._member.name

    def set_priority(self, priority: int) -> None:
        """The act-slot priority of the next steps (sent with each step)."""
        self.priority = priority

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetReturn:
        """Raises `SandboxError` (the sample is retried) if the worker is gone."""
        return await self._member._reset(self, seed, options)

    async def astep(self, action: str) -> StepReturn:
        """Act on the worker; a dead worker is an infra-error observation, not an exception."""
        return await self._member._step(self, action)

    async def release(self) -> None:
        """End the lease (the worker destroys its sandbox). Idempotent."""
        if self._released:
            return
        self._released = True
        await self._member._release(self)


class RayPoolMember:
    """See the module docstring. Use it as an async context manager (a `PoolFleet` does).

    Args:
        actor: the `EnvWorker` actor handle, made for this member on its node (the member
            owns it: it closes and kills it at the end).
        node: the node it runs on.
        pool_config: the node's pool settings (for `capacity`).
        config: timeouts, refresh and clock settings.
        bus: the conductor's bus; the worker's events are re-emitted there.
        clock: the conductor's clock; event times are mapped onto it.
        factories: the fleet's shared factory cache.
    """

    def __init__(
        self,
        actor: Any,
        node: RayNode,
        pool_config: PoolConfig,
        config: RayPoolConfig,
        *,
        bus: EventBus,
        clock: Clock,
        factories: FactoryCache | None = None,
    ) -> None:
        self._actor = actor
        self._errors = _RayErrors.load()
        self.node = node
        self._pool_config = pool_config
        self._config = config
        self.bus = bus
        self.clock = clock
        self._factories = factories or FactoryCache()
        self._shipped: set[str] = set()  # factory keys the worker holds
        self._offset = ClockOffset(config.clock_window)
        self._view = WorkerView(_NO_STATS, {}, 0.0)
        self._leased = 0
        self._unsent_prewarm: set[str] = set()
        self._wake = asyncio.Event()
        self.info: WorkerInfo | None = None
        self._gone: WorkerGoneError | None = None
        self.reaped = 0  # containers of this worker removed after it died
        self._tasks: asyncio.TaskGroup | None = None
        self._refresh: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def actor(self) -> Any:
        """The worker's actor handle (for diagnostics and tests)."""
        return self._actor

    @property
    def gone(self) -> WorkerGoneError | None:
        """Why the worker is dead, or None while it lives."""
        return self._gone

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        """Wait for the worker to start its pool.

        Raises:
            WorkerGoneError: it could not be placed or started (PoolFleet marks it down).
        """
        try:
            info: WorkerInfo = await self._call(
                self._actor.start.remote(), self._config.start_timeout_s
            )
        except self._errors.any as exc:
            require_ray().kill(self._actor, no_restart=True)
            self._closed = True
            raise WorkerGoneError(
                f"the env worker on {self.name} did not start: {_cause(exc)}; check that the "
                "node has a Docker engine and the pool's image, and that it has the actor's "
                "resources (ray.actor_num_cpus, ray.actor_resources)"
            ) from exc
        self.info = info
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._refresh = self._tasks.create_task(
            self._refresh_loop(), name=f"ray-refresh-{self.name}"
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the worker (it destroys its sandboxes) and end the actor; after a death,
        remove its containers again. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._refresh is not None:
            self._refresh.cancel()  # before the close: a view of a closed pool is an error
        if self._gone is None:
            try:
                await self._call(self._actor.close.remote(), self._config.close_timeout_s)
            except self._errors.any as exc:  # then its sandboxes are removed as a dead one's
                self._mark_gone(f"did not close: {_cause(exc)}")
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            await tasks.__aexit__(None, None, None)  # the refresh stops; a reap finishes
        if self._gone is not None:
            await self._reap()
        require_ray().kill(self._actor, no_restart=True)

    # -- the LeasePool API --------------------------------------------------------------------

    def prewarm(self, images: Iterable[str]) -> None:
        """Announce upcoming images; sent to the worker by the background refresh."""
        self._unsent_prewarm.update(images)
        self._wake.set()

    async def acquire(
        self,
        factory: Any,
        image: str,
        *,
        sample_id: str = "",
        group_id: str = "",
        priority: int = 0,
    ) -> RayLease:
        """A lease on the worker (its sandbox may still start there).

        Raises:
            WorkerGoneError: the worker is dead.
            DockerGoneError: the node's Docker daemon stayed away.
        """
        if self._gone is not None:
            raise self._gone
        key, payload = self._factories.entry(factory)
        ref = self._actor.acquire.remote(
            key, None if key in self._shipped else payload, image, sample_id, group_id, priority
        )
        self._leased += 1  # counted at once, so that placements meanwhile see it
        try:
            reply, received_s = await self._timed_call(ref, self._config.call_timeout_s)
        except BaseException as exc:
            self._leased -= 1
            if isinstance(exc, self._errors.lost):  # a member that cannot take a lease is down
                raise self._mark_gone(f"acquire failed: {_cause(exc)}") from exc
            if isinstance(exc, self._errors.task):
                cause = _unwrapped(exc)
                if isinstance(cause, DockerGoneError):
                    raise self._mark_gone(f"its Docker daemon is gone: {cause}") from exc
                raise cause from exc
            raise
        self._shipped.add(key)
        self._take_view(reply.view, received_s)
        self._emit_wire(reply.events, received_s)
        return RayLease(
            self, reply.lease_id, image=image, sample_id=sample_id, group_id=group_id,
            priority=priority,
        )  # fmt: skip

    def warm_count(self, image: str) -> int:
        return 0 if self._gone is not None else self._view.warm.get(image, 0)

    def stats(self) -> PoolStats:
        stats = self._view.stats
        if self._gone is not None:  # its sandboxes are gone (or being removed) with it
            return replace(stats, live=0, warm=0, leased=self._leased)
        return replace(stats, leased=self._leased)

    @property
    def capacity(self) -> int:
        return self._pool_config.max_live

    @property
    def leased(self) -> int:
        return self._leased

    async def wait_warm(self, image: str, count: int | None = None) -> None:
        """Wait until `count` (default: warm_per_image) warm sandboxes of `image` are ready on
        the worker (for benchmarks and tests; the rollout layer uses `prewarm`)."""
        target = self._pool_config.warm_per_image if count is None else count
        view, received_s = await self._timed_call(
            self._actor.wait_warm.remote(image, target), self._config.start_timeout_s
        )
        self._take_view(view, received_s)

    # -- lease operations ---------------------------------------------------------------------

    async def _reset(
        self, lease: RayLease, seed: int | None, options: dict[str, Any] | None
    ) -> ResetReturn:
        if self._gone is not None:
            raise SandboxError(f"the env worker on {self.name} is gone: {self._gone}")
        ref = self._actor.reset.remote(lease.lease_id, seed, options)
        try:
            reply, received_s = await self._timed_call(ref, self._config.call_timeout_s)
        except self._errors.lost as exc:
            self._mark_gone(f"reset failed: {_cause(exc)}")
            raise SandboxError(f"the env worker on {self.name} is gone: {_cause(exc)}") from exc
        except self._errors.task as exc:
            raise _unwrapped(exc) from exc
        self._emit_wire(reply.events, received_s)
        return reply.result

    async def _step(self, lease: RayLease, action: str) -> StepReturn:
        sent_s = self.clock.now()
        if self._gone is not None:
            return self._infra_failure(lease, f"worker_gone: {self._gone}", sent_s)
        ref = self._actor.step.remote(lease.lease_id, action, lease.priority)
        timeout_s = self._config.step_timeout_s or None
        try:
            reply, received_s = await self._timed_call(ref, timeout_s)
        except TimeoutError:
            limit = f"{self._config.step_timeout_s:g} s (ray.step_timeout_s)"
            return self._infra_failure(lease, f"worker_timeout: no reply in {limit}", sent_s)
        except self._errors.gone as exc:
            self._mark_gone(f"died mid-step: {_cause(exc)}")
            return self._infra_failure(lease, f"worker_gone: {_cause(exc)}", sent_s)
        except self._errors.unavailable as exc:  # may come back: no death
            return self._infra_failure(lease, f"worker_unreachable: {_cause(exc)}", sent_s)
        except self._errors.task as exc:
            raise _unwrapped(exc) from exc
        lease.infra_error = reply.infra_error
        self._emit_wire(reply.events, received_s)
        return reply.result

    async def _release(self, lease: RayLease) -> None:
        self._leased -= 1
        if self._gone is not None:
            return  # its sandbox went with the worker (and is reaped)
        try:
            reply, received_s = await self._timed_call(
                self._actor.release.remote(lease.lease_id), self._config.call_timeout_s
            )
        except self._errors.lost as exc:
            self._mark_gone(f"release failed: {_cause(exc)}")
            return
        except self._errors.task as exc:  # the sample is over either way: report, go on
            log.warning("the env worker on %s could not release a lease: %s", self.name, exc)
            return
        self._take_view(reply.view, received_s)
        self._emit_wire(reply.events, received_s)

    def _infra_failure(self, lease: RayLease, message: str, waited_from_s: float) -> StepReturn:
        """As `EnvPool`'s: infra_error and reward events, the lease marked, the value returned."""
        lease.infra_error = message
        now_s = max(self.clock.now(), waited_from_s)
        ids = (lease.sample_id, lease.group_id)
        self.bus.emit(
            StepEvent(Phase.INFRA_ERROR, waited_from_s, now_s, *ids, {"message": message})
        )
        data = {"reward": 0.0, "infra_error": message}
        self.bus.emit(StepEvent(Phase.REWARD, now_s, now_s, *ids, data))
        return infra_error_step(message)

    # -- calls, clock, events -----------------------------------------------------------------

    async def _call(self, ref: Awaitable[_T], timeout_s: float | None) -> _T:
        """Await a Ray call; on timeout cancel it and raise TimeoutError."""
        try:
            async with asyncio.timeout(timeout_s):
                return await ref
        except TimeoutError:
            with contextlib.suppress(Exception):
                require_ray().cancel(ref)
            raise

    async def _timed_call(self, ref: Awaitable[_R], timeout_s: float | None) -> tuple[_R, float]:
        """`_call`, feeding the round trip to the clock offset; returns the reply and when it
        arrived (on the conductor's clock)."""
        sent_s = self.clock.now()
        reply = await self._call(ref, timeout_s)
        received_s = self.clock.now()
        self._offset.observe(ClockSample(sent_s, received_s, reply.now_s))
        return reply, received_s

    def _emit_wire(self, events: Sequence[WireEvent], received_s: float) -> None:
        """Emit the worker's events on the conductor's bus, their times on its clock (none
        after `received_s`, when the reply that reported them arrived)."""
        for wire in events:
            end_s = self._offset.to_local(float(wire["end_s"]), received_s=received_s)
            start_s = min(
                self._offset.to_local(float(wire["start_s"]), received_s=received_s), end_s
            )
            event = event_from_wire(wire, start_s, end_s)
            if "host" not in event.data:  # the worker's node: its own track in a trace
                event = replace(event, data={**event.data, "host": self.name})
            self.bus.emit(event)

    def _take_view(self, view: WorkerView, received_s: float) -> None:
        self._view = view
        if view.events:
            self._emit_wire(view.events, received_s)

    # -- background refresh, death, reaping ---------------------------------------------------

    async def _refresh_loop(self) -> None:
        while not self._closed and self._gone is None:
            try:
                await self._send_prewarm()
                view, received_s = await self._timed_call(
                    self._actor.view.remote(), self._config.call_timeout_s
                )
                self._take_view(view, received_s)
            except self._errors.gone as exc:
                self._mark_gone(f"stopped answering: {_cause(exc)}")
                return
            except self._errors.any as exc:
                log.warning("could not refresh the env worker on %s: %s", self.name, exc)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._config.refresh_s):
                    await self._wake.wait()

    async def _send_prewarm(self) -> None:
        if not self._unsent_prewarm:
            return
        images, self._unsent_prewarm = sorted(self._unsent_prewarm), set()
        try:
            await self._call(self._actor.prewarm.remote(images), self._config.call_timeout_s)
        except BaseException:
            self._unsent_prewarm.update(images)  # sent again by the next refresh
            raise

    def _mark_gone(self, why: str) -> WorkerGoneError:
        """Record the worker's death (once) and start removing its containers."""
        if self._gone is None:
            self._gone = WorkerGoneError(
                f"the Ray env worker on {self.name} {why}; its samples are retried on the "
                "other nodes"
            )
            log.warning("%s", self._gone)
            if self._tasks is not None:
                self._tasks.create_task(self._reap_twice(), name=f"ray-reap-{self.name}")
        return self._gone

    async def _reap_twice(self) -> None:
        await self._reap()
        if self._config.reap_settle_s:
            await asyncio.sleep(self._config.reap_settle_s)
            await self._reap()

    async def _reap(self) -> None:
        """Remove the dead worker's containers through its node's Docker (a pinned Ray task)."""
        if self.info is None:
            return
        ray = require_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        task = ray.remote(reap_worker_containers).options(
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(self.node.node_id, soft=False),
        )
        try:
            removed: int = await self._call(task.remote(self.info.pid), self._config.reap_timeout_s)
        except self._errors.any as exc:
            log.warning(
                "could not remove the containers of the dead env worker on %s (pid %d on %s): "
                "%s; that host's next pool start or `conductor envs reap` removes them",
                self.name, self.info.pid, self.info.host, _cause(exc),
            )  # fmt: skip
            return
        self.reaped += removed


def _cause(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _unwrapped(exc: Any) -> BaseException:
    """A worker method's own exception (Ray wraps it in a RayTaskError)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc
