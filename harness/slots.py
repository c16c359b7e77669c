"""`PrioritySlots`: a counting semaphore that grants waiters by priority, FIFO within a level.

The env pool's act slots use it: when more samples want to run a tool than there are slots,
samples of critical groups (higher priority) go first (DESIGN.md §3).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["PrioritySlots"]


class PrioritySlots:
    """`capacity` slots; `async with slots.hold(priority):` waits for one. Larger priority first."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._in_use = 0
        self._order = itertools.count()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def waiting(self) -> int:
        return sum(1 for _, _, future in self._waiters if not future.done())

    @asynccontextmanager
    async def hold(self, priority: int = 0) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()

    async def acquire(self, priority: int = 0) -> None:
        if self._in_use < self._capacity and not self.waiting:
            self._in_use += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (-priority, next(self._order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # granted just as we were cancelled: pass the slot on
            raise

    def release(self) -> None:
        if self._in_use <= 0:
            raise RuntimeError("release() without a matching acquire()")
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)  # the slot moves to this waiter; in_use is unchanged
                return
        self._in_use -= 1
