"""LRURadixKV: page-aligned prefix matching, locks, LRU eviction, host tier and accounting."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rollout.engines.sim import CachedPrefix, HostWritePolicy, LRURadixKV, TransferDirection

PAGE = 4


def seq(start: int, length: int) -> tuple[int, ...]:
    return tuple(range(start, start + length))


def cache_prefix(kv: LRURadixKV, rid: str, ids: tuple[int, ...]) -> None:
    """Run `ids` through a request's life: acquire, compute all of it, release as cache."""
    match = kv.acquire(rid, ids, 0, "")
    assert kv.reserve(rid, len(ids) - match.cached_tokens, 0) == 0
    kv.release(rid, ids, len(ids))


def test_match_counts_whole_pages_and_never_the_last_token() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    prompt = seq(0, 10)
    cache_prefix(kv, "a", prompt)
    assert kv.match_prefix(prompt) == CachedPrefix(8, 0)
    assert kv.match_prefix(prompt[:9]) == CachedPrefix(8, 0)
    assert kv.match_prefix(prompt[:8]) == CachedPrefix(4, 0)  # 8 tokens: at most 7 may match


def test_a_sibling_hits_the_prompt_pages_another_request_committed() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    prompt = seq(0, 12)
    kv.acquire("first", prompt, 0, "s1")
    kv.reserve("first", 12, 0)
    kv.commit("first", prompt, 12)
    assert kv.acquire("second", (*prompt, 99), 0, "s2") == CachedPrefix(12, 0)
    kv.check_invariants()


def test_pages_committed_twice_are_stored_once() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    prompt = seq(0, 8)
    for rid in ("a", "b"):
        kv.acquire(rid, prompt, 0, "")
        kv.reserve(rid, 8, 0)
    kv.commit("a", prompt, 8)
    kv.commit("b", prompt, 8)
    assert kv.stats().used_tokens == 8
    kv.check_invariants()


def test_reserve_reports_the_shortfall_and_allocates_nothing_when_locked_kv_blocks_it() -> None:
    kv = LRURadixKV(capacity_tokens=16, page_tokens=PAGE)
    kv.acquire("holder", seq(0, 13), 0, "")
    assert kv.reserve("holder", 12, 0) == 0
    kv.acquire("other", seq(100, 5), 0, "")
    assert kv.reserve("other", 8, 0) == 4
    assert kv.stats().used_tokens == 12


def test_the_least_recently_used_unlocked_prefix_is_evicted_first() -> None:
    kv = LRURadixKV(capacity_tokens=16, page_tokens=PAGE)
    old, recent = seq(0, 9), seq(100, 9)
    cache_prefix(kv, "old", old)
    cache_prefix(kv, "recent", recent)
    kv.acquire("new", seq(200, 9), 0, "")
    assert kv.reserve("new", 8, 0) == 0
    assert kv.match_prefix(old) == CachedPrefix(0, 0)
    assert kv.match_prefix(recent) == CachedPrefix(8, 0)


def test_a_locked_prefix_is_never_evicted() -> None:
    kv = LRURadixKV(capacity_tokens=16, page_tokens=PAGE)
    prompt = seq(0, 9)
    cache_prefix(kv, "warm", prompt)
    kv.acquire("running", prompt, 0, "")
    kv.acquire("new", seq(200, 13), 0, "")
    assert kv.reserve("new", 12, 0) == 4
    assert kv.match_prefix(prompt) == CachedPrefix(8, 0)


def test_evicted_kv_is_demoted_to_host_and_loaded_back_on_demand() -> None:
    kv = LRURadixKV(16, PAGE, host_capacity_tokens=32, write_policy=HostWritePolicy.WRITE_BACK)
    prompt = seq(0, 9)
    cache_prefix(kv, "a", prompt)
    cache_prefix(kv, "b", seq(100, 16))  # needs the whole pool: "a" goes to host
    assert kv.match_prefix(prompt) == CachedPrefix(0, 8)
    kv.acquire("again", prompt, 0, "")
    assert kv.load_back("again").tokens == 8
    assert kv.match_prefix(prompt) == CachedPrefix(8, 0)
    assert kv.stats().loaded_tokens == 8
    kv.check_invariants()


def test_write_through_copies_new_pages_to_host_as_a_background_transfer() -> None:
    kv = LRURadixKV(16, PAGE, host_capacity_tokens=32, write_policy=HostWritePolicy.WRITE_THROUGH)
    cache_prefix(kv, "a", seq(0, 9))
    transfers = kv.drain_transfers()
    assert [(t.direction, t.tokens) for t in transfers] == [(TransferDirection.D2H, 8)]
    assert kv.drain_transfers() == ()


def test_without_a_host_tier_evicted_kv_is_dropped() -> None:
    kv = LRURadixKV(capacity_tokens=16, page_tokens=PAGE)
    cache_prefix(kv, "a", seq(0, 9))
    cache_prefix(kv, "b", seq(100, 16))
    assert kv.match_prefix(seq(0, 9)) == CachedPrefix(0, 0)
    assert kv.stats().dropped_tokens == 8


def test_release_caches_prompt_and_output_but_retraction_frees_the_decode_kv() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    prompt, output = seq(0, 8), seq(50, 8)
    kv.acquire("done", prompt, 0, "")
    kv.reserve("done", 16, 0)
    kv.commit("done", prompt, 8)
    kv.release("done", prompt + output, 16)
    assert kv.match_prefix((*prompt, *output, 7)) == CachedPrefix(16, 0)
    kv.acquire("retracted", seq(100, 8), 0, "")
    kv.reserve("retracted", 16, 0)
    kv.commit("retracted", seq(100, 8), 8)
    kv.release("retracted", seq(100, 8), 8)
    assert kv.stats().used_tokens == 24
    kv.check_invariants()


def test_flush_drops_cached_prefixes_but_keeps_what_running_requests_hold() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    cache_prefix(kv, "idle", seq(0, 9))
    kv.acquire("running", seq(100, 9), 0, "")
    kv.reserve("running", 8, 0)
    kv.commit("running", seq(100, 9), 8)
    kv.flush()
    assert kv.match_prefix(seq(0, 9)) == CachedPrefix(0, 0)
    assert kv.match_prefix(seq(100, 9)) == CachedPrefix(8, 0)
    kv.check_invariants()


def test_a_retried_acquire_matches_what_the_tree_holds_now() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    ids = seq(0, 21)
    cache_prefix(kv, "short", ids[:9])
    assert kv.acquire("late", ids, 0, "") == CachedPrefix(8, 0)
    kv.release("late", ids, 0)  # refused: it will try again with the same tuple
    cache_prefix(kv, "longer", ids[:17])
    assert kv.acquire("late", ids, 0, "") == CachedPrefix(16, 0)


def test_using_a_request_that_holds_nothing_is_an_error_that_says_to_acquire() -> None:
    kv = LRURadixKV(capacity_tokens=16, page_tokens=PAGE)
    with pytest.raises(ValueError, match="acquire"):
        kv.reserve("ghost", 4, 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.booleans())
def test_random_request_lives_keep_every_invariant(seed: int, write_through: bool) -> None:
    rng = random.Random(seed)
    policy = HostWritePolicy.WRITE_THROUGH if write_through else HostWritePolicy.WRITE_BACK
    kv = LRURadixKV(64, PAGE, host_capacity_tokens=rng.choice([0, 32, 96]), write_policy=policy)
    prompts = [tuple(rng.randrange(3) for _ in range(rng.randrange(2, 30))) for _ in range(6)]
    live: dict[str, tuple[tuple[int, ...], int]] = {}
    refused: list[tuple[str, tuple[int, ...]]] = []
    for step in range(60):
        if refused and rng.random() < 0.3:  # a refused request tries again, same sequence
            rid, ids = refused.pop(rng.randrange(len(refused)))
            fresh = kv.match_prefix(ids)
            assert kv.acquire(rid, ids, 0, "") == fresh
            kv.release(rid, ids, 0)
            refused.append((rid, ids))
        elif live and rng.random() < 0.4:
            rid = rng.choice(sorted(live))
            ids, computed = live.pop(rid)
            extra = tuple(rng.randrange(3) for _ in range(rng.randrange(0, 6)))
            kv.release(rid, ids + extra, computed + (len(extra) if rng.random() < 0.5 else 0))
        else:
            rid = f"r{step}"
            ids = rng.choice(prompts) + tuple(rng.randrange(3) for _ in range(rng.randrange(4)))
            match = kv.acquire(rid, ids, 0, "")
            if match.host_tokens and kv.load_back(rid).shortfall_tokens:
                kv.release(rid, ids, 0)
                refused.append((rid, ids))
                continue
            new = len(ids) - match.cached_tokens
            if kv.reserve(rid, new + 5, 0):
                kv.release(rid, ids, 0)
                refused.append((rid, ids))
                continue
            kv.commit(rid, ids, len(ids))
            live[rid] = (ids, len(ids))
        kv.check_invariants()


def test_an_unused_reservation_can_be_given_back_but_no_more() -> None:
    kv = LRURadixKV(capacity_tokens=64, page_tokens=PAGE)
    kv.acquire("a", seq(0, 5), 0, "")
    kv.reserve("a", 20, 0)
    kv.unreserve("a", 12)
    assert kv.stats().used_tokens == 8
    with pytest.raises(ValueError, match="give back only"):
        kv.unreserve("a", 9)
