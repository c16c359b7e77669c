import asyncio

import pytest

from harness.slots import PrioritySlots


async def _grant_order(slots: PrioritySlots, requests: list[tuple[str, int]]) -> list[str]:
    granted: list[str] = []
    await slots.acquire()  # hold the only slot so every request queues

    async def want(name: str, priority: int) -> None:
        async with slots.hold(priority):
            granted.append(name)

    tasks = [asyncio.create_task(want(name, priority)) for name, priority in requests]
    await asyncio.sleep(0)
    slots.release()
    await asyncio.gather(*tasks)
    return granted


async def test_higher_priority_waiter_is_granted_first() -> None:
    order = await _grant_order(PrioritySlots(1), [("low", 0), ("high", 1)])
    assert order == ["high", "low"]


async def test_waiters_of_equal_priority_are_granted_fifo() -> None:
    order = await _grant_order(PrioritySlots(1), [("a", 0), ("b", 0), ("c", 0)])
    assert order == ["a", "b", "c"]


async def test_no_more_than_capacity_hold_slots_at_once() -> None:
    slots, peak, active = PrioritySlots(2), [0], [0]

    async def work() -> None:
        async with slots.hold():
            active[0] += 1
            peak[0] = max(peak[0], active[0])
            await asyncio.sleep(0.001)
            active[0] -= 1

    await asyncio.gather(*(work() for _ in range(10)))
    assert peak[0] == 2 and slots.in_use == 0


async def test_cancelled_waiter_does_not_leak_a_slot() -> None:
    slots = PrioritySlots(1)
    await slots.acquire()
    waiter = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    slots.release()
    assert slots.in_use == 0


def test_release_without_acquire_is_a_bug() -> None:
    with pytest.raises(RuntimeError, match="without a matching"):
        PrioritySlots(1).release()
