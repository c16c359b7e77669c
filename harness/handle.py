"""`SandboxHandle`: a sandbox that may still be starting.

An env receives a handle, not a sandbox, so that `reset()` can return the first observation at
once while the container starts in the background (env init overlaps the first generation). The
env awaits `handle.get()` only when it must run something.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from harness.errors import SandboxError
from harness.sandbox.base import Sandbox

__all__ = ["OwnedSandboxHandle", "PooledSandboxHandle", "SandboxHandle"]


@runtime_checkable
class SandboxHandle(Protocol):
    """What an env holds instead of a sandbox."""

    @property
    def ready(self) -> bool:
        """Whether `get()` would return without waiting."""
        ...

    async def get(self) -> Sandbox:
        """The sandbox; waits while it starts. Raises SandboxError if it cannot be had."""
        ...

    async def aclose(self) -> None:
        """Called by the env when it closes."""
        ...


class PooledSandboxHandle:
    """Resolves to a sandbox made by the env pool; the pool, not the env, destroys it.

    `sibling(image)` makes a fresh sandbox where this one runs (the same backend: the same
    Docker host or Ray node), for work the env does beside the agent's sandbox, such as grading
    in a clean one; the env closes it.
    """

    def __init__(
        self,
        future: asyncio.Future[Sandbox],
        sibling: Callable[[str], Awaitable[Sandbox]] | None = None,
    ) -> None:
        self._future = future
        self._sibling = sibling

    @property
    def ready(self) -> bool:
        return (
            self._future.done()
            and not self._future.cancelled()
            and self._future.exception() is None
        )

    async def get(self) -> Sandbox:
        """The sandbox; waits while it starts. Raises SandboxError if it could not be started."""
        try:
            return await asyncio.shield(self._future)
        except asyncio.CancelledError:
            if self._future.cancelled():
                raise SandboxError("the sandbox was released before it started") from None
            raise

    async def sibling(self, image: str) -> Sandbox:
        """A fresh sandbox from `image` on this sandbox's backend (the caller closes it).

        Raises:
            SandboxError: it cannot be created, or this handle's pool offers none.
        """
        if self._sibling is None:
            raise SandboxError("this sandbox's pool makes no sibling sandboxes")
        return await self._sibling(image)

    @property
    def makes_siblings(self) -> bool:
        return self._sibling is not None

    def cancel(self) -> None:
        """Give up on a sandbox that has not started yet (the pool destroys it on arrival)."""
        self._future.cancel()

    async def aclose(self) -> None:
        """Nothing to do: the pool owns the sandbox."""


class OwnedSandboxHandle:
    """A handle that creates its sandbox on first use and destroys it on `aclose()`.

    For an env used on its own (e.g. through `gymnasium.make`) rather than through `EnvPool`.
    """

    def __init__(self, create: Callable[[], Awaitable[Sandbox]]) -> None:
        self._create = create
        self._sandbox: Sandbox | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def ready(self) -> bool:
        return self._sandbox is not None

    async def get(self) -> Sandbox:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._sandbox is None:
                self._sandbox = await self._create()
            return self._sandbox

    async def aclose(self) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await sandbox.aclose()
