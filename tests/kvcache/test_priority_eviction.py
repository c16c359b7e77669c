"""Eviction order of `PriorityKVPolicy`, read as a specification on hand-built caches.

The standard cache (page of 1 token, 12 device tokens, 8 host tokens), completely full:

    [1 2 3 4]   context of session "low"  (low priority, t=1)
    [5 6 7 8]   context of session "high" (high priority, t=2)
    [9 10]      unreferenced cache (t=3)
    [11 12]     unreferenced cache (t=4)
"""

from __future__ import annotations

from typing import Any

from kvcache import KVPolicy, Priority
from tests.kvcache.helpers import path_on_device, run_turn, spec_policy

LOW_CTX = [1, 2, 3, 4]
HIGH_CTX = [5, 6, 7, 8]
OLD_CACHE = [9, 10]
NEW_CACHE = [11, 12]


def full_cache(**overrides: Any) -> KVPolicy:
    policy = spec_policy(**overrides)
    policy.open("low", Priority.LOW, 0.0)
    policy.open("high", Priority.HIGH, 0.0)
    run_turn(policy, LOW_CTX, 1.0, session_id="low")
    run_turn(policy, HIGH_CTX, 2.0, session_id="high", priority=Priority.HIGH)
    run_turn(policy, OLD_CACHE, 3.0)
    run_turn(policy, NEW_CACHE, 4.0)
    assert policy.free_device_tokens == 0
    return policy


def test_unreferenced_kv_is_evicted_before_low_referenced_kv() -> None:
    policy = full_cache()
    result = policy.reserve(4, Priority.LOW, 5.0)
    assert result.ok and result.dropped_tokens == 4
    assert not path_on_device(policy, OLD_CACHE) and not path_on_device(policy, NEW_CACHE)
    assert path_on_device(policy, LOW_CTX)


def test_least_recently_used_unreferenced_kv_goes_first() -> None:
    policy = full_cache()
    policy.match_prefix(OLD_CACHE, 5.0)  # now more recent than NEW_CACHE
    policy.reserve(2, Priority.LOW, 6.0)
    assert path_on_device(policy, OLD_CACHE)
    assert not path_on_device(policy, NEW_CACHE)


def test_eviction_stops_as_soon_as_enough_tokens_are_free() -> None:
    policy = full_cache()
    result = policy.reserve(2, Priority.LOW, 5.0)
    assert result.freed_tokens == 2
    assert path_on_device(policy, NEW_CACHE)


def test_low_referenced_kv_is_offloaded_to_host_when_host_has_room() -> None:
    policy = full_cache()
    result = policy.reserve(6, Priority.LOW, 5.0)
    assert result.ok and result.offloaded_tokens == 4
    match = policy.peek_prefix(LOW_CTX)
    assert (match.device_tokens, match.host_tokens) == (0, 4)


def test_offload_on_eviction_reports_the_link_time() -> None:
    policy = full_cache()
    result = policy.reserve(6, Priority.LOW, 5.0)
    assert result.transfer_s == 4.0  # 4 tokens at 1 token/s


def test_low_referenced_kv_is_dropped_when_host_is_full() -> None:
    policy = full_cache(host_capacity_tokens=0)
    result = policy.reserve(6, Priority.LOW, 5.0)
    assert result.ok and result.offloaded_tokens == 0 and result.dropped_tokens == 8
    assert policy.peek_prefix(LOW_CTX).miss_tokens == 4


def test_high_referenced_kv_is_not_evicted_for_a_low_priority_request() -> None:
    policy = full_cache()
    result = policy.reserve(10, Priority.LOW, 5.0)
    assert not result.ok
    assert path_on_device(policy, HIGH_CTX)


def test_shortfall_is_exactly_what_a_low_priority_request_cannot_get() -> None:
    policy = full_cache()
    result = policy.reserve(10, Priority.LOW, 5.0)
    assert result.shortfall_tokens == 10 - 8  # 8 tokens are unreferenced or low-referenced


def test_a_failed_reservation_evicts_nothing() -> None:
    policy = full_cache()
    before = policy.stats()
    policy.reserve(10, Priority.LOW, 5.0)
    after = policy.stats()
    assert (after.device_used_tokens, after.dropped_tokens, after.offloaded_tokens) == (
        before.device_used_tokens,
        before.dropped_tokens,
        before.offloaded_tokens,
    )


def test_high_referenced_kv_is_evicted_for_a_high_priority_request() -> None:
    policy = full_cache()
    result = policy.reserve(12, Priority.HIGH, 5.0)
    assert result.ok
    assert not path_on_device(policy, HIGH_CTX)


def test_high_referenced_kv_goes_last_even_for_a_high_priority_request() -> None:
    policy = full_cache()
    policy.reserve(8, Priority.HIGH, 5.0)
    assert path_on_device(policy, HIGH_CTX)


def test_evictable_size_counts_only_what_the_requester_may_evict() -> None:
    policy = full_cache()
    assert policy.evictable_size(Priority.LOW) == 8
    assert policy.evictable_size(Priority.HIGH) == 12


def test_locked_kv_is_never_evicted() -> None:
    policy = full_cache()
    receipt = policy.lock(OLD_CACHE)
    assert not policy.reserve(12, Priority.HIGH, 5.0).ok
    assert policy.reserve(10, Priority.HIGH, 5.0).ok
    assert path_on_device(policy, OLD_CACHE)
    policy.unlock(receipt)


def test_locked_kv_is_not_counted_as_evictable() -> None:
    policy = full_cache()
    policy.lock(OLD_CACHE)
    assert policy.evictable_size(Priority.HIGH) == 10


def test_eviction_walks_leaf_up() -> None:
    policy = spec_policy()
    run_turn(policy, [20, 21, 22], 1.0)
    run_turn(policy, [20, 21, 23], 2.0)  # tree: [20 21] -> {[22], [23]}
    policy.reserve(policy.free_device_tokens, Priority.LOW, 3.0)
    policy.reserve(2, Priority.LOW, 3.0)  # frees the two leaves before their parent
    assert path_on_device(policy, [20, 21])
    assert policy.peek_prefix([20, 21, 22]).miss_tokens == 1


def test_evicting_kv_that_has_a_host_copy_only_frees_the_device_copy() -> None:
    policy = full_cache()
    policy.reserve(6, Priority.LOW, 5.0)  # LOW_CTX offloaded
    policy.release(6, 5.0)
    run_turn(policy, LOW_CTX, 6.0, session_id="low")  # loaded back: now on both tiers
    moved_before = policy.stats().d2h_tokens
    result = policy.reserve(policy.free_device_tokens + 4, Priority.LOW, 7.0)
    assert result.demoted_tokens == 4 and result.offloaded_tokens == 0
    assert policy.stats().d2h_tokens == moved_before


def test_offload_discards_unreferenced_host_kv_to_make_room() -> None:
    policy = spec_policy(host_capacity_tokens=4)
    policy.open("a", Priority.LOW, 0.0)
    policy.open("b", Priority.LOW, 0.0)
    run_turn(policy, [1, 2, 3, 4], 1.0, session_id="a")
    policy.tool_wait("a", 100.0, 1.0)  # offloaded: host is now full
    policy.close("a", 2.0)  # its host KV is ordinary cache now
    run_turn(policy, [5, 6, 7, 8], 3.0, session_id="b")
    policy.reserve(12, Priority.LOW, 4.0)
    assert policy.peek_prefix([5, 6, 7, 8]).host_tokens == 4
    assert policy.peek_prefix([1, 2, 3, 4]).miss_tokens == 4


def test_offload_never_discards_another_low_sessions_host_kv() -> None:
    policy = spec_policy(host_capacity_tokens=4)
    policy.open("a", Priority.LOW, 0.0)
    policy.open("b", Priority.LOW, 0.0)
    run_turn(policy, [1, 2, 3, 4], 1.0, session_id="a")
    policy.tool_wait("a", 100.0, 1.0)  # offloaded: host is now full
    run_turn(policy, [5, 6, 7, 8], 3.0, session_id="b")
    result = policy.reserve(12, Priority.LOW, 4.0)
    assert result.dropped_tokens == 4  # b's KV: no room on host
    assert policy.peek_prefix([1, 2, 3, 4]).host_tokens == 4


def test_offload_unreferenced_option_sends_unreferenced_kv_to_host() -> None:
    policy = full_cache(offload_unreferenced=True)
    result = policy.reserve(2, Priority.LOW, 5.0)
    assert result.offloaded_tokens == 2
    assert policy.peek_prefix(OLD_CACHE).host_tokens == 2
