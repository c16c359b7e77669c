"""`reclaim_host_backups`: a full host makes room from copies of device-resident KV.

The spec cache (page of 1 token, 12 device tokens, 8 host tokens), three critical sessions:

    [9 10 11 12]  session "c", on device only (t=1)
    [1 2 3 4]     session "a", offloaded for a tool call and loaded back: device + host copy
    [5 6 7 8]     session "b", the same: the host (8 tokens) holds only these two backups

Loading KV back keeps its host copy (as SGLang's HiCache write-through does), so the host can
fill with copies of contexts that are on device anyway. Discarding such a backup loses nothing.
"""

from __future__ import annotations

from typing import Any

from kvcache import OffloadDecision, Priority, PriorityKVPolicy
from kvcache.checks import check_cache
from tests.kvcache.helpers import cache_of, path_on_device, run_turn, spec_policy

A_CTX = [1, 2, 3, 4]
B_CTX = [5, 6, 7, 8]
C_CTX = [9, 10, 11, 12]


def host_full_of_backups(**overrides: Any) -> PriorityKVPolicy:
    policy = spec_policy(tool_wait_offload_high=True, **overrides)
    assert isinstance(policy, PriorityKVPolicy)
    for session in ("a", "b", "c"):
        policy.open(session, Priority.HIGH, 0.0)
    run_turn(policy, C_CTX, 1.0, session_id="c", priority=Priority.HIGH)
    now = 2.0
    for session, ctx in (("a", A_CTX), ("b", B_CTX)):
        run_turn(policy, ctx, now, session_id=session, priority=Priority.HIGH)
        policy.tool_wait(session, None, now + 0.5)  # unknown return: offloaded at once
        policy.tool_done(session, now + 1.0)
        run_turn(policy, ctx, now + 1.0, session_id=session, priority=Priority.HIGH)
        now += 2.0
    assert policy.free_device_tokens == 0 and policy.host_used_tokens == 8
    assert path_on_device(policy, A_CTX) and path_on_device(policy, B_CTX)
    return policy


def test_without_it_a_critical_context_evicted_while_the_host_holds_backups_is_dropped() -> None:
    policy = host_full_of_backups()
    result = policy.reserve(4, Priority.HIGH, 10.0)
    assert result.ok and result.dropped_tokens == 4 and result.offloaded_tokens == 0
    assert policy.peek_prefix(C_CTX).miss_tokens == 4


def test_an_evicted_context_takes_the_room_of_the_least_recent_backup_instead_of_dropping() -> None:
    policy = host_full_of_backups(reclaim_host_backups=True)
    result = policy.reserve(4, Priority.HIGH, 10.0)
    assert result.ok and result.dropped_tokens == 0 and result.offloaded_tokens == 4
    assert policy.peek_prefix(C_CTX).host_tokens == 4
    assert path_on_device(policy, A_CTX)  # its backup went, its KV stayed
    assert policy.peek_prefix(B_CTX).device_tokens == 4
    check_cache(cache_of(policy))


def test_a_tool_wait_offload_blocked_by_backups_goes_through_with_it() -> None:
    blocked = host_full_of_backups()
    assert blocked.tool_wait("c", None, 10.0) == ()
    assert path_on_device(blocked, C_CTX)
    policy = host_full_of_backups(reclaim_host_backups=True)
    decisions = policy.tool_wait("c", None, 10.0)
    assert [(d.session_id, d.offloaded_tokens) for d in decisions if isinstance(d, OffloadDecision)]
    assert policy.peek_prefix(C_CTX).host_tokens == 4
    assert policy.stats().dropped_tokens == 0
    check_cache(cache_of(policy))


def test_host_only_kv_of_another_live_session_is_never_taken_for_room() -> None:
    policy = host_full_of_backups(reclaim_host_backups=True)
    policy.tool_wait("a", None, 10.0)  # a's device copy goes: its host copy is its only one
    policy.tool_wait("c", None, 11.0)  # room from b's backup only
    assert policy.peek_prefix(A_CTX).host_tokens == 4
    assert policy.peek_prefix(C_CTX).host_tokens == 4
    assert path_on_device(policy, B_CTX) and policy.host_used_tokens == 8
    assert policy.tool_wait("b", None, 12.0) == ()  # nothing left to give up: b stays
    assert path_on_device(policy, B_CTX)
    check_cache(cache_of(policy))
