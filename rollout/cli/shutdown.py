"""Graceful shutdown for long commands: SIGTERM / SIGINT cancel the run, a second one exits.

The first signal cancels the command's main task, so every `async with` above it unwinds: the
conductor stops admitting and aborts generations, the env pool removes every container the run
made (agent and grading), the recorder flushes and closes its files. The command then exits with
128 + the signal number and a line saying what was kept. A second signal exits at once (the
reaper removes what is left at the next start, as after `kill -9`), and so does a clean stop
that has not finished within its time limit: the stop never hangs on a stuck task or daemon.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from harness.loop_watchdog import LoopWatchdogConfig

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


def run_until_signal(
    main: Callable[[], Awaitable[T]],
    on_first: Callable[[int], None],
    *,
    stop_timeout_s: float | None = None,
) -> T:
    """`asyncio.run(main())`, shut down cleanly on the first SIGTERM / SIGINT.

    The handlers are plain `signal.signal` handlers, not the loop's: Python runs them between
    two bytecodes of the main thread, so a signal is seen even while a task holds the event
    loop (issue 28: two SIGTERMs were ignored while an editor call held it for minutes). The
    first signal schedules the clean stop on the loop and starts a timer: if the process has
    not finished within `stop_timeout_s` (None: `LoopWatchdogConfig`'s default), it exits
    anyway with a line on stderr. A second signal exits at once.

    Raises:
        Interrupted: a signal stopped the run (after its clean-up ran).
    """
    limit_s = LoopWatchdogConfig().stop_timeout_s if stop_timeout_s is None else stop_timeout_s
    received: list[int] = []
    target: dict[str, Any] = {}  # the loop and the main task, once they run
    timer: list[threading.Timer] = []

    def cancel_main() -> None:
        task = target.get("task")
        if task is not None and not task.done():
            on_first(received[0])
            task.cancel()

    def on_signal(signum: int, _frame: object) -> None:
        if received:
            os._exit(128 + signum)  # the second signal: now, without clean-up
        received.append(signum)
        deadline = threading.Timer(limit_s, _exit_late, args=(signum, limit_s))
        deadline.daemon = True
        deadline.start()
        timer.append(deadline)
        loop = target.get("loop")
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(cancel_main)

    async def guarded() -> T:
        target["loop"] = asyncio.get_running_loop()
        target["task"] = asyncio.current_task()
        if received:  # a signal came while the loop was being made
            cancel_main()
        try:
            return await main()
        except asyncio.CancelledError:
            if received:
                raise Interrupted(received[0]) from None
            raise

    previous = {signum: signal.signal(signum, on_signal) for signum in _SIGNALS}
    try:
        return asyncio.run(guarded())
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for deadline in timer:
            deadline.cancel()


def _exit_late(signum: int, stop_timeout_s: float) -> None:
    """The clean stop took too long: leave now (the next start reaps the containers left)."""
    name = signal.Signals(signum).name
    message = (
        f"{name}: the clean stop did not finish within {stop_timeout_s:g} s "
        "(watchdog.stop_timeout_s); exiting now. Containers left behind are removed by the "
        "next run's start or `conductor envs reap`.\n"
    )
    with contextlib.suppress(OSError):
        os.write(2, message.encode())
    os._exit(128 + signum)
