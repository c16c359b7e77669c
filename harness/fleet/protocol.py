"""What the rollout layer needs of an env pool and of one lease, as structural types.

`EnvPool` / `EnvLease` (one machine's Docker engine) satisfy them, and so do `PoolFleet` (one pool
over several) and the Ray worker proxies, so `PoolSessions` drives any of them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, Self

from harness.env import ResetReturn, StepReturn
from harness.pool import PoolStats

__all__ = ["Lease", "LeasePool"]


class Lease(Protocol):
    """One sample's env: `areset`, `astep` until the episode ends, then `release`.

    `infra_error` is set when the episode ended for an infrastructure reason (the sandbox or
    its host died): the sample is retried, never graded.
    """

    sample_id: str
    group_id: str
    image: str
    infra_error: str | None

    def set_priority(self, priority: int) -> None: ...

    async def areset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> ResetReturn: ...

    async def astep(self, action: str) -> StepReturn: ...

    async def release(self) -> None: ...


class LeasePool(Protocol):
    """Leases envs on warm sandboxes; used as an async context manager."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc_info: object) -> None: ...

    async def aclose(self) -> None: ...

    def prewarm(self, images: Iterable[str]) -> None: ...

    async def acquire(
        self,
        factory: Any,  # an EnvFactory (handle -> AgentEnv); a Ray member ships it to its node
        image: str,
        *,
        sample_id: str = "",
        group_id: str = "",
        priority: int = 0,
    ) -> Lease: ...

    def warm_count(self, image: str) -> int: ...

    def stats(self) -> PoolStats: ...

    @property
    def capacity(self) -> int:
        """How many sandboxes it may keep live at once (its `max_live`)."""
        ...

    @property
    def leased(self) -> int:
        """Leases not yet released."""
        ...
