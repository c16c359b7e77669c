"""The eviction order as pure functions, tested without a tree."""

from __future__ import annotations

import pytest

from kvcache import EvictionAction, EvictionClass, Priority, eviction_action, eviction_key
from kvcache.eviction_order import (
    eviction_class,
    host_reclaim_limit,
    max_evictable_class,
    should_offload,
)


def test_unreferenced_node_sorts_before_a_more_recently_used_low_ref_node() -> None:
    assert eviction_key(0, 0, last_access_s=100.0) < eviction_key(0, 1, last_access_s=1.0)


def test_low_ref_node_sorts_before_a_less_recently_used_high_ref_node() -> None:
    assert eviction_key(0, 5, last_access_s=100.0) < eviction_key(1, 0, last_access_s=1.0)


def test_least_recently_used_goes_first_within_a_class() -> None:
    assert eviction_key(0, 1, last_access_s=1.0) < eviction_key(0, 1, last_access_s=2.0)


@pytest.mark.parametrize(
    ("high_ref", "low_ref", "expected"),
    [
        (0, 0, EvictionClass.UNREFERENCED),
        (0, 3, EvictionClass.LOW_REF),
        (1, 0, EvictionClass.HIGH_REF),
        (1, 3, EvictionClass.HIGH_REF),
    ],
)
def test_any_high_ref_makes_a_node_high_class(
    high_ref: int, low_ref: int, expected: EvictionClass
) -> None:
    assert eviction_class(high_ref, low_ref) is expected


def test_low_priority_requester_may_not_evict_high_ref_nodes() -> None:
    assert max_evictable_class(Priority.LOW) is EvictionClass.LOW_REF


def test_high_priority_requester_may_evict_high_ref_nodes() -> None:
    assert max_evictable_class(Priority.HIGH) is EvictionClass.HIGH_REF


@pytest.mark.parametrize(
    ("on_host", "offload", "host_has_room", "expected"),
    [
        (True, False, False, EvictionAction.DEMOTE),
        (True, True, True, EvictionAction.DEMOTE),
        (False, True, True, EvictionAction.OFFLOAD),
        (False, True, False, EvictionAction.DROP),
        (False, False, True, EvictionAction.DROP),
    ],
)
def test_eviction_action_demotes_backups_offloads_when_room_else_drops(
    on_host: bool, offload: bool, host_has_room: bool, expected: EvictionAction
) -> None:
    action = eviction_action(on_host=on_host, offload=offload, host_has_room=host_has_room)
    assert action is expected


def test_priority_rules_offload_referenced_but_not_unreferenced_nodes() -> None:
    assert should_offload(EvictionClass.LOW_REF, EvictionClass.LOW_REF)
    assert not should_offload(EvictionClass.UNREFERENCED, EvictionClass.LOW_REF)


def test_no_offload_class_means_eviction_never_offloads() -> None:
    assert not should_offload(EvictionClass.HIGH_REF, None)


def test_strict_host_reclaim_only_discards_strictly_less_protected_kv() -> None:
    assert host_reclaim_limit(EvictionClass.LOW_REF, strict=True) is EvictionClass.UNREFERENCED
    assert host_reclaim_limit(EvictionClass.UNREFERENCED, strict=True) is None


def test_lru_host_reclaim_discards_the_same_class() -> None:
    assert host_reclaim_limit(EvictionClass.UNREFERENCED, strict=False) is (
        EvictionClass.UNREFERENCED
    )
