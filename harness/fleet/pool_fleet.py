"""`PoolFleet`: one `LeasePool` over several members (Docker hosts, Ray nodes).

The rollout layer sees one pool: `prewarm` homes each image on one member (see `placement`),
`acquire` places a lease by warm sandboxes, home and load, and `stats` adds the members up.
Act slots stay per member: an action runs where its sandbox is, so each host's `act_slots`
bounds the actions that host runs at once, granted in priority order there.

A member that is gone (its daemon stayed away past its `daemon_outage_s`, its Ray worker died)
raises `DockerGoneError` from `acquire`; the fleet marks it down, logs it once and places the
lease elsewhere. The samples that were running there end with an infra error and are retried
on the others. Only when every member is down does `acquire` raise, and the run ends.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Self

from harness.errors import DockerGoneError, HarnessError
from harness.fleet.placement import MemberLoad, choose_home, choose_member
from harness.fleet.protocol import Lease, LeasePool
from harness.pool import PoolStats

__all__ = ["FleetMember", "PoolFleet"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FleetMember:
    """One member of a fleet: a name for logs and reports, and its pool."""

    name: str
    pool: LeasePool


class PoolFleet:
    """See the module docstring. Use it as an async context manager."""

    def __init__(self, members: Sequence[FleetMember]) -> None:
        names = [member.name for member in members]
        if not members or len(set(names)) != len(names):
            raise ValueError(f"a pool fleet needs members with unique names, got {names}")
        self._members = {member.name: member.pool for member in members}
        self._down: dict[str, str] = {}  # member -> why
        self._homes: dict[str, str] = {}  # image -> member
        self._stack: AsyncExitStack | None = None

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(self._members)

    def down(self) -> dict[str, str]:
        """The members marked down, with the reason."""
        return dict(self._down)

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        stack = AsyncExitStack()
        await stack.__aenter__()
        try:
            for name, pool in self._members.items():
                try:
                    await stack.enter_async_context(pool)
                except HarnessError as exc:  # a host that is unreachable at start
                    self._mark_down(name, f"could not start: {exc}")
            if len(self._down) == len(self._members):
                raise DockerGoneError(f"no pool member could start: {self._down_text()}")
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every member (each removes its sandboxes). Idempotent."""
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()

    # -- the LeasePool API --------------------------------------------------------------------

    def prewarm(self, images: Iterable[str]) -> None:
        """Announce upcoming images; each is warmed on its home member."""
        by_member: dict[str, list[str]] = {}
        for image in images:
            home = self._home_of(image)
            if home is not None:
                by_member.setdefault(home, []).append(image)
        for name, homed in by_member.items():
            self._members[name].prewarm(homed)

    async def acquire(
        self,
        factory: Any,
        image: str,
        *,
        sample_id: str = "",
        group_id: str = "",
        priority: int = 0,
    ) -> Lease:
        """A lease from the best member for `image` (see `placement`).

        Raises:
            DockerGoneError: every member is down.
        """
        while True:
            home = self._home_of(image)
            name = choose_member(self._loads(image), home)
            if name is None:
                raise DockerGoneError(f"every pool member is down: {self._down_text()}")
            try:
                return await self._members[name].acquire(
                    factory, image, sample_id=sample_id, group_id=group_id, priority=priority
                )
            except DockerGoneError as exc:
                self._mark_down(name, str(exc))

    def warm_count(self, image: str) -> int:
        return sum(pool.warm_count(image) for pool in self._up_pools())

    def stats(self) -> PoolStats:
        per_member = [pool.stats() for pool in self._members.values()]
        return PoolStats(
            live=sum(stats.live for stats in per_member),
            warm=sum(stats.warm for stats in per_member),
            leased=sum(stats.leased for stats in per_member),
            cold_starts=sum(stats.cold_starts for stats in per_member),
            warm_hits=sum(stats.warm_hits for stats in per_member),
            replaced_dead=sum(stats.replaced_dead for stats in per_member),
        )

    def member_stats(self) -> dict[str, PoolStats]:
        """Each member's own stats, for reports."""
        return {name: pool.stats() for name, pool in self._members.items()}

    @property
    def capacity(self) -> int:
        return sum(pool.capacity for pool in self._up_pools())

    @property
    def leased(self) -> int:
        return sum(pool.leased for pool in self._members.values())

    # -- placement ----------------------------------------------------------------------------

    def _loads(self, image: str) -> list[MemberLoad]:
        homes: dict[str, int] = {}
        for member in self._homes.values():
            homes[member] = homes.get(member, 0) + 1
        return [
            MemberLoad(
                name,
                up=name not in self._down,
                leased=pool.leased,
                capacity=pool.capacity,
                warm=pool.warm_count(image) if name not in self._down else 0,
                homes=homes.get(name, 0),
            )
            for name, pool in self._members.items()
        ]

    def _home_of(self, image: str) -> str | None:
        home = self._homes.get(image)
        if home is None or home in self._down:
            home = choose_home(self._loads(image))
            if home is not None:
                self._homes[image] = home
        return home

    def _mark_down(self, name: str, why: str) -> None:
        if name in self._down:
            return
        self._down[name] = why
        up = len(self._members) - len(self._down)
        log.warning("pool member %s is down (%s); %d of %d left", name, why, up, len(self._members))

    def _up_pools(self) -> list[LeasePool]:
        return [pool for name, pool in self._members.items() if name not in self._down]

    def _down_text(self) -> str:
        return "; ".join(f"{name}: {why}" for name, why in self._down.items())
