"""Where an SWE episode's sandbox comes from: an env-pool handle, or a per-episode lender.

* `HandleSource` wraps a `harness.handle.SandboxHandle` (what `EnvPool` gives each env): the
  sandbox may still be starting at `reset`, so `reset` does not wait for it; the first action
  does. A pooled handle serves one episode (the pool makes a new env per lease); an
  `OwnedSandboxHandle` makes a fresh sandbox after each `aclose`, so it serves many.
* `ProviderSource` wraps `async acquire(task) -> (sandbox, release)` (or an object with that
  `acquire` method): a sandbox is borrowed at `reset` and given back when the episode ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, runtime_checkable

from envs.swe.grading import EpisodeTask
from harness.errors import HarnessError, SandboxDeadError
from harness.handle import SandboxHandle
from harness.sandbox.base import Sandbox

__all__ = [
    "AcquireSandbox",
    "HandleSource",
    "ProviderSource",
    "ReleaseSandbox",
    "SandboxProvider",
    "SandboxSource",
    "sandbox_source",
]

ReleaseSandbox = Callable[[], Awaitable[None]]
"""Gives a sandbox back to whoever lent it (who destroys or recycles it)."""

AcquireSandbox = Callable[[EpisodeTask], Awaitable[tuple[Sandbox, ReleaseSandbox]]]
"""A coroutine function that lends a sandbox for a task."""


@runtime_checkable
class SandboxProvider(Protocol):
    """Lends sandboxes for tasks."""

    async def acquire(self, task: EpisodeTask) -> tuple[Sandbox, ReleaseSandbox]: ...


class SandboxSource(Protocol):
    """The env's view of its sandbox supply, one episode at a time."""

    async def begin(self, task: EpisodeTask) -> None:
        """Prepare a sandbox for a new episode of `task` (the previous one must be ended)."""
        ...

    async def get(self) -> Sandbox:
        """The episode's sandbox (waits while it starts). Raises SandboxError if there is none."""
        ...

    async def end(self) -> None:
        """The episode is over: give back what was lent for it. Idempotent."""
        ...

    async def aclose(self) -> None:
        """The env closes. Idempotent."""
        ...


class HandleSource:
    """A `SandboxHandle` as a sandbox source."""

    def __init__(self, handle: SandboxHandle) -> None:
        self._handle = handle
        self._previous: Sandbox | None = None

    async def begin(self, task: EpisodeTask) -> None:
        reused = (
            self._previous is not None
            and self._handle.ready
            and await self._handle.get() is self._previous
        )
        if reused:
            raise HarnessError(
                "this sandbox handle gives back the sandbox of the previous episode; take a "
                "new lease (a new env) from the pool for each episode"
            )

    async def get(self) -> Sandbox:
        sandbox = await self._handle.get()
        self._previous = sandbox
        return sandbox

    async def end(self) -> None:
        await self._handle.aclose()

    async def aclose(self) -> None:
        await self._handle.aclose()


class ProviderSource:
    """An `acquire(task)` lender as a sandbox source; checks the lent sandbox is alive."""

    def __init__(self, acquire: AcquireSandbox) -> None:
        self._acquire = acquire
        self._sandbox: Sandbox | None = None
        self._release: ReleaseSandbox | None = None

    async def begin(self, task: EpisodeTask) -> None:
        await self.end()
        sandbox, release = await self._acquire(task)
        if not await sandbox.is_alive():
            await release()
            raise SandboxDeadError(
                f"the sandbox lent for {task.instance_id} is not alive; check the sandbox backend"
            )
        self._sandbox, self._release = sandbox, release

    async def get(self) -> Sandbox:
        if self._sandbox is None:
            raise SandboxDeadError("the episode's sandbox was already given back")
        return self._sandbox

    async def end(self) -> None:
        release, self._release = self._release, None
        self._sandbox = None
        if release is not None:
            await release()

    async def aclose(self) -> None:
        await self.end()


def sandbox_source(sandboxes: SandboxHandle | SandboxProvider | AcquireSandbox) -> SandboxSource:
    """Wrap whichever kind of sandbox supply the env was given."""
    if isinstance(sandboxes, SandboxHandle):
        return HandleSource(sandboxes)
    if isinstance(sandboxes, SandboxProvider):
        return ProviderSource(sandboxes.acquire)
    if callable(sandboxes):
        return ProviderSource(sandboxes)
    raise TypeError(
        "sandboxes must be a SandboxHandle, an object with `async acquire(task)`, or an async "
        f"function (task) -> (sandbox, release); got {type(sandboxes).__name__}"
    )
