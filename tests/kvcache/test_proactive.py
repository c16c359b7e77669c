"""Proactive offload, prefetch and pressure backoff of `PriorityKVPolicy`, as a specification.

The link moves 1 token per second and the prefetch margin is 0.5 s (see `spec_config`), so a
4-token context takes 4 s each way and its round trip costs 8.5 s with the margin.
"""

from __future__ import annotations

from typing import Any

from kvcache import OffloadDecision, OffloadReason, PrefetchDecision, Priority, PriorityKVPolicy
from tests.kvcache.helpers import path_on_device, run_turn, spec_policy

CTX = [1, 2, 3, 4]


def waiting_low_session(expected_s: float | None = 20.0, **overrides: Any) -> PriorityKVPolicy:
    """Session "a" (low) cached CTX at t=0 and started a tool at t=1."""
    policy = spec_policy(**overrides)
    assert isinstance(policy, PriorityKVPolicy)
    policy.open("a", Priority.LOW, 0.0)
    run_turn(policy, CTX, 0.0, session_id="a")
    policy.tool_wait("a", expected_s, 1.0)
    return policy


def test_low_priority_tool_wait_offloads_exclusive_kv_to_host() -> None:
    policy = spec_policy()
    policy.open("a", Priority.LOW, 0.0)
    run_turn(policy, CTX, 0.0, session_id="a")
    decisions = policy.tool_wait("a", 20.0, 1.0)
    assert decisions == (OffloadDecision("a", 4, 0, 4.0, OffloadReason.TOOL_WAIT),)
    assert policy.peek_prefix(CTX).host_tokens == 4


def test_tool_wait_keeps_a_prefix_shared_with_another_live_session_on_device() -> None:
    policy = spec_policy()
    policy.open("a", Priority.LOW, 0.0)
    policy.open("b", Priority.LOW, 0.0)
    run_turn(policy, [1, 2, 3, 4], 0.0, session_id="a")
    run_turn(policy, [1, 2, 5, 6], 0.0, session_id="b")
    policy.tool_wait("a", 20.0, 1.0)
    match = policy.peek_prefix([1, 2, 3, 4])
    assert (match.device_tokens, match.host_tokens) == (2, 2)


def test_high_priority_tool_wait_keeps_kv_on_device() -> None:
    policy = spec_policy()
    policy.open("a", Priority.HIGH, 0.0)
    run_turn(policy, CTX, 0.0, session_id="a", priority=Priority.HIGH)
    assert policy.tool_wait("a", 1000.0, 1.0) == ()
    assert path_on_device(policy, CTX)


def test_a_high_priority_session_is_offloaded_too_when_configured_and_the_tool_is_long() -> None:
    policy = spec_policy(tool_wait_offload_high=True)
    policy.open("a", Priority.HIGH, 0.0)
    run_turn(policy, CTX, 0.0, session_id="a", priority=Priority.HIGH)
    decisions = policy.tool_wait("a", 1000.0, 1.0)
    assert any(isinstance(d, OffloadDecision) for d in decisions)
    assert not path_on_device(policy, CTX)
    short = spec_policy(tool_wait_offload_high=True)
    short.open("b", Priority.HIGH, 0.0)
    run_turn(short, CTX, 0.0, session_id="b", priority=Priority.HIGH)
    assert short.tool_wait("b", 0.01, 1.0) == ()  # back before the round trip: kept
    assert path_on_device(short, CTX)


def test_tool_returning_before_the_round_trip_pays_off_is_not_offloaded() -> None:
    policy = waiting_low_session(expected_s=8.5)
    assert path_on_device(policy, CTX)


def test_tool_wait_offload_never_drops_kv_when_the_host_is_full() -> None:
    policy = waiting_low_session(host_capacity_tokens=0)
    assert path_on_device(policy, CTX)


def test_tool_wait_offload_can_be_switched_off() -> None:
    policy = waiting_low_session(tool_wait_offload=False)
    assert path_on_device(policy, CTX)


def test_prefetch_is_not_started_before_one_reload_time_ahead_of_the_return() -> None:
    policy = waiting_low_session()  # returns at 21.0; reload 4 s; margin 0.5 s
    assert policy.before_forward(0, 16.4) == ()


def test_prefetch_starts_one_reload_time_plus_margin_before_the_predicted_return() -> None:
    policy = waiting_low_session()
    decisions = policy.before_forward(0, 16.5)
    assert decisions == (PrefetchDecision("a", 4, 4.0, 20.5),)
    assert path_on_device(policy, CTX)


def test_prefetch_yields_to_the_predicted_demand() -> None:
    policy = waiting_low_session()
    assert policy.before_forward(10, 16.5) == ()  # 12 free - 10 demanded < 4 needed


def test_a_deferred_prefetch_starts_once_there_is_room() -> None:
    policy = waiting_low_session()
    policy.before_forward(10, 16.5)
    decisions = policy.before_forward(0, 17.0)
    assert [type(d) for d in decisions] == [PrefetchDecision]


def test_prefetch_landing_before_the_tool_returns_counts_in_time() -> None:
    policy = waiting_low_session()
    policy.before_forward(0, 16.5)  # lands at 20.5
    policy.tool_done("a", 21.0)
    stats = policy.stats()
    assert (stats.prefetches, stats.prefetches_in_time, stats.prefetches_late) == (1, 1, 0)


def test_prefetch_landing_after_the_tool_returns_counts_late() -> None:
    policy = waiting_low_session()
    policy.before_forward(0, 16.5)  # lands at 20.5
    policy.tool_done("a", 20.0)
    assert policy.stats().prefetches_late == 1


def test_session_back_before_its_prefetch_started_counts_as_returned_without_prefetch() -> None:
    policy = waiting_low_session()
    policy.tool_done("a", 10.0)
    assert policy.stats().returns_without_prefetch == 1


def test_unknown_tool_duration_offloads_and_never_prefetches() -> None:
    policy = waiting_low_session(expected_s=None)
    assert policy.peek_prefix(CTX).host_tokens == 4
    assert policy.before_forward(0, 1e6) == ()


def test_closing_a_high_priority_session_starts_due_prefetches_that_now_fit() -> None:
    policy = waiting_low_session()
    policy.open("h", Priority.HIGH, 2.0)
    run_turn(policy, list(range(100, 112)), 2.0, session_id="h", priority=Priority.HIGH)
    assert policy.before_forward(0, 16.5) == ()  # the device is full of critical KV
    decisions = policy.close("h", 17.0)
    assert [d.session_id for d in decisions if isinstance(d, PrefetchDecision)] == ["a"]


def test_becoming_low_priority_during_a_tool_wait_offloads() -> None:
    policy = spec_policy()
    policy.open("a", Priority.HIGH, 0.0)
    run_turn(policy, CTX, 0.0, session_id="a", priority=Priority.HIGH)
    policy.tool_wait("a", 20.0, 1.0)
    decisions = policy.set_priority("a", Priority.LOW, 2.0)
    assert decisions == (OffloadDecision("a", 4, 0, 4.0, OffloadReason.PRIORITY_CHANGE),)


def test_becoming_high_priority_during_a_tool_wait_prefetches_at_once() -> None:
    policy = waiting_low_session()
    decisions = policy.set_priority("a", Priority.HIGH, 2.0)
    assert decisions == (PrefetchDecision("a", 4, 4.0, 6.0),)


# ----------------------------------------------------------------- pressure backoff
def six_waiting_sessions(**overrides: Any) -> PriorityKVPolicy:
    """Six low sessions of 2 tokens fill the device; their tools return at t = 10, 20, ... 60.

    Tool-wait offload is off, so their KV is still on device when pressure comes.
    """
    policy = spec_policy(tool_wait_offload=False, host_capacity_tokens=12, **overrides)
    assert isinstance(policy, PriorityKVPolicy)
    for index in range(6):
        session_id = f"s{index}"
        policy.open(session_id, Priority.LOW, 0.0)
        run_turn(policy, [10 * index, 10 * index + 1], 0.0, session_id=session_id)
        policy.tool_wait(session_id, 10.0 * (index + 1), 0.0)
    assert policy.free_device_tokens == 0
    return policy


def test_no_pressure_offload_while_the_device_can_give_the_demand() -> None:
    policy = six_waiting_sessions()
    policy.close("s0", 1.0)  # its 2 tokens become unreferenced cache
    assert policy.before_forward(2, 1.0) == ()


def test_pressure_offloads_the_session_returning_last_first() -> None:
    policy = six_waiting_sessions()
    decisions = policy.before_forward(12, 1.0)
    assert [(d.session_id, d.reason) for d in decisions if isinstance(d, OffloadDecision)] == [
        ("s5", OffloadReason.PRESSURE)
    ]


def test_pressure_offload_group_doubles_while_pressure_persists() -> None:
    policy = six_waiting_sessions()
    groups = [len(policy.before_forward(12, float(step))) for step in range(1, 3)]
    assert groups == [1, 2]
    assert policy.backoff_group_size == 4


def test_pressure_offload_group_halves_once_pressure_eases() -> None:
    policy = six_waiting_sessions()
    policy.before_forward(12, 1.0)
    policy.before_forward(12, 2.0)  # group is now 4
    policy.before_forward(0, 3.0)
    assert policy.backoff_group_size == 2


def test_pressure_offload_stops_once_the_shortage_is_covered() -> None:
    policy = six_waiting_sessions(backoff_initial_group=4)
    decisions = policy.before_forward(4, 1.0)
    assert len(decisions) == 2  # 2 sessions x 2 tokens cover the 4-token shortage


def test_closing_a_high_priority_session_resets_the_backoff() -> None:
    policy = six_waiting_sessions()
    policy.open("h", Priority.HIGH, 0.0)
    policy.before_forward(12, 1.0)
    policy.before_forward(12, 2.0)
    policy.close("h", 3.0)
    assert policy.backoff_group_size == 1


def test_kv_that_eviction_offloaded_during_a_tool_wait_is_prefetched_before_the_return() -> None:
    policy = waiting_low_session(tool_wait_offload=False)  # still on device, returns at 21.0
    policy.reserve(12, Priority.LOW, 2.0)  # eviction offloads it
    policy.release(12, 3.0)
    assert policy.peek_prefix(CTX).host_tokens == 4
    assert policy.before_forward(0, 16.5) == (PrefetchDecision("a", 4, 4.0, 20.5),)
