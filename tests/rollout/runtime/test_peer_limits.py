"""The knob-free peers' live limits: group sample slots (AReaL) and the adaptive in-flight cap
(prime-rl), as asyncio gates."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from rollout.core.inflight_control import InflightControl, InflightControlConfig
from rollout.core.types import make_sample_id
from rollout.engines.base import EngineStats
from rollout.runtime.group_slots import GroupSampleSlots
from rollout.runtime.inflight_limit import AdaptiveInflightLimit, engine_load_sample


def sid(group: str, index: int) -> str:
    return make_sample_id(group, 0, index)


async def _started(
    limit: GroupSampleSlots | AdaptiveInflightLimit, sample: str
) -> asyncio.Task[None]:
    task = asyncio.create_task(limit.enter(sample))
    await asyncio.sleep(0)
    return task


async def test_a_new_group_waits_for_all_its_slots_then_its_members_go_live_together() -> None:
    slots = GroupSampleSlots(4, lambda group: 2)
    for group in ("g0", "g1"):
        for index in range(2):
            await slots.enter(sid(group, index))
    first = await _started(slots, sid("g2", 0))
    second = await _started(slots, sid("g2", 1))
    slots.leave(sid("g0", 0))
    await asyncio.sleep(0)
    assert not first.done()  # one slot free; the group needs two
    slots.leave(sid("g1", 1))  # a sample of another unfinished group
    await asyncio.gather(first, second)
    assert slots.live == 4


async def test_nobody_overtakes_the_head_group() -> None:
    sizes = {"g0": 2, "big": 3, "g2": 1}
    slots = GroupSampleSlots(3, sizes.__getitem__)
    await slots.enter(sid("g0", 0))
    await slots.enter(sid("g0", 1))
    big = await _started(slots, sid("big", 0))
    small = await _started(slots, sid("g2", 0))  # one slot is free, but `big` waits first
    assert not big.done() and not small.done()
    big.cancel()
    small.cancel()


def stats(used: int, evictable: int = 0, *, retractions: int = 0, running: int = 1,
          waiting: int = 0) -> EngineStats:  # fmt: skip
    return EngineStats(
        running_requests=running,
        waiting_requests=waiting,
        max_running_requests=64,
        kv_used_tokens=used,
        kv_capacity_tokens=1000,
        extra={"kv_evictable_tokens": float(evictable), "retractions": float(retractions)},
    )


def test_kv_use_counts_what_running_requests_hold_and_preemptions_are_retractions() -> None:
    sample = engine_load_sample("e0", stats(900, evictable=300, retractions=2))
    assert (sample.kv_usage, sample.preemptions) == (0.6, 2)
    assert engine_load_sample("e0", stats(900, running=0)).kv_usage == 0.0  # idle: holds none


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def adaptive(
    cap: int, shed: list[Sequence[str]], clock: Clock, min_burst: int = 100
) -> AdaptiveInflightLimit:
    control = InflightControl(
        InflightControlConfig(initial_inflight=cap),
        kv_capacity_tokens=1000,
        max_context_tokens=100,
    )
    return AdaptiveInflightLimit(control, now_s=clock, shed_groups=shed.append, min_burst=min_burst)


async def test_samples_beyond_the_adaptive_cap_wait_in_arrival_order() -> None:
    limit = adaptive(2, [], Clock())
    await limit.enter(sid("g0", 0))
    await limit.enter(sid("g0", 1))
    second = await _started(limit, sid("g1", 0))
    third = await _started(limit, sid("g1", 1))
    limit.leave(sid("g0", 0))
    await second
    assert not third.done()
    third.cancel()


async def test_a_hard_trim_sheds_the_youngest_groups_whole_and_frees_their_places_at_once() -> None:
    shed: list[Sequence[str]] = []
    clock = Clock()
    limit = adaptive(6, shed, clock)
    for at, group in ((0.0, "old"), (1.0, "mid"), (2.0, "young")):
        clock.now = at
        await limit.enter(sid(group, 0))
        await limit.enter(sid(group, 1))
    limit.poll({"e0": stats(950)}, now_s=3.0)  # use 0.95: cap 6 x 0.7 / 0.95 = 4, cancel 2
    assert shed == [["young"]] and limit.cap == 4 and limit.inflight == 4
    limit.leave(sid("young", 0))  # its cancelled run unwinds: not a finished episode
    assert limit.inflight == 4 and limit.counts.cancelled_samples == 2


async def test_admissions_are_burst_capped_within_one_poll_interval() -> None:
    limit = adaptive(20, [], Clock(), min_burst=2)
    await limit.enter(sid("g0", 0))
    await limit.enter(sid("g0", 1))
    third = await _started(limit, sid("g1", 0))
    assert not third.done()  # at most max(2, 20 // 10) admissions per window
    limit.poll({"e0": stats(100)}, now_s=5.0)  # a new window
    await third
