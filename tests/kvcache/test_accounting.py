"""Accounting: hit rates by tier, recomputation, link traffic and occupancy over time."""

from __future__ import annotations

import pytest

from kvcache import Priority
from kvcache.accounting import OccupancyTracker
from tests.kvcache.helpers import run_turn, spec_policy


def test_hit_rates_split_looked_up_tokens_by_tier() -> None:
    policy = spec_policy(policy="lru")
    run_turn(policy, [1, 2, 3, 4], 0.0)
    policy.reserve(10, Priority.LOW, 1.0)  # [1 2 3 4] demoted to host
    policy.release(10, 1.0)
    run_turn(policy, [5, 6], 2.0)
    policy.match_prefix([5, 6, 1, 2], 3.0)  # 2 device, 2 miss
    policy.match_prefix([1, 2, 3, 4], 3.0)  # 4 host
    stats = policy.stats()
    looked_up = 4 + 2 + 4 + 4  # includes the two run_turn lookups (all misses)
    assert stats.device_hit_rate == pytest.approx(2 / looked_up)
    assert stats.host_hit_rate == pytest.approx(4 / looked_up)
    assert stats.miss_rate == pytest.approx(8 / looked_up)


def test_recomputed_tokens_are_misses_of_context_the_session_had_cached() -> None:
    policy = spec_policy(host_capacity_tokens=0)
    policy.open("a", Priority.LOW, 0.0)
    run_turn(policy, [1, 2, 3, 4], 0.0, session_id="a")
    policy.reserve(12, Priority.LOW, 1.0)  # drops a's context
    policy.release(12, 1.0)
    match = policy.match_prefix([1, 2, 3, 4, 5, 6], 2.0, session_id="a")
    assert match.recomputed_tokens == 4  # [5 6] are new, not recomputed
    assert policy.stats().recomputed_tokens == 4


def test_bytes_moved_each_way_follow_the_tokens_moved() -> None:
    policy = spec_policy(transfer={"bytes_per_token": 1000})
    policy.open("a", Priority.LOW, 0.0)
    run_turn(policy, [1, 2, 3, 4], 0.0, session_id="a")
    policy.tool_wait("a", 1e9, 1.0)
    policy.tool_done("a", 2.0)
    run_turn(policy, [1, 2, 3, 4], 2.0, session_id="a")  # loads the host hit back
    stats = policy.stats()
    assert (stats.d2h_bytes, stats.h2d_bytes) == (4000, 4000)
    assert (stats.offloads, stats.load_backs) == (1, 1)


def test_occupancy_mean_is_weighted_by_time() -> None:
    tracker = OccupancyTracker(sample_interval_s=1.0)
    tracker.record(0.0, 10)
    tracker.record(1.0, 30)
    tracker.record(4.0, 0)
    assert tracker.mean_tokens() == pytest.approx((10 * 1 + 30 * 3) / 4)
    assert tracker.peak_tokens == 30


def test_occupancy_samples_are_spaced_by_the_interval() -> None:
    tracker = OccupancyTracker(sample_interval_s=1.0)
    for time_s in (0.0, 0.5, 1.0, 1.5, 2.25):
        tracker.record(time_s, 1)
    assert [t for t, _ in tracker.samples] == [0.0, 1.0, 2.25]


def test_device_occupancy_counts_reserved_tokens() -> None:
    policy = spec_policy()
    policy.reserve(5, Priority.LOW, 0.0)
    assert policy.stats().device_used_tokens == 5
