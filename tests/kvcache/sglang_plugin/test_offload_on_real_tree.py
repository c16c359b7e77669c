"""Offloading a low-priority session's KV to host once its write-through is done, on SGLang's
real UnifiedRadixCache with HiCache (CPU stand-ins for its two GPU-only pieces: real_tree)."""

from __future__ import annotations

import pytest
from sglang.srt.mem_cache.base_prefix_cache import EvictParams

from tests.kvcache.sglang_plugin.real_tree import Tree, agentkv_tree

pytestmark = pytest.mark.sglang
HIGH, LOW = 1, 0
SYSTEM = list(range(1, 17))


def context(session: int, turn_tokens: int = 24) -> list[int]:
    return SYSTEM + [100_000 * (session + 1) + i for i in range(turn_tokens)]


def turn(tree: Tree, tokens: list[int], session: str, priority: int) -> None:
    node, length = tree.insert(tokens, priority)
    tree.cache.session_turn_ended(session, priority, node, length)


@pytest.mark.parametrize("core", ["rust", "python"])
def test_a_low_sessions_kv_goes_to_host_once_backed_up_and_a_shared_prefix_stays(
    core: str,
) -> None:
    with agentkv_tree(host_tier=True, core=core) as tree:
        high, low = context(0), context(1)
        turn(tree, high, "high", HIGH)
        turn(tree, low, "low", LOW)
        assert tree.match(low) == (len(low), 0)  # the copy to host is still in flight
        tree.cache.writing_check(write_back=True)  # the scheduler's poll acknowledges it
        assert tree.match(low) == (len(SYSTEM), len(low) - len(SYSTEM))
        assert tree.match(high) == (len(high), 0)  # pinned, and not offloaded
        assert tree.cache.offloaded_tokens == len(low) - len(SYSTEM)


def test_the_whole_exclusive_chain_of_a_low_session_is_offloaded() -> None:
    with agentkv_tree(host_tier=True) as tree:
        first = context(1)
        turn(tree, first, "low", LOW)
        second = [*first, *range(7_000, 7_024)]
        turn(tree, second, "low", LOW)  # a second turn: a second node under the first
        tree.cache.writing_check(write_back=True)
        assert tree.match(second) == (0, len(second))  # nothing else shares it: all on host


def test_a_node_locked_by_a_running_request_is_not_offloaded() -> None:
    with agentkv_tree(host_tier=True) as tree:
        low = context(1)
        node, length = tree.insert(low, LOW)
        running = tree.cache.lock(node)  # another request matched it and is decoding
        tree.cache.session_turn_ended("low", LOW, node, length)
        tree.cache.writing_check(write_back=True)
        assert tree.match(low) == (len(low), 0)
        tree.cache.unlock(running)


def test_offloaded_kv_frees_device_memory_and_accounting_stays_exact() -> None:
    with agentkv_tree(host_tier=True, capacity=256) as tree:
        for session in range(4):
            turn(tree, context(session + 1, turn_tokens=40), f"low{session}", LOW)
        tree.cache.writing_check(write_back=True)
        assert tree.tree_tokens() + tree.allocator.available_size() == tree.capacity
        assert tree.allocator.available_size() == tree.capacity - len(SYSTEM)
        evictable = tree.cache.evictable_size()
        assert tree.cache.evict(EvictParams(num_tokens=10**6)).num_tokens_evicted == evictable


def test_without_a_host_tier_nothing_is_offloaded() -> None:
    with agentkv_tree() as tree:
        low = context(1)
        turn(tree, low, "low", LOW)
        tree.cache.writing_check(write_back=True)
        assert tree.match(low) == (len(low), 0) and tree.cache.offloaded_tokens == 0


def test_a_prefix_another_session_still_uses_on_the_device_stays_there() -> None:
    with agentkv_tree(host_tier=True) as tree:
        first, second = context(1), context(2)
        tree.insert(second, LOW)  # another session's context, backed up and unlocked
        tree.cache.writing_check(write_back=True)
        turn(tree, first, "low1", LOW)  # shares the system prompt with it
        tree.cache.writing_check(write_back=True)
        assert tree.match(first) == (len(SYSTEM), len(first) - len(SYSTEM))
        assert tree.match(second) == (len(second), 0)
