"""Graceful shutdown for long commands: SIGTERM / SIGINT cancel the run, a second one exits.

The first signal cancels the command's main task, so every `async with` above it unwinds: the
conductor stops admitting and aborts generations, the env pool removes every container the run
made (agent and grading), the recorder flushes and closes its files. The command then exits with
128 + the signal number and a line saying what was kept. A second signal exits at once (the
reaper removes what is left at the next start, as after `kill -9`).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["Interrupted", "run_until_signal"]

T = TypeVar("T")
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupted(Exception):
    """The run was stopped by a signal after a clean shutdown."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def run_until_signal(main: Callable[[], Awaitable[T]], on_first: Callable[[int], None]) -> T:
    """`asyncio.run(main())`, shut down cleanly on the first SIGTERM / SIGINT.

    Raises:
        Interrupted: a signal stopped the run (after its clean-up ran).
    """
    received: list[int] = []

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: int) -> None:
            if received:
                os._exit(128 + signum)  # the second signal: now, without clean-up
            received.append(signum)
            on_first(signum)
            task.cancel()

        for signum in _SIGNALS:
            loop.add_signal_handler(signum, on_signal, signum)
        try:
            return await main()
        except asyncio.CancelledError:
            if received:
                raise Interrupted(received[0]) from None
            raise
        finally:
            for signum in _SIGNALS:
                loop.remove_signal_handler(signum)

    return asyncio.run(guarded())
