"""Virtual time: an asyncio event loop whose clock jumps to the next timer instead of waiting.

The same asyncio code (agent loop, scheduler shell, simulated engine and envs) runs unchanged on
this loop; `asyncio.sleep`, `loop.call_later`, `asyncio.timeout` and `asyncio.wait_for` all read
`loop.time()`, which here is a virtual clock. When no callback is ready and no I/O is pending, the
loop advances the clock straight to the earliest scheduled timer, so a one-hour rollout takes as
long as the Python code it runs. Components read the time through `foundation.clock.LoopClock`.

How it works: `SelectorEventLoop` asks its selector to wait up to `timeout` seconds (the gap to the
next timer). `_FastForwardSelector` polls the real selector without blocking and, if nothing is
ready, advances the virtual clock by `timeout` instead of sleeping. Blocking is real only when no
timer is scheduled at all (the loop then waits for I/O or a thread, exactly as a normal loop does).

Compared with the `looptime` package (which patches an existing loop's `time()` and `select()`,
adds configurable "noop cycles" and an idle "end of time", and is aimed at pytest), this is a
plain subclass with one documented knob, so model code cannot tell the clocks apart (the SimPy
`rt.py` idea in reverse). Work done in threads (`run_in_executor`) and real socket I/O take zero
virtual time; set `real_io_wait_s` when real sockets must get a chance to answer before the
clock jumps.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

__all__ = ["VirtualTimeLoop", "run_virtual"]

T = TypeVar("T")

# The loop always registers one file descriptor of its own: the self-pipe that wakes it from
# other threads (`call_soon_threadsafe`). More registered descriptors mean real sockets exist.
_SELF_PIPE_FDS = 1


class _VirtualClock:
    """The loop's virtual now, shared by the loop (reads it) and its selector (advances it)."""

    __slots__ = ("now_s",)

    def __init__(self, start_s: float) -> None:
        self.now_s = start_s


class _FastForwardSelector(selectors.BaseSelector):
    """Delegates to a real selector, but turns an idle wait into a jump of the virtual clock."""

    def __init__(
        self, clock: _VirtualClock, real: selectors.BaseSelector, real_io_wait_s: float
    ) -> None:
        self._clock = clock
        self._real = real
        self._real_io_wait_s = real_io_wait_s
        self._registered = 0  # file descriptors registered (the wake-up pipe counts)

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        key = self._real.register(fileobj, events, data)
        self._registered += 1
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        key = self._real.unregister(fileobj)
        self._registered -= 1
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._real.get_map()

    def close(self) -> None:
        self._real.close()

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Return ready I/O at once; otherwise advance the clock by `timeout` and return none."""
        if timeout is None:
            # No timer at all: only I/O or another thread can make progress; wait for real.
            return self._real.select(None)
        if timeout <= 0 and self._registered <= _SELF_PIPE_FDS:
            # Callbacks are ready and no socket is open: the wake-up pipe only says that
            # another thread queued a callback (already in the ready queue) or a signal came;
            # it is read before the clock next moves. Two in three iterations of a simulation
            # are such, and a poll costs as much as a small callback.
            return []
        events = self._real.select(0)
        if events or timeout <= 0:
            return events
        if self._real_io_wait_s > 0 and len(self._real.get_map()) > _SELF_PIPE_FDS:
            events = self._real.select(min(timeout, self._real_io_wait_s))
            if events:
                return events
        self._clock.now_s += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a virtual clock that fast-forwards over idle time.

    Args:
        start_s: the virtual time the loop starts at (seconds).
        real_io_wait_s: wall seconds to wait for real socket I/O before jumping the clock; only
            used while sockets other than the loop's own wake-up pipe are registered. 0 means
            never wait (pure simulation).

    Example:
        >>> loop = VirtualTimeLoop()
        >>> loop.run_until_complete(asyncio.sleep(3600.0))
        >>> loop.time()
        3600.0
        >>> loop.close()
    """

    def __init__(self, start_s: float = 0.0, real_io_wait_s: float = 0.0) -> None:
        self._virtual_clock = _VirtualClock(start_s)
        selector = _FastForwardSelector(
            self._virtual_clock, selectors.DefaultSelector(), real_io_wait_s
        )
        super().__init__(selector)
        if real_io_wait_s < 0:
            self.close()
            raise ValueError(f"real_io_wait_s must be >= 0 seconds, got {real_io_wait_s!r}")

    def time(self) -> float:
        """The virtual time in seconds."""
        return self._virtual_clock.now_s


def run_virtual(
    main: Coroutine[Any, Any, T] | Callable[[], Awaitable[T]],
    *,
    start_s: float = 0.0,
    real_io_wait_s: float = 0.0,
    debug: bool | None = None,
) -> T:
    """Run `main` to completion on a fresh `VirtualTimeLoop`, like `asyncio.run`.

    `main` is a coroutine, or a zero-argument async callable (then it is called inside the loop,
    which is handy when building the coroutine needs a running loop). Remaining tasks are
    cancelled and the loop is closed afterwards.
    """

    def factory() -> asyncio.AbstractEventLoop:
        return VirtualTimeLoop(start_s=start_s, real_io_wait_s=real_io_wait_s)

    async def call() -> T:
        assert callable(main)
        return await main()

    coro = main if asyncio.iscoroutine(main) else call()
    with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
        return runner.run(coro)
