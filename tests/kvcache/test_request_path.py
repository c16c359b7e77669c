"""The request path shared by both policies: match, load back, lock, reserve, insert."""

from __future__ import annotations

import pytest

from kvcache import CapacityError, InvariantError, Priority, ReceiptError, SessionError
from kvcache.checks import check_cache
from kvcache.eviction_order import EvictionClass
from tests.kvcache.helpers import cache_of, path_on_device, run_turn, spec_policy


@pytest.fixture(params=["priority", "lru"])
def policy_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_match_reports_device_host_and_miss_tokens_separately(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    run_turn(policy, [1, 2, 3, 4], 0.0)
    policy.reserve(12, Priority.HIGH, 1.0)  # pushes [1 2 3 4] to host (or drops it, per policy)
    policy.release(12, 1.0)
    run_turn(policy, [1, 2], 2.0)  # [1 2] back on device
    match = policy.match_prefix([1, 2, 3, 4, 5], 3.0)
    assert match.device_tokens == 2
    assert match.host_tokens + match.miss_tokens == 3


def test_only_whole_pages_are_cached(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, page_size=4)
    run_turn(policy, list(range(10)), 0.0)
    match = policy.peek_prefix(list(range(10)))
    assert (match.device_tokens, match.miss_tokens) == (8, 2)


def test_insert_returns_the_unused_reservation(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, page_size=4)
    policy.reserve(10, Priority.LOW, 0.0)
    result = policy.insert(list(range(10)), 0.0, reserved_tokens=10)
    assert result.returned_reserved_tokens == 2
    assert policy.device_used_tokens == 8


def test_inserting_kv_without_a_reservation_is_refused_when_the_device_is_full(
    policy_name: str,
) -> None:
    policy = spec_policy(policy=policy_name)
    policy.reserve(12, Priority.LOW, 0.0)
    with pytest.raises(CapacityError, match="reserve"):
        policy.insert([1, 2], 0.0)


def test_releasing_more_than_was_reserved_is_refused(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    policy.reserve(2, Priority.LOW, 0.0)
    with pytest.raises(CapacityError):
        policy.release(3, 0.0)


def test_a_receipt_can_be_released_only_once(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    run_turn(policy, [1, 2], 0.0)
    receipt = policy.lock([1, 2])
    policy.unlock(receipt)
    with pytest.raises(ReceiptError, match="exactly once"):
        policy.unlock(receipt)


def test_lock_covers_exactly_the_device_resident_prefix(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    run_turn(policy, [1, 2, 3, 4], 0.0)
    receipt = policy.lock([1, 2, 9])
    assert receipt.locked_tokens == 2
    assert policy.evictable_size(Priority.HIGH) == 2  # [3 4] only
    check_cache(cache_of(policy))


def test_load_back_moves_a_host_hit_to_device(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, offload_unreferenced=True)
    run_turn(policy, [1, 2, 3, 4], 0.0)
    policy.reserve(12, Priority.HIGH, 1.0)
    policy.release(12, 1.0)
    assert policy.peek_prefix([1, 2, 3, 4]).host_tokens == 4
    result = policy.load_back([1, 2, 3, 4], Priority.LOW, 2.0)
    assert (result.ok, result.loaded_tokens, result.ready_at_s) == (True, 4, 6.0)
    assert path_on_device(policy, [1, 2, 3, 4])


def test_each_node_keeps_the_class_of_its_refs_and_the_check_sees_a_stale_one() -> None:
    policy = spec_policy()  # the priority policy: sessions reference their context
    policy.open("s", Priority.HIGH, 0.0)
    run_turn(policy, [1, 2, 3, 4], 0.0, session_id="s", priority=Priority.HIGH)
    cache = cache_of(policy)
    leaf = cache.session_leaf("s")
    assert leaf is not None and leaf.ref_class == EvictionClass.HIGH_REF
    policy.close("s", 1.0)
    assert leaf.ref_class == EvictionClass.UNREFERENCED
    check_cache(cache)
    leaf.ref_class = EvictionClass.LOW_REF
    with pytest.raises(InvariantError, match="kept class"):
        check_cache(cache)


def test_a_loaded_back_prefix_reports_when_its_copy_lands(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, offload_unreferenced=True)
    run_turn(policy, [1, 2, 3, 4], 0.0)
    policy.reserve(12, Priority.HIGH, 1.0)
    policy.release(12, 1.0)
    policy.load_back([1, 2, 3, 4], Priority.LOW, 2.0)
    assert policy.peek_prefix([1, 2, 3, 4]).device_ready_at_s == 6.0


def test_load_back_without_room_reports_the_shortfall_and_moves_nothing(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, offload_unreferenced=True)
    run_turn(policy, [1, 2, 3, 4], 0.0)
    policy.reserve(12, Priority.HIGH, 1.0)
    result = policy.load_back([1, 2, 3, 4], Priority.HIGH, 2.0)
    assert (result.ok, result.shortfall_tokens) == (False, 4)
    assert policy.peek_prefix([1, 2, 3, 4]).host_tokens == 4


def test_a_request_for_an_unopened_session_is_refused(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    with pytest.raises(SessionError, match="open"):
        policy.match_prefix([1], 0.0, session_id="ghost")


def test_opening_a_session_twice_is_refused(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    policy.open("a", Priority.LOW, 0.0)
    with pytest.raises(SessionError, match="already open"):
        policy.open("a", Priority.LOW, 0.0)


def test_prefix_shared_by_two_requests_is_cached_once(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name)
    run_turn(policy, [1, 2, 3], 0.0)
    run_turn(policy, [1, 2, 4], 1.0)
    assert policy.device_used_tokens == 4


def test_insert_moves_a_running_requests_lock_onto_what_it_cached(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, page_size=2)
    policy.reserve(4, Priority.LOW, 0.0)
    policy.insert([1, 2, 3, 4], 0.0, reserved_tokens=4)
    receipt = policy.lock([1, 2, 3, 4])
    policy.reserve(4, Priority.LOW, 1.0)
    result = policy.insert([1, 2, 3, 4, 5, 6, 7, 8], 1.0, reserved_tokens=4, relock=receipt)
    assert result.receipt is not None and result.receipt.locked_tokens == 8
    assert result.new_device_tokens == 4
    with pytest.raises(ReceiptError):
        policy.unlock(receipt)  # spent by the move
    check_cache(cache_of(policy))
    policy.unlock(result.receipt)
    check_cache(cache_of(policy))


def test_a_lock_cannot_move_onto_tokens_it_does_not_prefix(policy_name: str) -> None:
    policy = spec_policy(policy=policy_name, page_size=2)
    policy.reserve(4, Priority.LOW, 0.0)
    policy.insert([1, 2, 3, 4], 0.0, reserved_tokens=4)
    receipt = policy.lock([1, 2, 3, 4])
    used = policy.device_used_tokens
    policy.reserve(4, Priority.LOW, 1.0)
    with pytest.raises(ReceiptError, match="not a prefix"):
        policy.insert([1, 2, 9, 9, 5, 6], 1.0, reserved_tokens=4, relock=receipt)
    assert policy.device_used_tokens == used + 4  # nothing cached; the reservation is intact
    policy.unlock(receipt)
    check_cache(cache_of(policy))


def test_a_session_lookup_starts_at_its_context_only_when_the_request_continues_it(
    policy_name: str,
) -> None:
    """`lock_prefix(session_id=)` may skip the walk down to where the session's context ends;
    a request that does not continue that context (a rewritten history) must not match it."""
    policy = spec_policy(policy=policy_name, page_size=2, device_capacity_tokens=24)
    policy.open("s", Priority.LOW, 0.0)
    run_turn(policy, [1, 2, 3, 4], 0.0, session_id="s")
    run_turn(policy, [9, 9, 7, 7], 1.0)  # the other branch shares nothing with the session
    for tokens in ([1, 2, 3, 4, 5, 6], [9, 9, 7, 7, 5, 6], [1, 2, 5, 6, 7, 8], [1, 2]):
        expected = policy.peek_prefix(tokens)
        locked = policy.lock_prefix(tokens, session_id="s")
        assert locked.match == expected, tokens
        assert locked.receipt.locked_tokens == expected.device_tokens
        policy.unlock(locked.receipt)
    check_cache(cache_of(policy))
