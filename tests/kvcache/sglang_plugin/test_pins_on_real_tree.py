"""Session pins on SGLang's real UnifiedRadixCache: what is pinned stays on the device, what is
not is evicted first, and SGLang's own accounting stays exact."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang.srt.mem_cache.base_prefix_cache import EvictParams

from kvcache.sglang_plugin.config import AgentKVConfig
from tests.kvcache.sglang_plugin.real_tree import Tree, agentkv_tree

pytestmark = pytest.mark.sglang
HIGH, LOW = 1, 0
SYSTEM = list(range(1, 17))  # a system prompt every session shares


def context(session: int, turns: int, turn_tokens: int = 24) -> list[int]:
    """A session's context after `turns` turns: the shared prefix, then its own tokens."""
    own = [100_000 * (session + 1) + i for i in range(turns * turn_tokens)]
    return SYSTEM + own


def turn(tree: Tree, session: int, turns: int, priority: int) -> list[int]:
    tokens = context(session, turns)
    node, length = tree.insert(tokens, priority)
    tree.cache.session_turn_ended(f"s{session}", priority, node, length)
    return tokens


def pressure(tree: Tree, seed: int, tokens: int) -> None:
    """A low-priority newcomer that needs `tokens` of KV (evicts what it must)."""
    tree.insert([900_000_000 + seed * 10_000 + i for i in range(tokens)], LOW)


def test_a_high_sessions_kv_survives_eviction_through_its_tool_call() -> None:
    with agentkv_tree() as tree:
        high = turn(tree, 0, 2, HIGH)
        low = turn(tree, 1, 2, LOW)
        tree.cache.evict(EvictParams(num_tokens=10**6))
        assert tree.on_device(high) == len(high)
        assert tree.on_device(low) == len(SYSTEM)  # its own KV went; the shared prefix stays


def test_pinned_kv_is_protected_not_evictable_in_sglangs_accounting() -> None:
    with agentkv_tree() as tree:
        high = turn(tree, 0, 3, HIGH)
        assert tree.cache.protected_size() == len(high) and tree.cache.evictable_size() == 0


def test_a_pin_moves_to_the_end_of_the_sessions_newest_turn() -> None:
    with agentkv_tree() as tree:
        turn(tree, 0, 1, HIGH)
        newest = turn(tree, 0, 2, HIGH)
        assert tree.cache.protected_size() == len(newest)  # one pin, on the newest node
        assert tree.cache.pinned_sessions == {"s0": len(newest)}


@pytest.mark.parametrize("event", ["close", "low"])
def test_closing_or_lowering_a_session_releases_its_pin(event: str) -> None:
    with agentkv_tree() as tree:
        high = turn(tree, 0, 2, HIGH)
        if event == "close":
            tree.cache.close_session("s0")
        else:
            tree.cache.set_session_priority("s0", LOW)
        assert tree.cache.pinned_sessions == {} and tree.cache.protected_size() == 0
        assert tree.cache.evictable_size() == len(high)


def test_low_requests_never_displace_pins_but_a_high_turn_over_budget_displaces_the_oldest() -> (
    None
):
    config = AgentKVConfig(pin_budget_fraction=0.25)  # 128 of 512 tokens
    with agentkv_tree(config=config) as tree:
        first = turn(tree, 0, 2, HIGH)  # 64 tokens
        second = turn(tree, 1, 2, HIGH)  # 64 (shares 16)
        for seed in range(6):
            pressure(tree, seed, 200)
        assert tree.on_device(first) == len(first) and tree.on_device(second) == len(second)
        third = turn(tree, 2, 2, HIGH)  # over budget: the least recently pinned (s0) goes
        assert set(tree.cache.pinned_sessions) == {"s1", "s2"}
        tree.cache.evict(EvictParams(num_tokens=10**6))
        assert tree.on_device(second) == len(second) and tree.on_device(third) == len(third)
        assert tree.on_device(first) == len(SYSTEM)


def test_a_context_longer_than_the_whole_budget_is_not_pinned() -> None:
    with agentkv_tree(config=AgentKVConfig(pin_budget_fraction=0.05)) as tree:
        turn(tree, 0, 3, HIGH)  # 88 tokens > 25
        assert tree.cache.pinned_sessions == {}


def test_a_flush_drops_the_pins_with_the_tree() -> None:
    with agentkv_tree() as tree:
        turn(tree, 0, 2, HIGH)
        tree.cache.reset()
        assert tree.cache.pinned_sessions == {} and tree.tree_tokens() == 0
        turn(tree, 0, 1, HIGH)  # pins work again on the fresh tree
        assert list(tree.cache.pinned_sessions) == ["s0"]


# -- random operation sequences ---------------------------------------------------------------

operation = st.one_of(
    st.tuples(st.just("turn"), st.integers(0, 5), st.sampled_from([HIGH, LOW])),
    st.tuples(st.just("close"), st.integers(0, 5), st.just(0)),
    st.tuples(st.just("priority"), st.integers(0, 5), st.sampled_from([HIGH, LOW])),
    st.tuples(st.just("pressure"), st.integers(0, 10**6), st.integers(1, 300)),
    st.tuples(st.just("evict"), st.integers(1, 400), st.just(0)),
)


@pytest.mark.parametrize(
    ("core", "host_tier"), [("rust", False), ("python", False), ("rust", True)]
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=st.lists(operation, min_size=1, max_size=40))
def test_invariants_hold_over_random_operation_sequences(
    core: str, host_tier: bool, operations: list[tuple[str, int, int]]
) -> None:
    config = AgentKVConfig(pin_budget_fraction=0.5)
    with agentkv_tree(capacity=1024, core=core, config=config, host_tier=host_tier) as tree:
        budget = int(0.5 * tree.capacity)
        turns: dict[int, int] = {}
        live_high: dict[int, list[int]] = {}  # session -> its context, while high and open
        for kind, session, value in operations:
            if kind == "turn":
                if len(context(session, turns.get(session, 0) + 1)) > 400:
                    continue
                turns[session] = turns.get(session, 0) + 1
                tokens = turn(tree, session, turns[session], value)
                if value == HIGH:
                    live_high[session] = tokens
                else:
                    live_high.pop(session, None)
            elif kind == "close":
                tree.cache.close_session(f"s{session}")
                live_high.pop(session, None)
            elif kind == "priority":
                tree.cache.set_session_priority(f"s{session}", value)
                if value == LOW:
                    live_high.pop(session, None)
            elif kind == "pressure":
                pressure(tree, session, value)
            else:
                tree.cache.evict(EvictParams(num_tokens=value))
            if host_tier:
                tree.cache.writing_check(write_back=True)  # acks: low sessions go to host
            pinned = tree.cache.pinned_sessions
            # Pins belong to live high sessions only, and fit the budget.
            assert set(pinned) <= {f"s{s}" for s in live_high}
            assert sum(pinned.values()) <= budget
            # A pinned session's whole context is on the device: nothing evicted it.
            for name in pinned:
                tokens = live_high[int(name[1:])]
                assert tree.on_device(tokens) == len(tokens)
            # SGLang's accounting is exact: evictable + protected is the tree, no leak.
            assert tree.tree_tokens() + tree.allocator.available_size() == tree.capacity
        # Evicting everything evictable frees exactly evictable_size and spares every pin.
        evictable = tree.cache.evictable_size()
        evicted = tree.cache.evict(EvictParams(num_tokens=10**9)).num_tokens_evicted
        assert evicted == evictable and tree.cache.evictable_size() == 0
        for name in tree.cache.pinned_sessions:
            tokens = live_high[int(name[1:])]
            assert tree.on_device(tokens) == len(tokens)
