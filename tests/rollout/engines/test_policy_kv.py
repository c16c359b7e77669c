"""PolicyKV: the kvcache policy behind the sim engine's KV seam, and the LRU-vs-policy benchmark.

The first block runs the `KVBackend` behaviours that both backends share, parametrized over the
plain LRU cache and the adapter; then come the adapter's own rules (session hints, priorities,
transfers, accounting, flush), the engine driving it, the config/factory wiring and the benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation.clock import ManualClock
from foundation.config import load_config
from foundation.errors import ConfigError
from kvcache import KVCacheConfig, PriorityKVPolicy
from rollout.engines.base import (
    FinishReason,
    GenerateRequest,
    GenerateResult,
    KVHint,
    KVHintKind,
    SamplingParams,
)
from rollout.engines.sim import (
    CachedPrefix,
    HostWritePolicy,
    KVBackend,
    LRURadixKV,
    ServedModelConfig,
    SimEngine,
    SimEngineConfig,
    TokenSeq,
    Transfer,
    TransferDirection,
)
from rollout.engines.sim.config import KVBackendKind
from rollout.engines.sim.cost_model import (
    decode_step_time_s,
    prefill_attention_units,
    step_time_s,
)
from rollout.engines.sim.factory import build_kv_backend, build_sim_engine, policy_kv_config
from rollout.engines.sim.policy_kv import PolicyKV
from rollout.simulation.kv_bench import BenchSetup, run_backend
from rollout.simulation.kv_bench import main as kv_bench_main
from rollout.simulation.vtime import run_virtual
from rollout.simulation.workload import SyntheticWorkload, WorkloadConfig
from tests.paths import CONFIGS
from tests.rollout.engines.doubles import COST, MODEL, STOP, FixedTokens, prompt

PAGE = 4
HIGH, LOW = 1, 0
LINK_S_PER_TOKEN = MODEL.kv_bytes_per_token / 47e9  # the engine's default link
LINK_LATENCY_S = 15e-6


def seq(start: int, length: int) -> tuple[int, ...]:
    return tuple(range(start, start + length))


# ---- backends --------------------------------------------------------------------------------


def unit_policy(
    capacity: int, host: int = 0, clock: ManualClock | None = None, **knobs: Any
) -> PolicyKV:
    """The priority policy on PAGE-token pages, with a link that moves 1 token per second."""
    config = KVCacheConfig.model_validate(
        {
            "policy": "priority",
            "page_size": PAGE,
            "device_capacity_tokens": capacity,
            "host_capacity_tokens": host,
            "prefetch_margin_s": 0.5,
            "transfer": {
                "bytes_per_token": 1,
                "d2h_bandwidth_bytes_per_s": 1.0,
                "h2d_bandwidth_bytes_per_s": 1.0,
                "latency_s": 0.0,
            },
            **knobs,
        }
    )
    return PolicyKV(config, clock=clock if clock is not None else ManualClock())


MakeKV = Callable[..., KVBackend]


def make_lru(capacity: int, host: int = 0, clock: ManualClock | None = None) -> KVBackend:
    return LRURadixKV(capacity, PAGE, host, HostWritePolicy.WRITE_BACK)


def make_policy(capacity: int, host: int = 0, clock: ManualClock | None = None) -> KVBackend:
    return unit_policy(capacity, host, clock)


@pytest.fixture(params=[make_lru, make_policy], ids=["radix_lru", "kvcache"])
def make_kv(request: pytest.FixtureRequest) -> MakeKV:
    factory: MakeKV = request.param
    return factory


def check(kv: KVBackend) -> None:
    assert isinstance(kv, LRURadixKV | PolicyKV)
    kv.check_invariants()


def cache_prefix(
    kv: KVBackend, rid: str, ids: tuple[int, ...], priority: int = LOW, session: str = ""
) -> None:
    """Run `ids` through a request's life: acquire, compute all of it, release as cache."""
    match = kv.acquire(rid, ids, priority, session)
    if match.host_tokens:
        assert kv.load_back(rid).shortfall_tokens == 0
    assert kv.reserve(rid, len(ids) - match.cached_tokens, priority) == 0
    kv.release(rid, ids, len(ids))


# ---- KVBackend behaviours both backends share ----------------------------------------------


def test_match_counts_whole_pages_and_never_the_last_token(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    ids = seq(0, 10)
    cache_prefix(kv, "a", ids)
    assert kv.match_prefix(ids) == CachedPrefix(8, 0)
    assert kv.match_prefix(ids[:9]) == CachedPrefix(8, 0)
    assert kv.match_prefix(ids[:8]) == CachedPrefix(4, 0)  # 8 tokens: at most 7 may match


def test_a_sibling_hits_the_prompt_pages_another_request_committed(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    ids = seq(0, 12)
    kv.acquire("first", ids, LOW, "s1")
    kv.reserve("first", 12, LOW)
    kv.commit("first", ids, 12)
    assert kv.acquire("second", (*ids, 99), LOW, "s2") == CachedPrefix(12, 0)
    check(kv)


def test_pages_committed_twice_are_stored_once(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    ids = seq(0, 8)
    for rid in ("a", "b"):
        kv.acquire(rid, ids, LOW, "")
        kv.reserve(rid, 8, LOW)
    kv.commit("a", ids, 8)
    kv.commit("b", ids, 8)
    assert kv.stats().used_tokens == 8
    check(kv)


def test_reserve_reports_the_shortfall_and_allocates_nothing_when_locked_kv_blocks_it(
    make_kv: MakeKV,
) -> None:
    kv = make_kv(16)
    kv.acquire("holder", seq(0, 13), LOW, "")
    assert kv.reserve("holder", 12, LOW) == 0
    kv.acquire("other", seq(100, 5), LOW, "")
    assert kv.reserve("other", 8, LOW) == 4
    assert kv.stats().used_tokens == 12


def test_reserve_each_grants_every_request_or_none(make_kv: MakeKV) -> None:
    kv = make_kv(32)
    for rid, start in (("a", 0), ("b", 100), ("c", 200)):
        kv.acquire(rid, seq(start, 5), LOW, "")
    assert kv.reserve_each(["a", "b", "c"], 8, LOW) == 0
    assert kv.stats().used_tokens == 24
    assert kv.reserve_each(["a", "b", "c"], 4, LOW) == 4  # 12 asked, 8 free: nobody gets any
    assert kv.stats().used_tokens == 24
    kv.unreserve("b", 8)  # each got its own share, to give back on its own
    with pytest.raises(ValueError, match="give back only"):
        kv.unreserve("b", 1)
    check(kv)


def test_unreserve_each_gives_back_each_share_or_nothing(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    kv.acquire("a", seq(0, 5), LOW, "")
    kv.acquire("b", seq(100, 5), LOW, "")
    assert kv.reserve_each(["a", "b"], 10, LOW) == 0
    kv.unreserve_each([("a", 4), ("b", 6)])
    assert kv.stats().used_tokens == 10
    with pytest.raises(ValueError, match="give back only"):
        kv.unreserve_each([("a", 1), ("b", 5)])  # b holds only 4 more
    assert kv.stats().used_tokens == 10  # the refusal changed nothing, not even a's share
    kv.unreserve_each([("a", 6), ("b", 4)])
    assert kv.stats().used_tokens == 0
    check(kv)


def test_the_least_recently_used_unlocked_prefix_is_evicted_first(make_kv: MakeKV) -> None:
    clock = ManualClock()
    kv = make_kv(16, clock=clock)
    old, recent = seq(0, 9), seq(100, 9)
    cache_prefix(kv, "old", old)
    clock.advance(1.0)
    cache_prefix(kv, "recent", recent)
    clock.advance(1.0)
    kv.acquire("new", seq(200, 9), LOW, "")
    assert kv.reserve("new", 8, LOW) == 0
    assert kv.match_prefix(old) == CachedPrefix(0, 0)
    assert kv.match_prefix(recent) == CachedPrefix(8, 0)


def test_a_locked_prefix_is_never_evicted(make_kv: MakeKV) -> None:
    kv = make_kv(16)
    ids = seq(0, 9)
    cache_prefix(kv, "warm", ids)
    kv.acquire("running", ids, LOW, "")
    kv.acquire("new", seq(200, 13), LOW, "")
    assert kv.reserve("new", 12, LOW) == 4
    assert kv.match_prefix(ids) == CachedPrefix(8, 0)


def test_release_caches_prompt_and_output_but_retraction_frees_the_decode_kv(
    make_kv: MakeKV,
) -> None:
    kv = make_kv(64)
    ids, output = seq(0, 8), seq(50, 8)
    kv.acquire("done", ids, LOW, "")
    kv.reserve("done", 16, LOW)
    kv.commit("done", ids, 8)
    kv.release("done", ids + output, 16)
    assert kv.match_prefix((*ids, *output, 7)) == CachedPrefix(16, 0)
    kv.acquire("retracted", seq(100, 8), LOW, "")
    kv.reserve("retracted", 16, LOW)
    kv.commit("retracted", seq(100, 8), 8)
    kv.release("retracted", seq(100, 8), 8)
    assert kv.stats().used_tokens == 24
    check(kv)


def test_a_retried_acquire_matches_what_the_tree_holds_now(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    ids = seq(0, 21)
    cache_prefix(kv, "short", ids[:9])
    assert kv.acquire("late", ids, LOW, "") == CachedPrefix(8, 0)
    kv.release("late", ids, 0)  # refused: it will try again with the same tuple
    cache_prefix(kv, "longer", ids[:17])
    assert kv.acquire("late", ids, LOW, "") == CachedPrefix(16, 0)


def test_flush_drops_every_cached_prefix_when_no_request_holds_kv(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    cache_prefix(kv, "idle", seq(0, 9))
    kv.flush()
    assert kv.match_prefix(seq(0, 9)) == CachedPrefix(0, 0)
    assert kv.stats().used_tokens == 0


def test_using_a_request_that_holds_nothing_is_an_error_that_says_to_acquire(
    make_kv: MakeKV,
) -> None:
    kv = make_kv(16)
    with pytest.raises(ValueError, match="acquire"):
        kv.reserve("ghost", 4, LOW)


def test_an_unused_reservation_can_be_given_back_but_no_more(make_kv: MakeKV) -> None:
    kv = make_kv(64)
    kv.acquire("a", seq(0, 5), LOW, "")
    kv.reserve("a", 20, LOW)
    kv.unreserve("a", 12)
    assert kv.stats().used_tokens == 8
    with pytest.raises(ValueError, match="give back only"):
        kv.unreserve("a", 9)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
@pytest.mark.parametrize("factory", [make_lru, make_policy], ids=["radix_lru", "kvcache"])
def test_random_request_lives_keep_every_invariant(factory: MakeKV, seed: int) -> None:
    rng = random.Random(seed)
    clock = ManualClock()
    kv = factory(64, host=rng.choice([0, 32, 96]), clock=clock)
    prompts = [tuple(rng.randrange(3) for _ in range(rng.randrange(2, 30))) for _ in range(6)]
    live: dict[str, tuple[tuple[int, ...], int]] = {}
    refused: list[tuple[str, tuple[int, ...]]] = []
    for step in range(60):
        clock.advance(rng.random())
        priority = rng.choice([LOW, HIGH])
        if refused and rng.random() < 0.3:  # a refused request tries again, same sequence
            rid, ids = refused.pop(rng.randrange(len(refused)))
            fresh = kv.match_prefix(ids)
            assert kv.acquire(rid, ids, priority, rid) == fresh
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
            match = kv.acquire(rid, ids, priority, rid)
            if match.host_tokens and kv.load_back(rid).shortfall_tokens:
                kv.release(rid, ids, 0)
                refused.append((rid, ids))
                continue
            new = len(ids) - match.cached_tokens
            if kv.reserve(rid, new + 5, priority):
                kv.release(rid, ids, 0)
                refused.append((rid, ids))
                continue
            kv.commit(rid, ids, len(ids))
            live[rid] = (ids, len(ids))
        check(kv)


# ---- the adapter's own rules ---------------------------------------------------------------


def open_session(kv: PolicyKV, session: str, priority: int) -> None:
    kv.hint(KVHint(KVHintKind.OPEN, session, priority))


def run_session_turn(kv: PolicyKV, session: str, ids: tuple[int, ...], priority: int) -> None:
    """One request of `session` that computes all of `ids` and leaves them cached."""
    cache_prefix(kv, f"{session}/{len(ids)}", ids, priority, session)


def test_a_low_priority_tool_wait_offloads_the_sessions_kv_as_a_device_to_host_transfer() -> None:
    kv = unit_policy(64, host=64)
    open_session(kv, "s", LOW)
    run_session_turn(kv, "s", seq(0, 13), LOW)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "s", LOW, expected_s=100.0))
    assert kv.match_prefix(seq(0, 13)) == CachedPrefix(0, 12)
    assert kv.drain_transfers() == (Transfer(TransferDirection.D2H, 12),)


def test_a_high_priority_tool_wait_keeps_the_sessions_kv_on_device() -> None:
    kv = unit_policy(64, host=64)
    open_session(kv, "s", HIGH)
    run_session_turn(kv, "s", seq(0, 13), HIGH)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "s", HIGH, expected_s=100.0))
    assert kv.match_prefix(seq(0, 13)) == CachedPrefix(12, 0)
    assert kv.drain_transfers() == ()


def test_a_due_prefetch_is_a_host_to_device_transfer_naming_its_session() -> None:
    clock = ManualClock()
    kv = unit_policy(64, host=64, clock=clock)
    open_session(kv, "s", LOW)
    run_session_turn(kv, "s", seq(0, 13), LOW)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "s", LOW, expected_s=100.0))
    kv.drain_transfers()
    clock.advance(100.0 - 12.0 - 0.5)  # one reload time (12 s) plus the margin before return
    kv.before_forward(0)
    assert kv.drain_transfers() == (Transfer(TransferDirection.H2D, 12, "s"),)
    assert kv.match_prefix(seq(0, 13)) == CachedPrefix(12, 0)


def test_a_low_priority_request_cannot_evict_a_high_priority_sessions_kv() -> None:
    kv = unit_policy(32)
    open_session(kv, "critical", HIGH)
    run_session_turn(kv, "critical", seq(0, 25), HIGH)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "critical", HIGH, expected_s=100.0))
    kv.acquire("low", seq(100, 17), LOW, "other")
    assert kv.available_tokens(LOW) == 8
    assert kv.reserve("low", 16, LOW) == 8
    assert kv.match_prefix(seq(0, 25)) == CachedPrefix(24, 0)


def test_a_high_priority_request_may_evict_another_high_priority_sessions_kv() -> None:
    kv = unit_policy(32)
    open_session(kv, "critical", HIGH)
    run_session_turn(kv, "critical", seq(0, 25), HIGH)
    kv.acquire("urgent", seq(100, 17), HIGH, "other")
    assert kv.reserve("urgent", 16, HIGH) == 0
    assert kv.match_prefix(seq(0, 25)).device_tokens < 24


def test_hints_for_sessions_that_are_not_open_are_ignored_and_counted() -> None:
    kv = unit_policy(64, host=64)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "never-opened", LOW, expected_s=5.0))
    kv.hint(KVHint(KVHintKind.CLOSE, "never-opened", LOW))
    assert kv.ignored_hints == 2


def test_a_second_open_changes_the_sessions_priority() -> None:
    kv = unit_policy(64, host=64)
    open_session(kv, "s", LOW)
    open_session(kv, "s", HIGH)
    run_session_turn(kv, "s", seq(0, 13), HIGH)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "s", HIGH, expected_s=100.0))
    assert kv.match_prefix(seq(0, 13)) == CachedPrefix(12, 0)


def test_an_admission_refused_and_retried_is_looked_up_once() -> None:
    kv = unit_policy(64)
    ids = seq(0, 9)
    kv.acquire("r", ids, LOW, "")
    kv.release("r", ids, 0)  # refused before anything was allocated
    kv.acquire("r", ids, LOW, "")
    kv.reserve("r", 9, LOW)
    kv.release("r", ids, 9)
    stats = kv.policy_stats()
    assert (stats.lookups, stats.miss_tokens) == (1, 8)


def test_a_sessions_kv_dropped_under_pressure_counts_as_recomputed_on_its_next_turn() -> None:
    kv = unit_policy(16)  # no host tier: evicted low-referenced KV is dropped
    open_session(kv, "s", LOW)
    first = seq(0, 9)
    run_session_turn(kv, "s", first, LOW)
    cache_prefix(kv, "other", seq(100, 16))  # needs the whole pool: drops "s"
    run_session_turn(kv, "s", (*first, 50, 51, 52, 53), LOW)
    assert kv.stats().recomputed_tokens == 8


def test_flush_waits_for_the_last_running_request_and_keeps_sessions_and_counters() -> None:
    kv = unit_policy(64, host=64)
    open_session(kv, "s", LOW)
    run_session_turn(kv, "s", seq(0, 9), LOW)
    kv.acquire("running", seq(100, 9), LOW, "")
    kv.reserve("running", 9, LOW)
    kv.flush()
    assert kv.match_prefix(seq(0, 9)) == CachedPrefix(8, 0)  # not yet: a request holds KV
    kv.release("running", seq(100, 9), 9)
    assert (kv.match_prefix(seq(0, 9)), kv.match_prefix(seq(100, 9))) == (
        CachedPrefix(0, 0),
        CachedPrefix(0, 0),
    )
    assert (kv.flushes, kv.policy_stats().lookups) == (1, 2)
    kv.hint(KVHint(KVHintKind.TOOL_WAIT, "s", LOW, expected_s=5.0))  # still open
    assert kv.ignored_hints == 0


# ---- the engine over the adapter ------------------------------------------------------------


def engine_with(
    kv: KVBackend, tokens: FixedTokens, model: ServedModelConfig = MODEL, **config: Any
) -> SimEngine:
    return SimEngine(SimEngineConfig.model_validate(config), model, kv, tokens)


def engine_policy(
    capacity_tokens: int,
    host_tokens: int = 0,
    model: ServedModelConfig = MODEL,
    **knobs: Any,
) -> PolicyKV:
    """The priority policy sized as given, paged and linked like the engine's default config."""
    derived = policy_kv_config(SimEngineConfig(), model).model_dump()
    config = KVCacheConfig.model_validate(
        {
            **derived,
            "device_capacity_tokens": capacity_tokens,
            "host_capacity_tokens": host_tokens,
            **knobs,
        }
    )
    return PolicyKV(config)


def make_backend(name: str, capacity_tokens: int, host_tokens: int = 0) -> KVBackend:
    if name == "radix_lru":
        return LRURadixKV(capacity_tokens, 64, host_tokens)
    return engine_policy(capacity_tokens, host_tokens)


def request(
    rid: str,
    ids: tuple[int, ...],
    *,
    session: str = "",
    priority: int = LOW,
    max_new: int = 4096,
    hints: tuple[KVHint, ...] = (),
) -> GenerateRequest:
    return GenerateRequest(
        rid=rid,
        input_ids=ids,
        sampling=SamplingParams(max_new_tokens=max_new, stop_token_ids=(STOP,)),
        session_id=session or rid,
        priority=priority,
        kv_hints=hints,
    )


def prefill_s(*chunks: tuple[int, int]) -> float:
    """One prefill step over (new tokens, prefix tokens) chunks."""
    return step_time_s(
        COST,
        decode_requests=0,
        decode_context_tokens=0,
        prefill_tokens=sum(n for n, _ in chunks),
        prefill_attention=sum(prefill_attention_units(n, p) for n, p in chunks),
    )


def hint(kind: KVHintKind, session: str, priority: int, expected_s: float | None = None) -> KVHint:
    return KVHint(kind, session, priority, expected_s)


def test_a_low_session_offloaded_in_its_tool_wait_is_a_host_hit_with_link_time_next_turn() -> None:
    kv = engine_policy(8192, host_tokens=8192)
    engine = engine_with(kv, FixedTokens(default=1))
    first = prompt(0, 2000)

    async def main() -> tuple[GenerateResult, float, float]:
        opened = (hint(KVHintKind.OPEN, "s", LOW),)
        done = await engine.generate(request("t0", first, session="s", hints=opened))
        await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "s", LOW, expected_s=30.0)])
        await asyncio.sleep(1.0)  # the tool returns long before the prefetch would start
        await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, "s", LOW)])
        start = asyncio.get_running_loop().time()
        again = await engine.generate(request("t1", (*first, *done.output_ids, 5), session="s"))
        return again, start, asyncio.get_running_loop().time()

    again, start, end = run_virtual(main())
    cached = 1984  # whole pages of the 2000-token context
    assert again.cached_tokens == cached
    assert engine.counters.host_hit_tokens == cached
    link_s = LINK_LATENCY_S + cached * LINK_S_PER_TOKEN
    assert end - start == pytest.approx(link_s + prefill_s((2002 - cached, cached)), rel=1e-9)


def test_a_prefetch_that_lands_before_the_tool_returns_makes_the_next_turn_a_device_hit() -> None:
    kv = engine_policy(16384, host_tokens=16384, prefetch_margin_s=0.5)
    engine = engine_with(kv, FixedTokens({"busy": 4000}, default=1), max_block_steps=16)
    first = prompt(0, 2000)

    async def main() -> GenerateResult:
        busy = asyncio.create_task(engine.generate(request("busy", prompt(10**6, 500))))
        opened = (hint(KVHintKind.OPEN, "s", LOW),)
        done = await engine.generate(request("t0", first, session="s", hints=opened))
        await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "s", LOW, expected_s=10.0)])
        await asyncio.sleep(10.0)  # returns as predicted; "busy" keeps the engine stepping
        await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, "s", LOW)])
        again = await engine.generate(request("t1", (*first, *done.output_ids, 5), session="s"))
        await busy
        return again

    again = run_virtual(main())
    stats = engine.stats().extra
    assert again.cached_tokens == 1984
    assert (stats["kv_prefetches"], stats["kv_prefetches_in_time"]) == (1, 1)
    assert engine.counters.host_hit_tokens == 0


def test_a_high_priority_sessions_kv_stays_on_device_across_its_tool_wait() -> None:
    kv = engine_policy(8192, host_tokens=8192)
    engine = engine_with(kv, FixedTokens(default=1))
    first = prompt(0, 2000)

    async def main() -> GenerateResult:
        opened = (hint(KVHintKind.OPEN, "s", HIGH),)
        done = await engine.generate(request("t0", first, session="s", priority=HIGH, hints=opened))
        await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "s", HIGH, expected_s=30.0)])
        await asyncio.sleep(30.0)
        await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, "s", HIGH)])
        ids = (*first, *done.output_ids, 5)
        return await engine.generate(request("t1", ids, session="s", priority=HIGH))

    again = run_virtual(main())
    assert again.cached_tokens == 1984
    assert (engine.counters.host_hit_tokens, engine.stats().extra["kv_offloads"]) == (0, 0)


def test_under_kv_pressure_a_low_request_is_retracted_before_a_high_session_loses_its_cache() -> (
    None
):
    kv = engine_policy(4096)
    engine = engine_with(kv, FixedTokens({"low": 2000}, default=1), schedule_policy="priority")
    context = prompt(0, 3000)
    finished: list[str] = []

    async def high_session() -> GenerateResult:
        opened = (hint(KVHintKind.OPEN, "h", HIGH),)
        done = await engine.generate(
            request("h0", context, session="h", priority=HIGH, hints=opened)
        )
        await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "h", HIGH, expected_s=30.0)])
        await asyncio.sleep(30.0)  # the low request runs out of room meanwhile
        await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, "h", HIGH)])
        ids = (*context, *done.output_ids, 5)
        again = await engine.generate(request("h1", ids, session="h", priority=HIGH))
        finished.append("h")
        await engine.send_kv_hints([hint(KVHintKind.CLOSE, "h", HIGH)])
        return again

    async def low_request() -> GenerateResult:
        await asyncio.sleep(1.0)
        result = await engine.generate(request("low", prompt(10**6, 500)))
        finished.append("low")
        return result

    async def main() -> tuple[GenerateResult, GenerateResult]:
        return await asyncio.gather(high_session(), low_request())

    high, low = run_virtual(main())
    assert high.cached_tokens == 2944  # the high session's context survived on device
    assert (low.finish_reason, len(low.output_ids)) == (FinishReason.STOP, 2000)
    assert low.num_retractions >= 1
    assert finished == ["h", "low"]


def test_the_engine_stats_expose_hits_misses_recomputation_transfers_and_prefetches() -> None:
    kv = engine_policy(8192, host_tokens=8192)
    engine = engine_with(kv, FixedTokens(default=1))
    first = prompt(0, 2000)

    async def main() -> None:
        opened = (hint(KVHintKind.OPEN, "s", LOW),)
        done = await engine.generate(request("t0", first, session="s", hints=opened))
        await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "s", LOW, expected_s=30.0)])
        await asyncio.sleep(1.0)
        await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, "s", LOW)])
        await engine.generate(request("t1", (*first, *done.output_ids, 5), session="s"))

    run_virtual(main())
    stats = engine.stats().extra
    moved = 1984 * MODEL.kv_bytes_per_token
    assert {
        name: stats[name]
        for name in (
            "kv_device_hit_tokens",
            "kv_host_hit_tokens",
            "kv_miss_tokens",
            "kv_recomputed_tokens",
            "kv_offloads",
            "kv_prefetches",
            "kv_prefetches_in_time",
            "h2d_bytes",
            "d2h_bytes",
        )
    } == {
        "kv_device_hit_tokens": 0,
        "kv_host_hit_tokens": 1984,
        "kv_miss_tokens": 1999 + 2001 - 1984,  # all but the last token of each turn
        "kv_recomputed_tokens": 0,
        "kv_offloads": 1,
        "kv_prefetches": 0,
        "kv_prefetches_in_time": 0,
        "h2d_bytes": moved,
        "d2h_bytes": moved,
    }


# ---- engine behaviours on both backends ------------------------------------------------------


BACKENDS = ["radix_lru", "kvcache"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_request_takes_a_prefill_step_then_one_decode_step_per_further_token(
    backend: str,
) -> None:
    engine = engine_with(make_backend(backend, 1_000_000), FixedTokens(default=5))

    async def main() -> float:
        await engine.generate(request("a", prompt(0, 1000)))
        return asyncio.get_running_loop().time()

    expected = prefill_s((1000, 0)) + sum(decode_step_time_s(COST, 1, 1001 + i) for i in range(4))
    assert run_virtual(main()) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_abort_returns_partial_output_whose_resubmission_hits_the_prefix_cache(
    backend: str,
) -> None:
    engine = engine_with(make_backend(backend, 1_000_000), FixedTokens(default=500))
    first = request("a", prompt(0, 1000))

    async def main() -> tuple[GenerateResult, GenerateResult]:
        task = asyncio.create_task(engine.generate(first))
        await asyncio.sleep(0.3)
        await engine.abort("a")
        partial = await task
        resumed = await engine.generate(request("a2", first.input_ids + partial.output_ids))
        return partial, resumed

    partial, resumed = run_virtual(main())
    assert partial.finish_reason is FinishReason.ABORT
    assert resumed.cached_tokens == (1000 + len(partial.output_ids) - 1) // 64 * 64


@pytest.mark.parametrize("backend", BACKENDS)
def test_running_out_of_kv_retracts_a_request_which_later_completes_unchanged(
    backend: str,
) -> None:
    engine = engine_with(
        make_backend(backend, 2944), FixedTokens(default=800), clip_max_new_tokens=1
    )

    async def main() -> list[GenerateResult]:
        return list(
            await asyncio.gather(
                engine.generate(request("a", prompt(0, 1000))),
                engine.generate(request("b", prompt(10**6, 1000))),
            )
        )

    results = run_virtual(main())
    assert [len(r.output_ids) for r in results] == [800, 800]
    assert engine.counters.retractions >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_weight_update_flushes_the_prefix_cache(backend: str) -> None:
    engine = engine_with(make_backend(backend, 1_000_000), FixedTokens(default=2))
    ids = prompt(0, 1000)

    async def main() -> tuple[int, int]:
        await engine.generate(request("a", ids))
        warm = await engine.generate(request("b", ids))
        await engine.update_weights(1)
        cold = await engine.generate(request("c", ids))
        return warm.cached_tokens, cold.cached_tokens

    assert run_virtual(main()) == (960, 0)


def rollout_log(
    seed: int, backend: str, kv_factory: Callable[[SimEngineConfig], KVBackend] | None = None
) -> tuple[list[tuple[str, int, float]], dict[str, float]]:
    """2 groups × 3 samples of a short swe_like run with session hints.

    Returns (rid, cached tokens, end time) per turn in finish order, and the engine's stats.
    """
    model = load_config(ServedModelConfig, CONFIGS / "model" / "qwen3_32b_h200.yaml")
    engine_config = load_config(
        SimEngineConfig,
        CONFIGS / "engine" / "sim.yaml",
        [f"kv_backend={backend}", "schedule_policy=priority"],
    )
    workload_config = load_config(
        WorkloadConfig,
        CONFIGS / "workload" / "swe_like.yaml",
        ["turns.median=6", "prompt_tokens.median=30000", "prompt_tokens.max=40000"],
    )
    workload = SyntheticWorkload(workload_config, seed)
    kv = kv_factory(engine_config) if kv_factory is not None else None
    engine = build_sim_engine(engine_config, model, workload.token_model(), kv)
    log: list[tuple[str, int, float]] = []

    async def sample(group: int, index: int) -> None:
        env = workload.make_env(group, index)
        session, priority = env.session_id, HIGH if group == 0 else LOW
        hints: tuple[KVHint, ...] = (hint(KVHintKind.OPEN, session, priority),)
        context = await env.reset()
        for turn in range(1000):
            rid = f"{session}/{turn}"
            result = await engine.generate(
                request(rid, context, session=session, priority=priority, hints=hints)
            )
            hints = ()
            log.append((rid, result.cached_tokens, asyncio.get_running_loop().time()))
            wait = hint(KVHintKind.TOOL_WAIT, session, priority, expected_s=1.0)
            await engine.send_kv_hints([wait])
            observation, done, _, _ = await env.step(result.output_ids)
            if done:
                break
            await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, session, priority)])
            context = context + result.output_ids + observation
        await engine.send_kv_hints([hint(KVHintKind.CLOSE, session, priority)])

    async def all_samples() -> None:
        async with asyncio.TaskGroup() as tasks:
            for group in range(2):
                for index in range(3):
                    tasks.create_task(sample(group, index))

    run_virtual(all_samples())
    return log, dict(engine.stats().extra)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_simulated_rollout_with_hints_is_identical_for_the_same_seed(backend: str) -> None:
    assert rollout_log(3, backend) == rollout_log(3, backend)


class CheckedPolicyKV(PolicyKV):
    """Checks every invariant after each call that changes the cache."""

    def commit(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        super().commit(rid, token_ids, computed_tokens)
        self.check_invariants()

    def release(self, rid: str, token_ids: TokenSeq, computed_tokens: int) -> None:
        super().release(rid, token_ids, computed_tokens)
        self.check_invariants()

    def hint(self, hint: KVHint) -> None:
        super().hint(hint)
        self.check_invariants()

    def before_forward(self, demand_tokens: int) -> None:
        super().before_forward(demand_tokens)
        self.check_invariants()


def test_a_kv_tight_rollout_with_hints_keeps_the_policy_cache_consistent() -> None:
    model = load_config(ServedModelConfig, CONFIGS / "model" / "qwen3_32b_h200.yaml")
    checked: list[CheckedPolicyKV] = []

    def factory(config: SimEngineConfig) -> KVBackend:
        kv = CheckedPolicyKV(policy_kv_config(config, model))
        checked.append(kv)
        return kv

    log, _ = rollout_log(5, "kvcache", factory)
    stats = checked[0].policy_stats()
    assert len(log) > 10
    assert stats.offloads > 0 and stats.h2d_tokens > 0  # the run did move KV both ways


def test_every_copy_the_policy_makes_crosses_the_engines_link() -> None:
    _, stats = rollout_log(5, "kvcache")
    assert stats["kv_offloads"] > 0 and stats["kv_loaded_tokens"] > 0
    assert (stats["d2h_bytes"], stats["h2d_bytes"]) == (
        stats["kv_offloaded_tokens"] * 262_144,  # the 32B model's KV bytes per token
        stats["kv_loaded_tokens"] * 262_144,
    )


def test_the_adapter_over_kvcaches_lru_policy_prefills_what_the_lru_backend_prefills() -> None:
    """Cross-check of the adapter: both are LRU with write-back, so they recompute alike."""
    engine = load_config(
        SimEngineConfig,
        CONFIGS / "engine" / "sim.yaml",
        ["schedule_policy=priority", "kvcache.policy=lru"],
    )
    setup = BenchSetup(
        engine=engine,
        model=load_config(ServedModelConfig, CONFIGS / "model" / "qwen3_32b_h200.yaml"),
        workload=load_config(
            WorkloadConfig, CONFIGS / "workload" / "swe_like.yaml", ["turns.median=10"]
        ),
        groups=4,
        group_size=8,
        high_groups=0,
        seed=0,
    )
    lru = run_backend(setup, KVBackendKind.RADIX_LRU, HostWritePolicy.WRITE_BACK).engine
    adapter = run_backend(setup, KVBackendKind.KVCACHE).engine
    assert lru["host_hit_tokens"] > 0  # the pool was tight enough to evict
    assert adapter["prefill_tokens"] == pytest.approx(lru["prefill_tokens"], rel=0.01)


# ---- wiring: config and factory --------------------------------------------------------------


def test_the_shipped_engine_config_still_builds_the_lru_backend() -> None:
    config = load_config(SimEngineConfig, CONFIGS / "engine" / "sim.yaml")
    assert isinstance(build_kv_backend(config, MODEL), LRURadixKV)


def test_kv_backend_priority_builds_the_policy_sized_and_linked_like_the_engine() -> None:
    config = load_config(
        SimEngineConfig,
        CONFIGS / "engine" / "sim.yaml",
        ["kv_backend=kvcache", "schedule_policy=priority"],
    )
    kv = build_kv_backend(config, MODEL)
    assert isinstance(kv, PolicyKV)
    policy = kv.policy
    assert isinstance(policy, PriorityKVPolicy)
    capacity = MODEL.kv_capacity_tokens(64)
    assert (kv.page_tokens, kv.capacity_tokens, policy.config.host_capacity_tokens) == (
        64,
        capacity,
        int(capacity * 2.0) // 64 * 64,
    )
    assert (policy.transfer.bytes_per_token, policy.transfer.h2d_bandwidth_bytes_per_s) == (
        MODEL.kv_bytes_per_token,
        config.link.h2d_gb_per_s * 1e9,
    )


def test_the_priority_backend_with_fcfs_scheduling_is_refused_with_advice() -> None:
    with pytest.raises(ConfigError, match="needs schedule_policy: priority"):
        load_config(SimEngineConfig, CONFIGS / "engine" / "sim.yaml", ["kv_backend=kvcache"])


def test_kvcache_pool_sizes_in_the_engine_config_are_refused_with_advice() -> None:
    with pytest.raises(ConfigError, match="derives the page size, pool sizes"):
        load_config(
            SimEngineConfig,
            CONFIGS / "engine" / "sim.yaml",
            ["kvcache.device_capacity_tokens=1000"],
        )


def test_an_engine_config_survives_a_round_trip_through_model_dump() -> None:
    config = load_config(SimEngineConfig, CONFIGS / "engine" / "sim.yaml")
    assert SimEngineConfig.model_validate(config.model_dump()) == config


# ---- the benchmark ---------------------------------------------------------------------------


def test_the_kv_benchmark_prints_simulated_side_by_side_ratios(
    capsys: pytest.CaptureFixture[str],
) -> None:
    workload = str(CONFIGS / "workload" / "short_context.yaml")
    argv = ["--workload", workload, "--groups", "2", "--group-size", "2", "--seed", "1"]
    assert kv_bench_main(argv) == 0
    out = capsys.readouterr().out
    assert "SIMULATED" in out
    assert "prio/LRU" in out
    assert "makespan (simulated s)" in out


def test_a_request_whose_session_turns_critical_while_it_waits_may_evict_as_critical() -> None:
    """A request keeps the priority it was sent with, and a low one may not evict protected KV:
    it waits behind a critical session's KV while another request runs. Its session's
    `set_priority` hint raises it at once (before session 20 it waited on; once nothing ran,
    with its own group critical and its siblings' KV filling the pool, for ever: growth/32B
    B=16, seed 4)."""
    kv = engine_policy(8192)  # no host: the critical KV can only be evicted
    engine = engine_with(kv, FixedTokens({"busy": 2000}, default=1))

    async def main() -> tuple[bool, float, float]:
        loop = asyncio.get_running_loop()
        opened = (hint(KVHintKind.OPEN, "critical", HIGH),)
        await engine.generate(request("c0", prompt(0, 5000), session="critical", hints=opened))
        await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "critical", HIGH, 1e6)])
        busy = asyncio.create_task(engine.generate(request("busy", prompt(10**7, 100))))
        await asyncio.sleep(0.5)
        late_open = (hint(KVHintKind.OPEN, "late", LOW),)
        late = asyncio.create_task(
            engine.generate(
                request("l0", prompt(10**6, 4000), session="late", max_new=8, hints=late_open)
            )
        )
        await asyncio.sleep(1.0)
        waited_while_low = not late.done()
        await engine.send_kv_hints([hint(KVHintKind.SET_PRIORITY, "late", HIGH)])
        await late
        late_s = loop.time()
        await busy
        return waited_while_low, late_s, loop.time()

    waited_while_low, late_s, busy_s = run_virtual(main())
    assert waited_while_low  # protection held while the request was low and another ran
    assert late_s < busy_s  # raised, it evicted the critical KV instead of waiting for "busy"
    assert engine.counters.idle_bypasses == 0
    assert kv.match_prefix(prompt(0, 5000)).device_tokens < 4992


async def _low_head_behind_a_critical_tool_call(
    engine: SimEngine, *, tool_s: float
) -> tuple[tuple[int, ...], asyncio.Task[GenerateResult]]:
    """A critical session generates a 3,000-token context and starts a `tool_s` tool call (its
    KV protected on the device); a low request that the KV left cannot hold then queues, and
    10 s pass. Returns the session's next input and the low request's task."""
    context = prompt(0, 3000)
    opened = (hint(KVHintKind.OPEN, "critical", HIGH),)
    done = await engine.generate(
        request("c0", context, session="critical", priority=HIGH, hints=opened)
    )
    await engine.send_kv_hints([hint(KVHintKind.TOOL_WAIT, "critical", HIGH, tool_s)])
    late = asyncio.create_task(engine.generate(request("l0", prompt(10**6, 2000))))
    await asyncio.sleep(10.0)
    return (*context, *done.output_ids, 5), late


def test_an_idle_engine_admits_a_critical_request_past_a_low_head_that_protected_kv_blocks() -> (
    None
):
    """First come, first served: a low request at the head, held back by a critical session's
    KV protected through its tool call, with nothing running, waits until that KV moves. The
    session's next request, queued behind it, is what would move it: it goes first (counted),
    finds its context on the device, and the low request runs once the session closes."""
    kv = engine_policy(4096)  # no host: the critical KV stays on the device
    engine = engine_with(kv, FixedTokens(default=1))

    async def main() -> tuple[GenerateResult, GenerateResult]:
        ids, late = await _low_head_behind_a_critical_tool_call(engine, tool_s=10.0)
        assert not late.done()  # the tool returned; the low request still waits at the head
        await engine.send_kv_hints([hint(KVHintKind.TOOL_DONE, "critical", HIGH)])
        again = await asyncio.wait_for(
            engine.generate(request("c1", ids, session="critical", priority=HIGH)), 60.0
        )
        await engine.send_kv_hints([hint(KVHintKind.CLOSE, "critical", HIGH)])
        return again, await asyncio.wait_for(late, 60.0)

    again, late = run_virtual(main())
    assert again.cached_tokens == 2944  # its context survived, and it did not wait for ever
    assert late.finish_reason is FinishReason.STOP
    assert engine.counters.idle_bypasses == 1


def test_a_critical_request_arriving_at_an_idle_engine_goes_past_a_blocked_head_unprompted() -> (
    None
):
    """The bypass above with no hint between: the critical session's KV stays protected (its
    tool has not returned), so only the arrival itself wakes the idle engine, and an idle
    engine's admission always looks again (a blocked head is skipped unexamined only right
    after a decode block, when something runs); without the bypass the critical request would
    queue behind the low head for as long as the protection holds."""
    kv = engine_policy(4096)
    engine = engine_with(kv, FixedTokens(default=1))

    async def main() -> tuple[GenerateResult, bool]:
        ids, late = await _low_head_behind_a_critical_tool_call(engine, tool_s=1e6)
        again = await asyncio.wait_for(
            engine.generate(request("c1", ids, session="critical", priority=HIGH)), 60.0
        )
        waiting = not late.done()
        late.cancel()  # the caller gives up: the engine frees its place like a disconnect
        with contextlib.suppress(asyncio.CancelledError):
            await late
        return again, waiting

    again, late_still_waits = run_virtual(main())
    assert again.cached_tokens == 2944
    assert late_still_waits  # the protection held for the low head all along
    assert engine.counters.idle_bypasses == 1
