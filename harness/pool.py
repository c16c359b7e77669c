"""`EnvPool`: warm sandboxes per image, leased envs, priority-ordered act slots, step events.

* **Warm start.** For every image in demand (announced by `prewarm`, or seen in `acquire`) the
  pool keeps `warm_per_image` started sandboxes ready. `acquire` returns a lease at once; if a
  warm sandbox exists the lease owns it immediately, otherwise one starts in the background and
  the env's first action waits for it (that wait is the step's `pre_act` time, and the
  container start overlaps the sample's first generation).
* **Act slots.** At most `act_slots` actions execute at once; waiting steps are granted by
  priority (critical groups first), FIFO within a level.
* **Lifecycle.** `release` destroys the sandbox (a fresh one per episode is cheaper and safer
  than cleaning one) and the warm set refills in the background. A sandbox that dies mid-episode
  ends the episode with `info["infra_error"]` instead of a reward, and is replaced. `max_live`
  bounds all live sandboxes (warm, starting and leased).

Use it as an async context manager; leaving the block destroys every sandbox it made.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, model_validator

from foundation.clock import Clock, LoopClock
from foundation.config import FrozenConfig
from harness.backends import SandboxBackend
from harness.env import AgentEnv, ResetReturn, StepReturn
from harness.errors import (
    DockerGoneError,
    DockerUnavailableError,
    PoolClosedError,
    SandboxDeadError,
    SandboxError,
)
from harness.events import EventBus, Phase, StepEvent
from harness.handle import PooledSandboxHandle, SandboxHandle
from harness.sandbox.base import Sandbox
from harness.sandbox.limits import ContainerLimits, ExecLimits
from harness.slots import PrioritySlots

__all__ = ["DockerHostConfig", "EnvFactory", "EnvLease", "EnvPool", "PoolConfig", "PoolStats"]

log = logging.getLogger(__name__)

EnvFactory = Callable[[SandboxHandle], AgentEnv]


DOCKER_ENDPOINT_SCHEMES = ("unix", "tcp")
"""The `DOCKER_HOST` URL schemes a host endpoint may use (ssh needs paramiko, which we lack:
forward the remote socket with `ssh -L` and name the local end as unix://)."""


class DockerHostConfig(FrozenConfig):
    """One Docker daemon of a several-host pool (`pool.hosts`): where it is, and what it takes.

    The limits left unset are the pool's own (`max_live`, `act_slots`, ...), applied per host.
    """

    name: str = Field(
        ...,
        min_length=1,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="the host's name in logs, reports and errors (unique in the pool)",
    )
    endpoint: str | None = Field(
        None,
        description="its daemon as a DOCKER_HOST URL: unix:///path/docker.sock or tcp://host:2375 "
        "(exactly one of endpoint and context)",
    )
    context: str | None = Field(
        None,
        description="a Docker context (`docker context ls`) whose endpoint and TLS settings "
        "are used; resolved when the pool is built",
    )
    max_live: int | None = Field(None, ge=1, description="this host's bound on live sandboxes")
    act_slots: int | None = Field(None, ge=1, description="actions this host runs at once")
    start_concurrency: int | None = Field(
        None, ge=1, description="sandboxes this host's daemon starts at the same time"
    )
    daemon_outage_s: float | None = Field(
        None,
        ge=0,
        description="how long this host's daemon may stop answering before the host is marked "
        "down and its samples go to the others (s)",
    )

    @model_validator(mode="after")
    def _one_endpoint(self) -> DockerHostConfig:
        if (self.endpoint is None) == (self.context is None):
            raise ValueError(
                f"host {self.name!r} needs exactly one of `endpoint` (a DOCKER_HOST URL such as "
                "unix:///var/run/docker.sock) and `context` (a `docker context ls` name)"
            )
        if self.endpoint is not None:
            scheme, separator, rest = self.endpoint.partition("://")
            if not separator or scheme not in DOCKER_ENDPOINT_SCHEMES or not rest:
                schemes = ", ".join(f"{known}://" for known in DOCKER_ENDPOINT_SCHEMES)
                raise ValueError(
                    f"host {self.name!r}: endpoint {self.endpoint!r} is not a Docker URL this "
                    f"pool can reach; use one of {schemes} (e.g. unix:///var/run/docker.sock, "
                    "tcp://10.0.0.2:2375), or a Docker context"
                )
        return self


class PoolConfig(FrozenConfig):
    """Configuration of the env pool (`configs/pool/default.yaml`)."""

    backend: Literal["auto", "docker", "local"] = Field(
        "auto",
        description="sandbox backend; auto = docker (no silent fall back to the unisolated "
        "local backend: name `local`, or set CONDUCTOR_ALLOW_HOST_SANDBOX=1)",
    )
    warm_per_image: int = Field(2, ge=0, description="started sandboxes kept ready per image")
    max_live: int = Field(32, ge=1, description="bound on live sandboxes (warm+starting+leased)")
    act_slots: int = Field(8, ge=1, description="actions allowed to execute at the same time")
    start_concurrency: int = Field(
        4, ge=1, description="sandboxes started at the same time (the daemon is the bottleneck)"
    )
    workdir: str = Field("/testbed", description="working directory inside each sandbox")
    reap_on_start: bool = Field(True, description="remove leftovers of dead owners on start")
    daemon_outage_s: float = Field(
        120.0,
        ge=0,
        description="how long a sandbox start waits for a Docker daemon that stopped answering "
        "(a restart), retrying with backoff, before it gives up; the pool then refuses new "
        "leases (`DockerGoneError`) and a rollout run ends with that message (s)",
    )
    daemon_retry_max_s: float = Field(
        8.0, gt=0, description="longest wait between two such retries (doubling from 0.25 s) (s)"
    )
    daemon_warning_interval_s: float = Field(
        10.0,
        ge=0,
        description="at most one 'Docker daemon not answering' warning per this long, for the "
        "whole pool, however many starts wait (s)",
    )
    cleanup_timeout_s: float = Field(
        20.0,
        ge=0,
        description="at close, how long removals the daemon cannot take yet (409 right after a "
        "restart, or an answer lost in the restart) are retried, so none is left behind; "
        "not waited for when the daemon is gone (s)",
    )
    container: ContainerLimits = Field(default_factory=ContainerLimits)
    exec: ExecLimits = Field(default_factory=ExecLimits)
    hosts: tuple[DockerHostConfig, ...] = Field(
        (),
        description="several Docker daemons, one env pool each, seen as one pool (leases "
        "spread by warm sandboxes, image home and load; a host whose daemon is gone is marked "
        "down and its samples are retried on the others); empty = the one local daemon "
        "(DOCKER_HOST or its default socket). Each host's unset limits are the fields above",
    )

    @model_validator(mode="after")
    def _hosts_are_docker_and_unique(self) -> PoolConfig:
        if not self.hosts:
            return self
        if self.backend == "local":
            raise ValueError(
                "pool.hosts are Docker daemons; they need backend docker (or auto), not local"
            )
        names = [host.name for host in self.hosts]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"pool.hosts names must be unique; repeated: {', '.join(repeated)}")
        return self

    def for_host(self, host: DockerHostConfig) -> PoolConfig:
        """This config as one host's own pool: its overrides applied, no `hosts` of its own."""
        overrides = {
            field: getattr(host, field)
            for field in ("max_live", "act_slots", "start_concurrency", "daemon_outage_s")
            if getattr(host, field) is not None
        }
        return self.model_copy(update={**overrides, "hosts": ()})


@dataclass(frozen=True, slots=True)
class PoolStats:
    live: int
    warm: int
    leased: int
    cold_starts: int
    warm_hits: int
    replaced_dead: int


class EnvLease:
    """One sample's env. Call `areset`, then `astep` until the episode ends, then `release`."""

    def __init__(
        self,
        pool: EnvPool,
        env: AgentEnv,
        handle: PooledSandboxHandle,
        *,
        image: str,
        sample_id: str,
        group_id: str,
        priority: int,
    ) -> None:
        self._pool = pool
        self.env = env
        self.handle = handle
        self.image = image
        self.sample_id = sample_id
        self.group_id = group_id
        self.priority = priority
        self.infra_error: str | None = None
        self._released = False

    def set_priority(self, priority: int) -> None:
        """Change the act-slot priority of this sample's next steps."""
        self.priority = priority

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetReturn:
        return await self.env.areset(seed=seed, options=options)

    async def astep(self, action: str) -> StepReturn:
        """Wait for the sandbox and an act slot (pre_act), act, and report the step's events."""
        return await self._pool._run_step(self, action)

    async def release(self) -> None:
        """End the lease: close the env and destroy its sandbox. Idempotent."""
        if self._released:
            return
        self._released = True
        await self._pool._release(self)


class EnvPool:
    """See the module docstring."""

    def __init__(
        self,
        backend: SandboxBackend,
        config: PoolConfig | None = None,
        *,
        clock: Clock | None = None,
        bus: EventBus | None = None,
        host: str = "",
    ) -> None:
        """`host`: the pool's host name, put in its step events' data (`host`) so a trace can
        give every host its track; "" (one pool) leaves it out."""
        self.backend = backend
        self.config = config or PoolConfig()
        self.clock = clock or LoopClock()
        self.bus = bus or EventBus()
        self.host = host
        self._warm: dict[str, deque[Sandbox]] = {}
        self._starting: dict[str, int] = {}
        self._pending: dict[str, deque[asyncio.Future[Sandbox]]] = {}  # leases awaiting a sandbox
        self._demand: set[str] = set()
        self._live = 0
        self._leased = 0
        self._cold_starts = 0
        self._warm_hits = 0
        self._replaced_dead = 0
        self._gone: DockerGoneError | None = None  # the daemon stayed away: no lease can start
        self._all: set[Sandbox] = set()
        self._act_slots = PrioritySlots(self.config.act_slots)
        self._start_gate = asyncio.Semaphore(self.config.start_concurrency)
        self._capacity = asyncio.Condition()
        self._refill_needed = asyncio.Event()
        self._warm_added = asyncio.Event()
        self._tasks: asyncio.TaskGroup | None = None
        self._refill_task: asyncio.Task[None] | None = None
        self._closed = False
        self._unremoved: set[Sandbox] = set()
        self._outage_since_s: float | None = None  # the first unanswered start of this outage
        self._gone_event = asyncio.Event()  # wakes every waiting start when the pool gives up
        self._warned_s = -math.inf
        self._unwarned = 0

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> EnvPool:
        if self.config.reap_on_start:
            removed = await self.backend.reap()
            if removed:
                log.info("reaped %d leftover sandboxes", removed)
        self._tasks = asyncio.TaskGroup()
        await self._tasks.__aenter__()
        self._refill_task = self._tasks.create_task(self._refill_loop(), name="env-pool-refill")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Destroy every sandbox this pool made and stop its background work. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._refill_task is not None:
            self._refill_task.cancel()
        async with self._capacity:  # wake starts waiting for capacity: they give up now
            self._capacity.notify_all()
        self._gone_event.set()  # and starts waiting out a Docker outage
        tasks, self._tasks = self._tasks, None
        if tasks is not None:
            # Starts in flight are awaited, not cancelled: a cancelled `to_thread` would still
            # create its container, and nobody would remove it.
            try:
                await tasks.__aexit__(None, None, None)
            except BaseExceptionGroup as group:  # a background bug must not hide the cleanup
                log.error("env pool background task failed: %r", group)
        leftovers = [*self._all, *self._unremoved]
        await asyncio.gather(*(_close_quietly(sandbox) for sandbox in leftovers))
        await self._remove_what_is_left(leftovers)
        self._all.clear()
        self._unremoved.clear()
        self._warm.clear()

    async def _remove_what_is_left(self, sandboxes: list[Sandbox]) -> None:
        """Retry the removals the daemon could not take at once (a restart in progress, a 409
        right after it, creations whose answer was lost) until none is left or
        `cleanup_timeout_s` passes (issue 28: a 5 s restart left 2 containers behind). One
        try only when the daemon is gone or does not answer: the next run's start reaps
        those."""
        remove_lost = getattr(self.backend, "remove_lost", None)
        deadline: float | None = None
        delay = 0.25
        while True:
            if remove_lost is not None:  # containers whose creation answer an outage swallowed
                await remove_lost()
            pending = [s for s in sandboxes if getattr(s, "removal_pending", False)]
            left = len(pending) + len(getattr(self.backend, "lost_names", ()))
            if not left:
                return
            if deadline is None:
                patient = self._gone is None and await self._daemon_answers()
                deadline = self.clock.now() + (self.config.cleanup_timeout_s if patient else 0)
            if self.clock.now() + delay > deadline:
                log.warning(
                    "%d containers could not be removed (the Docker daemon did not take it); "
                    "the next start removes them, or `conductor envs reap`",
                    left,
                )
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.daemon_retry_max_s)
            await asyncio.gather(*(_close_quietly(sandbox) for sandbox in pending))

    async def _daemon_answers(self) -> bool:
        """Whether the backend's daemon answers now (a backend without one: True)."""
        ping = getattr(self.backend, "ping", None)
        if ping is None:
            return True
        try:
            await ping()
        except SandboxError:
            return False
        return True

    # -- public API ---------------------------------------------------------------------------

    def prewarm(self, images: Iterable[str]) -> None:
        """Announce images that upcoming samples will need, so warm sandboxes are ready."""
        self._check_open()
        self._demand.update(images)
        self._refill_needed.set()

    async def acquire(
        self,
        factory: EnvFactory,
        image: str,
        *,
        sample_id: str = "",
        group_id: str = "",
        priority: int = 0,
    ) -> EnvLease:
        """A lease on a new env for `image`; returns at once (the sandbox may still start).

        Raises:
            DockerGoneError: a start already gave up on the daemon (`daemon_outage_s`).
        """
        self._check_open()
        if self._gone is not None:
            raise self._gone
        assert self._tasks is not None, "use `async with EnvPool(...)`"
        self._demand.add(image)
        requested_s = self.clock.now()
        future: asyncio.Future[Sandbox] = asyncio.get_running_loop().create_future()
        warm = self._warm.get(image)
        if warm:
            future.set_result(warm.popleft())
            self._warm_hits += 1
        else:
            self._cold_starts += 1
            self._pending.setdefault(image, deque()).append(future)
            self._tasks.create_task(self._start_for_lease(image, future))
        self._leased += 1
        self._refill_needed.set()
        future.add_done_callback(
            lambda done: self._emit_env_init(
                done, requested_s, sample_id, group_id, image, bool(warm)
            )
        )
        handle = PooledSandboxHandle(future, sibling=self.backend.create)
        lease = EnvLease(
            self,
            factory(handle),
            handle,
            image=image,
            sample_id=sample_id,
            group_id=group_id,
            priority=priority,
        )
        return lease

    def stats(self) -> PoolStats:
        return PoolStats(
            live=self._live,
            warm=sum(len(queue) for queue in self._warm.values()),
            leased=self._leased,
            cold_starts=self._cold_starts,
            warm_hits=self._warm_hits,
            replaced_dead=self._replaced_dead,
        )

    def warm_count(self, image: str) -> int:
        return len(self._warm.get(image, ()))

    @property
    def capacity(self) -> int:
        """How many sandboxes it may keep live at once (`max_live`)."""
        return self.config.max_live

    @property
    def leased(self) -> int:
        """Leases not yet released."""
        return self._leased

    async def wait_warm(self, image: str, count: int | None = None) -> None:
        """Wait until `count` (default: warm_per_image) warm sandboxes of `image` are ready."""
        target = self.config.warm_per_image if count is None else count
        self.prewarm([image])
        while self.warm_count(image) < target:
            self._warm_added.clear()
            await self._warm_added.wait()

    # -- steps --------------------------------------------------------------------------------

    async def _run_step(self, lease: EnvLease, action: str) -> StepReturn:
        self._check_open()
        waited_from_s = self.clock.now()
        try:
            sandbox = await lease.handle.get()
        except SandboxError as exc:
            return self._infra_failure(lease, None, f"sandbox_start_failed: {exc}", waited_from_s)
        async with self._act_slots.hold(lease.priority):
            started_s = self.clock.now()
            try:
                observation, reward, terminated, truncated, info = await lease.env.astep(action)
            except SandboxDeadError as exc:
                return self._infra_failure(lease, sandbox, f"sandbox_dead: {exc}", waited_from_s)
            ended_s = self.clock.now()
        pre_act_s = started_s - waited_from_s
        self._emit(Phase.PRE_ACT, waited_from_s, started_s, lease, {})
        self._emit(
            Phase.ACT, started_s, ended_s, lease, {"pre_act_s": pre_act_s, "step": lease.env.steps}
        )
        info = {**info, "pre_act_s": pre_act_s, "act_s": ended_s - started_s}
        if info.get("infra_error"):
            lease.infra_error = str(info["infra_error"])
            if not await sandbox.is_alive():
                self._discard_dead(sandbox)
        if terminated or truncated:
            self._emit(
                Phase.REWARD,
                ended_s,
                ended_s,
                lease,
                {"reward": reward, "infra_error": lease.infra_error},
            )
        return observation, reward, terminated, truncated, info

    def _infra_failure(
        self, lease: EnvLease, sandbox: Sandbox | None, message: str, waited_from_s: float
    ) -> StepReturn:
        lease.infra_error = message
        if sandbox is not None:
            self._discard_dead(sandbox)
        now_s = self.clock.now()
        self._emit(Phase.INFRA_ERROR, waited_from_s, now_s, lease, {"message": message})
        self._emit(Phase.REWARD, now_s, now_s, lease, {"reward": 0.0, "infra_error": message})
        return infra_error_step(message)

    # -- sandbox lifetime ---------------------------------------------------------------------

    async def _start_for_lease(self, image: str, future: asyncio.Future[Sandbox]) -> None:
        """Start a sandbox for a lease, unless a warm one reaches the lease first."""
        if not await self._reserve_capacity(image, future):
            if not future.done():
                future.set_exception(
                    PoolClosedError("the env pool closed before a sandbox was free")
                )
            return
        if future.done():  # served by a warm sandbox while waiting for capacity
            await self._free_capacity()
            return
        try:
            sandbox = await self._start(image)
        except SandboxError as exc:
            await self._free_capacity()
            if not future.done():
                future.set_exception(exc)
            return
        if future.done():  # released before it started, or served by a warm sandbox meanwhile
            self._add_warm(image, sandbox)
        else:
            future.set_result(sandbox)

    async def _start(self, image: str) -> Sandbox:
        async with self._start_gate:
            sandbox = await self._create_waiting_out_outages(image)
        self._all.add(sandbox)
        return sandbox

    async def _create_waiting_out_outages(self, image: str) -> Sandbox:
        """`backend.create`, retried with backoff while the Docker daemon does not answer (it
        is restarting); other failures raise at once.

        The outage is the pool's, not each start's: it began at the first unanswered start,
        and when it has lasted `daemon_outage_s` every waiting start gives up at once
        (`DockerGoneError`), however late it began waiting. Warnings are the pool's too, at
        most one per `daemon_warning_interval_s`.
        """
        delay = 0.25
        while True:
            if self._gone is not None:
                raise self._gone
            try:
                sandbox = await self.backend.create(image)
            except DockerUnavailableError as exc:
                self._drop_warm()  # a restarted daemon has stopped them
                now_s = self.clock.now()
                if self._outage_since_s is None:
                    self._outage_since_s = now_s
                waited_s = now_s - self._outage_since_s
                limit_s = self.config.daemon_outage_s
                if self._gone is None and waited_s >= limit_s:
                    self._gone = DockerGoneError(
                        f"{exc}; gave up after waiting {limit_s:g} s (pool.daemon_outage_s)"
                    )
                    self._gone_event.set()
                if self._gone is not None:
                    raise self._gone from exc
                if self._closed:
                    raise  # the pool is closing: no start waits out the outage any more
                self._warn_outage(exc, waited_s)
                with contextlib.suppress(TimeoutError):  # woken early when the pool gives up
                    await asyncio.wait_for(self._gone_event.wait(), min(delay, limit_s - waited_s))
                delay = min(delay * 2, self.config.daemon_retry_max_s)
                continue
            self._outage_since_s = None
            return sandbox

    def _warn_outage(self, exc: DockerUnavailableError, waited_s: float) -> None:
        now_s = self.clock.now()
        if now_s - self._warned_s < self.config.daemon_warning_interval_s:
            self._unwarned += 1
            return
        held = f" ({self._unwarned} more retries since the last warning)" if self._unwarned else ""
        log.warning(
            "Docker daemon not answering for %.0f s; starts wait up to pool.daemon_outage_s = "
            "%g s%s: %s",
            waited_s,
            self.config.daemon_outage_s,
            held,
            exc,
        )
        self._warned_s, self._unwarned = now_s, 0

    async def _release(self, lease: EnvLease) -> None:
        self._leased -= 1
        try:
            await lease.env.aclose()
        finally:
            if lease.handle.ready:
                await self._destroy(await lease.handle.get())
            else:
                lease.handle.cancel()
        self._refill_needed.set()

    def _discard_dead(self, sandbox: Sandbox) -> None:
        self._replaced_dead += 1
        if getattr(sandbox, "daemon_lost", False):
            self._drop_warm()  # the daemon went away: the warm ones are dead too
        if self._tasks is not None:
            self._tasks.create_task(self._destroy(sandbox))

    def _drop_warm(self) -> None:
        """Destroy every warm sandbox (after a daemon outage none can be trusted), so that
        leases start fresh ones instead of failing on dead ones; the refill re-creates them."""
        dropped = [sandbox for queue in self._warm.values() for sandbox in queue]
        self._warm.clear()
        for sandbox in dropped:
            self._replaced_dead += 1
            if self._tasks is not None:
                self._tasks.create_task(self._destroy(sandbox))

    async def _destroy(self, sandbox: Sandbox) -> None:
        if sandbox not in self._all:
            return
        self._all.discard(sandbox)
        await self._close_tracked(sandbox)
        await self._free_capacity()

    async def _close_tracked(self, sandbox: Sandbox) -> None:
        await _close_quietly(sandbox)
        if getattr(sandbox, "removal_pending", False):
            self._unremoved.add(sandbox)  # the daemon was away: removed again at close

    async def _reserve_capacity(self, image: str, future: asyncio.Future[Sandbox]) -> bool:
        """Count one more live sandbox, waiting for room; False if the pool closed meanwhile.

        Also returns (with one sandbox counted, for the caller to free) as soon as `future` was
        served by a warm sandbox while waiting.
        """
        async with self._capacity:
            while self._live >= self.config.max_live:
                if self._closed:
                    return False
                if future.done():
                    break
                victim = self._warm_victim(image)
                if victim is not None:  # a waiting sample beats a warm spare of another image
                    self._all.discard(victim)
                    self._live -= 1
                    assert self._tasks is not None
                    self._tasks.create_task(self._close_tracked(victim))
                    break
                await self._capacity.wait()
            self._live += 1
            return True

    async def _free_capacity(self, *, refill: bool = True) -> None:
        """Count one live sandbox less and wake waiters; `refill=False` after a failed warm start,
        so a broken image does not retry in a tight loop."""
        async with self._capacity:
            self._live -= 1
            self._capacity.notify_all()
        if refill:
            self._refill_needed.set()

    def _warm_victim(self, image: str) -> Sandbox | None:
        for other, queue in self._warm.items():
            if other != image and queue:
                return queue.pop()
        return None

    async def _refill_loop(self) -> None:
        while True:
            await self._refill_needed.wait()
            self._refill_needed.clear()
            if self._closed:
                return
            for image in sorted(self._demand):
                missing = (
                    self.config.warm_per_image
                    - len(self._warm.get(image, ()))
                    - self._starting.get(image, 0)
                )
                for _ in range(missing):
                    # Leases waiting for a sandbox come before warm spares.
                    if self._live + self._waiting_leases() >= self.config.max_live:
                        break
                    self._live += 1
                    self._starting[image] = self._starting.get(image, 0) + 1
                    assert self._tasks is not None
                    self._tasks.create_task(self._start_warm(image))

    async def _start_warm(self, image: str) -> None:
        try:
            sandbox = await self._start(image)
        except SandboxError as exc:
            if not isinstance(exc, DockerUnavailableError):  # an outage warns on its own
                log.warning("could not start a warm sandbox for %s: %s", image, exc)
            await self._free_capacity(refill=False)
            return
        finally:
            self._starting[image] -= 1
        self._add_warm(image, sandbox)

    def _add_warm(self, image: str, sandbox: Sandbox) -> None:
        """A started sandbox goes to the oldest lease still waiting for `image`, else warm."""
        pending = self._pending.get(image)
        while pending:
            future = pending.popleft()
            if not future.done():
                future.set_result(sandbox)
                self._warm_hits += 1
                self._cold_starts -= 1
                return
        self._warm.setdefault(image, deque()).append(sandbox)
        self._warm_added.set()
        if self._tasks is not None and self._waiting_leases():
            self._tasks.create_task(self._notify_capacity())  # a new victim for a waiting lease

    def _waiting_leases(self) -> int:
        return sum(1 for queue in self._pending.values() for future in queue if not future.done())

    async def _notify_capacity(self) -> None:
        async with self._capacity:
            self._capacity.notify_all()

    # -- events -------------------------------------------------------------------------------

    def _emit(
        self, phase: Phase, start_s: float, end_s: float, lease: EnvLease, data: dict[str, Any]
    ) -> None:
        if self.host:
            data = {**data, "host": self.host}
        self.bus.emit(StepEvent(phase, start_s, end_s, lease.sample_id, lease.group_id, data))

    def _emit_env_init(
        self,
        future: asyncio.Future[Sandbox],
        requested_s: float,
        sample_id: str,
        group_id: str,
        image: str,
        warm: bool,
    ) -> None:
        if future.cancelled():
            return
        data = {"image": image, "warm": warm, "error": str(future.exception() or "") or None}
        if self.host:
            data["host"] = self.host
        self.bus.emit(
            StepEvent(Phase.ENV_INIT, requested_s, self.clock.now(), sample_id, group_id, data)
        )

    def _check_open(self) -> None:
        if self._closed:
            raise PoolClosedError("the env pool is closed; create a new one")


def infra_error_step(message: str) -> StepReturn:
    """The step return of an episode that ended for an infrastructure reason: truncated, not
    graded (the sample is retried), with `info["infra_error"]` saying why."""
    observation = f"[infrastructure error] {message}. The episode ends; it is retried, not graded."
    return (
        observation,
        0.0,
        False,
        True,
        {"infra_error": message, "truncation_reason": "infra_error"},
    )


async def _close_quietly(sandbox: Sandbox) -> None:
    try:
        await sandbox.aclose()
    except SandboxError as exc:
        log.warning("could not destroy a sandbox: %s", exc)
