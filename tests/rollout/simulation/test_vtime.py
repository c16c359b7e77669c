"""Virtual time: sleeps and timeouts fast-forward, and timer order is deterministic."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from foundation.clock import LoopClock
from rollout.simulation.vtime import VirtualTimeLoop, run_virtual


@pytest.mark.timeout(20)
def test_an_hour_long_sleep_completes_and_advances_virtual_time_by_an_hour() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.sleep(3600.0)
        return loop.time() - start

    assert run_virtual(main()) == pytest.approx(3600.0)


def test_loop_clock_reads_virtual_time_inside_a_virtual_loop() -> None:
    clock = LoopClock()

    async def main() -> tuple[float, float]:
        before = clock.now()
        await asyncio.sleep(42.0)
        return before, clock.now()

    before, after = run_virtual(main(), start_s=100.0)
    assert (before, after) == (100.0, pytest.approx(142.0))


def test_timers_fire_in_deadline_order_then_in_scheduling_order_for_ties() -> None:
    log: list[tuple[str, float]] = []

    async def sleeper(name: str, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        log.append((name, asyncio.get_running_loop().time()))

    async def main() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(sleeper("c", 3.0))
            group.create_task(sleeper("a", 1.0))
            group.create_task(sleeper("b1", 2.0))
            group.create_task(sleeper("b2", 2.0))

    run_virtual(main())
    assert log == [("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("c", 3.0)]


def test_two_runs_of_the_same_program_log_the_same_events() -> None:
    async def main() -> list[tuple[int, float]]:
        log: list[tuple[int, float]] = []

        async def worker(index: int) -> None:
            for step in range(5):
                await asyncio.sleep(0.1 * ((index * 7 + step * 3) % 5))
                log.append((index, asyncio.get_running_loop().time()))

        async with asyncio.TaskGroup() as group:
            for index in range(10):
                group.create_task(worker(index))
        return log

    assert run_virtual(main) == run_virtual(main)


def test_wait_for_times_out_at_the_virtual_deadline() -> None:
    async def main() -> float:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.sleep(600.0), timeout=30.0)
        return loop.time()

    assert run_virtual(main()) == pytest.approx(30.0)


def test_asyncio_timeout_scope_cancels_the_body_at_the_virtual_deadline() -> None:
    async def main() -> tuple[bool, float]:
        loop = asyncio.get_running_loop()
        finished = False
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(5.0):
                await asyncio.sleep(10.0)
                finished = True
        return finished, loop.time()

    assert run_virtual(main()) == (False, pytest.approx(5.0))


def test_ready_callbacks_run_before_the_clock_moves() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen: list[float] = []
        loop.call_soon(lambda: seen.append(loop.time()))
        loop.call_later(2.0, lambda: seen.append(loop.time()))
        await asyncio.sleep(3.0)
        return seen

    assert run_virtual(main()) == [0.0, 2.0]


def test_work_from_a_thread_wakes_a_loop_that_has_no_timers() -> None:
    async def main() -> int:
        return await asyncio.get_running_loop().run_in_executor(None, sum, [1, 2, 3])

    assert run_virtual(main()) == 6


def test_a_signal_that_comes_while_callbacks_are_ready_is_handled_before_the_clock_moves() -> None:
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        seen: list[float] = []
        loop.add_signal_handler(signal.SIGUSR1, lambda: seen.append(loop.time()))
        try:
            os.kill(os.getpid(), signal.SIGUSR1)
            await asyncio.sleep(0)  # ready callbacks: the loop does not poll its wake-up pipe
            await asyncio.sleep(5.0)  # it does before the clock jumps
        finally:
            loop.remove_signal_handler(signal.SIGUSR1)
        return seen

    assert run_virtual(main()) == [0.0]


def test_negative_real_io_wait_is_rejected_with_the_bad_value() -> None:
    with pytest.raises(ValueError, match="-1"):
        VirtualTimeLoop(real_io_wait_s=-1)
