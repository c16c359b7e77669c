"""Clocks: the one place the harness and the rollout layer read the time.

Every component takes a `Clock`, so the same code runs in wall-clock time and in virtual time
(the simulated engine runs the asyncio loop fast-forward; `LoopClock` then reads virtual time).
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "LoopClock", "ManualClock", "MonotonicClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of seconds. Only differences between readings are meaningful."""

    def now(self) -> float:
        """Return the current time in seconds."""
        ...


class MonotonicClock:
    """Wall-clock seconds from `time.monotonic()`; for synchronous code outside an event loop."""

    def now(self) -> float:
        return time.monotonic()


class LoopClock:
    """The running asyncio loop's time: wall time on a normal loop, virtual on a fast-forward one.

    Falls back to `time.monotonic()` when called outside a running loop, which is the same clock
    a default asyncio loop uses.
    """

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; for tests of pure logic."""

    def __init__(self, start_s: float = 0.0) -> None:
        self._now_s = start_s

    def now(self) -> float:
        return self._now_s

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds!r} s)")
        self._now_s += seconds
