"""Why ready samples wait at the conductor: the accounting and the scheduler's reasons."""

from __future__ import annotations

import pytest

from rollout.core.config import SchedulerConfig
from rollout.core.held_samples import HeldTime, HoldReason
from rollout.core.scheduler import (
    EngineAdded,
    EngineLoad,
    GenerationFinished,
    RolloutScheduler,
    SampleAdmitted,
)
from tests.rollout.core.test_kv_residency import World, starts

# -- the accounting ---------------------------------------------------------------------------


def test_each_interval_counts_its_waiting_samples_under_the_reason_that_began_it() -> None:
    held = HeldTime()
    held.observe(0.0, 2, HoldReason.KV_ROOM)
    held.observe(3.0, 1, HoldReason.SLOT)
    assert held.totals(5.0) == {"kv_room": 6.0, "slot": 2.0}
    assert held.totals(7.0) == {"kv_room": 6.0, "slot": 4.0}  # the state goes on
    held.observe(7.0, 0, None)
    assert held.totals(10.0) == {"kv_room": 6.0, "slot": 4.0}


def test_nothing_is_held_before_the_first_observation_or_while_nothing_waits() -> None:
    held = HeldTime()
    assert held.totals(4.0) == {}
    held.observe(5.0, 3, None)  # no reason: counted as nothing waiting
    held.observe(6.0, 0, HoldReason.SLOT)
    assert held.totals(9.0) == {}


def test_several_observations_at_one_instant_keep_only_the_last_state() -> None:
    held = HeldTime()
    held.observe(1.0, 4, HoldReason.LIVE_SET)
    held.observe(1.0, 1, HoldReason.KV_ROOM)
    assert held.totals(3.0) == pytest.approx({"kv_room": 2.0})


# -- the scheduler's reasons ------------------------------------------------------------------


def test_a_sample_the_device_kv_cannot_hold_is_held_for_kv_room() -> None:
    world = World(kv=1_000, host=2_000)  # every event one second after the last
    world.admit("a", 600)
    assert starts(world.admit("b", 500)) == []  # 600 + 500 > 1,000
    assert starts(world.do(GenerationFinished("a", episode_done=True, context_tokens=700))) == ["b"]
    assert world.scheduler.held_sample_s(world.now_s) == {"kv_room": 1.0}


def test_a_sample_with_no_free_slot_is_held_for_a_slot() -> None:
    world = World(kv=10**6, slots=1)
    world.admit("a", 100)
    world.admit("b", 100)  # b waits alone for a second, then with c for one more
    world.admit("c", 100)
    assert world.scheduler.held_sample_s(world.now_s + 1.0) == {"slot": 1.0 + 2 * 1.0}


def test_a_new_sample_the_live_set_cannot_take_is_held_for_the_live_set() -> None:
    world = World(kv=1_000, host=0)
    world.admit("a", 600)
    assert starts(world.admit("b", 500)) == []
    assert world.scheduler.held_sample_s(world.now_s + 2.0) == {"live_set": 2.0}


def test_low_priority_work_kept_off_an_engine_short_of_kv_headroom_is_held_for_it() -> None:
    scheduler = RolloutScheduler(SchedulerConfig(low_priority_kv_watermark=0.5))
    scheduler.handle(EngineAdded("e0", EngineLoad(8, 0.2, 1_000, 0), now_s=0.0))
    assert not scheduler.handle(SampleAdmitted("a", "A", context_tokens=10, now_s=1.0))
    assert scheduler.held_sample_s(4.0) == {"low_priority_headroom": 3.0}
