"""The LRU baseline: same interface, no refs or priorities, optional demote to host."""

from __future__ import annotations

from kvcache import LRUKVPolicy, Priority
from tests.kvcache.helpers import path_on_device, run_turn, spec_policy


def three_contexts(**overrides: object) -> LRUKVPolicy:
    """A low session (t=1), a high session (t=2) and unreferenced cache (t=3), 4 tokens each."""
    policy = spec_policy(policy="lru", **overrides)
    assert isinstance(policy, LRUKVPolicy)
    policy.open("low", Priority.LOW, 0.0)
    policy.open("high", Priority.HIGH, 0.0)
    run_turn(policy, [1, 2, 3, 4], 1.0, session_id="low")
    run_turn(policy, [5, 6, 7, 8], 2.0, session_id="high", priority=Priority.HIGH)
    run_turn(policy, [9, 10, 11, 12], 3.0)
    return policy


def test_lru_evicts_the_least_recently_used_kv_whoever_references_it() -> None:
    policy = three_contexts()
    policy.reserve(4, Priority.LOW, 4.0)
    assert not path_on_device(policy, [1, 2, 3, 4])
    assert path_on_device(policy, [9, 10, 11, 12])


def test_lru_lets_a_low_priority_request_evict_a_high_priority_sessions_kv() -> None:
    policy = three_contexts()
    assert policy.evictable_size(Priority.LOW) == 12
    assert policy.reserve(8, Priority.LOW, 4.0).ok
    assert not path_on_device(policy, [5, 6, 7, 8])


def test_lru_demotes_evicted_kv_to_host_like_hicache_write_back() -> None:
    policy = three_contexts()
    result = policy.reserve(4, Priority.LOW, 4.0)
    assert result.offloaded_tokens == 4
    assert policy.peek_prefix([1, 2, 3, 4]).host_tokens == 4


def test_lru_makes_host_room_by_discarding_the_least_recently_used_host_kv() -> None:
    policy = three_contexts(host_capacity_tokens=4)
    policy.reserve(8, Priority.LOW, 4.0)  # [1..4] to host, then [5..8] replaces it there
    assert policy.peek_prefix([5, 6, 7, 8]).host_tokens == 4
    assert policy.peek_prefix([1, 2, 3, 4]).miss_tokens == 4


def test_lru_without_demote_uses_the_device_tier_only() -> None:
    policy = three_contexts(lru_demote_to_host=False)
    result = policy.reserve(4, Priority.LOW, 4.0)
    assert (result.offloaded_tokens, result.dropped_tokens) == (0, 4)


def test_lru_hints_never_move_kv() -> None:
    policy = three_contexts()
    decisions = (
        policy.tool_wait("low", 100.0, 4.0)
        + policy.set_priority("low", Priority.HIGH, 5.0)
        + policy.before_forward(100, 6.0)
        + policy.tool_done("low", 7.0)
        + policy.close("low", 8.0)
    )
    assert decisions == ()
    assert path_on_device(policy, [1, 2, 3, 4])
